"""Compiled cross term of an RBF part and a linear part in a sum kernel.

For k = k_rbf + k_lin + ..., Psi2 holds E[k_rbf(z_m, x) k_lin(x, z_m') + (m <-> m')].
Per dimension exp(-alpha/2 (x - z)^2) N(x | mu, S) is proportional to a Gaussian with
variance S d1 and mean mhat = (mu + alpha S z) d1 = mu - alpha S d1 (mu - z), where
d1 = 1 / (1 + alpha S). Hence

    E[k_rbf(x, z_m) x] = Psi1_rbf[n, m] mhat[n, m, :]
    C^n[m, m'] = E[k_rbf(z_m, x) k_lin(x, z_m')] = Psi1_rbf[n, m] (mhat[n, m, :] . A[m', :]),

A = Z diag(b), and sum_n C^n = H A^T with H[m, q] = sum_n Psi1_rbf[n, m] mhat[n, m, q].
The cross term adds C + C^T to Psi2.

Gradients: with Ws = W2 + W2^T and V = (Ws Z) diag(b) the cross part of L is

    L_x = sum_{n, m} Psi1_rbf[n, m] g_nm,    g_nm = mhat[n, m, :] . V[m, :],

and with u = mu - z (per q):
    dL_x/dmu    = Psi1 (g (-alpha d1 u) + V d1)
    dL_x/dS     = Psi1 (g alpha d1 (alpha d1 u^2 - 1)/2 - V alpha d1^2 u)
    dL_x/dz_m   = Psi1 (g alpha d1 u + V alpha S d1)      (through the rbf part)
    dL_x/dalpha = Psi1 (-g (S d1 + u^2 d1^2)/2 - V S d1^2 u)
    dL_x/dsf2   = Psi1 g / sf2
    dL_x/dV     = H   ->  dL/db_q = sum_m H[m,q] (Ws Z)[m,q],  dL/dZ += Ws (H diag(b)).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from .._numba_config import PARALLEL_OPTIONS as _PARALLEL
from .._numba_config import SERIAL_OPTIONS as _SERIAL


@njit(**_SERIAL)
def _point_setup(n, mu, S, sf2, alpha, d1, ad1):
    """d1, alpha*d1 for point n; returns log(sf2 prod_q d1^(1/2))."""
    logc = math.log(sf2)
    for q in range(mu.shape[1]):
        d1[q] = 1.0 / (alpha[q] * S[n, q] + 1.0)
        ad1[q] = alpha[q] * d1[q]
        logc += 0.5 * math.log(d1[q])
    return logc


@njit(**_SERIAL)
def _psi1_entry(n, m, mu, Z, ad1, logc):
    s = logc
    for q in range(Z.shape[1]):
        u = mu[n, q] - Z[m, q]
        s -= 0.5 * ad1[q] * u * u
    return math.exp(s)


# --- H = sum_n Psi1_rbf[n, m] mhat[n, m, :] ------------------------------------------------
@njit(**_SERIAL)
def _h_rows(n0, n1, mu, S, Z, sf2, alpha, H):
    M, Q = Z.shape
    d1 = np.empty(Q)
    ad1 = np.empty(Q)
    for n in range(n0, n1):
        logc = _point_setup(n, mu, S, sf2, alpha, d1, ad1)
        for m in range(M):
            psi = _psi1_entry(n, m, mu, Z, ad1, logc)
            for q in range(Q):
                H[m, q] += psi * (mu[n, q] - ad1[q] * S[n, q] * (mu[n, q] - Z[m, q]))


@njit(**_PARALLEL)
def _rbf_moment_blocks(N, nchunks, mu, S, Z, sf2, alpha, Hc):
    """The only parallel code: one block of points per iteration (see rbf_moment)."""
    for c in prange(nchunks):
        _h_rows(c * N // nchunks, (c + 1) * N // nchunks,
            mu, S, Z, sf2, alpha, Hc[c])


@njit(**_SERIAL)
def rbf_moment(mu, S, Z, sf2, alpha, nchunks):
    """(M, Q) H[m, :] = sum_n E[k_rbf(x_n, z_m) x_n]."""
    N = mu.shape[0]
    M, Q = Z.shape
    Hc = np.zeros((nchunks, M, Q))
    _rbf_moment_blocks(N, nchunks, mu, S, Z, sf2, alpha, Hc)
    H = np.zeros((M, Q))
    for c in range(nchunks):
        H += Hc[c]
    return H


# --- per-point cross term (predictions) ----------------------------------------------------
@njit(**_SERIAL)
def _cross_n_rows(n0, n1, mu, S, Z, sf2, alpha, A, out):
    M, Q = Z.shape
    d1 = np.empty(Q)
    ad1 = np.empty(Q)
    mhat = np.empty(Q)
    for n in range(n0, n1):
        logc = _point_setup(n, mu, S, sf2, alpha, d1, ad1)
        for m in range(M):
            psi = _psi1_entry(n, m, mu, Z, ad1, logc)
            for q in range(Q):
                mhat[q] = mu[n, q] - ad1[q] * S[n, q] * (mu[n, q] - Z[m, q])
            for m2 in range(M):
                r = 0.0
                for q in range(Q):
                    r += mhat[q] * A[m2, q]
                out[n, m, m2] = psi * r
        for m in range(M):  # C + C^T
            for m2 in range(m, M):
                v = out[n, m, m2] + out[n, m2, m]
                out[n, m, m2] = v
                out[n, m2, m] = v


@njit(**_PARALLEL)
def _cross_n_blocks(N, nchunks, mu, S, Z, sf2, alpha, A, out):
    """The only parallel code: one block of points per iteration (see cross_n)."""
    for c in prange(nchunks):
        _cross_n_rows(c * N // nchunks, (c + 1) * N // nchunks,
            mu, S, Z, sf2, alpha, A, out)


@njit(**_SERIAL)
def cross_n(mu, S, Z, sf2, alpha, A, nchunks):
    """(N, M, M) C^n + C^n^T."""
    N = mu.shape[0]
    out = np.empty((N, Z.shape[0], Z.shape[0]))
    _cross_n_blocks(N, nchunks, mu, S, Z, sf2, alpha, A, out)
    return out


# --- gradients -------------------------------------------------------------------------------
@njit(**_SERIAL)
def _grad_rows(n0, n1, mu, S, Z, sf2, alpha, V, dmu, dS, dZ, dth_out, H):
    """Rows n of dmu, dS (added to); this block's sums dZ (M, Q), dth_out (Q+1,), H (M, Q)."""
    M, Q = Z.shape
    dth = np.zeros(Q + 1)  # local: blocks' rows of dth_out share cache lines
    d1 = np.empty(Q)
    ad1 = np.empty(Q)
    for n in range(n0, n1):
        logc = _point_setup(n, mu, S, sf2, alpha, d1, ad1)
        for m in range(M):
            psi = _psi1_entry(n, m, mu, Z, ad1, logc)
            g = 0.0
            for q in range(Q):
                mh = mu[n, q] - ad1[q] * S[n, q] * (mu[n, q] - Z[m, q])
                g += mh * V[m, q]
                H[m, q] += psi * mh
            pg = psi * g
            dth[0] += pg / sf2
            for q in range(Q):
                u = mu[n, q] - Z[m, q]
                a, s, e = alpha[q], S[n, q], d1[q]
                pv = psi * V[m, q]
                dmu[n, q] += -pg * ad1[q] * u + pv * e
                dS[n, q] += 0.5 * pg * ad1[q] * (ad1[q] * u * u - 1.0) - pv * a * e * e * u
                dZ[m, q] += pg * ad1[q] * u + pv * a * s * e
                dth[q + 1] += -0.5 * pg * (s * e + u * u * e * e) - pv * s * e * e * u
    dth_out += dth


