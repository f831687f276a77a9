"""Checkpoints of a distributed fit: every block's q(X) parameters, written by its worker,
and the driver's globals, in a folder (a local path or any fsspec URL).

A checkpoint of iteration k is the files ``block-<i>-<k>.npz`` (one per block of rows,
the block's unconstrained local parameters) and ``global-<k>.npz`` (the globals, Y's
column means), then ``meta.json``, written last, naming k. Every file is written whole
(a temporary file and a rename; object stores put whole objects), so a reader that goes
through ``meta.json`` never sees a half-written checkpoint: a fit killed while writing
iteration k leaves the checkpoint of the previous one. Older iterations' files are
removed after ``meta.json`` names the new one. npz + JSON, never pickle.
"""

from __future__ import annotations

import io
import json

import numpy as np

#: written in meta.json; a reader refuses other formats
FORMAT = "bgplvm-distributed-checkpoint"
VERSION = 1


def _is_local(url: str) -> bool:
    return "://" not in str(url) or str(url).startswith("file://")


def _local(url: str) -> str:
    return str(url)[len("file://"):] if str(url).startswith("file://") else str(url)


def write_bytes(url: str, data: bytes) -> None:
    """Write a whole file: atomically (temporary file + rename) on a local disk, as one
    object elsewhere (fsspec)."""
    if _is_local(url):
        from ..io import atomic_write_bytes

        atomic_write_bytes(_local(url), data)
    else:
        import fsspec

        with fsspec.open(url, "wb") as f:
            f.write(data)


def read_bytes(url: str) -> bytes:
    if _is_local(url):
        with open(_local(url), "rb") as f:
            return f.read()
    import fsspec

    with fsspec.open(url, "rb") as f:
        return f.read()


def _join(folder: str, name: str) -> str:
    return str(folder).rstrip("/") + "/" + name


def block_name(i: int, k: int) -> str:
    return f"block-{i:05d}-{k:08d}.npz"


def write_block(folder: str, i: int, k: int, x: np.ndarray) -> None:
    """Block ``i``'s unconstrained local parameters at iteration ``k`` (by its worker)."""
    buf = io.BytesIO()
    np.savez(buf, x=np.asarray(x, dtype=np.float64))
    write_bytes(_join(folder, block_name(i, k)), buf.getvalue())


def read_block(folder: str, i: int, k: int, size: int) -> np.ndarray:
    with np.load(io.BytesIO(read_bytes(_join(folder, block_name(i, k)))), allow_pickle=False) as z:
        x = z["x"]
    if x.shape != (size,):
        raise ValueError(f"checkpoint block {i} of iteration {k} holds {x.shape[0]} values, expected {size}")
    return x


def write_global(folder: str, k: int, meta: dict, arrays: dict) -> None:
    """The driver's share of iteration ``k``, then ``meta.json`` naming it (last)."""
    buf = io.BytesIO()
    np.savez(buf, **{n: _plain(v) for n, v in arrays.items()})
    write_bytes(_join(folder, f"global-{k:08d}.npz"), buf.getvalue())
    meta = dict(meta, format=FORMAT, version=VERSION, iteration=int(k))
    write_bytes(_join(folder, "meta.json"), json.dumps(meta, indent=1).encode())
    _remove_older(folder, k)


def _remove_older(folder: str, k: int) -> None:
    """Files of iterations before ``k`` (best effort: a leftover file is harmless)."""
    if not _is_local(folder):
        import fsspec

        fs, root = fsspec.core.url_to_fs(folder)
        names = [p.rsplit("/", 1)[-1] for p in fs.ls(root, detail=False)]
        remove = lambda name: fs.rm(_join(root, name))  # noqa: E731
    else:
        import os

        root = _local(folder)
        names = os.listdir(root)
        remove = lambda name: os.unlink(os.path.join(root, name))  # noqa: E731
    for name in names:
        if name.endswith(".npz") and name[:-4].rsplit("-", 1)[-1].isdigit() and int(name[:-4].rsplit("-", 1)[-1]) < k:
            try:
                remove(name)
            except OSError:
                pass


def _plain(v) -> np.ndarray:
    """An array npz stores without pickle: numbers as float64, ids as they are (or as text)."""
    v = np.asarray(v)
    if v.dtype.kind in "biuf":
        return v.astype(np.float64) if v.dtype.kind == "f" else v
    return v.astype(str)


def read_meta(folder: str) -> dict:
    try:
        meta = json.loads(read_bytes(_join(folder, "meta.json")))
    except FileNotFoundError as e:
        raise FileNotFoundError(f"no checkpoint in {folder} (its meta.json is missing)") from e
    if meta.get("format") != FORMAT or meta.get("version", 99) > VERSION:
        raise ValueError(f"{folder} does not hold a checkpoint this bgplvm reads (format "
                         f"{meta.get('format')!r} version {meta.get('version')!r})")
    return meta


