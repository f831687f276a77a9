"""Numba settings shared by every compiled kernel in ``model`` (one place for the flags).

Compiled kernels live in private ``_*_numba.py`` modules, take only contiguous float64
arrays and scalars, and come as a serial/parallel pair of *separate source functions*
(one Python function compiled twice with ``cache=True`` under different options collides
in numba's on-disk cache, numba issue 6845). The Python classes pick one of the pair at
call time through :func:`use_parallel`, so tests can flip :data:`PARALLEL`.

Caveat of the on-disk cache: a cached kernel is invalidated when its own source file
changes, not when a function it calls from another module changes (``_fastexp.exp_into``
is inlined into the RBF kernels). After editing such a helper, delete the ``*.nbi``/``*.nbc``
files in ``model/kernels/__pycache__``.

Environment variables (read once, at import):
    BGPLVM_NUMBA_PARALLEL=0       serial kernels only
    BGPLVM_NUMBA_MIN_PARALLEL=n   below n data points the serial kernel is used
"""

from __future__ import annotations

import os
from contextlib import contextmanager

import numba


def _env_flag(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() not in ("0", "false", "no", "off", "")


#: Use the multi-threaded (``prange``) kernels. Read at every call.
PARALLEL: bool = _env_flag("BGPLVM_NUMBA_PARALLEL", True)

#: Below this many data points the serial kernel is used: starting the thread pool costs
#: more than the work (a prediction for one point, the K(Z) of an M x M block).
MIN_PARALLEL_POINTS: int = int(os.environ.get("BGPLVM_NUMBA_MIN_PARALLEL", "64"))

#: LLVM fast-math flags. Deliberately *not* ``nnan``/``ninf``: with them NaN checks are
#: compiled away. ``reassoc`` lets LLVM vectorise the sums over inducing points; it changes
#: results only at the level of rounding (~1e-15 relative).
FASTMATH = frozenset({"nsz", "arcp", "contract", "afn", "reassoc"})

#: Cache compiled kernels on disk (safe: every kernel takes only arrays and scalars).
CACHE: bool = True

def use_parallel(n_points: int) -> bool:
    """Whether a kernel over ``n_points`` data points should run its parallel version."""
    return PARALLEL and n_points >= MIN_PARALLEL_POINTS


def n_chunks(n_points: int) -> int:
    """Number of blocks of data points for the parallel kernels (one per thread)."""
    return max(1, min(int(n_points), numba.get_num_threads()))


@contextmanager
def parallel_mode(parallel: bool, min_points: int = 0):
    """Temporarily force the serial (``parallel=False``) or parallel kernels (tests)."""
    global PARALLEL, MIN_PARALLEL_POINTS
    saved = PARALLEL, MIN_PARALLEL_POINTS
    PARALLEL, MIN_PARALLEL_POINTS = bool(parallel), int(min_points)
    try:
        yield
    finally:
        PARALLEL, MIN_PARALLEL_POINTS = saved
