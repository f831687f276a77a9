"""Files of rows (N x D training outputs) that a model refers to instead of copying.

A model of 1e5-1e7 rows is saved with its data left where it is: the model file records a
*reference* (``reference``): the file's path, absolute and relative to the model file, its
shape and a SHA-256 of a sample of its rows. ``resolve`` finds the file again when the model
is opened (the path given, then the recorded one, then the same relative place beside the
model file, so a folder moved whole still opens) and checks that it holds the same rows.

Formats: .npy (memory-mapped), .npz (the array "Y", or its only array), .h5 / .hdf5 (the
dataset "Y", or the only 2-D one), .zarr (needs zarr). ``bgplvm.distributed.data`` reads
the same files block by block on Dask workers with the helpers here.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np

SUFFIXES = (".npy", ".npz", ".h5", ".hdf5", ".zarr")

#: rows hashed to recognise a file again (spread evenly over it, first and last included)
SAMPLED_ROWS = 256


def suffix_of(path) -> str:
    return Path(str(path).rstrip("/")).suffix.lower()


def npz_key(path: str) -> tuple[str, tuple]:
    """(name, shape) of the data in an .npz: "Y", or its only array."""
    with np.load(path, allow_pickle=False) as z:
        keys = list(z.files)
        key = "Y" if "Y" in keys else (keys[0] if len(keys) == 1 else None)
        if key is None:
            raise ValueError(f"{path} holds the arrays {keys}: name the data 'Y' (np.savez(path, Y=Y))")
        return key, z[key].shape


def h5_key(path: str) -> tuple[str, tuple]:
    """(name, shape) of the data in an HDF5 file: the dataset "Y", or its only 2-D one."""
    import h5py

    with h5py.File(path, "r") as f:
        found = []
        f.visititems(lambda name, obj: found.append((name, obj.shape))
                     if isinstance(obj, h5py.Dataset) and obj.ndim == 2 else None)
    names = dict(found)
    if "Y" in names:
        return "Y", names["Y"]
    if len(found) == 1:
        return found[0]
    raise ValueError(f"{path} holds the 2-D datasets {sorted(names)}: name the data 'Y'")


def _zarr(path: str):
    try:
        import zarr
    except ImportError as e:
        raise ImportError("reading .zarr needs zarr: pip install zarr") from e
    return zarr.open(path, mode="r")


def check_path(path) -> str:
    """``path`` as a string, if it is a rows file this module reads (else ValueError /
    FileNotFoundError saying what is wrong)."""
    p = str(path)
    if suffix_of(p) not in SUFFIXES:
        raise ValueError(f"cannot read {p}: the data must be a {', '.join(SUFFIXES)} file")
    if "://" not in p and not Path(p).exists():
        raise FileNotFoundError(f"no data file {p}")
    return p


def shape_of(path) -> tuple[int, ...]:
    p = check_path(path)
    suffix = suffix_of(p)
    if suffix == ".npy":
        return tuple(np.load(p, mmap_mode="r").shape)
    if suffix == ".npz":
        return tuple(npz_key(p)[1])
    if suffix == ".zarr":
        return tuple(_zarr(p).shape)
    return tuple(h5_key(p)[1])


def read_rows(path, idx=None) -> np.ndarray:
    """The rows ``idx`` (sorted int array; None: all) of the data in ``path``, float64."""
    p = check_path(path)
    suffix = suffix_of(p)
    sel = slice(None) if idx is None else np.asarray(idx, dtype=np.int64)
    if suffix == ".npy":
        return np.array(np.load(p, mmap_mode="r")[sel], dtype=np.float64)
    if suffix == ".npz":
        key, _ = npz_key(p)
        with np.load(p, allow_pickle=False) as z:
            return np.array(z[key][sel], dtype=np.float64)
    if suffix == ".zarr":
        a = _zarr(p)
        return np.array(a[:] if idx is None else a.get_orthogonal_selection((sel, slice(None))), dtype=np.float64)
    import h5py

    key, _ = h5_key(p)
    with h5py.File(p, "r") as f:
        return np.array(f[key][sel], dtype=np.float64)


def sample_index(N: int) -> np.ndarray:
    return np.unique(np.linspace(0, N - 1, min(N, SAMPLED_ROWS)).round().astype(np.int64))


def fingerprint(rows: np.ndarray) -> str:
    """SHA-256 of sampled rows (float64, C order): NaN (missing) compares equal to NaN."""
    return hashlib.sha256(np.ascontiguousarray(rows, dtype=np.float64).tobytes()).hexdigest()


def reference(path, model_file=None, Y=None) -> dict:
    """What a model file records of its data in ``path``: {"path", "relative" (to the model
    file's folder), "shape", "sha256_sampled"}. With ``Y`` (the model's training outputs, N x
    D) the file's rows are checked to be those (shape and sampled rows)."""
    p = check_path(path)
    shape = shape_of(p)
    if len(shape) != 2:
        raise ValueError(f"{p} holds an array of shape {shape}: the data must be 2-D (rows x outputs)")
    idx = sample_index(shape[0])
    rows = read_rows(p, idx)
    if Y is not None:
        Y = np.asarray(Y)
        if Y.shape != shape or not np.array_equal(rows, np.asarray(Y[idx], dtype=np.float64), equal_nan=True):
            why = (f"shape {shape} there, {Y.shape} in the model" if Y.shape != shape
                   else "their rows differ")
            raise ValueError(f"{p} does not hold this model's training outputs ({why}): refer to the file "
                             "the model was fitted to, or save without data= to copy Y into the model file")
    ref = {"path": p if "://" in p else str(Path(p).resolve()), "shape": list(shape),
           "sha256_sampled": fingerprint(rows)}
    if model_file is not None and "://" not in p:
        try:
            ref["relative"] = os.path.relpath(ref["path"], Path(model_file).resolve().parent)
        except ValueError:  # another drive (Windows)
            pass
    return ref


def resolve(ref: dict, model_file=None, data=None) -> str:
    """The path of the data a model file refers to (``reference``), checked: ``data`` if
    given, else the recorded path, else the recorded relative path beside ``model_file``."""
    tried = []
    if data is not None:
        candidates = [str(data)]
    else:
        candidates = [ref["path"]]
        if ref.get("relative") and model_file is not None and not hasattr(model_file, "read"):
            candidates.append(str(Path(model_file).resolve().parent / ref["relative"]))
    for p in dict.fromkeys(candidates):
        if "://" in p or Path(p).exists():
            check_same(ref, p)
            return p
        tried.append(p)
    raise FileNotFoundError(
        f"the model's data (shape {tuple(ref['shape'])}) is referenced, not stored in the model file, and "
        f"it is not at {' nor '.join(tried)}: put the file back there, or give its new place "
        "(BayesianGPLVM.load(path, data=NEW_PATH))")


def check_same(ref: dict, path) -> None:
    """ValueError unless ``path`` holds the rows ``ref`` recorded (shape, sampled rows)."""
    shape = shape_of(path)
    if list(shape) != list(ref["shape"]):
        raise ValueError(f"{path} holds an array of shape {shape}; the model was fitted to one of shape "
                         f"{tuple(ref['shape'])}: give the file it was fitted to")
    if fingerprint(read_rows(path, sample_index(shape[0]))) != ref["sha256_sampled"]:
        raise ValueError(f"{path} has the shape of the model's data but not its rows (sampled rows differ): "
                         "it changed since the model was saved, or it is another file")
