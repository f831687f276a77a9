"""Numba settings shared by every compiled kernel in ``model`` (one place for the flags),
and how many threads a kernel call gets.

Compiled kernels live in private ``_*_numba.py`` modules and take only contiguous float64
arrays and scalars. Each public compiled kernel splits the data points into ``nchunks``
blocks, runs them through one ``prange`` loop (one block per iteration) and sums the
blocks' partial results in block order. The caller (``kernels/_util.run_blocks``) sets how
many threads run that loop (``numba.set_num_threads``, per Python thread), so one compiled
function serves the serial and the parallel case: with one thread OpenMP runs the loop on
the calling thread without waking the pool (about 1 microsecond more than a plain loop).
There are no separate serial twins any more (they doubled the cold compile time), and as
the blocks do not depend on the thread count, results are bit-for-bit the same on 1 or
more threads. (The thread count cannot be set inside the compiled code: Numba does not
cache a function that calls ``numba.set_num_threads``.)

Threads per call (:func:`threads_for`): one below :data:`MIN_PARALLEL_POINTS` points (the
work is smaller than waking a thread), and otherwise as many as there are idle cores, up to
``NUMBA_NUM_THREADS``. "Idle" comes from the kernel's count of runnable tasks
(``/proc/loadavg``, read at most every :data:`BUSY_CHECK_INTERVAL` seconds): on a 2-core
machine with one other busy process, a 2-thread parallel region waits for the thread that
shares its core with that process, and one evaluation took 3-10x the idle time
(bench/README.md, "Busy machine"); on one thread it takes the idle single-threaded time.
The same rule gives two models that evaluate in two threads of one process (the explorer)
one core each.

OpenMP's wait policy: libgomp's worker threads spin after each parallel region by default.
On a machine whose cores are all busy that spinning takes the core from the thread that
has work (one small-model evaluation: 56 ms against 5 ms at load 9). This module sets
``OMP_WAIT_POLICY=PASSIVE`` (unless the variable is already set) before Numba starts its
OpenMP pool; it is read when libgomp loads, so it has no effect if another library loaded
libgomp first.

Caveat of the on-disk cache: a cached kernel is invalidated when its own source file
changes, not when a function it calls from another module changes (``_fastexp.exp_into``
is inlined into the RBF kernels). After editing such a helper, delete the ``*.nbi``/``*.nbc``
files in ``model/kernels/__pycache__``.

Environment variables (read once, at import):
    BGPLVM_NUMBA_PARALLEL=0       one thread only
    BGPLVM_NUMBA_MIN_PARALLEL=n   below n data points one thread is used
    BGPLVM_NUMBA_ADAPTIVE=0       do not look at the machine's load: always all threads
    NUMBA_NUM_THREADS=n           at most n threads (Numba's own variable)
"""

from __future__ import annotations

import os
import time
from contextlib import contextmanager

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before numba loads libgomp

import numba  # noqa: E402


