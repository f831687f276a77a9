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

Layout and cost. Psi2 is symmetric, so only the P = M(M+1)/2 pairs m <= m' are visited
(row-major: the pairs (m, m..M-1) are contiguous). Sums over n go through one accumulator
per block of points (``prange`` over blocks, one block per thread), then a reduction:
memory O(N M + threads * (M^2 Q + CHUNK * M^2)), never N x M x M.

Psi2 values come in chunks of CHUNK points from a factored exponent. With x = mu_n - c,
zc_m = z_m - c (c = mean of Z, so that nothing cancels badly), d2 = d2_nq:

    log Psi2^n_p = h_nm + h_nm' + sum_q gamma_nq zc_mq zc_m'q,   gamma = alpha^2 S d2
                                                              (= alpha (1 - d2) / 2)
    h_nm = log sf2 + sum_q [log(d2)/4 - alpha d2 x^2 / 2 + alpha d2 x zc_mq
                            - alpha (1 + d2) zc_mq^2 / 4]

so the exponents of a chunk are one GEMM (CHUNK, Q) @ (Q, P) plus a (CHUNK, M) table,
then one exp over the (CHUNK, P) block (``exp_into``). Psi2^n (``psi2n``) keeps the
direct per-point form. The gradient sums over pairs use the exact t = mu - zbar and depend
on (n, q), so they are folded to three multiply-adds per (n, pair, q):

    sum_p G_p t_p, sum_p G_p t_p^2          (dL/dmu_n, dL/dS_n, dL/dalpha)
    T[q, p] += G_p d2_q t_p                 (dL/dZ, summed over n, scattered once at the end)

Test time (``psi_gradients_n``): every point has its own dL/dPsi2^n, so the sums over pairs
are done per point on the direct form of Psi2^n (as ``psi2n``), giving dL/dmu_n and dL/dS_n
only.

Every ``*_rows`` function is serial and processes the points n0 <= n < n1; each
``*_blocks`` function is the kernel's one ``prange`` loop over blocks of points; the public
functions (``K``, ``psi1``, ``psi2``, ``psi2n_tab``, ``psi_gradients``, ``psi_gradients_n``)
allocate, run the blocks and reduce them in block order; the caller sets the number of
threads (see
``model/_numba_config.py``).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from .._numba_config import PARALLEL_OPTIONS as _PARALLEL
from .._numba_config import SERIAL_OPTIONS as _SERIAL
from ._fastexp import exp_into

#: Points per chunk of the Psi2 kernels: the (CHUNK, P) exponent block is one GEMM and
#: stays in cache (16 x 1275 doubles = 160 kB at M = 50).
CHUNK = 16
#: Groups per chunk of the subset sums of missing outputs (``_rbf_groups_numba``): a row
#: pattern's Psi2 weights (and its Psi2 run) take one (P,) addition per chunk of B groups,
#: for 2^B subset sums per chunk (B = 4: 16 x 1275 doubles = 160 kB at M = 50).
SUBSET_BITS = 4

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


@njit(**_PARALLEL)
def _K_blocks(N, nchunks, X, X2, sf2, alpha, out):
    """The only parallel code: one block of points per iteration (see K)."""
    for c in prange(nchunks):
        _k_rows(c * N // nchunks, (c + 1) * N // nchunks,
            X, X2, sf2, alpha, out)


@njit(**_SERIAL)
def K(X, X2, sf2, alpha, nchunks):
    """(N, N2) sf2 exp(-1/2 sum_q alpha_q (x_nq - x2_mq)^2)."""
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


@njit(**_PARALLEL)
def _psi1_blocks(N, nchunks, mu, S, ZT, sf2, alpha, out):
    """The only parallel code: one block of points per iteration (see psi1)."""
    for c in prange(nchunks):
        _psi1_rows(c * N // nchunks, (c + 1) * N // nchunks,
            mu, S, ZT, sf2, alpha, out)


