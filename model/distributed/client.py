"""Which Dask cluster a distributed model runs on, checked before anything is sent.

``client`` is a ``dask.distributed.Client``, a scheduler address ("tcp://host:8786") or
"local": a ``LocalCluster`` of one single-threaded worker process per core, started for
the model and closed with it (``Connection.close``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

#: seconds to reach a scheduler, and to wait for its first worker
CONNECT_TIMEOUT = 10.0


def _require_distributed():
    try:
        import distributed  # noqa: F401
    except ImportError as e:  # pragma: no cover - the test extra installs it
        raise ImportError("a distributed model needs Dask's scheduler: pip install 'bgplvm[distributed]'"
                          " (or pass client=None to fit in this process)") from e
    return distributed


@dataclass
class Connection:
    """A client and whether the model started it (then ``close`` also stops its cluster)."""

    client: object
    owned: bool = False

    @property
    def workers(self) -> list[str]:
        """The workers' addresses alive now, sorted (the blocks are dealt to them in this
        order; ``faults.alive_workers``)."""
        from .faults import alive_workers

        return alive_workers(self.client)

    def close(self) -> None:
        if self.owned:
            cluster = getattr(self.client, "cluster", None)
            self.client.close(timeout=CONNECT_TIMEOUT)
            if cluster is not None:
                cluster.close(timeout=CONNECT_TIMEOUT)
            self.owned = False


def close_anywhere(conn: Connection) -> None:
    """``conn.close()``, from whatever thread the garbage collector runs a finalizer in: in
    a thread that runs an event loop (a Dask client's own, say) a blocking close would stall
    that loop, so it is done from a new thread there."""
    import asyncio
    import threading

    try:
        asyncio.get_running_loop()
    except RuntimeError:  # no loop runs here: close now
        conn.close()
        return
    threading.Thread(target=conn.close, name="bgplvm: close a local cluster", daemon=True).start()


def local_cluster(n_workers: int | None = None):
    """A client of a ``LocalCluster``: one worker process per core, one thread each (the
    compiled kernels then run one per core; BLAS on one thread)."""
    distributed = _require_distributed()
    n = n_workers or max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
    try:
        # no dashboard; the scheduler's own HTTP routes on a free port (not 8787, which a
        # second cluster, or the user's own, would find taken)
        cluster = distributed.LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                           dashboard_address=None, silence_logs=50,
                                           scheduler_kwargs={"dashboard_address": ":0"})
    except RuntimeError as e:
        raise RuntimeError("the local Dask cluster's worker processes did not start. Worker processes "
                           "import the main script again: in a script, build the model under "
                           "`if __name__ == '__main__':`") from e
    return distributed.Client(cluster)


def connect(client) -> Connection:
    """A ``Connection`` to the cluster named by ``client`` (module docstring), its workers
    checked (``check_workers``)."""
    distributed = _require_distributed()
    if isinstance(client, distributed.Client):
        conn = Connection(client, owned=False)
    elif client == "local":
        conn = Connection(local_cluster(), owned=True)
    elif isinstance(client, str):
        conn = Connection(_dial(distributed, client), owned=True)
    else:
        raise TypeError(f"client must be a dask.distributed.Client, a scheduler address such as "
                        f"'tcp://host:8786', 'local' or None (in this process), got {client!r}")
    try:
        check_workers(conn.client)
    except BaseException:
        conn.close()
        raise
    return conn


def _dial(distributed, address: str):
    try:
        return distributed.Client(address, timeout=CONNECT_TIMEOUT)
    except (OSError, TimeoutError) as e:
        raise ConnectionError(f"cannot reach the Dask scheduler at {address!r} within {CONNECT_TIMEOUT:.0f} s "
                              f"({type(e).__name__}: {e}); start one there (`dask scheduler`, then "
                              "`dask worker ADDRESS` on each machine) or pass client='local'") from e


def check_workers(client) -> dict:
    """The bgplvm version on every worker, which must be this one: otherwise a RuntimeError
    naming both (a worker without bgplvm, or another version of it, would fail later with
    an unpickling error or differ silently)."""
    import importlib.metadata

    from .. import __version__

    try:
        client.wait_for_workers(1, timeout=CONNECT_TIMEOUT)
    except (TimeoutError, OSError) as e:
        raise RuntimeError(f"the Dask scheduler has no workers (waited {CONNECT_TIMEOUT:.0f} s): start some "
                           "with `dask worker SCHEDULER_ADDRESS`") from e
    # importlib.metadata.version travels by reference and exists on every worker, with or
    # without bgplvm (a function of bgplvm would fail to unpickle there instead)
    try:
        found = client.run(importlib.metadata.version, "bgplvm", on_error="return", callback_timeout=CONNECT_TIMEOUT)
    except (TimeoutError, OSError) as e:
        raise RuntimeError(f"the Dask workers did not answer within {CONNECT_TIMEOUT:.0f} s "
                           f"({type(e).__name__}: {e}): are they stuck or unreachable from here?") from e
    bad = {w: v for w, v in found.items() if v != __version__}
    if bad:
        w, v = sorted(bad.items())[0]
        what = "no bgplvm" if isinstance(v, Exception) else f"bgplvm {v}"
        raise RuntimeError(f"{len(bad)} of {len(found)} Dask workers cannot run this model: {w} has {what}, "
                           f"this process has bgplvm {__version__}; install the same version on every "
                           f"worker (pip install bgplvm[distributed]=={__version__})")
    return found
