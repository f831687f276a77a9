"""The blocks of rows of a distributed model: ``_rows.RowBlock`` actors on the workers.

``Blocks`` deals the rows of Y (a NumPy array or a dask array chunked by rows) to the
workers the scheduler lists, calls a method on every block at once (``call``), counts
what crosses the network, and brings back blocks whose worker was lost (``find_lost``,
``replace``): a block is rebuilt from where its rows come from (the NumPy array the
driver was given, scattered again; or the dask array's graph, computed again where its
chunk was lost) on the workers alive at that moment. ``moves`` and ``move`` deal blocks
to workers that joined. Every wait has a deadline (``faults``).
"""

from __future__ import annotations

import numpy as np

from . import faults
from .faults import CALL_TIMEOUT, ClusterTimeout, Deadline, WorkerLost, alive_workers, where


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
        the actor class and its arguments. ``timeout``: seconds a round of calls may take
        (``faults.CALL_TIMEOUT``). ``where[i]``: the worker holding block i.
    """

    def __init__(self, conn, Y, chunks: int | None, make, rows: tuple | None = None,
                 timeout: float = CALL_TIMEOUT):
        self.conn, self.make, self.timeout = conn, make, float(timeout)
        #: array bytes sent to / received from the blocks, and calls
        self.traffic = dict(sent=0, received=0, calls=0)
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
                k = len(self.alive()) if chunks is None else int(chunks)
                if not 1 <= k <= Y.shape[0]:
                    raise ValueError(f"chunks must be between 1 and N={Y.shape[0]}, got {chunks}")
                bounds = np.linspace(0, Y.shape[0], k + 1).astype(int)
                rows = np.diff(bounds)
            self._numpy, self._delayed = Y, None
            self.rows = [int(r) for r in rows]
        self.starts = np.concatenate([[0], np.cumsum(self.rows)]).astype(np.int64)
        self.actors = [None] * len(self.rows)
        self.where: list[str | None] = [None] * len(self.rows)
        self._futures = [None] * len(self.rows)
        self._start(range(len(self.rows)))

    def __len__(self) -> int:
        return len(self.rows)

    # --- workers --------------------------------------------------------------------------------
    def alive(self) -> list[str]:
        """The workers alive now, as the scheduler lists them (``faults.alive_workers``);
        waits up to ``faults.SCHEDULER_TIMEOUT`` for a first one."""
        workers = alive_workers(self.conn.client)
        if not workers:
            try:
                self.conn.client.wait_for_workers(1, timeout=faults.SCHEDULER_TIMEOUT)
            except (TimeoutError, OSError) as e:
                raise WorkerLost(f"the Dask cluster has no workers left (waited {faults.SCHEDULER_TIMEOUT:.0f} s): start "
                                 "some (`dask worker SCHEDULER_ADDRESS`, or cluster.scale(n))") from e
            workers = alive_workers(self.conn.client)
        return workers

    def _deal(self, which: list[int], workers: list[str], keep: set[int]) -> dict[int, str]:
        """A worker for each block in ``which``: the one holding fewest of the blocks
        ``keep`` and those dealt so far (ties in ``workers``' order: round robin at the start)."""
        load = {w: 0 for w in workers}
        for i in keep:
            if self.where[i] in load:
                load[self.where[i]] += 1
        out = {}
        for i in which:
            w = min(workers, key=lambda x: load[x])  # the first of the least loaded
            out[i] = w
            load[w] += 1
        return out

    # --- starting blocks ------------------------------------------------------------------------
    def _data(self, i: int, worker: str):
        """Block i's rows as a future on (or near) ``worker``: scattered from the NumPy array
        (a new key each time), or the dask chunk computed (anywhere, should ``worker`` go)."""
        client = self.conn.client
        if self._numpy is not None:
            return client.scatter(self._numpy[self.starts[i]:self.starts[i + 1]], workers=[worker], hash=False,
                                  timeout=faults.SCHEDULER_TIMEOUT)
        return client.compute(self._delayed[i], workers=[worker], allow_other_workers=True)

    def _start(self, which, place: dict[int, str] | None = None, states: dict | None = None) -> None:
        """Start the actors of blocks ``which`` on the workers alive now (or at ``place``;
        ``states``: block -> future of its optimiser's state, ``move``); a block whose
        worker leaves meanwhile is dealt again, until ``timeout``."""
        which, deadline = list(which), Deadline(self.timeout)
        others = set(range(len(self.rows))) - set(which)
        states = states or {}
        while which:
            workers = self.alive()
            if place is None or any(place.get(i) not in workers for i in which):
                place = self._deal(which, workers, others)
            futs = {}
            for i in which:
                cls, *args = self.make(i, self.rows[i], self._data(i, place[i]))
                futs[i] = self.conn.client.submit(cls, *args, states.get(i), actor=True, workers=[place[i]],
                                                  allow_other_workers=False, pure=False)
            which = self._await_started(futs, place, deadline)
            others |= set(futs) - set(which)

    def _await_started(self, futs: dict, place: dict, deadline: Deadline) -> list[int]:
        """Wait for the actors ``futs`` (block -> future); returns the blocks whose worker
        left before theirs started (to deal again). A block that failed on a live worker
        raises its error (the rows' own: a chunk that cannot be read)."""
        import distributed

        pending, again = dict(futs), []
        while pending:
            try:
                distributed.wait(list(pending.values()), timeout=min(faults.POLL, max(deadline.left(), 0.01)))
            except TimeoutError:
                pass
            alive = set(self.alive())
            for i, f in list(pending.items()):
                if f.status == "finished":
                    self.actors[i], self._futures[i], self.where[i] = f.result(), f, place[i]
                elif place[i] not in alive or f.status in ("lost", "cancelled"):
                    f.release()
                    again.append(i)
                elif f.status == "error":
                    raise f.exception()
                else:
                    continue
                del pending[i]
            if pending and deadline.passed:
                for f in pending.values():
                    f.release()
                raise ClusterTimeout(f"{where(pending, [place[i] for i in pending])} did not start within "
                                     f"{deadline.seconds:.0f} s with the worker alive: is it stuck, or out of "
                                     "memory? (its rows' chunk may be slow to read: raise the model's timeout=)",
                                     [place[i] for i in pending], pending)
        return sorted(again)

    # --- calls ----------------------------------------------------------------------------------
    def call(self, method: str, *args, per_block=None, only=None, timeout: float | None = None) -> list:
        """Call ``method`` on every block at once (``per_block``: one argument tuple per
        block instead of ``args``; ``only``: those block indices) and wait for all, at most
        ``timeout`` seconds (the model's); a block whose worker left raises ``WorkerLost``."""
        idx = list(range(len(self.rows))) if only is None else list(only)
        calls = [per_block[i] if per_block is not None else args for i in idx]
        futs = []
        for i, a in zip(idx, calls):
            try:
                futs.append(getattr(self.actors[i], method)(*a))
            except RuntimeError as e:  # Dask: "Worker holding Actor was lost"
                raise WorkerLost(f"{where([i], [self.where[i]])} is gone ({e})", [self.where[i]], [i]) from e
        out = self._collect(idx, futs, method, Deadline(self.timeout if timeout is None else timeout))
        self.traffic["sent"] += sum(nbytes(a) for a in calls)
        self.traffic["received"] += sum(nbytes(r) for r in out)
        self.traffic["calls"] += len(calls)
        return out

    def _collect(self, idx: list[int], futs: list, what: str, deadline: Deadline) -> list:
        """The results of the actor calls ``futs`` on blocks ``idx``, looking at the
        scheduler every ``faults.POLL`` seconds while waiting (``_check``)."""
        out = []
        for k, f in enumerate(futs):
            while True:
                try:
                    out.append(f.result(timeout=min(faults.POLL, max(deadline.left(), 0.01))))
                    break
                except TimeoutError:  # (before OSError: TimeoutError is one)
                    self._check(idx[k:], what, deadline)
                except OSError as e:  # Dask: "Unable to contact Actor's worker"
                    self._check(idx[k:], what, None)
                    i = idx[k]
                    raise WorkerLost(f"{where([i], [self.where[i]])} did not answer {what} ({e})",
                                     [self.where[i]], [i]) from e
        return out

    def _check(self, pending: list[int], what: str, deadline: Deadline | None) -> None:
        """``WorkerLost`` if a worker of the ``pending`` blocks left; ``ClusterTimeout`` if
        ``deadline`` passed with them alive."""
        alive = set(self.alive())
        lost = [i for i in pending if self.where[i] not in alive or self._futures[i] is None
                or self._futures[i].status != "finished"]
        if lost:
            ws = [self.where[i] for i in lost]
            raise WorkerLost(f"{where(lost, ws)} left the cluster during {what}", ws, lost)
        if deadline is not None and deadline.passed:
            ws = [self.where[i] for i in pending]
            raise ClusterTimeout(f"{what} on {where(pending, ws)} did not finish within {deadline.seconds:.0f} s, "
                                 "with the workers alive: are they stuck, out of memory or paused? (a larger "
                                 "model may need a larger timeout=)", ws, pending)

    # --- losses and joins -----------------------------------------------------------------------
    def find_lost(self) -> list[int]:
        """The blocks whose worker left, or whose actor does not answer a ping."""
        alive = set(self.alive())
        lost = {i for i in range(len(self.rows)) if self.where[i] not in alive or self._futures[i] is None
                or self._futures[i].status != "finished"}
        for i in sorted(set(range(len(self.rows))) - lost):
            try:
                self.call("ping", only=[i], timeout=faults.PING_TIMEOUT)
            except (WorkerLost, OSError):
                lost.add(i)
        return sorted(lost)

    def _forget(self, i: int) -> None:
        """Release block i's actor (the scheduler would otherwise wait to rebuild it on its
        worker, gone: a task nobody can run)."""
        _release(self._futures[i], getattr(self.actors[i], "_future", None))
        self.actors[i], self._futures[i], self.where[i] = None, None, None

    def replace(self, lost: list[int]) -> None:
        """Rebuild the ``lost`` blocks on the workers alive now (their rows from the source)."""
        for i in lost:
            self._forget(i)
        self._start(lost)

    def moves(self) -> dict[int, str]:
        """Blocks to deal to workers that joined: from the worker holding most blocks to the
        one holding fewest, while they differ by 2 or more (block -> new worker)."""
        alive = self.alive()
        held = {w: [i for i, x in enumerate(self.where) if x == w] for w in alive}
        out = {}
        while True:
            hi = max(alive, key=lambda w: len(held[w]))
            lo = min(alive, key=lambda w: len(held[w]))
            if len(held[hi]) - len(held[lo]) < 2:
                return out
            i = held[hi].pop()
            held[lo].append(i)
            out[i] = lo

    def move(self, moves: dict[int, str]) -> None:
        """Start blocks ``moves`` (block -> worker) anew there with their optimiser's state,
        sent from their old worker to the new one, then release the old actors: the fit
        goes on as if nothing moved (the caller centres their rows again,
        ``Training._rebalance``)."""
        from ._rows import export_state

        client = self.conn.client
        old = {i: (self.actors[i], self._futures[i]) for i in moves}
        states = {i: client.submit(export_state, self.actors[i], workers=[self.where[i]], pure=False)
                  for i in moves}
        self._start(sorted(moves), place=dict(moves), states=states)
        for i, (a, f) in old.items():
            _release(f, getattr(a, "_future", None), states[i])

    def close(self) -> None:
        self.actors, self._futures, self.where = [], [], []


def _release(*futures) -> None:
    """Release Dask futures (None: skipped), quietly where the connection is broken."""
    for f in futures:
        try:
            if f is not None:
                f.release()
        except Exception:  # noqa: BLE001 - releasing on a broken connection
            pass
