"""Compiled kernels for the ARD exponentiated quadratic (RBF) covariance.

    k(x, x') = sf2 * exp(-1/2 sum_q alpha_q (x_q - x'_q)^2),   alpha_q = 1 / lengthscale_q^2

Psi statistics (paper, appendix "Calculating the Psi Quantities"), per point n with
d1_q = 1 / (alpha_q S_nq + 1), d2_q = 1 / (2 alpha_q S_nq + 1):

    psi0_n       = sf2
    Psi1[n, m]   = sf2 prod_q d1_q^(1/2) exp(-1/2 alpha_q d1_q (mu_nq - z_mq)^2)
    Psi2^n[m,m'] = sf2^2 prod_q d2_q^(1/2) exp(-alpha_q (z_mq - z_m'q)^2 / 4
                                              - alpha_q d2_q (mu_nq - zbar_q)^2),
    zbar = (z_m + z_m') / 2.

Log-derivatives used by the gradients (u = mu_nq - z_mq, t = mu_nq - zbar_q, dz = z_mq - z_m'q):

    log Psi1:  d/dmu = -alpha d1 u          d/dS = alpha d1 (alpha d1 u^2 - 1) / 2
               d/dz_m = alpha d1 u          d/dalpha = -(S d1 + u^2 d1^2) / 2
    log Psi2:  d/dmu = -2 alpha d2 t        d/dS = alpha d2 (2 alpha d2 t^2 - 1)
               d/dz_m = -alpha dz/2 + alpha d2 t,   d/dz_m' = alpha dz/2 + alpha d2 t
               d/dalpha = -S d2 - dz^2/4 - t^2 d2^2
    and d/dsf2 = 1/sf2 (Psi1), 2/sf2 (Psi2).

Layout and cost. Psi2 is symmetric, so only the P = M(M+1)/2 pairs m <= m' are visited;
pair tables ``zbar`` (Q, P) and ``D0`` (P,) are built once per call. For each n the
exponent of every pair is computed once, exponentiated once, and reused for the value and
every gradient. Sums over n go through one accumulator per block of points (``prange``
over blocks, one block per thread), then a reduction: memory O(N M + threads * M^2 Q),
never N x M x M x Q. The sums over pairs that depend on (n, q) are folded so that the
only per-(n, pair, q) work is the exponent and three multiply-adds:

    sum_p G_p t_p, sum_p G_p t_p^2          (dL/dmu_n, dL/dS_n, dL/dalpha)
    T[q, p] += G_p d2_q t_p                 (dL/dZ, summed over n, scattered once at the end)

Every ``*_rows`` function is serial and processes the points n0 <= n < n1; the public
functions come in pairs ``*_serial`` / ``*_parallel`` (separate source functions, see
``model/_numba_config.py``).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from .._numba_config import CACHE, FASTMATH
from ._fastexp import exp_into

_SERIAL = dict(cache=CACHE, fastmath=set(FASTMATH), nogil=True)
_PARALLEL = dict(cache=CACHE, fastmath=set(FASTMATH), nogil=True, parallel=True)


# --------------------------------------------------------------------------------------
# K(X, X2) and its gradients
# --------------------------------------------------------------------------------------
@njit(**_SERIAL)
def _k_rows(n0, n1, X, X2, sf2, alpha, out):
    M, Q = X2.shape
    for n in range(n0, n1):
        for m in range(M):
            r = 0.0
            for q in range(Q):
                d = X[n, q] - X2[m, q]
                r += alpha[q] * d * d
            out[n, m] = sf2 * math.exp(-0.5 * r)


@njit(**_SERIAL)
def K_serial(X, X2, sf2, alpha):
    """(N, N2) sf2 exp(-1/2 sum_q alpha_q (x_nq - x2_mq)^2)."""
    out = np.empty((X.shape[0], X2.shape[0]))
    _k_rows(0, X.shape[0], X, X2, sf2, alpha, out)
    return out


@njit(**_PARALLEL)
def K_parallel(X, X2, sf2, alpha, nchunks):
    N = X.shape[0]
    out = np.empty((N, X2.shape[0]))
    for c in prange(nchunks):
        _k_rows(c * N // nchunks, (c + 1) * N // nchunks, X, X2, sf2, alpha, out)
    return out


@njit(**_SERIAL)
def K_gradients(dL_dK, X, sf2, alpha):
    """Gradients of L(K(X)) for a general (not necessarily symmetric) dL_dK (N, N).

    Returns (dL_dX (N, Q), dL_dsf2, dL_dalpha (Q,)).
    """
    N, Q = X.shape
    dX = np.zeros((N, Q))
    dalpha = np.zeros(Q)
    dsf2 = 0.0
    for i in range(N):
        for j in range(N):
            r = 0.0
            for q in range(Q):
                d = X[i, q] - X[j, q]
                r += alpha[q] * d * d
            kij = math.exp(-0.5 * r)  # K_ij / sf2
            dsf2 += dL_dK[i, j] * kij
            g = dL_dK[i, j] * sf2 * kij
            gs = (dL_dK[i, j] + dL_dK[j, i]) * sf2 * kij
            for q in range(Q):
                d = X[i, q] - X[j, q]
                dX[i, q] -= gs * alpha[q] * d
                dalpha[q] -= 0.5 * g * d * d
    return dX, dsf2, dalpha


# --------------------------------------------------------------------------------------
# psi statistics: values
# --------------------------------------------------------------------------------------
@njit(**_SERIAL)
def _psi1_rows(n0, n1, mu, S, Z, sf2, alpha, out):
    M, Q = Z.shape
    ad1 = np.empty(Q)
    ex = np.empty(M)
    scratch = np.empty(M)
    for n in range(n0, n1):
        logc = math.log(sf2)
        for q in range(Q):
            d1 = 1.0 / (alpha[q] * S[n, q] + 1.0)
            ad1[q] = alpha[q] * d1
            logc += 0.5 * math.log(d1)
        for m in range(M):
            s = logc
            for q in range(Q):
                u = mu[n, q] - Z[m, q]
                s -= 0.5 * ad1[q] * u * u
            ex[m] = s
        exp_into(ex, out[n], scratch)


@njit(**_SERIAL)
def psi1_serial(mu, S, Z, sf2, alpha):
    """(N, M) Psi1 (eq:psi1)."""
    out = np.empty((mu.shape[0], Z.shape[0]))
    _psi1_rows(0, mu.shape[0], mu, S, Z, sf2, alpha, out)
    return out


@njit(**_PARALLEL)
def psi1_parallel(mu, S, Z, sf2, alpha, nchunks):
    N = mu.shape[0]
    out = np.empty((N, Z.shape[0]))
    for c in prange(nchunks):
        _psi1_rows(c * N // nchunks, (c + 1) * N // nchunks, mu, S, Z, sf2, alpha, out)
    return out


@njit(**_SERIAL)
def pair_tables(Z, alpha):
    """Tables over the P = M(M+1)/2 pairs m <= m' (row-major order).

    Returns pm, pm2 (P,) int64 indices, zbar (Q, P) = (z_m + z_m')/2 and
    D0 (P,) = sum_q alpha_q (z_mq - z_m'q)^2 / 4.
    """
    M, Q = Z.shape
    P = M * (M + 1) // 2
    pm = np.empty(P, np.int64)
    pm2 = np.empty(P, np.int64)
    zbar = np.empty((Q, P))
    D0 = np.zeros(P)
    p = 0
    for m in range(M):
        for m2 in range(m, M):
            pm[p] = m
            pm2[p] = m2
            for q in range(Q):
                zbar[q, p] = 0.5 * (Z[m, q] + Z[m2, q])
                d = Z[m, q] - Z[m2, q]
                D0[p] += 0.25 * alpha[q] * d * d
            p += 1
    return pm, pm2, zbar, D0


@njit(**_SERIAL)
def pair_weights(W, pm, pm2):
    """(P,) weights w_p with sum_{m,m'} W[m,m'] A[m,m'] = sum_p w_p A_p for symmetric A."""
    P = pm.shape[0]
    w = np.empty(P)
    for p in range(P):
        m, m2 = pm[p], pm2[p]
        w[p] = W[m, m] if m == m2 else W[m, m2] + W[m2, m]
    return w


@njit(**_SERIAL)
def pairs_to_matrix(v, pm, pm2, M):
    """Symmetric (M, M) matrix from its (P,) upper triangle."""
    out = np.empty((M, M))
    for p in range(v.shape[0]):
        out[pm[p], pm2[p]] = v[p]
        out[pm2[p], pm[p]] = v[p]
    return out


@njit(**_SERIAL)
def _psi2_log_exponent(n, mu, S, zbar, D0, sf2, alpha, d2, ex):
    """ex[p] <- log Psi2^n_p for every pair p; also fills d2[q] = 1/(2 alpha_q S_nq + 1)."""
    Q, P = zbar.shape
    logc = 2.0 * math.log(sf2)
    for q in range(Q):
        d2[q] = 1.0 / (2.0 * alpha[q] * S[n, q] + 1.0)
        logc += 0.5 * math.log(d2[q])
    for p in range(P):
        ex[p] = logc - D0[p]
    for q in range(Q):
        c = alpha[q] * d2[q]
        muq = mu[n, q]
        for p in range(P):
            t = muq - zbar[q, p]
            ex[p] -= c * t * t


@njit(**_SERIAL)
def _psi2_rows(n0, n1, mu, S, zbar, D0, sf2, alpha, acc):
    Q, P = zbar.shape
    ex = np.empty(P)
    E = np.empty(P)
    scratch = np.empty(P)
    d2 = np.empty(Q)
    for n in range(n0, n1):
        _psi2_log_exponent(n, mu, S, zbar, D0, sf2, alpha, d2, ex)
        exp_into(ex, E, scratch)
        for p in range(P):
            acc[p] += E[p]


@njit(**_SERIAL)
def psi2_serial(mu, S, Z, sf2, alpha):
    """(M, M) Psi2 = sum_n Psi2^n (eq:psi2)."""
    pm, pm2, zbar, D0 = pair_tables(Z, alpha)
    acc = np.zeros(pm.shape[0])
    _psi2_rows(0, mu.shape[0], mu, S, zbar, D0, sf2, alpha, acc)
    return pairs_to_matrix(acc, pm, pm2, Z.shape[0])


@njit(**_PARALLEL)
def psi2_parallel(mu, S, Z, sf2, alpha, nchunks):
    N = mu.shape[0]
    pm, pm2, zbar, D0 = pair_tables(Z, alpha)
    P = pm.shape[0]
    acc = np.zeros((nchunks, P))
    for c in prange(nchunks):
        _psi2_rows(c * N // nchunks, (c + 1) * N // nchunks, mu, S, zbar, D0, sf2, alpha, acc[c])
    total = np.zeros(P)
    for c in range(nchunks):
        for p in range(P):
            total[p] += acc[c, p]
    return pairs_to_matrix(total, pm, pm2, Z.shape[0])


@njit(**_SERIAL)
def _psi2n_rows(n0, n1, mu, S, zbar, D0, sf2, alpha, pm, pm2, out):
    Q, P = zbar.shape
    ex = np.empty(P)
    E = np.empty(P)
    scratch = np.empty(P)
    d2 = np.empty(Q)
    for n in range(n0, n1):
        _psi2_log_exponent(n, mu, S, zbar, D0, sf2, alpha, d2, ex)
        exp_into(ex, E, scratch)
        for p in range(P):
            v = E[p]
            out[n, pm[p], pm2[p]] = v
            out[n, pm2[p], pm[p]] = v


@njit(**_SERIAL)
def psi2n_serial(mu, S, Z, sf2, alpha):
    """(N, M, M) per-point Psi2^n."""
    pm, pm2, zbar, D0 = pair_tables(Z, alpha)
    M = Z.shape[0]
    out = np.empty((mu.shape[0], M, M))
    _psi2n_rows(0, mu.shape[0], mu, S, zbar, D0, sf2, alpha, pm, pm2, out)
    return out


@njit(**_PARALLEL)
def psi2n_parallel(mu, S, Z, sf2, alpha, nchunks):
    N = mu.shape[0]
    pm, pm2, zbar, D0 = pair_tables(Z, alpha)
    M = Z.shape[0]
    out = np.empty((N, M, M))
    for c in prange(nchunks):
        _psi2n_rows(c * N // nchunks, (c + 1) * N // nchunks, mu, S, zbar, D0, sf2, alpha, pm, pm2, out)
    return out


# --------------------------------------------------------------------------------------
# psi statistics: gradients
# --------------------------------------------------------------------------------------
@njit(**_SERIAL)
def _grad_rows(n0, n1, dL_dPsi1, w2, mu, S, Z, zbar, D0, sf2, alpha, do1, do2,
               dmu, dS, dZ, T, Gacc, dth_out):
    """Gradient contributions of the points n0 <= n < n1.

    Writes rows n of dmu, dS (N, Q); adds into this block's accumulators dZ (M, Q) (Psi1
    part), T (Q, P) and Gacc (P,) (Psi2 part, scattered to dZ by ``_grad_finalize``) and
    dth_out (Q + 1,) = [dL/dsf2, dL/dalpha_1..Q]. Small per-point sums go to a local
    array first: neighbouring blocks' rows of dth_out share cache lines (false sharing).
    """
    M, Q = Z.shape
    dth = np.zeros(Q + 1)
    P = zbar.shape[1]
    d1 = np.empty(Q)
    ad1 = np.empty(Q)
    d2 = np.empty(Q)
    su = np.empty(Q)
    suu = np.empty(Q)
    ex = np.empty(P)
    G = np.empty(P)
    scratch = np.empty(max(P, M))
    ex1 = np.empty(M)
    E1 = np.empty(M)
    log_sf2 = math.log(sf2)
    for n in range(n0, n1):
        for q in range(Q):
            dmu[n, q] = 0.0
            dS[n, q] = 0.0
        # ---- Psi1: G1 = dL/dPsi1[n, m] * Psi1[n, m]
        if do1:
            logc = log_sf2
            for q in range(Q):
                d1[q] = 1.0 / (alpha[q] * S[n, q] + 1.0)
                ad1[q] = alpha[q] * d1[q]
                logc += 0.5 * math.log(d1[q])
                su[q] = 0.0
                suu[q] = 0.0
            for m in range(M):
                s = logc
                for q in range(Q):
                    u = mu[n, q] - Z[m, q]
                    s -= 0.5 * ad1[q] * u * u
                ex1[m] = s
            exp_into(ex1, E1, scratch)
            g1sum = 0.0
            for m in range(M):
                G1 = dL_dPsi1[n, m] * E1[m]
                g1sum += G1
                for q in range(Q):
                    gu = G1 * (mu[n, q] - Z[m, q])
                    su[q] += gu
                    suu[q] += gu * (mu[n, q] - Z[m, q])
                    dZ[m, q] += ad1[q] * gu
            dth[0] += g1sum / sf2
            for q in range(Q):
                dmu[n, q] -= ad1[q] * su[q]
                dS[n, q] += 0.5 * ad1[q] * (ad1[q] * suu[q] - g1sum)
                dth[q + 1] -= 0.5 * (S[n, q] * d1[q] * g1sum + d1[q] * d1[q] * suu[q])
        # ---- Psi2: G_p = w_p * Psi2^n_p (w_p folds the symmetric pair (m, m'))
        if do2:
            _psi2_log_exponent(n, mu, S, zbar, D0, sf2, alpha, d2, ex)
            exp_into(ex, G, scratch)
            g2sum = 0.0
            for p in range(P):
                G[p] *= w2[p]
                g2sum += G[p]
                Gacc[p] += G[p]
            dth[0] += 2.0 * g2sum / sf2
            for q in range(Q):
                muq = mu[n, q]
                d2q = d2[q]
                st = 0.0
                stt = 0.0
                for p in range(P):
                    t = muq - zbar[q, p]
                    gt = G[p] * t
                    st += gt
                    stt += gt * t
                    T[q, p] += gt * d2q
                a = alpha[q]
                dmu[n, q] -= 2.0 * a * d2q * st
                dS[n, q] += a * d2q * (2.0 * a * d2q * stt - g2sum)
                dth[q + 1] -= S[n, q] * d2q * g2sum + d2q * d2q * stt
    dth_out += dth


@njit(**_SERIAL)
def _grad_finalize(Z, alpha, pm, pm2, T, Gacc, dZ, dth):
    """Scatter the pair sums of the Psi2 part into dZ and add the dz^2 term of dL/dalpha."""
    Q = Z.shape[1]
    for p in range(pm.shape[0]):
        m, m2 = pm[p], pm2[p]
        if m == m2:
            for q in range(Q):
                dZ[m, q] += 2.0 * alpha[q] * T[q, p]
        else:
            for q in range(Q):
                dz = Z[m, q] - Z[m2, q]
                a = alpha[q]
                dZ[m, q] += a * (T[q, p] - 0.5 * dz * Gacc[p])
                dZ[m2, q] += a * (T[q, p] + 0.5 * dz * Gacc[p])
                dth[q + 1] -= 0.25 * Gacc[p] * dz * dz


@njit(**_SERIAL)
def psi_gradients_serial(dL_dpsi0, dL_dPsi1, dL_dPsi2, mu, S, Z, sf2, alpha, do1, do2):
    """Chain rule through psi0, Psi1, Psi2 for a general (M, M) dL_dPsi2.

    Returns (dL_dmu (N, Q), dL_dS (N, Q), dL_dZ (M, Q), dL_dsf2, dL_dalpha (Q,)).
    ``do1``/``do2`` skip the Psi1/Psi2 parts (when their weights are all zero).
    """
    N, Q = mu.shape
    M = Z.shape[0]
    pm, pm2, zbar, D0 = pair_tables(Z, alpha)
    w2 = pair_weights(dL_dPsi2, pm, pm2)
    P = pm.shape[0]
    dmu = np.empty((N, Q))
    dS = np.empty((N, Q))
    dZ = np.zeros((M, Q))
    T = np.zeros((Q, P))
    Gacc = np.zeros(P)
    dth = np.zeros(Q + 1)
    _grad_rows(0, N, dL_dPsi1, w2, mu, S, Z, zbar, D0, sf2, alpha, do1, do2,
               dmu, dS, dZ, T, Gacc, dth)
    _grad_finalize(Z, alpha, pm, pm2, T, Gacc, dZ, dth)
    dsf2 = dth[0]
    for n in range(N):
        dsf2 += dL_dpsi0[n]
    return dmu, dS, dZ, dsf2, dth[1:].copy()


@njit(**_PARALLEL)
def psi_gradients_parallel(dL_dpsi0, dL_dPsi1, dL_dPsi2, mu, S, Z, sf2, alpha, do1, do2, nchunks):
    N, Q = mu.shape
    M = Z.shape[0]
    pm, pm2, zbar, D0 = pair_tables(Z, alpha)
    w2 = pair_weights(dL_dPsi2, pm, pm2)
    P = pm.shape[0]
    dmu = np.empty((N, Q))
    dS = np.empty((N, Q))
    dZc = np.zeros((nchunks, M, Q))
    Tc = np.zeros((nchunks, Q, P if do2 else 0))
    Gc = np.zeros((nchunks, P if do2 else 0))
    dthc = np.zeros((nchunks, Q + 1))
    for c in prange(nchunks):
        _grad_rows(c * N // nchunks, (c + 1) * N // nchunks, dL_dPsi1, w2, mu, S, Z, zbar, D0,
                   sf2, alpha, do1, do2, dmu, dS, dZc[c], Tc[c], Gc[c], dthc[c])
    dZ = np.zeros((M, Q))
    T = np.zeros((Q, P))
    Gacc = np.zeros(P)
    dth = np.zeros(Q + 1)
    for c in range(nchunks):
        dZ += dZc[c]
        dth += dthc[c]
        if do2:
            T += Tc[c]
            Gacc += Gc[c]
    _grad_finalize(Z, alpha, pm, pm2, T, Gacc, dZ, dth)
    dsf2 = dth[0]
    for n in range(N):
        dsf2 += dL_dpsi0[n]
    return dmu, dS, dZ, dsf2, dth[1:].copy()