@njit(**_SERIAL)
def psi1(mu, S, Z, sf2, alpha, nchunks):
    """(N, M) Psi1 (eq:psi1)."""
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
def factored_tables(Z):
    """Tables of the factored Psi2 exponent (see the module docstring).

    Returns shift (Q,) = mean of Z, ZhT (2Q+1, M) with rows [zc_q, zc_q^2, 1] and
    ZpT (Q, P) = zc_mq zc_m'q over the pairs m <= m', where zc = Z - shift, and starts (M,),
    the pair index of (m, m) (pairs of one m are contiguous in the row-major order).
    """
    M, Q = Z.shape
    P = M * (M + 1) // 2
    shift = np.zeros(Q)
    for m in range(M):
        for q in range(Q):
            shift[q] += Z[m, q]
    shift /= M
    zc = np.empty((M, Q))
    ZhT = np.empty((2 * Q + 1, M))
    for m in range(M):
        for q in range(Q):
            z = Z[m, q] - shift[q]
            zc[m, q] = z
            ZhT[q, m] = z
            ZhT[Q + q, m] = z * z
        ZhT[2 * Q, m] = 1.0
    ZpT = np.empty((Q, P))
    starts = np.empty(M, np.int64)
    p = 0
    for m in range(M):
        starts[m] = p
        for m2 in range(m, M):
            for q in range(Q):
                ZpT[q, p] = zc[m, q] * zc[m2, q]
            p += 1
    return shift, ZhT, ZpT, starts


@njit(**_SERIAL)
def _psi2_chunk_log(c0, k, mu, S, shift, ZhT, ZpT, starts, sf2, alpha, Ah, Gam, d2, H, X):
    """X[j, p] <- log Psi2^n_p for the k points n = c0 + j (X is (k, P)); d2[j, q] <- d2_nq.

    log Psi2^n_p = h_nm + h_nm' + sum_q gamma_nq zc_mq zc_m'q: the cross term is one GEMM
    (k, Q) @ (Q, P), the h_nm one GEMM (k, 2Q+1) @ (2Q+1, M).
    """
    Q = mu.shape[1]
    M = ZhT.shape[1]
    logs = math.log(sf2)
    for j in range(k):
        n = c0 + j
        cst = logs
        for q in range(Q):
            a = alpha[q]
            e = 1.0 / (2.0 * a * S[n, q] + 1.0)
            x = mu[n, q] - shift[q]
            d2[j, q] = e
            ae = a * e
            Ah[j, q] = ae * x
            Ah[j, Q + q] = -0.25 * a * (1.0 + e)
            Gam[j, q] = a * a * S[n, q] * e  # alpha (1 - d2) / 2 without the cancellation
            cst += 0.25 * math.log(e) - 0.5 * ae * x * x
        Ah[j, 2 * Q] = cst
    np.dot(Ah[:k], ZhT, H[:k])
    np.dot(Gam[:k], ZpT, X)
    for j in range(k):
        xr = X[j]
        hr = H[j]
        for m in range(M):  # pairs (m, m..M-1) are contiguous
            hm = hr[m]
            xs = xr[starts[m]:starts[m] + M - m]
            hs = hr[m:]
            for i in range(M - m):
                xs[i] += hm + hs[i]


@njit(**_SERIAL)
def _psi2_rows(n0, n1, mu, S, shift, ZhT, ZpT, starts, sf2, alpha, acc):
    Q = mu.shape[1]
    P = ZpT.shape[1]
    M = ZhT.shape[1]
    CH = CHUNK
    Ah = np.empty((CH, 2 * Q + 1))
    Gam = np.empty((CH, Q))
    d2 = np.empty((CH, Q))
    H = np.empty((CH, M))
    Xbuf = np.empty(CH * P)
    Ebuf = np.empty(CH * P)
    scratch = np.empty(CH * P)
    for c0 in range(n0, n1, CH):
        k = min(CH, n1 - c0)
        _psi2_chunk_log(c0, k, mu, S, shift, ZhT, ZpT, starts, sf2, alpha, Ah, Gam, d2, H,
                        Xbuf[:k * P].reshape((k, P)))
        exp_into(Xbuf[:k * P], Ebuf[:k * P], scratch[:k * P])
        for j in range(k):
            for p in range(P):
                acc[p] += Ebuf[j * P + p]


@njit(**_PARALLEL)
def _psi2_blocks(N, nchunks, mu, S, shift, ZhT, ZpT, starts, sf2, alpha, acc):
    """The only parallel code: one block of points per iteration (see psi2)."""
    for c in prange(nchunks):
        _psi2_rows(c * N // nchunks, (c + 1) * N // nchunks,
            mu, S, shift, ZhT, ZpT, starts, sf2, alpha, acc[c])


@njit(**_SERIAL)
def psi2(mu, S, Z, sf2, alpha, nchunks):
    """(M, M) Psi2 = sum_n Psi2^n (eq:psi2)."""
    N = mu.shape[0]
    pm, pm2, zbar, D0 = pair_tables(Z, alpha)
    shift, ZhT, ZpT, starts = factored_tables(Z)
    P = pm.shape[0]
    acc = np.zeros((nchunks, P))
    _psi2_blocks(N, nchunks, mu, S, shift, ZhT, ZpT, starts, sf2, alpha, acc)
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


