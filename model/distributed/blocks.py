"""The blocks of rows of a distributed model: ``_rows.RowBlock`` actors on the workers.

``Blocks`` deals the rows of Y (a NumPy array or a dask array chunked by rows) to the
workers, calls a method on every block at once (``call``), counts what crosses the
network, and brings back blocks whose worker was lost (``find_lost``, ``replace``): a
block is rebuilt from where its rows come from (the NumPy array the driver was given,
or the dask array's graph) on a worker still alive.
"""

from __future__ import annotations

import numpy as np


def is_dask_array(Y) -> bool:
    try:
        import dask.array as da
    except ImportError:  # pragma: no cover
        return False
    return isinstance(Y, da.Array)


def check_dask_rows(Y, rows: tuple | None = None):
    """A dask array whose blocks are whole rows (``rows``: the rows per block wanted)."""
    if Y.ndim != 2:
        raise ValueError(f"Y must be 2-D (rows x outputs), got a dask array of shape {Y.shape}")
    if Y.numblocks[1] != 1:
        raise ValueError(f"Y is chunked along its columns (column chunks {Y.chunks[1]}): each block must hold "
                         "whole rows; rechunk it first: Y = Y.rechunk({1: -1})")
    if rows is not None and tuple(Y.chunks[0]) != tuple(rows):
        return Y.rechunk({0: tuple(rows)})
    if any(c == 0 for c in Y.chunks[0]):
        return Y.rechunk({0: tuple(c for c in Y.chunks[0] if c)})
    return Y


def nbytes(obj) -> int:
    """The bytes of the arrays and numbers in a call's arguments or result."""
    if isinstance(obj, np.ndarray):
        return obj.nbytes
    if isinstance(obj, (float, int, np.floating, np.integer)):
        return 8
    if isinstance(obj, dict):
        return sum(nbytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(nbytes(v) for v in obj)
    if hasattr(obj, "__dataclass_fields__"):
        return sum(nbytes(getattr(obj, f)) for f in obj.__dataclass_fields__)
    return 0


class Blocks:
    """Y's rows in blocks on the workers of ``conn`` (a ``client.Connection``).

    Y : (N, D) NumPy array, split into ``chunks`` blocks (default one per worker) or into
        blocks of ``rows`` rows; or a dask array chunked by rows (its chunks are the blocks,
        or rechunked to ``rows``). ``make(i, n, data_future)`` gives block i's actor (n rows):
        the actor class and its arguments.
    """

    def __init__(self, conn, Y, chunks: int | None, make, rows: tuple | None = None):
        self.conn, self.make = conn, make
        #: array bytes sent to / received from the blocks, and calls
        self.traffic = dict(sent=0, received=0, calls=0)
        workers = conn.workers
        if is_dask_array(Y):
            Y = check_dask_rows(Y, rows)
            self._delayed = list(Y.to_delayed()[:, 0])
            self._numpy = None
            self.rows = [int(c) for c in Y.chunks[0]]
        else:
            Y = np.asarray(Y, dtype=np.float64)
            if Y.ndim != 2 or Y.shape[0] < 1:
                raise ValueError(f"Y must be a 2-D array with at least one row, got shape {Y.shape}")
            if rows is None:
                k = len(workers) if chunks is None else int(chunks)
                if not 1 <= k <= Y.shape[0]:
                    raise ValueError(f"chunks must be between 1 and N={Y.shape[0]}, got {chunks}")
                bounds = np.linspace(0, Y.shape[0], k + 1).astype(int)
                rows = np.diff(bounds)
            self._numpy, self._delayed = Y, None
            self.rows = [int(r) for r in rows]
        self.starts = np.concatenate([[0], np.cumsum(self.rows)]).astype(np.int64)
        self.actors = [None] * len(self.rows)
        self._futures = [None] * len(self.rows)
        self._start(range(len(self.rows)), workers)

    def _data(self, i: int, worker: str):
        client = self.conn.client
        if self._numpy is not None:
            return client.scatter(self._numpy[self.starts[i]:self.starts[i + 1]], workers=[worker])
        return client.compute(self._delayed[i], workers=[worker])

    def _start(self, which, workers) -> None:
        client = self.conn.client
        which = list(which)
        futs = {}
        for j, i in enumerate(which):
            w = workers[(i if len(which) == len(self.rows) else j) % len(workers)]
            cls, *args = self.make(i, self.rows[i], self._data(i, w))
            futs[i] = client.submit(cls, *args, actor=True, workers=[w], allow_other_workers=False, pure=False)
        for i, f in futs.items():
            self.actors[i], self._futures[i] = f.result(), f

    def __len__(self) -> int:
        return len(self.rows)

    def call(self, method: str, *args, per_block=None, only=None) -> list:
        """Call ``method`` on every block at once (``per_block``: one argument tuple per
        block instead of ``args``; ``only``: those block indices) and wait for all."""
        idx = range(len(self.rows)) if only is None else list(only)
        calls = [per_block[i] if per_block is not None else args for i in idx]
        futs = [getattr(self.actors[i], method)(*a) for i, a in zip(idx, calls)]
        out = [f.result() for f in futs]
        self.traffic["sent"] += sum(nbytes(a) for a in calls)
        self.traffic["received"] += sum(nbytes(r) for r in out)
        self.traffic["calls"] += len(calls)
        return out

    def find_lost(self) -> list[int]:
        """The blocks whose actor does not answer (its worker died)."""
        lost = []
        futs = []
        for i, a in enumerate(self.actors):
            try:
                futs.append((i, a.ping()))
            except Exception:  # noqa: BLE001 - a dead worker raises OSError / RuntimeError
                lost.append(i)
        for i, f in futs:
            try:
                f.result(timeout=30)
            except Exception:  # noqa: BLE001
                lost.append(i)
        return sorted(lost)

    def replace(self, lost: list[int]) -> None:
        """Rebuild the ``lost`` blocks on the workers alive now (their rows from the source)."""
        self.conn.client.wait_for_workers(1, timeout=60)
        self._start(lost, self.conn.workers)

    def close(self) -> None:
        self.actors, self._futures = [], []
