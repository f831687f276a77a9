"""Linear algebra helpers: jittered Cholesky, triangular solves, log-determinants.

Never an explicit inverse: every solve goes through a Cholesky factor and a triangular
solve. The factor and the solves call LAPACK (potrf, trtrs) directly: the bound makes a
handful per evaluation and scipy's wrappers cost ~10-15 us each around them, a tenth of a
small model's evaluation.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import cho_solve
from scipy.linalg.lapack import dpotrf, dtrtrs

#: Jitter added to the diagonal of Kuu before its Cholesky, x max(1, mean diag Kuu)
#: (``bound.kuu_jitter``): it keeps Kuu numerically positive definite when two inducing
#: inputs nearly coincide. (GPy 1.15's
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
    diag = np.arange(M)
    scale = max(float(np.mean(np.abs(A[diag, diag]))), 1e-300)
    j = jitter
    for _ in range(MAX_JITTER_TRIES):
        Aj = np.array(A, dtype=np.float64, order="C")
        Aj[diag, diag] += j
        # the C-ordered symmetric matrix is its own Fortran-ordered transpose: factor it as
        # U^T U (upper, no copy), then L = U^T is C-ordered lower
        U, info = dpotrf(Aj.T, lower=0, clean=1, overwrite_a=1)
        if info == 0:
            return U.T
        j = max(j * 10.0, 1e-10 * scale)
    raise CholeskyError(
        f"{what} ({M}x{M}) is not positive definite even with jitter {j / 10:.1e} added to its "
        f"diagonal. {hint or 'Likely cause: duplicated inputs or an extreme kernel parameter.'}")


def _trtrs(L: np.ndarray, B: np.ndarray, transposed: bool) -> np.ndarray:
    # L (C-ordered lower) is passed as L^T, Fortran-ordered upper (no copy): solving with
    # (L^T)^T = L is trans=1, with L^T is trans=0
    X, info = dtrtrs(np.ascontiguousarray(L).T, B, lower=0, trans=0 if transposed else 1)
    if info > 0:
        raise np.linalg.LinAlgError(f"singular triangular factor: zero on its diagonal at {info - 1}")
    if info < 0:
        raise ValueError(f"trtrs: illegal argument {-info}")
    return X


def solve_lower(L: np.ndarray, B: np.ndarray) -> np.ndarray:
    """L^{-1} B for lower-triangular L."""
    return _trtrs(L, B, transposed=False)


def solve_upper_t(L: np.ndarray, B: np.ndarray) -> np.ndarray:
    """L^{-T} B for lower-triangular L."""
    return _trtrs(L, B, transposed=True)


def chol_solve(L: np.ndarray, B: np.ndarray) -> np.ndarray:
    """(L L^T)^{-1} B by two triangular solves."""
    return cho_solve((L, True), B, check_finite=False)


def logdet_from_chol(L: np.ndarray) -> float:
    """log |L L^T|."""
    return 2.0 * float(np.sum(np.log(np.diag(L))))