@njit(**_PARALLEL)
def _psi2n_blocks(N, nchunks, mu, S, zbar, D0, sf2, alpha, pm, pm2, out):
    """The only parallel code: one block of points per iteration (see psi2n_tab)."""
    for c in prange(nchunks):
        _psi2n_rows(c * N // nchunks, (c + 1) * N // nchunks,
            mu, S, zbar, D0, sf2, alpha, pm, pm2, out)


@njit(**_SERIAL)
def psi2n_tab(mu, S, pm, pm2, zbar, D0, sf2, alpha, M, nchunks):
    """(N, M, M) per-point Psi2^n, with the pair tables of Z given (``pair_tables``)."""
    N = mu.shape[0]
    out = np.empty((N, M, M))
    _psi2n_blocks(N, nchunks, mu, S, zbar, D0, sf2, alpha, pm, pm2, out)
    return out


#: above this log ratio expm1 nears overflow while psi1 may have underflowed to 0 (an
#: inducing input far from q(x_n)): the product is then taken in logs
_LOG_RATIO_BIG = 700.0


@njit(**_SERIAL)
def _psi2n_centred_rows(n0, n1, mu, S, Z, ZT, P1, sf2, alpha, pm, pm2, zbar, out):
    Q, P = zbar.shape
    M = Z.shape[0]
    w = np.empty(Q)
    v = np.empty(Q)
    d1 = np.empty(Q)
    ad1 = np.empty(Q)
    lp1 = np.empty(M)
    for n in range(n0, n1):
        c = 0.0
        for q in range(Q):
            s = alpha[q] * S[n, q]
            c += math.log1p(s) - 0.5 * math.log1p(2.0 * s)
            w[q] = alpha[q] * s / ((1.0 + s) * (1.0 + 2.0 * s))
            v[q] = 0.25 * alpha[q] * s / (1.0 + s)
        logs = False  # log psi1_n, computed once a pair of point n needs it
        for p in range(P):
            m, m2 = pm[p], pm2[p]
            r = c
            for q in range(Q):
                t = mu[n, q] - zbar[q, p]
                d = Z[m, q] - Z[m2, q]
                r += w[q] * t * t - v[q] * d * d
            if r <= _LOG_RATIO_BIG:
                val = P1[n, m] * P1[n, m2] * math.expm1(r)
            else:  # psi1_m psi1_m' e^r (1 - e^-r): log Psi2^n_mm' <= 2 log sf2, finite
                if not logs:
                    _psi1_log_point(n, mu, S, ZT, sf2, alpha, d1, ad1, lp1)
                    logs = True
                val = math.exp(lp1[m] + lp1[m2] + r + math.log(-math.expm1(-r)))
            out[n, m, m2] = val
            out[n, m2, m] = val


@njit(**_PARALLEL)
def _psi2n_centred_blocks(N, nchunks, mu, S, Z, ZT, P1, sf2, alpha, pm, pm2, zbar, out):
    for c in prange(nchunks):
        _psi2n_centred_rows(c * N // nchunks, (c + 1) * N // nchunks,
                            mu, S, Z, ZT, P1, sf2, alpha, pm, pm2, zbar, out)


@njit(**_SERIAL)
def psi2n_centred(mu, S, Z, P1, sf2, alpha, pm, pm2, zbar, nchunks):
    """(N, M, M) Psi2^n - psi1_n psi1_n^T as psi1_m psi1_m' expm1(log ratio), the ratio's
    logarithm summed per dimension from O(S) terms (``RBF.psi2n_centred``); P1 (N, M) is
    Psi1 and pm, pm2, zbar Z's pair tables (``pair_tables``). Where the log ratio exceeds
    ``_LOG_RATIO_BIG`` the product is formed in logs (psi1 underflows to 0 there while
    expm1 overflows: 0 x inf)."""
    N, M = mu.shape[0], Z.shape[0]
    out = np.empty((N, M, M))
    ZT = np.ascontiguousarray(Z.T)
    _psi2n_centred_blocks(N, nchunks, mu, S, Z, ZT, P1, sf2, alpha, pm, pm2, zbar, out)
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
def subset_sums(w2, B):
    """(C, 2^B, P) sums of the rows of w2 (G, P) over every subset of each chunk of B
    consecutive rows (C = ceil(G / B); subset m of chunk c holds rows c B + i for the bits i
    of m): one addition of P values per subset."""
    G, P = w2.shape
    C = (G + B - 1) // B
    out = np.zeros((C, 1 << B, P))
    for c in range(C):
        for m in range(1, 1 << B):
            i = 0
            while not (m >> i) & 1:
                i += 1
            g = c * B + i
            if g < G:
                out[c, m] = out[c, m & (m - 1)] + w2[g]
            else:
                out[c, m] = out[c, m & (m - 1)]
    return out


