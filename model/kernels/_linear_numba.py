"""Compiled kernels for the ARD linear covariance k(x, x') = sum_q b_q x_q x'_q.

With A = Z diag(b) (M, Q) and C = sum_n (mu_n mu_n^T + diag(S_n)) (Q, Q) (paper, appendix
"Calculating the Psi Quantities"):

    psi0_n = sum_q b_q (mu_nq^2 + S_nq)
    Psi1   = mu A^T                                  (= K(mu, Z))
    Psi2^n = A (mu_n mu_n^T + diag(S_n)) A^T,        Psi2 = A C A^T

Gradients of L = sum w0 psi0 + sum W1 * Psi1 + sum W2 * Psi2, with Wsym = (W2 + W2^T)/2 and
K2 = A^T Wsym A (Q, Q):

    dL/dmu_n = 2 w0_n b * mu_n + W1[n] A + 2 K2 mu_n
    dL/dS_n  = w0_n b + diag(K2)
    dL/dZ    = (W1^T mu + 2 Wsym A C) diag(b)
    dL/db_q  = sum_n w0_n (mu_nq^2 + S_nq) + sum_m Z_mq (W1^T mu + 2 Wsym A C)_mq

The sums over n (C and R = W1^T mu) go through per-block accumulators as in ``_rbf_numba``;
the dense (M, M)/(Q, Q) products are left to NumPy in ``linear.py`` (BLAS, and much less
compile time than ``np.dot`` inside Numba).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .._numba_config import PARALLEL_OPTIONS as _PARALLEL
from .._numba_config import SERIAL_OPTIONS as _SERIAL


# --------------------------------------------------------------------------------------
# K(X, X2) = X diag(b) X2^T (also Psi1 = K(mu, Z))
# --------------------------------------------------------------------------------------
@njit(**_SERIAL)
def _k_rows(n0, n1, X, X2, b, out):
    M, Q = X2.shape
    for n in range(n0, n1):
        for m in range(M):
            r = 0.0
            for q in range(Q):
                r += b[q] * (X[n, q] * X2[m, q])  # symmetric in (n, m) bit for bit
            out[n, m] = r


@njit(**_PARALLEL)
def _K_blocks(N, nchunks, X, X2, b, out):
    """The only parallel code: one block of points per iteration (see K)."""
    for c in prange(nchunks):
        _k_rows(c * N // nchunks, (c + 1) * N // nchunks,
            X, X2, b, out)


@njit(**_SERIAL)
def K(X, X2, b, nchunks):
    """(N, N2) X diag(b) X2^T."""
    N = X.shape[0]
    out = np.empty((N, X2.shape[0]))
    _K_blocks(N, nchunks, X, X2, b, out)
    return out


@njit(**_SERIAL)
def K_gradients(dL_dK, X, b):
    """Gradients of L(K(X)) for a general dL_dK (N, N): (dL_dX (N, Q), dL_db (Q,))."""
    N, Q = X.shape
    dX = np.zeros((N, Q))
    db = np.zeros(Q)
    for i in range(N):
        for j in range(N):
            w = dL_dK[i, j]
            ws = dL_dK[i, j] + dL_dK[j, i]
            for q in range(Q):
                dX[i, q] += ws * b[q] * X[j, q]
                db[q] += w * X[i, q] * X[j, q]
    return dX, db


# --------------------------------------------------------------------------------------
# psi statistics
# --------------------------------------------------------------------------------------
@njit(**_SERIAL)
def _second_moment_rows(n0, n1, mu, S, C_out):
    """C_out += sum_{n0 <= n < n1} mu_n mu_n^T + diag(S_n)."""
    Q = mu.shape[1]
    C = np.zeros((Q, Q))  # local: neighbouring blocks' buffers share cache lines
    for n in range(n0, n1):
        for q in range(Q):
            C[q, q] += S[n, q]
            for r in range(Q):
                C[q, r] += mu[n, q] * mu[n, r]
    C_out += C


@njit(**_PARALLEL)
def _second_moment_blocks(N, nchunks, mu, S, Cc):
    """The only parallel code: one block of points per iteration (see second_moment)."""
    for c in prange(nchunks):
        _second_moment_rows(c * N // nchunks, (c + 1) * N // nchunks,
            mu, S, Cc[c])


@njit(**_SERIAL)
def second_moment(mu, S, nchunks):
    """(Q, Q) C = sum_n E[x_n x_n^T] = mu^T mu + diag(sum_n S_n)."""
    N, Q = mu.shape
    Cc = np.zeros((nchunks, Q, Q))
    _second_moment_blocks(N, nchunks, mu, S, Cc)
    C = np.zeros((Q, Q))
    for c in range(nchunks):
        C += Cc[c]
    return C


@njit(**_SERIAL)
def _psi2n_rows(n0, n1, mu, S, A, out):
    M, Q = A.shape
    a = np.empty(M)
    for n in range(n0, n1):
        for m in range(M):
            r = 0.0
            for q in range(Q):
                r += A[m, q] * mu[n, q]
            a[m] = r
        for m in range(M):
            for m2 in range(m, M):
                r = a[m] * a[m2]
                for q in range(Q):
                    r += A[m, q] * S[n, q] * A[m2, q]
                out[n, m, m2] = r
                out[n, m2, m] = r


@njit(**_PARALLEL)
def _psi2n_blocks(N, nchunks, mu, S, A, out):
    """The only parallel code: one block of points per iteration (see psi2n)."""
    for c in prange(nchunks):
        _psi2n_rows(c * N // nchunks, (c + 1) * N // nchunks,
            mu, S, A, out)


@njit(**_SERIAL)
def psi2n(mu, S, A, nchunks):
    """(N, M, M) Psi2^n = A (mu_n mu_n^T + diag S_n) A^T."""
    N = mu.shape[0]
    out = np.empty((N, A.shape[0], A.shape[0]))
    _psi2n_blocks(N, nchunks, mu, S, A, out)
    return out


@njit(**_SERIAL)
def _grad_rows(n0, n1, w0, W1, mu, S, A, K2, b, dmu, dS, R, C_out, db_out):
    """Rows n of dmu, dS; this block's sums R += W1^T mu, C += E[x x^T], db += psi0 part."""
    M, Q = A.shape
    C = np.zeros((Q, Q))  # local: neighbouring blocks' buffers share cache lines
    db = np.zeros(Q)
    for n in range(n0, n1):
        for q in range(Q):
            mq = mu[n, q]
            g = 2.0 * w0[n] * b[q] * mq
            for m in range(M):
                g += W1[n, m] * A[m, q]
                R[m, q] += W1[n, m] * mq
            for r in range(Q):
                g += 2.0 * K2[q, r] * mu[n, r]
                C[q, r] += mq * mu[n, r]
            C[q, q] += S[n, q]
            dmu[n, q] = g
            dS[n, q] = w0[n] * b[q] + K2[q, q]
            db[q] += w0[n] * (mq * mq + S[n, q])
    C_out += C
    db_out += db


