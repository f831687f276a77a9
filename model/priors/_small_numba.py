"""Small dense d x d helpers of the state-space prior's compiled passes
(``_state_space_numba``): products, quadratic forms, Cholesky factor and solves of the
state covariances (d <= ~20). Each takes d explicitly, so that a caller's compile-time d
(``_dim``) unrolls their loops.

Numba's cache invalidates a kernel when its own file changes, not when a helper it calls
from another module does: after editing this file, delete ``model/priors/__pycache__/
_state_space_numba*.nb*``.
"""

from __future__ import annotations

import math

from numba import njit

from .._numba_config import STRICT_SERIAL_OPTIONS as _SERIAL


@njit(**_SERIAL)
def _mm(X, Y, out, d):
    """out = X @ Y (d x d)."""
    for i in range(d):
        for j in range(d):
            s = 0.0
            for k in range(d):
                s += X[i, k] * Y[k, j]
            out[i, j] = s


@njit(**_SERIAL)
def _mmt(X, Y, out, d):
    """out = X @ Y^T (d x d)."""
    for i in range(d):
        for j in range(d):
            s = 0.0
            for k in range(d):
                s += X[i, k] * Y[j, k]
            out[i, j] = s


@njit(**_SERIAL)
def _quad(H, X, d):
    """H^T X H."""
    s = 0.0
    for i in range(d):
        for j in range(d):
            s += H[i] * X[i, j] * H[j]
    return s


@njit(**_SERIAL)
def _cholesky_plain(X, L, d):
    """L lower with L L^T = X; False (L unfinished) if X is not positive definite."""
    for i in range(d):
        for j in range(i + 1):
            s = X[i, j]
            for k in range(j):
                s -= L[i, k] * L[j, k]
            if i == j:
                if s <= 0.0:
                    return False
                L[i, i] = math.sqrt(s)
            else:
                L[i, j] = s / L[j, j]
    return True


@njit(**_SERIAL)
def _cholesky(X, L, d):
    """L lower with L L^T = X + j I, j the smallest of 0, 1e-12 tr/d, x10, ... that works."""
    if _cholesky_plain(X, L, d):
        return True
    tr = 0.0
    for i in range(d):
        tr += X[i, i]
    jit = 0.0
    for _ in range(12):
        ok = True
        for i in range(d):
            for j in range(i + 1):
                s = X[i, j] + (jit if i == j else 0.0)
                for k in range(j):
                    s -= L[i, k] * L[j, k]
                if i == j:
                    if s <= 0.0:
                        ok = False
                        break
                    L[i, i] = math.sqrt(s)
                else:
                    L[i, j] = s / L[j, j]
            if not ok:
                break
        if ok:
            return True
        jit = max(1e-300, 1e-12 * abs(tr) / d) if jit == 0.0 else 10.0 * jit
    return False


@njit(**_SERIAL)
def _chol_solve(L, B, d):
    """B := (L L^T)^{-1} B in place (B (d, d))."""
    for c in range(d):
        for i in range(d):
            s = B[i, c]
            for j in range(i):
                s -= L[i, j] * B[j, c]
            B[i, c] = s / L[i, i]
        for i in range(d - 1, -1, -1):
            s = B[i, c]
            for j in range(i + 1, d):
                s -= L[j, i] * B[j, c]
            B[i, c] = s / L[i, i]


@njit(**_SERIAL)
def _dim(dims, H):
    """The state dimension: len(dims), a compile-time constant, for the specialised
    small dimensions; H's length (a run-time value) when dims is the empty tuple."""
    if len(dims) > 0:
        return len(dims)
    return H.shape[0]
