"""Rows of a data file as a dask array whose blocks the workers read themselves.

``open_rows(path)``: .npy (memory-mapped), .npz (the array "Y", or its only array),
.h5 / .hdf5 (the dataset "Y", or the only 2-D one) and .zarr (``dask.array.from_zarr``,
needs zarr). Each block is a task that opens the file and reads its rows on the worker:
the path must be reachable from every worker (a shared disk, or an fsspec URL for zarr),
and the driver never holds the rows.
"""

from __future__ import annotations

import numpy as np

from ..rowfile import check_path, h5_key, npz_key, suffix_of

#: bytes per block of rows (the blocks are the model's blocks: a few per worker)
BLOCK_BYTES = 64 * 2**20


def _npy_rows(path: str, a: int, b: int) -> np.ndarray:
    return np.array(np.load(path, mmap_mode="r")[a:b], dtype=np.float64)


def _npz_rows(path: str, key: str, a: int, b: int) -> np.ndarray:
    with np.load(path, allow_pickle=False) as z:
        return np.array(z[key][a:b], dtype=np.float64)


def _h5_rows(path: str, key: str, a: int, b: int) -> np.ndarray:
    import h5py

    with h5py.File(path, "r") as f:
        return np.array(f[key][a:b], dtype=np.float64)


#: the file behind each array ``open_rows`` made (by the dask array's name): a model built
#: from one refers to that file when saved (``source_of``)
_SOURCES: dict[str, str] = {}


def source_of(Y) -> str | None:
    """The file a dask array of rows was opened from by ``open_rows`` (None: another array)."""
    return _SOURCES.get(getattr(Y, "name", None))


def open_rows(path, block_rows: int | None = None):
    """A dask array (N, D) of the rows in ``path`` (module docstring), chunked by rows."""
    import dask
    import dask.array as da

    p = check_path(path)
    suffix = suffix_of(p)
    if suffix == ".zarr":
        try:
            Y = da.from_zarr(p)
        except ImportError as e:
            raise ImportError("reading .zarr needs zarr: pip install zarr") from e
        Y = Y.rechunk({1: -1})
        _SOURCES[Y.name] = p
        return Y
    if suffix == ".npy":
        mm = np.load(p, mmap_mode="r")
        shape, read = mm.shape, lambda a, b: dask.delayed(_npy_rows)(p, a, b)
    elif suffix == ".npz":
        key, shape = npz_key(p)
        read = lambda a, b: dask.delayed(_npz_rows)(p, key, a, b)  # noqa: E731
    else:
        key, shape = h5_key(p)
        read = lambda a, b: dask.delayed(_h5_rows)(p, key, a, b)  # noqa: E731
    if len(shape) != 2:
        raise ValueError(f"{p} holds an array of shape {shape}: the data must be 2-D (rows x outputs)")
    N, D = shape
    step = block_rows or max(1000, BLOCK_BYTES // (8 * max(D, 1)))
    parts = [da.from_delayed(read(a, min(a + step, N)), shape=(min(a + step, N) - a, D), dtype=np.float64)
             for a in range(0, N, step)]
    Y = da.concatenate(parts, axis=0)
    _SOURCES[Y.name] = p
    return Y
