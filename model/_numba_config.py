"""Numba settings shared by every compiled kernel in ``model`` (one place for the flags),
and how many threads a kernel call gets.

Compiled kernels live in private ``_*_numba.py`` modules and take only contiguous float64
arrays and scalars. Each public compiled kernel splits the data points into ``nchunks``
blocks, runs them through one ``prange`` loop (one block per iteration) and sums the
blocks' partial results in block order. The caller (``kernels/_util.run_blocks``) sets how
many threads run that loop (``numba.set_num_threads``, per Python thread), so one compiled
function serves the serial and the parallel case: with one thread OpenMP runs the loop on
the calling thread without waking the pool (a few microseconds more than a plain loop).
There are no separate serial twins any more (they doubled the cold compile time), and as
the blocks do not depend on the thread count, results are bit-for-bit the same on 1 or
more threads. (The thread count cannot be set inside the compiled code: Numba does not
cache a function that calls ``numba.set_num_threads``.)

Threads per call (:func:`threads_for`): one below :data:`MIN_PARALLEL_POINTS` points (the
work is smaller than waking a thread), and otherwise as many as there are idle cores, up to
``NUMBA_NUM_THREADS``. "Idle" is what other processes left over the last
:data:`BUSY_CHECK_INTERVAL` seconds (machine CPU time from ``/proc/stat`` minus this
process's own; :class:`_IdleCores`): on a 2-core
machine with one other busy process, a 2-thread parallel region waits for the thread that
shares its core with that process, and one evaluation took 3-10x the idle time
(bench/README.md, "Busy machine"); on one thread it takes the idle single-threaded time.
Two models that evaluate in two threads of one process (the explorer) share the idle
cores: one each on two cores (:class:`_CallingThreads`).

OpenMP's wait policy is left at libgomp's default (worker threads spin briefly after a
parallel region, then sleep). ``OMP_WAIT_POLICY=PASSIVE`` (sleep at once) was the default
for a while: it cost ~0.4 ms per evaluation on an idle machine (small model 1.78 against
1.43 ms, oil 6.7 against 6.4 ms; waking the sleeping worker at every region), and with the
thread counts above it no longer buys anything on a busy one (bench/README.md, "Busy
machine"). Set it in the environment to try.

Caveat of the on-disk cache: a cached kernel is invalidated when its own source file
changes, not when a function it calls from another module changes (``_fastexp.exp_into``
is inlined into the RBF kernels), nor when the options below change (Numba's cache key
holds the signature, the CPU and the function's bytecode, not its compiler flags). After
editing such a helper or an option, delete the ``*.nbi``/``*.nbc`` files in
``model/__pycache__``, ``model/kernels/__pycache__`` and ``model/priors/__pycache__``.

A run that compiles the kernels and a later run that loads them from the cache give the
same numbers bit for bit (``bench/cache_determinism.py`` checks it; the fast-math flags
below are chosen for it).

Environment variables (read once, at import):
    BGPLVM_NUMBA_PARALLEL=0       one thread only
    BGPLVM_NUMBA_MIN_PARALLEL=n   below n data points one thread is used
    BGPLVM_NUMBA_ADAPTIVE=0       do not look at the machine's load: always all threads
    NUMBA_NUM_THREADS=n           at most n threads (Numba's own variable)
"""

from __future__ import annotations

import os
import threading
import time
from contextlib import contextmanager

import numba


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

#: Seconds over which other processes' CPU use is measured (one read of /proc/stat costs
#: ~20 microseconds; the kernel counts CPU time in 10 ms ticks, so shorter windows would
#: be too coarse).
BUSY_CHECK_INTERVAL: float = 0.1

#: The most threads a kernel uses, and the number of blocks a call splits its points into
#: (fixed: results do not depend on how many threads run them).
MAX_THREADS: int = max(1, int(numba.config.NUMBA_NUM_THREADS))

#: LLVM fast-math flags of the psi-statistics and test-bound kernels. Deliberately *not*
#: ``nnan``/``ninf``: with them NaN checks are compiled away. ``reassoc`` lets LLVM
#: vectorise the sums over inducing points; it changes results only at the level of
#: rounding (~1e-15 relative). Not ``nsz`` either: with it (together with ``contract`` and
#: ``reassoc``) the code a process runs right after compiling a kernel and the code it
#: writes to the on-disk cache differed in the last bits, so the run that compiled and every
#: later run gave different fits (the walk reproduction's bound 9,328.25 against 9,329.64
#: after 2000 iterations). Without it they are equal bit for bit, at the same speed
#: (``bench/cache_determinism.py``, bench/README.md "The same numbers from compiled and
#: cached kernels").
FASTMATH = frozenset({"arcp", "contract", "afn", "reassoc"})

#: Cache compiled kernels on disk (safe: every kernel takes only arrays and scalars).
CACHE: bool = True

#: Compiler options of the serial functions (every kernel's wrapper and row loops) and
#: of the one ``prange`` loop per kernel.
SERIAL_OPTIONS = dict(cache=CACHE, fastmath=set(FASTMATH), nogil=True)
PARALLEL_OPTIONS = dict(SERIAL_OPTIONS, parallel=True)