@njit(**_PARALLEL)
def _psi_gradients_blocks(N, nchunks, dL_dpsi0, dL_dPsi1, mu, S, A, K2, b, dmu, dS, Rc, Cc, dbc):
    """The only parallel code: one block of points per iteration (see psi_gradients)."""
    for c in prange(nchunks):
        _grad_rows(c * N // nchunks, (c + 1) * N // nchunks,
                   dL_dpsi0, dL_dPsi1, mu, S, A, K2, b, dmu, dS, Rc[c], Cc[c], dbc[c])


@njit(**_SERIAL)
def psi_gradients(dL_dpsi0, dL_dPsi1, mu, S, A, K2, b, nchunks):
    """Loops over the points for the gradients; the dense (M, M) algebra is NumPy (``Linear``).

    A = Z diag(b) (M, Q), K2 = A^T Wsym A (Q, Q). Returns dL_dmu (N, Q), dL_dS (N, Q),
    R = dL_dPsi1^T mu (M, Q), C = sum_n E[x_n x_n^T] (Q, Q) and the psi0 part of dL_db (Q,).
    """
    N, Q = mu.shape
    M = A.shape[0]
    dmu = np.empty((N, Q))
    dS = np.empty((N, Q))
    Rc = np.zeros((nchunks, M, Q))
    Cc = np.zeros((nchunks, Q, Q))
    dbc = np.zeros((nchunks, Q))
    _psi_gradients_blocks(N, nchunks, dL_dpsi0, dL_dPsi1, mu, S, A, K2, b, dmu, dS, Rc, Cc, dbc)
    R = np.zeros((M, Q))
    C = np.zeros((Q, Q))
    db = np.zeros(Q)
    for c in range(nchunks):
        R += Rc[c]
        C += Cc[c]
        db += dbc[c]
    return dmu, dS, R, C, db


