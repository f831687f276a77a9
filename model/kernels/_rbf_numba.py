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
def _K_blocks(N, nchunks, X, X2, sf2, alpha, out):
    """The only parallel code: one block of points per iteration (see K_parallel)."""
    for c in prange(nchunks):
        _k_rows(c * N // nchunks, (c + 1) * N // nchunks,
            X, X2, sf2, alpha, out)


@njit(**_SERIAL)
def K_parallel(X, X2, sf2, alpha, nchunks):
    N = X.shape[0]
    out = np.empty((N, X2.shape[0]))
    _K_blocks(N, nchunks, X, X2, sf2, alpha, out)
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
def _psi1_log_point(n, mu, S, ZT, sf2, alpha, d1, ad1, ex1):
    """ex1[m] <- log Psi1[n, m]; fills d1, ad1 = alpha d1 for point n. ZT is Z^T (Q, M)."""
    Q, M = ZT.shape
    logc = math.log(sf2)
    for q in range(Q):
        d1[q] = 1.0 / (alpha[q] * S[n, q] + 1.0)
        ad1[q] = alpha[q] * d1[q]
        logc += 0.5 * math.log(d1[q])
    for m in range(M):
        ex1[m] = logc
    for q in range(Q):  # inner loop over m: contiguous in ZT, vectorises
        c = 0.5 * ad1[q]
        muq = mu[n, q]
        for m in range(M):
            u = muq - ZT[q, m]
            ex1[m] -= c * u * u


@njit(**_SERIAL)
def _psi1_rows(n0, n1, mu, S, ZT, sf2, alpha, out):
    Q, M = ZT.shape
    d1 = np.empty(Q)
    ad1 = np.empty(Q)
    ex = np.empty(M)
    scratch = np.empty(M)
    for n in range(n0, n1):
        _psi1_log_point(n, mu, S, ZT, sf2, alpha, d1, ad1, ex)
        exp_into(ex, out[n], scratch)


@njit(**_SERIAL)
def psi1_serial(mu, S, Z, sf2, alpha):
    """(N, M) Psi1 (eq:psi1)."""
    out = np.empty((mu.shape[0], Z.shape[0]))
    _psi1_rows(0, mu.shape[0], mu, S, np.ascontiguousarray(Z.T), sf2, alpha, out)
    return out


@njit(**_PARALLEL)
def _psi1_blocks(N, nchunks, mu, S, ZT, sf2, alpha, out):
    """The only parallel code: one block of points per iteration (see psi1_parallel)."""
    for c in prange(nchunks):
        _psi1_rows(c * N // nchunks, (c + 1) * N // nchunks,
            mu, S, ZT, sf2, alpha, out)


@njit(**_SERIAL)
def psi1_parallel(mu, S, Z, sf2, alpha, nchunks):
    N = mu.shape[0]
    out = np.empty((N, Z.shape[0]))
    ZT = np.ascontiguousarray(Z.T)
    _psi1_blocks(N, nchunks, mu, S, ZT, sf2, alpha, out)
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
def _psi2_blocks(N, nchunks, mu, S, zbar, D0, sf2, alpha, acc):
    """The only parallel code: one block of points per iteration (see psi2_parallel)."""
    for c in prange(nchunks):
        _psi2_rows(c * N // nchunks, (c + 1) * N // nchunks,
            mu, S, zbar, D0, sf2, alpha, acc[c])


@njit(**_SERIAL)
def psi2_parallel(mu, S, Z, sf2, alpha, nchunks):
    N = mu.shape[0]
    pm, pm2, zbar, D0 = pair_tables(Z, alpha)
    P = pm.shape[0]
    acc = np.zeros((nchunks, P))
    _psi2_blocks(N, nchunks, mu, S, zbar, D0, sf2, alpha, acc)
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
def _psi2n_blocks(N, nchunks, mu, S, zbar, D0, sf2, alpha, pm, pm2, out):
    """The only parallel code: one block of points per iteration (see psi2n_parallel)."""
    for c in prange(nchunks):
        _psi2n_rows(c * N // nchunks, (c + 1) * N // nchunks,
            mu, S, zbar, D0, sf2, alpha, pm, pm2, out)


@njit(**_SERIAL)
def psi2n_parallel(mu, S, Z, sf2, alpha, nchunks):
    N = mu.shape[0]
    pm, pm2, zbar, D0 = pair_tables(Z, alpha)
    M = Z.shape[0]
    out = np.empty((N, M, M))
    _psi2n_blocks(N, nchunks, mu, S, zbar, D0, sf2, alpha, pm, pm2, out)
    return out