#: The same for the latent priors' kernels (``priors/_*_numba.py``), without fast-math: on
#: their d x d recursions the compiled and the cached code differed with the flags above,
#: with ``contract`` and ``reassoc`` alone and with ``reassoc`` alone (the fits with the
#: state-space prior drifted apart); without any they are equal. They gain nothing from it
#: (d x d loops, no long sums to vectorise; CMU's state-space bound + gradient 43.3 ms with
#: the former flags, 41.7 ms without, the best of three alternating runs).
STRICT_SERIAL_OPTIONS = dict(SERIAL_OPTIONS, fastmath=False)
STRICT_PARALLEL_OPTIONS = dict(STRICT_SERIAL_OPTIONS, parallel=True)


class _IdleCores:
    """Cores not used by other processes: over the last ``BUSY_CHECK_INTERVAL`` seconds, the
    machine's busy CPU time (``/proc/stat``: user, nice, system, irq, softirq, steal) minus
    this process's own (``os.times``, every thread), per second of wall time, rounded to
    whole cores (Linux; elsewhere every core counts as idle).

    Counting this process's own time out matters: a snapshot of runnable tasks
    (``/proc/loadavg``) taken just after a parallel kernel still sees its worker thread,
    and the next kernel then ran on one thread on an idle machine (a small model's
    evaluation 1.7 ms instead of 1.4 ms)."""

    def __init__(self):
        self.n_cpus = os.cpu_count() or 1
        self._idle = self.n_cpus
        self._last = None  # (wall, machine busy s, own cpu s)
        self.available = os.path.exists("/proc/stat")
        self._tick = float(os.sysconf("SC_CLK_TCK")) if hasattr(os, "sysconf") else 100.0

    def _sample(self) -> tuple[float, float, float]:
        with open("/proc/stat", "rb") as f:
            fields = f.readline().split()  # "cpu user nice system idle iowait irq softirq steal ..."
        v = [int(x) for x in fields[1:9]]
        busy = (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / self._tick
        t = os.times()
        return time.monotonic(), busy, t.user + t.system

    @staticmethod
    def _others(a: tuple[float, float, float], b: tuple[float, float, float]) -> float:
        """Cores other processes kept busy between samples ``a`` and ``b``."""
        return ((b[1] - a[1]) - (b[2] - a[2])) / max(b[0] - a[0], 1e-9)

    def __call__(self) -> int:
        if not self.available:
            return self._idle
        now = time.monotonic()
        if self._last is not None and now - self._last[0] < BUSY_CHECK_INTERVAL:
            return self._idle
        try:
            sample = self._sample()
        except (OSError, ValueError, IndexError):
            self.available = False
            return self._idle
        if self._last is not None:
            self._idle = max(1, self.n_cpus - int(self._others(self._last, sample) + 0.5))
        self._last = sample
        return self._idle

    def measure(self, seconds: float = 0.5) -> float | None:
        """Cores that other processes leave idle over the next ``seconds`` (a float, not
        rounded, may be 0; sleeps that long). None where ``/proc/stat`` is unreadable."""
        if not self.available:
            return None
        try:
            a = self._sample()
            time.sleep(seconds)
            b = self._sample()
        except (OSError, ValueError, IndexError):
            return None
        return max(0.0, self.n_cpus - self._others(a, b))


idle_cores = _IdleCores()


class _CallingThreads:
    """Python threads of this process that called a kernel within the last
    ``BUSY_CHECK_INTERVAL`` seconds (two models evaluating in two threads, as the
    explorer's sessions do, share the idle cores instead of each taking all of them)."""

    def __init__(self):
        self._last: dict[int, float] = {}

    def __call__(self) -> int:
        now = time.monotonic()
        last = self._last
        last[threading.get_ident()] = now
        if len(last) > 64:  # forget threads that stopped calling
            for tid in [t for t, v in last.items() if now - v > BUSY_CHECK_INTERVAL]:
                last.pop(tid, None)
        return sum(1 for v in list(last.values()) if now - v < BUSY_CHECK_INTERVAL)


calling_threads = _CallingThreads()


def threads_for(n_points: int) -> int:
    """Threads for a kernel call over ``n_points`` data points (see the module docstring)."""
    if not PARALLEL or n_points < MIN_PARALLEL_POINTS or MAX_THREADS == 1:
        return 1
    if not ADAPTIVE:
        return MAX_THREADS
    return max(1, min(MAX_THREADS, idle_cores() // calling_threads()))


def n_chunks(n_points: int) -> int:
    """Blocks of data points of a kernel call: one per possible thread (never more than
    the points). Independent of the current load, so results are too."""
    return max(1, min(int(n_points), MAX_THREADS))


class thread_limit:
    """Context manager: inside, Numba runs this Python thread's kernels on at most
    ``threads_for(n_points)`` threads (``numba.get_num_threads()`` is restored after).
    ``run_blocks`` enters it around every kernel call; a caller whose many small calls all
    concern few points (test-time inference of one row: ~100 calls) enters it once around
    them, which saves the ~3 microseconds each set and reset costs. A class rather than a
    generator: it is on the path of every kernel call."""

    __slots__ = ("want", "have")

    def __init__(self, n_points: int):
        self.want, self.have = threads_for(n_points), numba.get_num_threads()

    def __enter__(self) -> "thread_limit":
        if self.want < self.have:
            numba.set_num_threads(self.want)  # this Python thread only
        return self

    def __exit__(self, *exc) -> None:
        if self.want < self.have:
            numba.set_num_threads(self.have)


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