@njit(**_SERIAL)
def _pattern_weights(Wsub, sub, r, out):
    """out (P,) = the pair weights of pattern r: the sum over the chunks c of the subset
    sums Wsub[c, sub[r, c]] (``subset_sums``; subset 0 is all zeros)."""
    P = out.shape[0]
    w = Wsub[0, sub[r, 0]]
    for p in range(P):
        out[p] = w[p]
    for c in range(1, sub.shape[1]):
        m = sub[r, c]
        if m == 0:
            continue
        w = Wsub[c, m]
        for p in range(P):
            out[p] += w[p]


@njit(**_SERIAL)
def _grad_rows(n0, n1, dL_dPsi1, w2, Wsub, wrow, sub, mu, S, ZT, zbar, shift, ZhT, ZpT, starts,
               sf2, alpha, do1, do2, dmu, dS, dZT, T, Gacc, dth_out):
    """Gradient contributions of the points n0 <= n < n1.

    The Psi2 part of point n is weighted by the pair weights w2[0] (w2 (1, P)) when
    ``wrow`` is empty (one dL/dPsi2 for all), else by the sum of the groups' weights its
    pattern r = wrow[n] observes, from their subset sums Wsub (``_pattern_weights``),
    summed again only where the pattern changes.

    Writes rows n of dmu, dS (N, Q); adds into this block's accumulators dZT (Q, M) (Psi1
    part, transposed), T (Q, P) and Gacc (P,) (Psi2 part, scattered to dZ by
    ``_grad_finalize``) and dth_out (Q + 1,) = [dL/dsf2, dL/dalpha_1..Q]. Small per-point
    sums go to a local array first: neighbouring blocks' rows of dth_out share cache
    lines (false sharing). The Psi2 values of a chunk of CHUNK points come from
    ``_psi2_chunk_log``; the sums over pairs then take four points at a time (see
    ``_psi2_pass_4``).
    """
    Q, M = ZT.shape
    P = ZpT.shape[1]
    CH = CHUNK
    dth = np.zeros(Q + 1)
    d1 = np.empty(Q)
    ad1 = np.empty(Q)
    ex1 = np.empty(M)
    G1 = np.empty(M)
    scratch = np.empty(max(CH * P, M))
    Ah = np.empty((CH, 2 * Q + 1))
    Gam = np.empty((CH, Q))
    d2 = np.empty((CH, Q))
    H = np.empty((CH, M))
    Xbuf = np.empty(CH * P)
    Gbuf = np.empty(CH * P)
    st = np.empty((4, Q))
    stt = np.empty((4, Q))
    gsum = np.empty(CH)
    wbuf = np.empty(P if wrow.size else 0)  # the current pattern's weights
    cur = -1
    for c0 in range(n0, n1, CH):
        kc = min(CH, n1 - c0)
        for n in range(c0, c0 + kc):
            for q in range(Q):
                dmu[n, q] = 0.0
                dS[n, q] = 0.0
            # ---- Psi1: G1 = dL/dPsi1[n, m] * Psi1[n, m]
            if do1:
                _psi1_grad_point(n, dL_dPsi1, mu, S, ZT, sf2, alpha, dmu, dS, dZT, dth,
                                 d1, ad1, ex1, G1, scratch)
        if not do2:
            continue
        # ---- Psi2: G_p = w_p * Psi2^n_p (w_p folds the symmetric pair (m, m'))
        _psi2_chunk_log(c0, kc, mu, S, shift, ZhT, ZpT, starts, sf2, alpha, Ah, Gam, d2, H,
                        Xbuf[:kc * P].reshape((kc, P)))
        exp_into(Xbuf[:kc * P], Gbuf[:kc * P], scratch[:kc * P])
        G = Gbuf[:kc * P].reshape((kc, P))
        for j in range(kc):
            Gj = G[j]
            if wrow.size:
                r = wrow[c0 + j]
                if r != cur:
                    _pattern_weights(Wsub, sub, r, wbuf)
                    cur = r
                wj = wbuf
            else:
                wj = w2[0]
            s = 0.0
            for p in range(P):
                g = Gj[p] * wj[p]
                Gj[p] = g
                s += g
                Gacc[p] += g
            gsum[j] = s
            dth[0] += 2.0 * s / sf2
        for j0 in range(0, kc, 4):
            n = c0 + j0
            k = min(4, kc - j0)
            if k == 4:
                _psi2_pass_4(n, mu, zbar, G[j0:j0 + 4], d2[j0:j0 + 4], T, st, stt)
            else:
                for j in range(k):
                    _psi2_pass_1(n + j, mu, zbar, G[j0 + j], d2[j0 + j], T, st[j], stt[j])
            for j in range(k):
                g2 = gsum[j0 + j]
                for q in range(Q):
                    a = alpha[q]
                    e = d2[j0 + j, q]
                    dmu[n + j, q] -= 2.0 * a * e * st[j, q]
                    dS[n + j, q] += a * e * (2.0 * a * e * stt[j, q] - g2)
                    dth[q + 1] -= S[n + j, q] * e * g2 + e * e * stt[j, q]
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