# --------------------------------------------------------------------------------------
# psi statistics: gradients
# --------------------------------------------------------------------------------------
@njit(**_SERIAL)
def _psi1_grad_point(n, dL_dPsi1, mu, S, ZT, sf2, alpha, dmu, dS, dZT, dth, d1, ad1, ex1, G1, scratch):
    """Psi1 part for point n: G1[m] = dL/dPsi1[n, m] Psi1[n, m]; adds to dmu, dS rows n,
    dZT (Q, M) and dth."""
    Q, M = ZT.shape
    _psi1_log_point(n, mu, S, ZT, sf2, alpha, d1, ad1, ex1)
    exp_into(ex1, G1, scratch)
    g1sum = 0.0
    for m in range(M):
        G1[m] *= dL_dPsi1[n, m]
        g1sum += G1[m]
    dth[0] += g1sum / sf2
    for q in range(Q):
        muq = mu[n, q]
        a1 = ad1[q]
        su = 0.0
        suu = 0.0
        for m in range(M):
            gu = G1[m] * (muq - ZT[q, m])
            su += gu
            suu += gu * (muq - ZT[q, m])
            dZT[q, m] += a1 * gu
        dmu[n, q] -= a1 * su
        dS[n, q] += 0.5 * a1 * (a1 * suu - g1sum)
        dth[q + 1] -= 0.5 * (S[n, q] * d1[q] * g1sum + d1[q] * d1[q] * suu)


@njit(**_SERIAL)
def _psi2_pass_1(n, mu, zbar, G, d2, T, st, stt):
    """One point: st[q] = sum_p G_p t_qp, stt[q] = sum_p G_p t_qp^2, T[q, p] += G_p d2_q t_qp."""
    Q, P = zbar.shape
    for q in range(Q):
        muq = mu[n, q]
        d2q = d2[q]
        s1 = 0.0
        s2 = 0.0
        for p in range(P):
            t = muq - zbar[q, p]
            gt = G[p] * t
            s1 += gt
            s2 += gt * t
            T[q, p] += gt * d2q
        st[q] = s1
        stt[q] = s2


@njit(**_SERIAL)
def _psi2_pass_4(n, mu, zbar, G, d2, T, st, stt):
    """``_psi2_pass_1`` for the four points n..n+3 at once (rows of G, d2, st, stt): zbar and
    T are read once per four points, which halves the time of this memory-bound loop."""
    Q, P = zbar.shape
    G0, G1, G2, G3 = G[0], G[1], G[2], G[3]
    for q in range(Q):
        m0, m1, m2, m3 = mu[n, q], mu[n + 1, q], mu[n + 2, q], mu[n + 3, q]
        e0, e1, e2, e3 = d2[0, q], d2[1, q], d2[2, q], d2[3, q]
        a0 = a1 = a2 = a3 = 0.0
        b0 = b1 = b2 = b3 = 0.0
        for p in range(P):
            z = zbar[q, p]
            t0, t1, t2, t3 = m0 - z, m1 - z, m2 - z, m3 - z
            g0, g1, g2, g3 = G0[p] * t0, G1[p] * t1, G2[p] * t2, G3[p] * t3
            a0 += g0
            a1 += g1
            a2 += g2
            a3 += g3
            b0 += g0 * t0
            b1 += g1 * t1
            b2 += g2 * t2
            b3 += g3 * t3
            T[q, p] += (g0 * e0 + g1 * e1) + (g2 * e2 + g3 * e3)
        st[0, q], st[1, q], st[2, q], st[3, q] = a0, a1, a2, a3
        stt[0, q], stt[1, q], stt[2, q], stt[3, q] = b0, b1, b2, b3