@njit(**_PARALLEL)
def _grad_blocks(N, nchunks, mu, S, Z, sf2, alpha, V, dmu, dS, dZc, dthc, Hc):
    """The only parallel code: one block of points per iteration (see grad)."""
    for c in prange(nchunks):
        _grad_rows(c * N // nchunks, (c + 1) * N // nchunks,
            mu, S, Z, sf2, alpha, V, dmu, dS, dZc[c], dthc[c], Hc[c])


@njit(**_SERIAL)
def grad(mu, S, Z, sf2, alpha, V, nchunks):
    """(dmu, dS, dZ_rbf, dsf2, dalpha (Q,), H) of L_x = sum Psi1_rbf[n,m] mhat[n,m,:].V[m,:]."""
    N, Q = mu.shape
    M = Z.shape[0]
    dmu = np.zeros((N, Q))
    dS = np.zeros((N, Q))
    dZc = np.zeros((nchunks, M, Q))
    dthc = np.zeros((nchunks, Q + 1))
    Hc = np.zeros((nchunks, M, Q))
    _grad_blocks(N, nchunks, mu, S, Z, sf2, alpha, V, dmu, dS, dZc, dthc, Hc)
    dZ = np.zeros((M, Q))
    dth = np.zeros(Q + 1)
    H = np.zeros((M, Q))
    for c in range(nchunks):
        dZ += dZc[c]
        dth += dthc[c]
        H += Hc[c]
    return dmu, dS, dZ, dth[0], dth[1:].copy(), H