@njit(**_PARALLEL)
def _psi_gradients_blocks(N, nchunks, dL_dPsi1, w2, Wsub, wrow, sub, mu, S, ZT, zbar, shift, ZhT,
                          ZpT, starts, sf2, alpha, do1, do2, dmu, dS, dZc, Tc, Gc, dthc):
    """The only parallel code: one block of points per iteration (see psi_gradients)."""
    for c in prange(nchunks):
        _grad_rows(c * N // nchunks, (c + 1) * N // nchunks,
            dL_dPsi1, w2, Wsub, wrow, sub, mu, S, ZT, zbar, shift, ZhT, ZpT, starts, sf2,
            alpha, do1, do2, dmu, dS, dZc[c], Tc[c], Gc[c], dthc[c])


@njit(**_SERIAL)
def psi_gradients(dL_dpsi0, dL_dPsi1, dL_dPsi2, mu, S, Z, sf2, alpha, do1, do2, nchunks):
    """Chain rule through psi0, Psi1, Psi2 for a general (M, M) dL_dPsi2.

    Returns (dL_dmu (N, Q), dL_dS (N, Q), dL_dZ (M, Q), dL_dsf2, dL_dalpha (Q,)).
    ``do1``/``do2`` skip the Psi1/Psi2 parts (when their weights are all zero).
    """
    pm, pm2, zbar, D0 = pair_tables(Z, alpha)
    w2 = pair_weights(dL_dPsi2, pm, pm2).reshape((1, pm.shape[0]))
    return psi_gradients_w(dL_dpsi0, dL_dPsi1, w2, np.empty(0, np.int64), np.empty((0, 0), np.int64),
                           mu, S, Z, sf2, alpha, do1, do2, nchunks)


@njit(**_SERIAL)
def psi_gradients_w(dL_dpsi0, dL_dPsi1, w2, wrow, sub, mu, S, Z, sf2, alpha, do1, do2, nchunks):
    """``psi_gradients`` with the Psi2 weights as pair weights (``pair_weights``): w2[0]
    for every point when ``wrow`` is empty, else point n takes the sum of the groups' rows
    of w2 (G, P) that its pattern r = wrow[n] observes: group g = c B + i where bit i of
    sub[r, c] is set (B = SUBSET_BITS; ``_grad_rows``)."""
    N, Q = mu.shape
    M = Z.shape[0]
    pm, pm2, zbar, D0 = pair_tables(Z, alpha)
    shift, ZhT, ZpT, starts = factored_tables(Z)
    P = pm.shape[0]
    dmu = np.empty((N, Q))
    dS = np.empty((N, Q))
    ZT = np.ascontiguousarray(Z.T)
    dZc = np.zeros((nchunks, Q, M))
    Tc = np.zeros((nchunks, Q, P if do2 else 0))
    Gc = np.zeros((nchunks, P if do2 else 0))
    dthc = np.zeros((nchunks, Q + 1))
    Wsub = subset_sums(w2, SUBSET_BITS) if wrow.size else np.empty((0, 0, P))
    _psi_gradients_blocks(N, nchunks, dL_dPsi1, w2, Wsub, wrow, sub, mu, S, ZT, zbar, shift, ZhT,
                          ZpT, starts, sf2, alpha, do1, do2, dmu, dS, dZc, Tc, Gc, dthc)
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


