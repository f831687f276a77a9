"""BLAS threads inside the model: one.

The matrices of the bound are small (M x M, N x M, N x D) and the psi statistics already
run on every core through Numba's thread pool. A multi-threaded BLAS beside that pool
makes the two fight for the cores: on a 2-core machine one bound + gradient on the oil
data took ~38 ms with OpenBLAS's default 2 threads against ~5 ms with 1 (bench/README.md).
``single_threaded_blas`` limits every loaded BLAS (numpy's and scipy's OpenBLAS alike)
for the duration of a call, through threadpoolctl; entering it costs ~10 microseconds.
"""

from __future__ import annotations

import functools

import scipy.linalg  # noqa: F401  (loads scipy's BLAS, so the controller sees it too)
from threadpoolctl import ThreadpoolController

_controller: ThreadpoolController | None = None


def single_threaded_blas():
    """Context manager: BLAS limited to one thread inside it."""
    global _controller
    if _controller is None:
        _controller = ThreadpoolController()
    return _controller.limit(limits=1, user_api="blas")


def blas_single_threaded(fn):
    """Decorator form of ``single_threaded_blas``."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with single_threaded_blas():
            return fn(*args, **kwargs)

    return wrapper