def _env_flag(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() not in ("0", "false", "no", "off", "")


#: Use more than one thread. Read at every call.
PARALLEL: bool = _env_flag("BGPLVM_NUMBA_PARALLEL", True)

#: Below this many data points one thread is used: starting the thread pool costs
#: more than the work (a prediction for one point, the K(Z) of an M x M block).
MIN_PARALLEL_POINTS: int = int(os.environ.get("BGPLVM_NUMBA_MIN_PARALLEL", "64"))

#: Adapt the thread count to the machine's load (see the module docstring).
ADAPTIVE: bool = _env_flag("BGPLVM_NUMBA_ADAPTIVE", True)

#: Seconds between two reads of /proc/loadavg (a read costs ~20-80 microseconds; one
#: bound + gradient makes ~5 kernel calls in a few milliseconds).
BUSY_CHECK_INTERVAL: float = 0.02

#: The most threads a kernel uses, and the number of blocks a call splits its points into
#: (fixed: results do not depend on how many threads run them).
MAX_THREADS: int = max(1, int(numba.config.NUMBA_NUM_THREADS))

#: LLVM fast-math flags. Deliberately *not* ``nnan``/``ninf``: with them NaN checks are
#: compiled away. ``reassoc`` lets LLVM vectorise the sums over inducing points; it changes
#: results only at the level of rounding (~1e-15 relative).
FASTMATH = frozenset({"nsz", "arcp", "contract", "afn", "reassoc"})

#: Cache compiled kernels on disk (safe: every kernel takes only arrays and scalars).
CACHE: bool = True

#: Compiler options of the serial functions (every kernel's wrapper and row loops) and
#: of the one ``prange`` loop per kernel.
SERIAL_OPTIONS = dict(cache=CACHE, fastmath=set(FASTMATH), nogil=True)
PARALLEL_OPTIONS = dict(SERIAL_OPTIONS, parallel=True)


class _IdleCores:
    """Cores not taken by other runnable tasks, from ``/proc/loadavg`` (Linux; elsewhere
    every core counts as idle). Cached for ``BUSY_CHECK_INTERVAL`` seconds."""

    def __init__(self):
        self.n_cpus = os.cpu_count() or 1
        self._t = -1.0
        self._idle = self.n_cpus
        self.available = os.path.exists("/proc/loadavg")

    def __call__(self) -> int:
        now = time.monotonic()
        if now - self._t < BUSY_CHECK_INTERVAL:
            return self._idle
        self._t = now
        if not self.available:
            return self._idle
        try:
            with open("/proc/loadavg", "rb") as f:
                running = int(f.read().split()[3].split(b"/")[0])  # "3/89": runnable/all
        except (OSError, ValueError, IndexError):
            self.available = False
            return self._idle
        # the reading thread is one of the runnable tasks; the others compete with us
        self._idle = max(1, self.n_cpus - (running - 1))
        return self._idle


idle_cores = _IdleCores()


def threads_for(n_points: int) -> int:
    """Threads for a kernel call over ``n_points`` data points (see the module docstring)."""
    if not PARALLEL or n_points < MIN_PARALLEL_POINTS or MAX_THREADS == 1:
        return 1
    if not ADAPTIVE:
        return MAX_THREADS
    return min(MAX_THREADS, idle_cores())


def n_chunks(n_points: int) -> int:
    """Blocks of data points of a kernel call: one per possible thread (never more than
    the points). Independent of the current load, so results are too."""
    return max(1, min(int(n_points), MAX_THREADS))


@contextmanager
def thread_limit(n_points: int):
    """Inside: Numba runs this Python thread's kernels on at most ``threads_for(n_points)``
    threads (set once; ``numba.get_num_threads()`` is restored after). ``run_blocks`` uses
    it per kernel call; a caller whose many small calls all concern few points (test-time
    inference of one row: ~100 calls) sets it once around them, which saves the ~3
    microseconds each set and reset costs."""
    want, have = threads_for(n_points), numba.get_num_threads()
    if want >= have:
        yield
        return
    numba.set_num_threads(want)  # this Python thread only
    try:
        yield
    finally:
        numba.set_num_threads(have)


@contextmanager
def parallel_mode(parallel: bool, min_points: int = 0, adaptive: bool = False):
    """Temporarily force one thread (``parallel=False``) or all threads from ``min_points``
    points on, not looking at the load unless ``adaptive`` (tests)."""
    global PARALLEL, MIN_PARALLEL_POINTS, ADAPTIVE
    saved = PARALLEL, MIN_PARALLEL_POINTS, ADAPTIVE
    PARALLEL, MIN_PARALLEL_POINTS, ADAPTIVE = bool(parallel), int(min_points), bool(adaptive)
    try:
        yield
    finally:
        PARALLEL, MIN_PARALLEL_POINTS, ADAPTIVE = saved