def read_global(folder: str, k: int) -> dict:
    with np.load(io.BytesIO(read_bytes(_join(folder, f"global-{k:08d}.npz"))), allow_pickle=False) as z:
        return {n: z[n] for n in z.files}


def check_same_model(meta: dict, **have) -> None:
    """Refuse a checkpoint of another model, naming what differs (N, D, Q, M, kernel, ...)."""
    diff = [f"{n} {meta.get(n)!r} there, {v!r} here" for n, v in have.items() if meta.get(n) != v]
    if diff:
        raise ValueError("the checkpoint is of another model: " + "; ".join(diff))


def resume(folder, Y=None, client="local", memory: int | None = None, timeout: float | None = None):
    """The distributed model of the last checkpoint in ``folder`` (``DistributedGPLVM.resume``;
    a ``DistributedMRD``'s too, ``Y`` then its views). Without ``Y`` the rows come from the
    file(s) the checkpoint names: a model built from ``open_rows`` (.npy, .npz, .h5, .zarr)
    or by ``bgplvm fit --data`` / ``--view``; one built from arrays needs ``Y``."""
    from ..optimize import MEMORY
    from .faults import CALL_TIMEOUT

    folder = str(folder)
    meta = read_meta(folder)
    if Y is None:
        Y = _reopen(folder, meta)
    k = int(meta["iteration"])
    g = read_global(folder, k)
    common = dict(seed=meta.get("seed"), client=client, memory=memory or meta.get("memory", MEMORY),
                  timeout=timeout or CALL_TIMEOUT, _init=False, _rows=tuple(meta["rows"]))
    dm = _build(meta, g, Y, common)
    try:
        dm.data_source = meta.get("data")
        check_same_model(meta, **dm._identity())
        if not np.allclose(g["Y_mean"], dm.Y_mean, rtol=1e-9, atol=1e-12 * (1 + np.abs(dm.Y_mean).max())):
            raise ValueError(f"the rows given are not the checkpoint's: their column means differ (largest "
                             f"difference {np.abs(g['Y_mean'] - dm.Y_mean).max():.3g})")
        if g["x"].shape != dm._gpart.x.shape:
            raise ValueError("the checkpoint's global parameters do not fit this model")
        dm._gpart.x = g["x"].copy()
        dm.frozen = set(meta.get("frozen", []))
        dm._all("restore", per_block=[(folder, i, k) for i in range(len(dm._blocks))])
        dm.iterations, dm._checkpoint = k, (folder, k)
    except BaseException:
        dm.close()
        raise
    return dm


def _reopen(folder: str, meta: dict):
    """The rows of the checkpoint's model from the file(s) it names (``open_rows``): Y, or
    an MRD's views {name: rows}."""
    from .data import open_rows

    if meta.get("model") == "mrd":
        if not meta.get("view_files"):
            raise ValueError(f"the checkpoint in {folder} does not name its views' files: the model was built from "
                             "arrays (NumPy, or dask arrays not opened by bgplvm.distributed.open_rows), which a "
                             f"checkpoint cannot reopen by itself. Pass the same views: DistributedMRD.resume({folder!r}, "
                             "views=..., client=...)")
        return {n: open_rows(p) for n, p in meta["view_files"].items()}
    if not meta.get("data"):
        raise ValueError(f"the checkpoint in {folder} does not name its data: the model was built from an array "
                         "(NumPy, or a dask array not opened by bgplvm.distributed.open_rows), which a checkpoint "
                         "cannot reopen by itself. Pass the same rows: "
                         f"BayesianGPLVM.resume({folder!r}, Y=..., client=...)")
    return open_rows(meta["data"])


def _build(meta: dict, g: dict, Y, common: dict):
    """The model ``meta`` describes (static, dynamical or MRD) over the rows ``Y``, not yet
    at the checkpoint's parameters."""
    kind = meta.get("model", "static")
    if kind == "mrd":
        from .mrd import DistributedMRD

        return DistributedMRD(Y, meta["Q"], meta["M"], list(meta["kernels"]), inducing=meta["inducing"],
                              init=meta.get("init", "scaled_pca"), **common)
    if kind == "dynamical":
        from .dynamical import DistributedDynamicalGPLVM

        return DistributedDynamicalGPLVM(Y, g["t"], meta["Q"], meta["M"], meta["kernel"],
                                         time_kernel=meta["time_kernel"], sequences=g["sequences"],
                                         time_prior=meta["time_prior"],
                                         state_space_options=meta.get("state_space_options"), **common)
    from .model import DistributedGPLVM

    return DistributedGPLVM(Y, meta["Q"], meta["M"], meta["kernel"], **common)
