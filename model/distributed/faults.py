"""What a distributed model does when its cluster fails: a deadline on every wait, and
errors that name what was lost and what to do.

Nothing here waits without a deadline. A call on the blocks (``blocks.Blocks``) is waited
for in slices of ``POLL`` seconds; between slices the scheduler is asked which workers are
alive (``alive_workers``, itself bounded by ``SCHEDULER_TIMEOUT``). A block whose worker
left is reported at once as ``WorkerLost`` (the fit rebuilds it, ``training.Training``);
a round that outlasts ``CALL_TIMEOUT`` with every worker alive is ``ClusterTimeout``; a
scheduler that does not answer is ``SchedulerLost``. The last two stop the fit: its last
checkpoint stays whole, and ``resume`` continues from it.
"""

from __future__ import annotations

import time

#: seconds between two looks at the scheduler while a call is waited for
POLL = 1.0
#: seconds one round of calls on the blocks (or the start of blocks on workers) may take
#: with every worker alive before the cluster is taken to be stuck (``timeout=`` of the
#: model: a block's slowest evaluation, or its loading, must fit well inside it)
CALL_TIMEOUT = 600.0
#: seconds the scheduler has to answer, and to show a first worker after a loss
SCHEDULER_TIMEOUT = 30.0
#: seconds a block's actor has to answer a ping once its worker is listed as alive
PING_TIMEOUT = 30.0
#: states in which a worker listed by the scheduler is about to leave
_LEAVING = {"closing", "closed", "closing_gracefully", "failed"}


class ClusterError(RuntimeError):
    """The cluster failed under a call: ``workers`` (addresses) and ``blocks`` (indices of
    blocks of rows) name what was concerned."""

    def __init__(self, message: str, workers=(), blocks=()):
        super().__init__(message)
        self.workers = sorted(set(workers))
        self.blocks = sorted(set(int(b) for b in blocks))


class WorkerLost(ClusterError):
    """Workers holding blocks of rows left the cluster (killed, restarted, scaled down)."""


class ClusterTimeout(ClusterError):
    """A round of calls outlasted its deadline with the workers still listed as alive."""


class SchedulerLost(ClusterError):
    """The scheduler does not answer (it stopped, or the network to it is down)."""


def alive_workers(client, timeout: float | None = None) -> list[str]:
    """The addresses of the workers the scheduler lists now, sorted, those about to leave
    left out; ``SchedulerLost`` when it does not answer within ``timeout`` seconds
    (``SCHEDULER_TIMEOUT``)."""
    timeout = SCHEDULER_TIMEOUT if timeout is None else timeout
    if client.status in ("closing", "closed"):
        raise SchedulerLost(f"the Dask client is {client.status}: the model's cluster is gone")
    try:
        info = client.sync(client.scheduler.identity, n_workers=-1, callback_timeout=timeout)
    except (OSError, TimeoutError) as e:
        raise SchedulerLost(f"the Dask scheduler {getattr(client.scheduler, 'address', '')} did not answer within "
                            f"{timeout:.0f} s ({type(e).__name__}: {e})") from e
    return sorted(a for a, w in info["workers"].items() if str(w.get("status", "running")) not in _LEAVING)


class Deadline:
    """A point in time ``seconds`` from now: ``left()`` the seconds to it (>= 0), ``passed``."""

    def __init__(self, seconds: float):
        self.seconds = float(seconds)
        self.end = time.monotonic() + self.seconds

    def left(self) -> float:
        return max(0.0, self.end - time.monotonic())

    @property
    def passed(self) -> bool:
        return time.monotonic() >= self.end


def where(blocks, workers) -> str:
    """'blocks [1, 3] on tcp://...' for messages."""
    ws = ", ".join(sorted(set(workers))) or "no worker"
    return f"block(s) {sorted(set(blocks))} on {ws}"