@njit(**_SERIAL)
def _grad_rows(n0, n1, dL_dPsi1, w2, mu, S, ZT, zbar, D0, sf2, alpha, do1, do2,
               dmu, dS, dZT, T, Gacc, dth_out):
    """Gradient contributions of the points n0 <= n < n1.

    Writes rows n of dmu, dS (N, Q); adds into this block's accumulators dZT (Q, M) (Psi1
    part, transposed), T (Q, P) and Gacc (P,) (Psi2 part, scattered to dZ by
    ``_grad_finalize``) and dth_out (Q + 1,) = [dL/dsf2, dL/dalpha_1..Q]. Small per-point
    sums go to a local array first: neighbouring blocks' rows of dth_out share cache
    lines (false sharing). Points are taken four at a time (see ``_psi2_pass_4``).
    """
    Q, M = ZT.shape
    P = zbar.shape[1]
    dth = np.zeros(Q + 1)
    d1 = np.empty(Q)
    ad1 = np.empty(Q)
    ex1 = np.empty(M)
    G1 = np.empty(M)
    d2 = np.empty((4, Q))
    ex = np.empty(P)
    G = np.empty((4, P))
    st = np.empty((4, Q))
    stt = np.empty((4, Q))
    g2sum = np.empty(4)
    scratch = np.empty(max(P, M))
    for n in range(n0, n1, 4):
        k = min(4, n1 - n)
        for j in range(k):
            for q in range(Q):
                dmu[n + j, q] = 0.0
                dS[n + j, q] = 0.0
            # ---- Psi1: G1 = dL/dPsi1[n, m] * Psi1[n, m]
            if do1:
                _psi1_grad_point(n + j, dL_dPsi1, mu, S, ZT, sf2, alpha, dmu, dS, dZT, dth,
                                 d1, ad1, ex1, G1, scratch)
        if not do2:
            continue
        # ---- Psi2: G_p = w_p * Psi2^n_p (w_p folds the symmetric pair (m, m'))
        for j in range(k):
            _psi2_log_exponent(n + j, mu, S, zbar, D0, sf2, alpha, d2[j], ex)
            Gj = G[j]
            exp_into(ex, Gj, scratch)
            s = 0.0
            for p in range(P):
                Gj[p] *= w2[p]
                s += Gj[p]
                Gacc[p] += Gj[p]
            g2sum[j] = s
            dth[0] += 2.0 * s / sf2
        if k == 4:
            _psi2_pass_4(n, mu, zbar, G, d2, T, st, stt)
        else:
            for j in range(k):
                _psi2_pass_1(n + j, mu, zbar, G[j], d2[j], T, st[j], stt[j])
        for j in range(k):
            for q in range(Q):
                a = alpha[q]
                e = d2[j, q]
                dmu[n + j, q] -= 2.0 * a * e * st[j, q]
                dS[n + j, q] += a * e * (2.0 * a * e * stt[j, q] - g2sum[j])
                dth[q + 1] -= S[n + j, q] * e * g2sum[j] + e * e * stt[j, q]
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
    dZT = np.zeros((Q, M))
    T = np.zeros((Q, P))
    Gacc = np.zeros(P)
    dth = np.zeros(Q + 1)
    _grad_rows(0, N, dL_dPsi1, w2, mu, S, np.ascontiguousarray(Z.T), zbar, D0, sf2, alpha, do1, do2,
               dmu, dS, dZT, T, Gacc, dth)
    dZ = np.ascontiguousarray(dZT.T)
    _grad_finalize(Z, alpha, pm, pm2, T, Gacc, dZ, dth)
    dsf2 = dth[0]
    for n in range(N):
        dsf2 += dL_dpsi0[n]
    return dmu, dS, dZ, dsf2, dth[1:].copy()


@njit(**_PARALLEL)
def _psi_gradients_blocks(N, nchunks, dL_dPsi1, w2, mu, S, ZT, zbar, D0, sf2, alpha, do1, do2,
                          dmu, dS, dZc, Tc, Gc, dthc):
    """The only parallel code: one block of points per iteration (see psi_gradients_parallel)."""
    for c in prange(nchunks):
        _grad_rows(c * N // nchunks, (c + 1) * N // nchunks,
            dL_dPsi1, w2, mu, S, ZT, zbar, D0, sf2, alpha, do1, do2,
            dmu, dS, dZc[c], Tc[c], Gc[c], dthc[c])


@njit(**_SERIAL)
def psi_gradients_parallel(dL_dpsi0, dL_dPsi1, dL_dPsi2, mu, S, Z, sf2, alpha, do1, do2, nchunks):
    N, Q = mu.shape
    M = Z.shape[0]
    pm, pm2, zbar, D0 = pair_tables(Z, alpha)
    w2 = pair_weights(dL_dPsi2, pm, pm2)
    P = pm.shape[0]
    dmu = np.empty((N, Q))
    dS = np.empty((N, Q))
    ZT = np.ascontiguousarray(Z.T)
    dZc = np.zeros((nchunks, Q, M))
    Tc = np.zeros((nchunks, Q, P if do2 else 0))
    Gc = np.zeros((nchunks, P if do2 else 0))
    dthc = np.zeros((nchunks, Q + 1))
    _psi_gradients_blocks(N, nchunks, dL_dPsi1, w2, mu, S, ZT, zbar, D0, sf2, alpha, do1, do2,
                          dmu, dS, dZc, Tc, Gc, dthc)
    dZT = np.zeros((Q, M))
    T = np.zeros((Q, P))
    Gacc = np.zeros(P)
    dth = np.zeros(Q + 1)
    for c in range(nchunks):
        dZT += dZc[c]
        dth += dthc[c]
        if do2:
            T += Tc[c]
            Gacc += Gc[c]
    dZ = np.ascontiguousarray(dZT.T)
    _grad_finalize(Z, alpha, pm, pm2, T, Gacc, dZ, dth)
    dsf2 = dth[0]
    for n in range(N):
        dsf2 += dL_dpsi0[n]
    return dmu, dS, dZ, dsf2, dth[1:].copy()
