"""Linear algebra helpers: jittered Cholesky, triangular solves, log-determinants.

Never an explicit inverse: every solve goes through a Cholesky factor and
``scipy.linalg.solve_triangular``.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import cho_solve, solve_triangular

#: Constant jitter added to the diagonal of Kuu before its Cholesky: it keeps Kuu
#: numerically positive definite when two inducing inputs nearly coincide. (GPy 1.15's
#: VarDTC default is 1e-8; the benchmark sets GPy's to this value to compare bounds.)
JITTER = 1e-6

#: How many times the jitter is multiplied by 10 before giving up.
MAX_JITTER_TRIES = 6


class CholeskyError(np.linalg.LinAlgError):
    """A matrix stayed non positive-definite even with growing jitter."""


def jittered_cholesky(A: np.ndarray, jitter: float = JITTER, what: str = "matrix",
                      hint: str = "") -> np.ndarray:
    """Lower Cholesky factor L of A + jitter * I, growing the jitter 10x on failure.

    A : (M, M) symmetric. Raises CholeskyError naming ``what`` and the likely cause.
    """
    if not np.all(np.isfinite(A)):
        raise CholeskyError(f"{what} contains NaN or inf; {hint or 'check the parameters'}")
    M = A.shape[0]
    eye = np.eye(M)
    scale = max(float(np.mean(np.abs(np.diag(A)))), 1e-300)
    j = jitter
    for _ in range(MAX_JITTER_TRIES):
        try:
            return np.linalg.cholesky(A + j * eye)
        except np.linalg.LinAlgError:
            j = max(j * 10.0, 1e-10 * scale)
    raise CholeskyError(
        f"{what} ({M}x{M}) is not positive definite even with jitter {j / 10:.1e} added to its "
        f"diagonal. {hint or 'Likely cause: duplicated inputs or an extreme kernel parameter.'}")


def solve_lower(L: np.ndarray, B: np.ndarray) -> np.ndarray:
    """L^{-1} B for lower-triangular L."""
    return solve_triangular(L, B, lower=True, check_finite=False)


def solve_upper_t(L: np.ndarray, B: np.ndarray) -> np.ndarray:
    """L^{-T} B for lower-triangular L."""
    return solve_triangular(L, B, lower=True, trans="T", check_finite=False)


def chol_solve(L: np.ndarray, B: np.ndarray) -> np.ndarray:
    """(L L^T)^{-1} B by two triangular solves."""
    return cho_solve((L, True), B, check_finite=False)


def logdet_from_chol(L: np.ndarray) -> float:
    """log |L L^T|."""
    return 2.0 * float(np.sum(np.log(np.diag(L))))