# --- per-point gradients (test time): a different V for every point ---------------------------
@njit(**_SERIAL)
def _grad_n_rows(n0, n1, mu, S, Z, sf2, alpha, Vn, dmu, dS):
    """Rows n of dmu, dS (added to) of L_x = sum_{n, m} Psi1_rbf[n, m] mhat[n, m, :] . Vn[n, m, :]
    (the formulas of ``_grad_rows`` with V replaced by the point's own Vn[n])."""
    M, Q = Z.shape
    d1 = np.empty(Q)
    ad1 = np.empty(Q)
    for n in range(n0, n1):
        logc = _point_setup(n, mu, S, sf2, alpha, d1, ad1)
        V = Vn[n]
        for m in range(M):
            psi = _psi1_entry(n, m, mu, Z, ad1, logc)
            g = 0.0
            for q in range(Q):
                mh = mu[n, q] - ad1[q] * S[n, q] * (mu[n, q] - Z[m, q])
                g += mh * V[m, q]
            pg = psi * g
            for q in range(Q):
                u = mu[n, q] - Z[m, q]
                a, e = alpha[q], d1[q]
                pv = psi * V[m, q]
                dmu[n, q] += -pg * ad1[q] * u + pv * e
                dS[n, q] += 0.5 * pg * ad1[q] * (ad1[q] * u * u - 1.0) - pv * a * e * e * u


@njit(**_PARALLEL)
def _grad_n_blocks(N, nchunks, mu, S, Z, sf2, alpha, Vn, dmu, dS):
    """The only parallel code: one block of points per iteration (see grad_n)."""
    for c in prange(nchunks):
        _grad_n_rows(c * N // nchunks, (c + 1) * N // nchunks, mu, S, Z, sf2, alpha, Vn, dmu, dS)


@njit(**_SERIAL)
def grad_n(mu, S, Z, sf2, alpha, Vn, nchunks):
    """(dmu (N, Q), dS (N, Q)) of L_x with per-point Vn (N, M, Q)."""
    N, Q = mu.shape
    dmu = np.zeros((N, Q))
    dS = np.zeros((N, Q))
    _grad_n_blocks(N, nchunks, mu, S, Z, sf2, alpha, Vn, dmu, dS)
    return dmu, dS