# --------------------------------------------------------------------------------------
# per-point gradients (test time): dL_dPsi2n differs for every point
# --------------------------------------------------------------------------------------
@njit(**_SERIAL)
def _grad_n_rows(n0, n1, w0, W1, W2n, mu, S, A, b, dmu, dS):
    """Rows n of dmu, dS for L = sum w0 psi0 + sum W1 * Psi1 + sum_n sum W2n[n] * Psi2^n.

    With K2n = A^T W2n[n] A (Q, Q):
        dL/dmu_n = 2 w0_n b * mu_n + W1[n] A + (K2n + K2n^T) mu_n,
        dL/dS_n  = w0_n b + diag(K2n).
    """
    M, Q = A.shape
    T = np.empty((M, Q))
    K2 = np.empty((Q, Q))
    for n in range(n0, n1):
        W = W2n[n]
        for m in range(M):  # T = W A
            for q in range(Q):
                T[m, q] = 0.0
            for m2 in range(M):
                w = W[m, m2]
                for q in range(Q):
                    T[m, q] += w * A[m2, q]
        for q in range(Q):  # K2 = A^T T
            for r in range(Q):
                K2[q, r] = 0.0
        for m in range(M):
            for q in range(Q):
                a = A[m, q]
                for r in range(Q):
                    K2[q, r] += a * T[m, r]
        for q in range(Q):
            g = 2.0 * w0[n] * b[q] * mu[n, q]
            for m in range(M):
                g += W1[n, m] * A[m, q]
            for r in range(Q):
                g += (K2[q, r] + K2[r, q]) * mu[n, r]
            dmu[n, q] = g
            dS[n, q] = w0[n] * b[q] + K2[q, q]


@njit(**_PARALLEL)
def _psi_gradients_n_blocks(N, nchunks, dL_dpsi0, dL_dPsi1, dL_dPsi2n, mu, S, A, b, dmu, dS):
    """The only parallel code: one block of points per iteration (see psi_gradients_n)."""
    for c in prange(nchunks):
        _grad_n_rows(c * N // nchunks, (c + 1) * N // nchunks,
                     dL_dpsi0, dL_dPsi1, dL_dPsi2n, mu, S, A, b, dmu, dS)


@njit(**_SERIAL)
def psi_gradients_n(dL_dpsi0, dL_dPsi1, dL_dPsi2n, mu, S, A, b, nchunks):
    """(dL_dmu (N, Q), dL_dS (N, Q)) for per-point weights dL_dPsi2n (N, M, M); A = Z diag(b)."""
    N, Q = mu.shape
    dmu = np.empty((N, Q))
    dS = np.empty((N, Q))
    _psi_gradients_n_blocks(N, nchunks, dL_dpsi0, dL_dPsi1, dL_dPsi2n, mu, S, A, b, dmu, dS)
    return dmu, dS
