"""Compiled passes of the state-space dynamical prior (``state_space``; the mathematics is
in that module's docstring).

Sequences are stored one after another: rows ``starts[b]:starts[b + 1]`` are sequence b,
in time order. The transition from row i to row i + 1 of the same sequence is
``A[ai[i]]``, its noise ``Qn[ai[i]]``: A, Qn (U, d, d) are kept for the U distinct time
steps only (one for evenly spaced frames), ``ai`` (N,) indexes them (the last row of a
sequence has no transition: its index is not read). ``P`` (d, d) is the stationary
covariance P_inf, ``H`` (d,) the output row. In the two passes that dominate the cost
(``covariances`` with its tangents, ``s_squared_times``) ``dims`` is a tuple of d
zeros for d <= ``SPECIALISED_DIMS`` (Matern 1/2, 3/2, 5/2, and their sums with white and
bias parts up to d = 4, e.g. Matern 3/2 + white + bias of the CMU models): its length
is a compile-time constant, so each such d gets its own compiled (and cached) specialisation
with the d x d loops unrolled (about 4x faster than loops of run-time length on these tiny
matrices); larger states pass ``()`` and share one generic version. Each specialisation costs
its compile time once (~5-10 s cold, then cached), hence the cap. The per-(sequence,
latent dimension) passes run in parallel over those pairs; each writes only its own rows of
the (Q, N, d, d) result arrays. All arrays contiguous float64.

A row with lambda = 0 has no site (a time at which q is only predicted: ``latent_at``).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .._numba_config import STRICT_PARALLEL_OPTIONS as _PARALLEL
from .._numba_config import STRICT_SERIAL_OPTIONS as _SERIAL
from ._small_numba import _chol_solve, _cholesky, _dim, _mm, _mmt, _quad

#: state dimensions with their own compiled specialisation (see the module docstring)
SPECIALISED_DIMS = 4  # d = 4 specialised: CMU's matern32+white+bias prior 197 -> 68 ms


# --- Kt v ----------------------------------------------------------------------------------
@njit(**_PARALLEL)
def kt_matvec(A, ai, P, H, starts, V, out):
    """out = Kt V for block-diagonal Kt (N, Q each): (Kt v)_i = H f_i + H P b_i with
    f_i = A_{i-1} f_{i-1} + P H v_i and b_i = A_i^T (b_{i+1} + H v_{i+1})."""
    B = starts.shape[0] - 1
    d = H.shape[0]
    Q = V.shape[1]
    for b in prange(B):
        s0, s1 = starts[b], starts[b + 1]
        f = np.zeros((d, Q))
        g = np.empty((d, Q))
        PH = np.zeros(d)
        for r in range(d):
            for k in range(d):
                PH[r] += P[r, k] * H[k]
        for i in range(s0, s1):
            if i > s0:
                a = ai[i - 1]
                for r in range(d):
                    for q in range(Q):
                        s = 0.0
                        for k in range(d):
                            s += A[a, r, k] * f[k, q]
                        g[r, q] = s
                f[:, :] = g
            for q in range(Q):
                s = 0.0
                for r in range(d):
                    f[r, q] += PH[r] * V[i, q]
                    s += H[r] * f[r, q]
                out[i, q] = s
        for r in range(d):
            for q in range(Q):
                f[r, q] = 0.0  # now b
        for i in range(s1 - 2, s0 - 1, -1):
            a = ai[i]
            for r in range(d):
                for q in range(Q):
                    g[r, q] = f[r, q] + H[r] * V[i + 1, q]
            for q in range(Q):
                s = 0.0
                for r in range(d):
                    t = 0.0
                    for k in range(d):
                        t += A[a, k, r] * g[k, q]
                    f[r, q] = t
                    s += PH[r] * t
                out[i, q] += s


@njit(**_PARALLEL)
def kt_matvec_tangent(A, dA, ai, P, dP, H, starts, V, out):
    """out = dKt V: the derivative of ``kt_matvec`` along (dA, dP)."""
    B = starts.shape[0] - 1
    d = H.shape[0]
    Q = V.shape[1]
    for b in prange(B):
        s0, s1 = starts[b], starts[b + 1]
        f = np.zeros((d, Q))
        df = np.zeros((d, Q))
        g = np.empty((d, Q))
        dg = np.empty((d, Q))
        PH = np.zeros(d)
        dPH = np.zeros(d)
        for r in range(d):
            for k in range(d):
                PH[r] += P[r, k] * H[k]
                dPH[r] += dP[r, k] * H[k]
        for i in range(s0, s1):
            if i > s0:
                a = ai[i - 1]
                for r in range(d):
                    for q in range(Q):
                        s = 0.0
                        ds = 0.0
                        for k in range(d):
                            s += A[a, r, k] * f[k, q]
                            ds += A[a, r, k] * df[k, q] + dA[a, r, k] * f[k, q]
                        g[r, q] = s
                        dg[r, q] = ds
                f[:, :] = g
                df[:, :] = dg
            for q in range(Q):
                s = 0.0
                for r in range(d):
                    f[r, q] += PH[r] * V[i, q]
                    df[r, q] += dPH[r] * V[i, q]
                    s += H[r] * df[r, q]
                out[i, q] = s
        for r in range(d):
            for q in range(Q):
                f[r, q] = 0.0
                df[r, q] = 0.0
        for i in range(s1 - 2, s0 - 1, -1):
            a = ai[i]
            for r in range(d):
                for q in range(Q):
                    g[r, q] = f[r, q] + H[r] * V[i + 1, q]
                    dg[r, q] = df[r, q]
            for q in range(Q):
                s = 0.0
                for r in range(d):
                    t = 0.0
                    dt = 0.0
                    for k in range(d):
                        t += A[a, k, r] * g[k, q]
                        dt += A[a, k, r] * dg[k, q] + dA[a, k, r] * g[k, q]
                    f[r, q] = t
                    df[r, q] = dt
                    s += PH[r] * dt + dPH[r] * t
                out[i, q] += s


# --- covariances: Kalman filter and RTS smoother ---------------------------------------------
@njit(**_SERIAL)
def _filter_one(A, ai, Qn, P, H, s0, s1, lam, Pp, Pf, c, d):
    """Covariance filter of one (sequence, q): Pp_i (prior-predictive), Pf_i (filtered), c_i =
    H Pp_i H. Measurement update in Joseph form, Pf = M Pp M^T + k k^T / lambda,
    M = I - k H^T, k = Pp H lambda / (1 + lambda c)."""
    k = np.empty(d)
    PH = np.empty(d)
    M = np.empty((d, d))
    T = np.empty((d, d))
    X = np.empty((d, d))
    Y = np.empty((d, d))
    Aa = np.empty((d, d))
    for r in range(d):
        for j in range(d):
            X[r, j] = P[r, j]
    for i in range(s0, s1):
        for r in range(d):
            for j in range(d):
                Pp[i, r, j] = X[r, j]
        ci = 0.0
        for r in range(d):
            s = 0.0
            for j in range(d):
                s += X[r, j] * H[j]
            PH[r] = s
            ci += H[r] * s
        c[i] = ci
        li = lam[i]
        if li != 0.0:
            for r in range(d):
                k[r] = PH[r] * li / (1.0 + li * ci)
            for r in range(d):
                for j in range(d):
                    M[r, j] = (1.0 if r == j else 0.0) - k[r] * H[j]
            _mm(M, X, T, d)
            _mmt(T, M, Y, d)
            for r in range(d):
                for j in range(r + 1):
                    v = 0.5 * (Y[r, j] + Y[j, r]) + k[r] * k[j] / li
                    X[r, j] = v
                    X[j, r] = v
        for r in range(d):
            for j in range(d):
                Pf[i, r, j] = X[r, j]
        if i + 1 < s1:
            a = ai[i]
            for r in range(d):
                for j in range(d):
                    Aa[r, j] = A[a, r, j]
            _mm(Aa, X, T, d)
            _mmt(T, Aa, Y, d)
            for r in range(d):
                for j in range(r + 1):
                    v = 0.5 * (Y[r, j] + Y[j, r]) + Qn[a, r, j]
                    X[r, j] = v
                    X[j, r] = v


@njit(**_SERIAL)
def _smooth_one(A, ai, H, s0, s1, Pp, Pf, Ps, G, Lp, d):
    """RTS covariances of one (sequence, q): G_i = Pf_i A_i^T Pp_{i+1}^{-1},
    Ps_i = Pf_i + G_i (Ps_{i+1} - Pp_{i+1}) G_i^T; Lp_i the Cholesky factor of Pp_{i+1}
    (kept for the tangent passes). Returns False if a Pp is not PD."""
    X = np.empty((d, d))
    T = np.empty((d, d))
    Gi = np.empty((d, d))
    L = np.zeros((d, d))
    Pn = np.empty((d, d))
    Sn = np.empty((d, d))
    for r in range(d):
        for j in range(d):
            Sn[r, j] = Pf[s1 - 1, r, j]
            Ps[s1 - 1, r, j] = Sn[r, j]
            G[s1 - 1, r, j] = 0.0
            Lp[s1 - 1, r, j] = 0.0
    for i in range(s1 - 2, s0 - 1, -1):
        a = ai[i]
        for r in range(d):
            for j in range(d):
                Pn[r, j] = Pp[i + 1, r, j]
        if not _cholesky(Pn, L, d):
            return False
        for r in range(d):  # A Pf = (G Pp)^T: solve Pp G^T = A Pf
            for j in range(d):
                s = 0.0
                for m in range(d):
                    s += A[a, r, m] * Pf[i, m, j]
                X[r, j] = s
        _chol_solve(L, X, d)
        for r in range(d):
            for j in range(d):
                Gi[r, j] = X[j, r]
                G[i, r, j] = X[j, r]
                Lp[i, r, j] = L[r, j]
        for r in range(d):
            for j in range(d):
                X[r, j] = Sn[r, j] - Pn[r, j]
        _mm(Gi, X, T, d)
        _mmt(T, Gi, X, d)
        for r in range(d):
            for j in range(r + 1):
                v = Pf[i, r, j] + 0.5 * (X[r, j] + X[j, r])
                Sn[r, j] = v
                Sn[j, r] = v
        for r in range(d):
            for j in range(d):
                Ps[i, r, j] = Sn[r, j]
    return True


@njit(**_PARALLEL)
def covariances(A, ai, Qn, P, H, starts, lam, Pp, Pf, Ps, G, Lp, S, c, dA, dQn, dP, dS, dc,
                dPp, dPf, dims):
    """For every sequence b and latent dimension q (lam (Q, N)): the filter and smoother
    covariances Pp, Pf, Ps, gains G, Cholesky factors Lp of Pp_{i+1} (Q, N, d, d), the
    marginal variances S = H Ps H and the prior-predictive variances c = H Pp H (Q, N);
    then, while that job's arrays are still in cache, the tangents dS, dc (p, Q, N) along
    each of p parameter directions (dA, dQn (p, U, d, d), dP (p, d, d); p may be 0), with
    dPp, dPf (Q, N, d, d) as workspace (``_tangent_one``). Returns 0, or 1 if some Pp was
    not positive definite even with jitter."""
    B = starts.shape[0] - 1
    Q = lam.shape[0]
    d = _dim(dims, H)
    fails = np.zeros(B * Q, dtype=np.int64)
    for job in prange(B * Q):
        b, q = job // Q, job % Q
        s0, s1 = starts[b], starts[b + 1]
        _filter_one(A, ai, Qn, P, H, s0, s1, lam[q], Pp[q], Pf[q], c[q], d)
        if not _smooth_one(A, ai, H, s0, s1, Pp[q], Pf[q], Ps[q], G[q], Lp[q], d):
            fails[job] = 1
            continue
        for i in range(s0, s1):
            s = 0.0
            for r in range(d):
                for j in range(d):
                    s += H[r] * Ps[q, i, r, j] * H[j]
            S[q, i] = s
        for k in range(dA.shape[0]):
            _tangent_one(A, dA[k], ai, dQn[k], dP[k], H, s0, s1, lam[q], Pp[q], Pf[q], Ps[q],
                         G[q], Lp[q], dS[k, q], dc[k, q], dPp[q], dPf[q], d)
    return 1 if fails.sum() > 0 else 0


@njit(**_PARALLEL)
def smoothed_means(A, ai, H, starts, lam, Pp, G, Y, out):
    """Posterior means of x given pseudo-observations Y (Q, N) with noise 1/lam (a row with
    lam = 0 is unobserved), from the covariances of ``covariances``: Kalman filter means,
    then m_s_i = m_f_i + G_i (m_s_{i+1} - A_i m_f_i). out (Q, N)."""
    B = starts.shape[0] - 1
    Q = lam.shape[0]
    d = H.shape[0]
    for job in prange(B * Q):
        b, q = job // Q, job % Q
        s0, s1 = starts[b], starts[b + 1]
        n = s1 - s0
        mf = np.zeros((n, d))
        mp = np.zeros(d)
        for i in range(s0, s1):
            j = i - s0
            if i > s0:
                a = ai[i - 1]
                for r in range(d):
                    s = 0.0
                    for k in range(d):
                        s += A[a, r, k] * mf[j - 1, k]
                    mp[r] = s
            li = lam[q, i]
            ci = _quad(H, Pp[q, i], d)
            v = Y[q, i]
            for r in range(d):
                v -= H[r] * mp[r]
            for r in range(d):
                if li == 0.0:
                    mf[j, r] = mp[r]
                else:
                    s = 0.0
                    for k in range(d):
                        s += Pp[q, i, r, k] * H[k]
                    mf[j, r] = mp[r] + s * li / (1.0 + li * ci) * v
        ms = mf[n - 1].copy()
        s = 0.0
        for r in range(d):
            s += H[r] * ms[r]
        out[q, s1 - 1] = s
        pred = np.empty(d)
        new = np.empty(d)
        for i in range(s1 - 2, s0 - 1, -1):
            j = i - s0
            a = ai[i]
            for r in range(d):
                s = 0.0
                for k in range(d):
                    s += A[a, r, k] * mf[j, k]
                pred[r] = ms[r] - s
            for r in range(d):
                s = mf[j, r]
                for k in range(d):
                    s += G[q, i, r, k] * pred[k]
                new[r] = s
            s = 0.0
            for r in range(d):
                ms[r] = new[r]
                s += H[r] * new[r]
            out[q, i] = s


# --- gradients -------------------------------------------------------------------------------
@njit(**_PARALLEL)
def s_squared_times(H, starts, Ps, G, w, out, dims):
    """out[q, i] = sum_j S_q[i, j]^2 w[q, j] with S_q the smoothed covariance of x (its
    off-diagonal entries from the gains: Cov(s_i, s_j) = G_i ... G_{j-1} Ps_j, j > i):

        out_i = w_i S_ii^2 + H^T V_i H + c_i^T U_i c_i,   c_i = Ps_i H,
        V_i = G_i (w_{i+1} c_{i+1} c_{i+1}^T + V_{i+1}) G_i^T,   V_last = 0,
        U_i = G_{i-1}^T (U_{i-1} + w_{i-1} H H^T) G_{i-1},       U_first = 0."""
    B = starts.shape[0] - 1
    Q = w.shape[0]
    d = _dim(dims, H)
    for job in prange(B * Q):
        b, q = job // Q, job % Q
        s0, s1 = starts[b], starts[b + 1]
        ci = np.empty(d)
        U = np.zeros((d, d))
        V = np.zeros((d, d))
        X = np.empty((d, d))
        T = np.empty((d, d))
        Gi = np.empty((d, d))
        for i in range(s0, s1):  # forward: U
            if i > s0:
                for r in range(d):
                    for j in range(d):
                        X[r, j] = U[r, j] + w[q, i - 1] * H[r] * H[j]
                        Gi[r, j] = G[q, i - 1, r, j]
                for r in range(d):  # U = G^T X G
                    for j in range(d):
                        s = 0.0
                        for k in range(d):
                            s += Gi[k, r] * X[k, j]
                        T[r, j] = s
                _mm(T, Gi, U, d)
            sii = 0.0
            for r in range(d):
                s = 0.0
                for k in range(d):
                    s += Ps[q, i, r, k] * H[k]
                ci[r] = s
                sii += H[r] * s
            out[q, i] = w[q, i] * sii * sii + _quad(ci, U, d)
        for i in range(s1 - 2, s0 - 1, -1):  # backward: V
            for r in range(d):
                s = 0.0
                for k in range(d):
                    s += Ps[q, i + 1, r, k] * H[k]
                ci[r] = s
            for r in range(d):
                for j in range(d):
                    X[r, j] = V[r, j] + w[q, i + 1] * ci[r] * ci[j]
                    Gi[r, j] = G[q, i, r, j]
            _mm(Gi, X, T, d)
            _mmt(T, Gi, V, d)
            out[q, i] += _quad(H, V, d)


@njit(**_SERIAL)
def _tangent_one(A, dA, ai, dQn, dP, H, s0, s1, lam, Pp, Pf, Ps, G, Lp, dS, dc, dPp, dPf, d):
    """Derivatives dS_i = H dPs_i H and dc_i = H dPp_i H of one (sequence, q) along
    (dA, dQ, dP_inf), lambda fixed. Filter: dPf = M dPp M^T (the Joseph form is stationary
    in the gain), dPp_{i+1} = dA Pf A^T + A dPf A^T + A Pf dA^T + dQ. Smoother:
    dG = (dPf A^T + Pf dA^T - G dPp') Pp'^{-1},
    dPs = dPf + dG (Ps' - Pp') G^T + G (Ps' - Pp') dG^T + G (dPs' - dPp') G^T.
    dPp, dPf (N, d, d): workspace (rows s0..s1-1 used)."""
    k = np.empty(d)
    M = np.empty((d, d))
    T = np.empty((d, d))
    X = np.empty((d, d))
    Y = np.empty((d, d))
    Aa = np.empty((d, d))
    dAa = np.empty((d, d))
    F = np.empty((d, d))
    for r in range(d):
        for m in range(d):
            X[r, m] = dP[r, m]  # X: dPp_i
    for i in range(s0, s1):
        for r in range(d):
            for m in range(d):
                dPp[i, r, m] = X[r, m]
        dc[i] = _quad(H, X, d)
        li = lam[i]
        if li != 0.0:
            ci = 0.0
            for r in range(d):
                s = 0.0
                for m in range(d):
                    s += Pp[i, r, m] * H[m]
                k[r] = s
                ci += H[r] * s
            for r in range(d):
                k[r] *= li / (1.0 + li * ci)
            for r in range(d):
                for m in range(d):
                    M[r, m] = (1.0 if r == m else 0.0) - k[r] * H[m]
            _mm(M, X, T, d)
            _mmt(T, M, Y, d)
            for r in range(d):
                for m in range(d):
                    X[r, m] = Y[r, m]  # X: dPf_i
        for r in range(d):
            for m in range(d):
                dPf[i, r, m] = X[r, m]
        if i + 1 < s1:
            a = ai[i]
            for r in range(d):
                for m in range(d):
                    Aa[r, m] = A[a, r, m]
                    dAa[r, m] = dA[a, r, m]
                    F[r, m] = Pf[i, r, m]
            _mm(dAa, F, T, d)
            _mmt(T, Aa, Y, d)  # dA Pf A^T
            _mm(Aa, X, T, d)
            _mmt(T, Aa, X, d)
            for r in range(d):
                for m in range(d):
                    X[r, m] += Y[r, m] + Y[m, r] + dQn[a, r, m]
    dPs = np.empty((d, d))
    dG = np.empty((d, d))
    D = np.empty((d, d))
    Gi = np.empty((d, d))
    L = np.empty((d, d))
    for r in range(d):
        for m in range(d):
            dPs[r, m] = dPf[s1 - 1, r, m]
    dS[s1 - 1] = _quad(H, dPs, d)
    for i in range(s1 - 2, s0 - 1, -1):
        a = ai[i]
        # dG^T = Pp'^{-1} (A dPf + dA Pf - dPp' G^T)
        for r in range(d):
            for m in range(d):
                s = 0.0
                for t in range(d):
                    s += A[a, r, t] * dPf[i, t, m] + dA[a, r, t] * Pf[i, t, m] - dPp[i + 1, r, t] * G[i, m, t]
                X[r, m] = s
                Gi[r, m] = G[i, r, m]
                L[r, m] = Lp[i, r, m]
                D[r, m] = Ps[i + 1, r, m] - Pp[i + 1, r, m]
        _chol_solve(L, X, d)
        for r in range(d):
            for m in range(d):
                dG[r, m] = X[m, r]
        _mm(dG, D, T, d)
        _mmt(T, Gi, X, d)
        for r in range(d):
            for m in range(d):
                D[r, m] = dPs[r, m] - dPp[i + 1, r, m]
        _mm(Gi, D, T, d)
        _mmt(T, Gi, Y, d)
        for r in range(d):
            for m in range(d):
                dPs[r, m] = dPf[i, r, m] + X[r, m] + X[m, r] + Y[r, m]
        dS[i] = _quad(H, dPs, d)


@njit(**_SERIAL)
def process_noise(A, P, out):
    """out_u = P - A_u P A_u^T, symmetrised (U, d, d)."""
    U, d, _ = A.shape
    T = np.empty((d, d))
    for i in range(U):
        for r in range(d):
            for m in range(d):
                s = 0.0
                for k in range(d):
                    s += A[i, r, k] * P[k, m]
                T[r, m] = s
        for r in range(d):
            for m in range(r + 1):
                s = 0.0
                for k in range(d):
                    s += T[r, k] * A[i, m, k]
                v = 0.5 * (P[r, m] + P[m, r]) - s
                out[i, r, m] = v
                out[i, m, r] = v


@njit(**_SERIAL)
def process_noise_tangent(A, dA, P, dP, out):
    """out_u = dP - dA_u P A_u^T - A_u P dA_u^T - A_u dP A_u^T (U, d, d)."""
    U, d, _ = A.shape
    T = np.empty((d, d))
    W = np.empty((d, d))
    for i in range(U):
        for r in range(d):
            for m in range(d):
                s = 0.0
                w = 0.0
                for k in range(d):
                    s += dA[i, r, k] * P[k, m]
                    w += A[i, r, k] * dP[k, m]
                T[r, m] = s
                W[r, m] = w
        for r in range(d):
            for m in range(r + 1):
                s = 0.0
                for k in range(d):
                    s += T[r, k] * A[i, m, k] + A[i, r, k] * T[m, k] + W[r, k] * A[i, m, k]
                v = 0.5 * (dP[r, m] + dP[m, r]) - s
                out[i, r, m] = v
                out[i, m, r] = v