# --------------------------------------------------------------------------------------
# per-point gradients (test time): dL_dPsi2n differs for every point
# --------------------------------------------------------------------------------------
@njit(**_SERIAL)
def _grad_n_rows(n0, n1, dL_dPsi1, dL_dPsi2n, mu, S, ZT, zbar, D0, pm, pm2, sf2, alpha,
                 do1, do2, dmu, dS):
    """Rows n0 <= n < n1 of dmu, dS (N, Q) for L = sum W1 * Psi1 + sum_n W2n[n] * Psi2^n.

    Psi2^n in the direct per-point form (as ``psi2n``); per point and pair p = (m, m'),
    G_p = w_p Psi2^n_p with w_p the folded weight of W2n[n] (pair_weights), then
        dL/dmu_nq = -2 alpha_q d2_q sum_p G_p t_qp,
        dL/dS_nq  = alpha_q d2_q (2 alpha_q d2_q sum_p G_p t_qp^2 - sum_p G_p).
    The Psi1 part is ``_psi1_grad_point``; its Z and parameter sums go to scratch arrays
    (test time holds Z and the kernel fixed).
    """
    Q, M = ZT.shape
    P = zbar.shape[1]
    d1 = np.empty(Q)
    ad1 = np.empty(Q)
    ex1 = np.empty(M)
    G1 = np.empty(M)
    scratch = np.empty(max(P, M))
    dZT_unused = np.zeros((Q, M))
    dth_unused = np.zeros(Q + 1)
    ex = np.empty(P)
    G = np.empty(P)
    d2 = np.empty(Q)
    for n in range(n0, n1):
        for q in range(Q):
            dmu[n, q] = 0.0
            dS[n, q] = 0.0
        if do1:
            _psi1_grad_point(n, dL_dPsi1, mu, S, ZT, sf2, alpha, dmu, dS, dZT_unused,
                             dth_unused, d1, ad1, ex1, G1, scratch)
        if not do2:
            continue
        _psi2_log_exponent(n, mu, S, zbar, D0, sf2, alpha, d2, ex)
        exp_into(ex, G, scratch[:P])
        W = dL_dPsi2n[n]
        gsum = 0.0
        for p in range(P):
            m, m2 = pm[p], pm2[p]
            w = W[m, m] if m == m2 else W[m, m2] + W[m2, m]
            g = G[p] * w
            G[p] = g
            gsum += g
        for q in range(Q):
            muq = mu[n, q]
            s1 = 0.0
            s2 = 0.0
            for p in range(P):
                t = muq - zbar[q, p]
                gt = G[p] * t
                s1 += gt
                s2 += gt * t
            a = alpha[q]
            e = d2[q]
            dmu[n, q] -= 2.0 * a * e * s1
            dS[n, q] += a * e * (2.0 * a * e * s2 - gsum)


@njit(**_PARALLEL)
def _psi_gradients_n_blocks(N, nchunks, dL_dPsi1, dL_dPsi2n, mu, S, ZT, zbar, D0, pm, pm2,
                            sf2, alpha, do1, do2, dmu, dS):
    """The only parallel code: one block of points per iteration (see psi_gradients_n)."""
    for c in prange(nchunks):
        _grad_n_rows(c * N // nchunks, (c + 1) * N // nchunks,
                     dL_dPsi1, dL_dPsi2n, mu, S, ZT, zbar, D0, pm, pm2, sf2, alpha, do1, do2,
                     dmu, dS)


@njit(**_SERIAL)
def psi_gradients_n(dL_dPsi1, dL_dPsi2n, mu, S, ZT, pm, pm2, zbar, D0, sf2, alpha, do1, do2,
                    nchunks):
    """(dL_dmu (N, Q), dL_dS (N, Q)) of L = sum W1 * Psi1 + sum_n sum W2n[n] * Psi2^n,
    dL_dPsi2n (N, M, M) any (not necessarily symmetric) per-point weights. psi0 = sf2 does
    not depend on mu, S. ZT = Z^T (Q, M) contiguous; pair tables of Z from ``pair_tables``."""
    N, Q = mu.shape
    dmu = np.empty((N, Q))
    dS = np.empty((N, Q))
    _psi_gradients_n_blocks(N, nchunks, dL_dPsi1, dL_dPsi2n, mu, S, ZT, zbar, D0, pm, pm2, sf2,
                            alpha, do1, do2, dmu, dS)
    return dmu, dS
