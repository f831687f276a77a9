"""Rows of a data file as a dask array whose blocks the workers read themselves.

``open_rows(path)``: .npy (memory-mapped), .npz (the array "Y", or its only array),
.h5 / .hdf5 (the dataset "Y", or the only 2-D one) and .zarr (``dask.array.from_zarr``,
needs zarr). Each block is a task that opens the file and reads its rows on the worker:
the path must be reachable from every worker (a shared disk, or an fsspec URL for zarr),
and the driver never holds the rows.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

#: bytes per block of rows (the blocks are the model's blocks: a few per worker)
BLOCK_BYTES = 64 * 2**20

SUFFIXES = (".npy", ".npz", ".h5", ".hdf5", ".zarr")


def _npy_rows(path: str, a: int, b: int) -> np.ndarray:
    return np.array(np.load(path, mmap_mode="r")[a:b], dtype=np.float64)


def _npz_rows(path: str, key: str, a: int, b: int) -> np.ndarray:
    with np.load(path, allow_pickle=False) as z:
        return np.array(z[key][a:b], dtype=np.float64)


def _h5_rows(path: str, key: str, a: int, b: int) -> np.ndarray:
    import h5py

    with h5py.File(path, "r") as f:
        return np.array(f[key][a:b], dtype=np.float64)


def _npz_key(path: str) -> tuple[str, tuple]:
    with np.load(path, allow_pickle=False) as z:
        keys = list(z.files)
        key = "Y" if "Y" in keys else (keys[0] if len(keys) == 1 else None)
        if key is None:
            raise ValueError(f"{path} holds the arrays {keys}: name the data 'Y' (np.savez(path, Y=Y))")
        return key, z[key].shape


def _h5_key(path: str) -> tuple[str, tuple]:
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


def open_rows(path, block_rows: int | None = None):
    """A dask array (N, D) of the rows in ``path`` (module docstring), chunked by rows."""
    import dask
    import dask.array as da

    p = str(path)
    suffix = Path(p.rstrip("/")).suffix.lower()
    if suffix == ".zarr":
        try:
            Y = da.from_zarr(p)
        except ImportError as e:
            raise ImportError("reading .zarr needs zarr: pip install zarr") from e
        return Y.rechunk({1: -1})
    if suffix not in SUFFIXES:
        raise ValueError(f"cannot read {p}: the data must be a {', '.join(SUFFIXES)} file")
    if not Path(p).exists():
        raise FileNotFoundError(f"no data file {p}")
    if suffix == ".npy":
        mm = np.load(p, mmap_mode="r")
        shape, read = mm.shape, lambda a, b: dask.delayed(_npy_rows)(p, a, b)
    elif suffix == ".npz":
        key, shape = _npz_key(p)
        read = lambda a, b: dask.delayed(_npz_rows)(p, key, a, b)  # noqa: E731
    else:
        key, shape = _h5_key(p)
        read = lambda a, b: dask.delayed(_h5_rows)(p, key, a, b)  # noqa: E731
    if len(shape) != 2:
        raise ValueError(f"{p} holds an array of shape {shape}: the data must be 2-D (rows x outputs)")
    N, D = shape
    step = block_rows or max(1000, BLOCK_BYTES // (8 * max(D, 1)))
    parts = [da.from_delayed(read(a, min(a + step, N)), shape=(min(a + step, N) - a, D), dtype=np.float64)
             for a in range(0, N, step)]
    return da.concatenate(parts, axis=0)
