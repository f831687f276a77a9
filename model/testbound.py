"""The bound for new outputs taken jointly with the training data (test time).

Paper: section "Predictions with the Standard Variational GP-LVM" (eq:predictive1) and the
appendix "The Variational Bound in the Test Phase" (app:partialtestBound). With the model's
parameters and q(X) held fixed, test rows y*_i (some entries missing) enter the collapsed
bound (FdFinal) of each output dimension j that they observe:

    F_hat(q(X), q(X*)) = sum_j F_j(training rows + the test rows of the batch observing j)

and log p(Y*_O | Y) ~ F_hat(q(X), q(X*)) - F_hat(q(X)) - KL(q(X*) || p(X*)). This module
gives that bound and its gradients w.r.t. the means mu* and variances S* of q(X*), however
q(X*) is parametrised: the KL term is the caller's (``bgplvm.kl.kl_static`` for the static
model; the dynamical model adds its own), and so is the optimisation of its parameters
(``infer_latent`` below does it for independent points).

Algebra (notation of ``model/bound.py``). From the training data, once (``TrainingStats``):
Kuu = Luu Luu^T, B0 = I + beta Luu^-1 Psi2 Luu^-T = LB0 LB0^T, R0 = LB0^-1 Luu^-1 (M, M,
lower triangular) and C = R0 Psi1^T Yc (M, D), whose column c_j is the c of FdFinal for
output j. A group g of test rows r (of one batch) observing the same output columns J
(d = |J| of them) adds P = sum_{i in r} Psi2*_i to Psi2 and Psi1*_r to Psi1, so that

    B_g = LB0 (I + beta K) LB0^T,   K = R0 P R0^T,   I + beta K = Lc Lc^T   (eigenvalues >= 1)
    c_j -> Lc^-1 w_j,   w_j = c_j + V y*_rj,   V = R0 Psi1*_r^T   (M, |r|)

and the change of sum_{j in J} F_j is (y* centred with the training mean)

    Delta_g = -d log|Lc| + beta^2/2 (sum_j ||Lc^-1 w_j||^2 - ||c_j||^2)
              + |r| d/2 (log beta - log 2pi) - beta/2 ||Y*_rJ||^2
              - beta d/2 sum_{i in r} psi0*_i + beta d/2 tr(Kuu^-1 P).

The difference of the quadratic terms is formed without cancelling the large training
terms: with U = (I + beta K)^-1 W and I - (I + beta K)^-1 = beta (I + beta K)^-1 K,

    sum_j ||Lc^-1 w_j||^2 - ||c_j||^2 = (||W||^2 - ||F||^2) - beta tr(U^T K W),
    ||W||^2 - ||F||^2 = 2 <F, V Y_c> + ||V Y_c||^2

(W, F, Y_c below), which keeps the rounding noise of Delta near that of its own size --
what the optimiser's line search sees.

F_hat of a batch = F_hat(q(X)) + sum of its groups' Delta_g: only the training statistics
and the group's own M x M algebra are touched, so the cost per test point does not grow
with N. Columns that no test row of the batch observes keep their training F_j. Gradients,
with U = (I + beta K)^-1 W (M, k), GU = R0^T U and G = R0^T (I + beta K)^-1 R0
(= (Kuu + beta (Psi2 + P))^-1, as in bound.py):

    dDelta/dP       = beta d/2 (Kuu^-1 - G) - beta^3/2 GU GU^T      (every row of the group)
    dDelta/dPsi1*_r = beta^2 Y_c GU^T,    dDelta/dpsi0*_i = -beta d/2

where W = F + V Y_c is the group's data with W W^T unchanged: for d <= M, F = C[:, J] and
Y_c = Y*_rJ; for d > M the d columns are first projected onto the row space of C[:, J]
(``_compress_pattern``, ``_compress_rows``), so W has at most M + |r| columns. The kernel
maps these to mu*, S* (``Kernel.psi_gradients_n``).

The algebra of all groups runs in one compiled kernel (``groups``, prange over blocks of
groups): per group two GEMMs for K, a Cholesky, triangular solves, and for the gradient one
more triangular solve and GEMM for G.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit, prange

from . import _numba_config as cfg
from ._numba_config import PARALLEL_OPTIONS as _PARALLEL
from ._numba_config import SERIAL_OPTIONS as _SERIAL
from ._threads import blas_single_threaded, single_threaded_blas
from .kernels._util import run_blocks
from .training_stats import TrainingStats


# ==========================================================================================
# test outputs: validation
# ==========================================================================================
def check_test_outputs(Y_star, D: int, name: str = "Y_star", allow_empty_rows: bool = False):
    """(Ys (n*, D) float64 with 0 at missing entries, observed (n*, D) bool) from an array
    with NaN marking missing entries. A 1-D array is one row. Raises ValueError for a wrong
    number of columns, inf, or (unless ``allow_empty_rows``) rows with nothing observed."""
    try:
        Ys = np.array(Y_star, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{name} must be a numeric (n*, {D}) array (NaN = missing): {e}") from None
    if Ys.ndim == 1:
        Ys = Ys[None, :]
    if Ys.ndim != 2 or Ys.shape[1] != D:
        raise ValueError(f"{name} must have shape (n*, {D}) -- the model was fitted on D={D} "
                         f"outputs -- got an array of shape {np.shape(Y_star)}")
    if Ys.shape[0] == 0:
        raise ValueError(f"{name} has no rows")
    if np.isinf(Ys).any():
        rows = np.unique(np.nonzero(np.isinf(Ys))[0])
        raise ValueError(f"{name} contains inf (rows {rows[:5].tolist()}); mark missing entries with NaN")
    observed = ~np.isnan(Ys)
    if not allow_empty_rows:
        empty = np.flatnonzero(~observed.any(axis=1))
        if empty.size:
            raise ValueError(f"{'row' if empty.size == 1 else 'rows'} {empty[:10].tolist()}"
                             f"{' ...' if empty.size > 10 else ''} of {name} "
                             f"{'is' if empty.size == 1 else 'are'} entirely NaN: nothing is "
                             "observed there to infer a latent point from")
    Ys[~observed] = 0.0
    return np.ascontiguousarray(Ys), observed


# ==========================================================================================
# compiled algebra of the groups
# ==========================================================================================
@njit(**_SERIAL)
def _cholesky_inplace(A):
    """Lower Cholesky factor of the symmetric A (M, M), written over A (upper part zeroed).
    Returns False if a pivot is not positive (A is then garbage)."""
    M = A.shape[0]
    for j in range(M):
        s = A[j, j]
        for k in range(j):
            s -= A[j, k] * A[j, k]
        if not s > 0.0:
            return False
        ljj = math.sqrt(s)
        A[j, j] = ljj
        for i in range(j + 1, M):
            t = A[i, j]
            for k in range(j):
                t -= A[i, k] * A[j, k]
            A[i, j] = t / ljj
        for i in range(j):
            A[i, j] = 0.0
    return True


@njit(**_SERIAL)
def _solve_lower_inplace(L, X):
    """X <- L^-1 X, L (M, M) lower triangular, X (M, k)."""
    M, k = X.shape
    for i in range(M):
        xi = X[i]
        for j in range(i):
            lij = L[i, j]
            xj = X[j]
            for c in range(k):
                xi[c] -= lij * xj[c]
        inv = 1.0 / L[i, i]
        for c in range(k):
            xi[c] *= inv


@njit(**_SERIAL)
def _solve_lower_t_inplace(L, X):
    """X <- L^-T X, L (M, M) lower triangular, X (M, k)."""
    M, k = X.shape
    for i in range(M - 1, -1, -1):
        xi = X[i]
        for j in range(i + 1, M):
            lji = L[j, i]
            xj = X[j]
            for c in range(k):
                xi[c] -= lji * xj[c]
        inv = 1.0 / L[i, i]
        for c in range(k):
            xi[c] *= inv


@njit(**_SERIAL)
def _solve_lower_tri_inplace(L, X):
    """X <- L^-1 X for lower-triangular L and X (M, M): the result is lower triangular too,
    so row i only touches columns <= i."""
    M = X.shape[0]
    for i in range(M):
        xi = X[i]
        for j in range(i):
            lij = L[i, j]
            xj = X[j]
            for c in range(j + 1):
                xi[c] -= lij * xj[c]
        inv = 1.0 / L[i, i]
        for c in range(i + 1):
            xi[c] *= inv


@njit(**_SERIAL)
def _group_rows(i0, i1, g_ptr, g_rows, g_d, g_pat, g_tg, g_yoff, g_width, Yc_flat, g_ysq,
                pat_foff, pat_k, F_flat, pos, psi0, Psi1, Psi2n, R0s, R0Ts, Kinv,
                beta, grad, gain, dP, dPsi1):
    """Groups g = i0..i1-1: gain[g] = Delta_g and, with ``grad``, dP[g] = dDelta/dP (M, M) and
    dPsi1[e] = dDelta/dPsi1*_row (M,) for each entry e = g_ptr[g]..g_ptr[g+1]-1 of the group
    (its rows g_rows[e]). psi0 (n,), Psi1 (n, M), Psi2n (n, M, M) hold the statistics of
    row r at position pos[r]. Group g's outputs belong to the training group g_tg[g]
    (R0s, R0Ts (G, M, M): ``TrainingStats``). Formulas: module docstring."""
    M = R0s.shape[1]
    P = np.empty((M, M))
    T = np.empty((M, M))
    L = np.empty((M, M))
    H = np.empty((M, M))
    HT = np.empty((M, M))
    G = np.empty((M, M))
    log_beta_2pi = math.log(beta) - math.log(2.0 * math.pi)
    for g in range(i0, i1):
        R0 = R0s[g_tg[g]]
        R0T = R0Ts[g_tg[g]]
        e0, e1 = g_ptr[g], g_ptr[g + 1]
        nr = e1 - e0
        d = g_d[g]
        p = g_pat[g]
        k = pat_k[p]
        w = g_width[g]
        Fp = F_flat[pat_foff[p]:pat_foff[p] + M * k].reshape((M, k))
        Yg = Yc_flat[g_yoff[g]:g_yoff[g] + nr * w].reshape((nr, w))
        # P = sum of the rows' Psi2*; psi0 and tr(Kuu^-1 P)
        P[:, :] = 0.0
        psi0s = 0.0
        for e in range(e0, e1):
            r = pos[g_rows[e]]
            psi0s += psi0[r]
            P += Psi2n[r]
        trKP = 0.0
        for a in range(M):
            for b in range(M):
                trKP += Kinv[a, b] * P[a, b]
        # I + beta K = Lc Lc^T, K = R0 P R0^T
        np.dot(P, R0T, T)
        np.dot(R0, T, L)
        for a in range(M):
            for b in range(a):
                v = 0.5 * beta * (L[a, b] + L[b, a])
                L[a, b] = v
                L[b, a] = v
            L[a, a] = 1.0 + beta * L[a, a]
        ok = _cholesky_inplace(L)
        if not ok:
            gain[g] = np.nan
            continue
        logdet = 0.0
        for a in range(M):
            logdet += math.log(L[a, a])
        # W = [F, 0] + V Yg with V = R0 Psi1*_r^T, then Lc^-1 W
        V = np.zeros((M, nr))
        for e in range(e0, e1):
            r = pos[g_rows[e]]
            for a in range(M):
                s = 0.0
                for b in range(a + 1):
                    s += R0[a, b] * Psi1[r, b]
                V[a, e - e0] = s
        # VY = V Yg, W = [F, 0] + VY; |W|^2 - |F|^2 = 2 <F, VY> + |VY|^2 (no cancellation)
        W = np.zeros((M, w))
        dnorm = 0.0
        for a in range(M):
            for t in range(nr):
                v = V[a, t]
                for c in range(w):
                    W[a, c] += v * Yg[t, c]
            for c in range(w):
                dnorm += W[a, c] * W[a, c]
            for c in range(k):
                dnorm += 2.0 * Fp[a, c] * W[a, c]
                W[a, c] += Fp[a, c]
        # RW = R0^T W; U = (I + beta K)^-1 W (W overwritten); GU = R0^T U
        RW = np.empty((M, w))
        np.dot(R0T, W, RW)
        _solve_lower_inplace(L, W)
        _solve_lower_t_inplace(L, W)
        GU = np.empty((M, w))
        np.dot(R0T, W, GU)
        # sum_j |Lc^-1 w_j|^2 - |c_j|^2 = |W|^2 - |F|^2 - beta tr(U^T K W),
        # tr(U^T K W) = <GU, P RW>   (I - (I + beta K)^-1 = beta (I + beta K)^-1 K)
        PRW = np.empty((M, w))
        np.dot(P, RW, PRW)
        tKW = 0.0
        for a in range(M):
            for c in range(w):
                tKW += GU[a, c] * PRW[a, c]
        gain[g] = (-d * logdet + 0.5 * beta * beta * (dnorm - beta * tKW)
                   + 0.5 * nr * d * log_beta_2pi - 0.5 * beta * g_ysq[g]
                   - 0.5 * beta * d * psi0s + 0.5 * beta * d * trKP)
        if not grad:
            continue
        # G = H^T H, H = Lc^-1 R0 (lower triangular; one GEMM beats a triangular loop here)
        H[:, :] = R0
        _solve_lower_tri_inplace(L, H)
        for a in range(M):
            for b in range(M):
                HT[a, b] = H[b, a]
        np.dot(HT, H, G)
        c1 = 0.5 * beta * d
        c3 = 0.5 * beta * beta * beta
        dPi = dP[g]
        for a in range(M):
            for b in range(a + 1):
                s = 0.0
                for c in range(w):
                    s += GU[a, c] * GU[b, c]
                v = c1 * (Kinv[a, b] - G[a, b]) - c3 * s
                dPi[a, b] = v
                dPi[b, a] = v
        c2 = beta * beta
        for e in range(e0, e1):
            t = e - e0
            for a in range(M):
                s = 0.0
                for c in range(w):
                    s += Yg[t, c] * GU[a, c]
                dPsi1[e, a] = c2 * s


@njit(**_PARALLEL)
def _groups_blocks(n, nchunks, g_ptr, g_rows, g_d, g_pat, g_tg, g_yoff, g_width, Yc_flat, g_ysq,
                   pat_foff, pat_k, F_flat, pos, psi0, Psi1, Psi2n, R0s, R0Ts, Kinv,
                   beta, grad, gain, dP, dPsi1):
    """The only parallel code: one block of groups per iteration (see groups)."""
    for c in prange(nchunks):
        _group_rows(c * n // nchunks, (c + 1) * n // nchunks, g_ptr, g_rows, g_d, g_pat, g_tg,
                    g_yoff, g_width, Yc_flat, g_ysq, pat_foff, pat_k, F_flat, pos,
                    psi0, Psi1, Psi2n, R0s, R0Ts, Kinv, beta, grad, gain, dP, dPsi1)


@njit(**_SERIAL)
def groups(g_ptr, g_rows, g_d, g_pat, g_tg, g_yoff, g_width, Yc_flat, g_ysq, pat_foff, pat_k,
           F_flat, pos, psi0, Psi1, Psi2n, R0s, R0Ts, Kinv, beta, grad, n_entries, nchunks):
    """(gain (G,), dP (G, M, M), dPsi1 (n_entries, M)) of the G = len(g_ptr) - 1 groups."""
    n = g_ptr.shape[0] - 1
    M = R0s.shape[1]
    gain = np.empty(n)
    dP = np.zeros((n if grad else 0, M, M))
    dPsi1 = np.zeros((n_entries if grad else 0, M))
    _groups_blocks(n, nchunks, g_ptr, g_rows, g_d, g_pat, g_tg, g_yoff, g_width, Yc_flat, g_ysq,
                   pat_foff, pat_k, F_flat, pos, psi0, Psi1, Psi2n, R0s, R0Ts, Kinv,
                   beta, grad, gain, dP, dPsi1)
    return gain, dP, dPsi1


# ==========================================================================================
# the prepared problem
# ==========================================================================================
def _compress_pattern(CJ: np.ndarray):
    """(F, Qq) for the training columns CJ (M, d) of a pattern of d > M columns: thin QR
    CJ^T = Qq Rq (Qq (d, M) orthonormal columns), F = Rq^T (M, M), so that CJ = F Qq^T."""
    Qq, Rq = np.linalg.qr(CJ.T)
    return np.ascontiguousarray(Rq.T), Qq


def _compress_rows(YJ: np.ndarray, Qq: np.ndarray) -> np.ndarray:
    """Y_c = [YJ Qq, Lo] (|r|, M + e) with YJ = (YJ Qq) Qq^T + Yo, Yo orthogonal to Qq and
    Yo Yo^T = Lo Lo^T: then (F + V Y_c)(F + V Y_c)^T = (CJ + V YJ)(CJ + V YJ)^T for every V,
    the only way the group's data enter the bound (module docstring)."""
    Yp = YJ @ Qq
    Yo = YJ - Yp @ Qq.T
    w, U = np.linalg.eigh(Yo @ Yo.T)
    keep = w > max(float(w.max(initial=0.0)), 1e-300) * 1e-14
    return np.ascontiguousarray(np.hstack([Yp, U[:, keep] * np.sqrt(w[keep])]))


class TestBound:
    """The test bound of fixed test outputs as a function of q(X*), prepared once.

    stats : TrainingStats;  Ys (n*, D) raw outputs (NaN allowed where not observed);
    observed (n*, D) bool (None: the non-NaN entries);  batch (n*,) integer ids of the
    batches taken jointly (None: every row its own batch, i.e. independent points).
    ``batch_ids`` lists the batches in the order of the outputs (sorted ids).
    """

    __test__ = False  # not a pytest class

    def __init__(self, stats: TrainingStats, Ys, observed=None, batch=None):
        self.stats = stats
        Ys = np.array(Ys, dtype=np.float64, ndmin=2)
        n, D = Ys.shape
        if D != stats.D:
            raise ValueError(f"test outputs have {D} columns, the training data {stats.D}")
        observed = ~np.isnan(Ys) if observed is None else np.asarray(observed, dtype=bool)
        if observed.shape != Ys.shape:
            raise ValueError(f"observed must have the shape of the outputs {Ys.shape}, got {observed.shape}")
        if not np.all(np.isfinite(Ys[observed])):
            raise ValueError("observed test outputs must be finite")
        self.n = n
        self.observed = observed
        Yc = np.where(observed, Ys - stats.Y_mean, 0.0)
        if batch is None:
            self.independent = True
            self.batch_ids = np.arange(n)
            batch_index = np.arange(n)
        else:
            batch = np.asarray(batch)
            if batch.shape != (n,) or batch.dtype.kind not in "iu":
                raise ValueError(f"batch must hold one integer id per test row, shape ({n},)")
            self.independent = False
            self.batch_ids, batch_index = np.unique(batch, return_inverse=True)
        self._build(Yc, batch_index)

    # --- groups ------------------------------------------------------------------------------
    def _build(self, Yc: np.ndarray, batch_index: np.ndarray) -> None:
        st = self.stats
        M = st.M
        obs = self.observed
        pat_of: dict[bytes, int] = {}
        F_list, pat_k = [], []
        g_rows, g_ptr, g_d, g_pat, g_tg, g_batch, Y_list, g_ysq = [], [0], [], [], [], [], [], []

        pat_Q: list = []

        def pattern(J: np.ndarray) -> int:
            key = np.packbits(J).tobytes()
            if key not in pat_of:
                pat_of[key] = len(pat_k)
                CJ = st.C[:, J]
                if CJ.shape[1] > M:  # more columns than the rank: compress (_compress_*)
                    F, Qq = _compress_pattern(CJ)
                else:
                    F, Qq = np.ascontiguousarray(CJ), None
                F_list.append(F)
                pat_Q.append(Qq)
                pat_k.append(F.shape[1])
            return pat_of[key]

        def add_group(rows: np.ndarray, J: np.ndarray, b: int) -> None:
            """Rows observing the columns J; split by the training groups of the columns
            (one for complete training data)."""
            tgs = np.unique(st.col_group[J]) if st.n_groups > 1 else [0]
            for tg in tgs:
                Jg = J & (st.col_group == tg) if st.n_groups > 1 else J
                p = pattern(Jg)
                YJ = Yc[np.ix_(rows, np.flatnonzero(Jg))]
                g_rows.extend(rows.tolist())
                g_ptr.append(len(g_rows))
                g_d.append(int(Jg.sum()))
                g_pat.append(p)
                g_tg.append(int(tg))
                g_batch.append(b)
                Y_list.append(np.ascontiguousarray(YJ) if pat_Q[p] is None else _compress_rows(YJ, pat_Q[p]))
                g_ysq.append(float(np.sum(YJ * YJ)))

        if self.independent:
            for i in np.flatnonzero(obs.any(axis=1)):
                add_group(np.array([i]), obs[i], int(i))
        else:
            order = np.argsort(batch_index, kind="stable")
            bounds = np.searchsorted(batch_index[order], np.arange(len(self.batch_ids) + 1))
            for b in range(len(self.batch_ids)):
                rows = order[bounds[b]:bounds[b + 1]]
                sub = obs[rows]  # (|rows|, D)
                cols = np.flatnonzero(sub.any(axis=0))
                if cols.size == 0:
                    continue
                pats, inv = np.unique(sub[:, cols].T, axis=0, return_inverse=True)
                for u in range(pats.shape[0]):
                    J = np.zeros(st.D, dtype=bool)
                    J[cols[inv.ravel() == u]] = True
                    add_group(rows[pats[u]], J, b)

        self.g_ptr = np.asarray(g_ptr, dtype=np.int64)
        self.g_rows = np.asarray(g_rows, dtype=np.int64)
        self.g_d = np.asarray(g_d, dtype=np.int64)
        self.g_pat = np.asarray(g_pat, dtype=np.int64)
        self.g_tg = np.asarray(g_tg, dtype=np.int64)
        self.g_batch = np.asarray(g_batch, dtype=np.int64)
        self.g_ysq = np.asarray(g_ysq, dtype=np.float64)
        self.g_width = np.asarray([y.shape[1] for y in Y_list], dtype=np.int64)
        self.g_yoff = np.concatenate([[0], np.cumsum([y.size for y in Y_list])]).astype(np.int64)
        self.Yc_flat = np.concatenate([y.ravel() for y in Y_list]) if Y_list else np.zeros(0)
        self.pat_k = np.asarray(pat_k, dtype=np.int64)
        self.pat_foff = np.concatenate([[0], np.cumsum([M * k for k in pat_k])]).astype(np.int64)
        self.F_flat = (np.concatenate([np.ascontiguousarray(F).ravel() for F in F_list])
                       if F_list else np.zeros(0))
        # batch -> its groups, and the rows of every batch
        G = len(g_d)
        order = np.argsort(self.g_batch, kind="stable")
        self.b_groups = order
        self.b_gptr = np.searchsorted(self.g_batch[order], np.arange(len(self.batch_ids) + 1))
        self.n_groups = G
        # one group per row: independent rows, unless their outputs span several training
        # groups (a model fitted with missing values)
        self._single_row = self.independent and st.n_groups == 1
        self._row_group = np.full(self.n, -1, dtype=np.int64)
        if self._single_row:
            self._row_group[self.g_rows] = np.arange(G)

    # --- evaluation ----------------------------------------------------------------------------
    @blas_single_threaded
    def evaluate(self, mu_s, S_s, grad: bool = True, batches=None):
        """Delta of each selected batch (F_hat of the batch minus the training F_hat) and its
        gradients w.r.t. the means and variances of the batch's rows.

        mu_s, S_s : (n*, Q) for all test rows (only the rows of the selected batches are read).
        batches : indices into ``batch_ids`` to evaluate (None: all).
        Returns (gain (nb,), dmu (n*, Q), dS (n*, Q)); rows outside the selected batches get
        zero gradients (``grad=False``: None, None).
        """
        st = self.stats
        mu_s = np.asarray(mu_s, dtype=np.float64)
        S_s = np.asarray(S_s, dtype=np.float64)
        if mu_s.shape != (self.n, st.Q) or S_s.shape != (self.n, st.Q):
            raise ValueError(f"mu_s and S_s must have shape ({self.n}, {st.Q}), got "
                             f"{mu_s.shape} and {S_s.shape}")
        nb = len(self.batch_ids)
        bsel = np.arange(nb) if batches is None else np.asarray(batches, dtype=np.int64)
        gain, rows, gmu, gS = self._evaluate(mu_s, S_s, grad, bsel)
        if not grad:
            return gain, None, None
        dmu = np.zeros((self.n, st.Q))
        dS = np.zeros((self.n, st.Q))
        dmu[rows] = gmu
        dS[rows] = gS
        return gain, dmu, dS

    def _evaluate(self, mu_s, S_s, grad: bool, bsel: np.ndarray):
        """(gain (len(bsel),), rows, dmu (len(rows), Q), dS) for the batches bsel; the caller
        limits BLAS to one thread (this runs once per optimiser step)."""
        st = self.stats
        k = st.kernel
        if self._single_row:  # independent points: group g holds row g_rows[g] only
            gsel = self._row_group[bsel]
            gsel = gsel[gsel >= 0]
            entries = gsel
            lens = np.ones(gsel.size, dtype=np.int64)
        else:
            gsel = np.concatenate([self.b_groups[self.b_gptr[b]:self.b_gptr[b + 1]] for b in bsel]
                                  + [np.zeros(0, np.int64)])
            starts, ends = self.g_ptr[gsel], self.g_ptr[gsel + 1]
            lens = ends - starts
            entries = np.concatenate([np.arange(a, e) for a, e in zip(starts, ends)]
                                     + [np.zeros(0, np.int64)])
        erows = self.g_rows[entries]
        rows = erows if self._single_row else np.unique(erows)
        pos = np.full(self.n, -1, dtype=np.int64)
        pos[rows] = np.arange(rows.size)
        mu_r = np.ascontiguousarray(mu_s[rows])
        S_r = np.ascontiguousarray(S_s[rows])
        if rows.size:
            psi0, Psi1, Psi2n = k.psi_stats_n(mu_r, S_r, st.Z)
        else:
            psi0, Psi1, Psi2n = np.zeros(0), np.zeros((0, st.M)), np.zeros((0, st.M, st.M))
        l_ptr = np.zeros(gsel.size + 1, dtype=np.int64)
        np.cumsum(lens, out=l_ptr[1:])
        gain_g, dP, dPsi1_e = _groups(
            gsel.size, l_ptr, erows, self.g_d[gsel],
            self.g_pat[gsel], self.g_tg[gsel], self.g_yoff[gsel], self.g_width[gsel], self.Yc_flat,
            self.g_ysq[gsel], self.pat_foff, self.pat_k, self.F_flat, pos, psi0, Psi1, Psi2n,
            st.R0s, st.R0Ts, st.Kinv, st.beta, bool(grad), int(entries.size))
        # sums per selected batch
        bpos = np.full(len(self.batch_ids), -1, dtype=np.int64)
        bpos[bsel] = np.arange(bsel.size)
        gain = np.bincount(bpos[self.g_batch[gsel]], weights=gain_g, minlength=bsel.size)
        if not grad or rows.size == 0:
            z = np.zeros((rows.size, st.Q))
            return gain, rows, z, z.copy()
        local = pos[erows]  # local row of every entry
        entry_group = np.repeat(np.arange(gsel.size), lens)
        if self._single_row:  # one group per row, in row order
            dPsi2n, dPsi1 = dP, dPsi1_e
        else:
            dPsi2n = np.zeros((rows.size, st.M, st.M))
            dPsi1 = np.zeros((rows.size, st.M))
            np.add.at(dPsi1, local, dPsi1_e)
            for e in range(local.size):
                dPsi2n[local[e]] += dP[entry_group[e]]
        dpsi0 = -0.5 * st.beta * np.bincount(local, weights=self.g_d[gsel][entry_group],
                                             minlength=rows.size)
        gmu, gS = k.psi_gradients_n(dpsi0, dPsi1, dPsi2n, mu_r, S_r, st.Z)
        return gain, rows, gmu, gS

    def evaluate_rows(self, mu_r, S_r, rows: np.ndarray, grad: bool = True):
        """Independent points only (``batch=None``), every row of ``rows`` observing something:
        (gain (k,), dmu (k, Q), dS (k, Q)) at mu_r, S_r (k, Q) for those rows. The lean path
        of the optimiser (no scatter; the caller limits BLAS to one thread)."""
        st = self.stats
        k = st.kernel
        if not self._single_row:  # several groups per row: the general path
            return self._evaluate_rows_grouped(mu_r, S_r, rows, grad)
        g = self._row_group[rows]
        n = g.size
        ar = self._arange(n + 1)
        psi0, Psi1, Psi2n = k.psi_stats_n(mu_r, S_r, st.Z)
        gain, dP, dPsi1 = _groups(
            n, ar, ar[:n], self.g_d[g], self.g_pat[g], self.g_tg[g], self.g_yoff[g], self.g_width[g],
            self.Yc_flat, self.g_ysq[g], self.pat_foff, self.pat_k, self.F_flat, ar[:n], psi0,
            Psi1, Psi2n, st.R0s, st.R0Ts, st.Kinv, st.beta, bool(grad), n)
        if not grad:
            return gain, None, None
        dpsi0 = (-0.5 * st.beta) * self.g_d[g]
        dmu, dS = k.psi_gradients_n(dpsi0, dPsi1, dP, mu_r, S_r, st.Z)
        return gain, dmu, dS

    def _evaluate_rows_grouped(self, mu_r, S_r, rows: np.ndarray, grad: bool):
        """``evaluate_rows`` where a row has several groups (its batch is the row itself)."""
        Q = self.stats.Q
        mu = np.zeros((self.n, Q))
        S = np.ones((self.n, Q))
        mu[rows], S[rows] = mu_r, S_r
        gain, done, gmu, gS = self._evaluate(mu, S, grad, np.asarray(rows, dtype=np.int64))
        if not grad:
            return gain, None, None
        at = np.searchsorted(done, rows)  # done: the sorted rows that observe something
        return gain, gmu[at], gS[at]

    def _arange(self, n: int) -> np.ndarray:
        if getattr(self, "_ar", np.zeros(0)).size < n:
            self._ar = np.arange(max(n, self.n + 1), dtype=np.int64)
        return self._ar[:n]


def _groups(n_groups: int, *args):
    """The group kernel over ``n_groups`` groups, on as many threads as ``_numba_config``
    gives them (see ``kernels._util.run_blocks``)."""
    return run_blocks(groups, n_groups, *args)


def test_bound(stats: TrainingStats, mu_s, S_s, Ys, observed=None, batch=None, grad: bool = True):
    """F_hat (no KL) of each batch of test rows taken jointly with the training data
    (eq:predictive1 / app:partialtestBound), summed over output dims j using, for each j, the
    training rows plus the test rows of the batch that observe j.

    mu_s, S_s (n*, Q); Ys (n*, D) raw outputs (NaN allowed where not observed);
    observed (n*, D) bool (None: the non-NaN entries); batch (n*,) int ids, None = every row
    its own batch (independent points). Returns F_hat per batch (in the order of the sorted
    batch ids) and dF_hat/dmu_s, dF_hat/dS_s (n*, Q) (None, None without ``grad``).
    For repeated evaluations with the same outputs use ``TestBound`` (prepared once).
    """
    tb = TestBound(stats, Ys, observed, batch)
    gain, dmu, dS = tb.evaluate(mu_s, S_s, grad=grad)
    return stats.F_hat + gain, dmu, dS


test_bound.__test__ = False  # not a pytest test


# ==========================================================================================
# inference of q(x*) for independent test points (static prior)
# ==========================================================================================
@dataclass
class LatentFit:
    """q(X*) inferred for independent test rows.

    mu, S : (n*, Q);  gain (n*,) = F_hat(q(X), q(x*_i)) - F_hat(q(X));  kl (n*,) the
    KL(q(x*_i) || N(0, I));  log_density = gain - kl, the estimate of log p(y*_i,O | Y)
    (eq:predictive1 over the observed dims);  init_rows (n*,) the training row whose q(x_n)
    started the optimisation;  iterations, status (per row, see ``batch_lbfgs``).
    """

    mu: np.ndarray
    S: np.ndarray
    gain: np.ndarray
    kl: np.ndarray
    log_density: np.ndarray
    init_rows: np.ndarray
    iterations: np.ndarray
    status: np.ndarray
    n_evals: int

    @property
    def converged(self) -> np.ndarray:
        return np.isin(self.status, ("gtol", "ftol", "xtol"))


def kl_rows(mu: np.ndarray, S: np.ndarray):
    """Per-row KL(N(mu_i, diag S_i) || N(0, I)) (KLstatic) and its gradients (n, Q)."""
    kl = 0.5 * np.sum(mu * mu + S - np.log(S) - 1.0, axis=1)
    return kl, mu, 0.5 * (1.0 - 1.0 / S)


@njit(**_SERIAL)
def _natural(X, idx, mu0, scale, lower):
    """(mu, S, dS/ds), each (k, Q), of rows idx from the optimiser's coordinates X = [z, s]
    (k, 2Q) of ``infer_latent``: mu = mu0 + scale z, S = softplus(s) + lower (the stable form
    of ``transforms.Softplus``), dS/ds = sigmoid(s). One compiled call per evaluation: with
    a few test rows, NumPy's per-call overhead would cost as much as the bound."""
    k = X.shape[0]
    Q = mu0.shape[1]
    mu = np.empty((k, Q))
    S = np.empty((k, Q))
    dSds = np.empty((k, Q))
    for j in range(k):
        i = idx[j]
        for q in range(Q):
            mu[j, q] = mu0[i, q] + scale[i, q] * X[j, q]
            s = X[j, Q + q]
            S[j, q] = max(s, 0.0) + math.log1p(math.exp(-abs(s))) + lower
            dSds[j, q] = 0.5 * (1.0 + math.tanh(0.5 * s))
    return mu, S, dSds


@njit(**_SERIAL)
def _objective_rows(idx, mu, S, dSds, scale, gain, dmu, dS):
    """f = KL(q(x*_j) || N(0, I)) - gain_j (KLstatic, as ``kl_rows``) per row j and its
    gradient (k, 2Q) w.r.t. the coordinates [z, s] of ``_natural``."""
    k, Q = mu.shape
    f = np.empty(k)
    G = np.empty((k, 2 * Q))
    for j in range(k):
        kl = 0.0
        for q in range(Q):
            m = mu[j, q]
            v = S[j, q]
            kl += 0.5 * (m * m + v - math.log(v) - 1.0)
            G[j, q] = (m - dmu[j, q]) * scale[idx[j], q]
            G[j, Q + q] = (0.5 * (1.0 - 1.0 / v) - dS[j, q]) * dSds[j, q]
        f[j] = kl - gain[j]
    return f, G


def nearest_rows(stats: TrainingStats, Ys: np.ndarray, observed: np.ndarray, k: int = 1,
                 chunk: int = 2048) -> np.ndarray:
    """(n*, k) indices of the training rows nearest to each test row in its observed dims
    (squared Euclidean distance over those dims only), nearest first. Training data with
    missing entries: the mean squared difference over the dims both observe (a training row
    sharing none with the test row comes last)."""
    Yc = stats.Yc
    k = max(1, min(int(k), Yc.shape[0]))
    Y2 = (Yc * Yc).T  # (D, N)
    T = None if stats.observed is None else stats.observed.T.astype(np.float64)  # (D, N)
    out = np.empty((Ys.shape[0], k), dtype=np.int64)
    for a in range(0, Ys.shape[0], chunk):
        o = observed[a:a + chunk]
        yc = np.where(o, Ys[a:a + chunk] - stats.Y_mean, 0.0)
        if T is None:
            dist = o.astype(np.float64) @ Y2 - 2.0 * yc @ Yc.T  # + |y*_O|^2, the same for a row
        else:  # Yc is 0 where the training row misses a dim
            both = o.astype(np.float64) @ T
            dist = ((yc * yc) @ T + o.astype(np.float64) @ Y2 - 2.0 * yc @ Yc.T) / np.maximum(both, 1.0)
            dist[both == 0] = np.inf
        if k == 1:
            out[a:a + chunk, 0] = np.argmin(dist, axis=1)
        else:
            part = np.argpartition(dist, k - 1, axis=1)[:, :k]
            order = np.argsort(np.take_along_axis(dist, part, axis=1), axis=1)
            out[a:a + chunk] = np.take_along_axis(part, order, axis=1)
    return out


#: rows optimised in one pass of ``infer_latent``: Psi2* and dF/dPsi2* take 16 M^2 bytes per
#: row (100 MB at M = 50 for 3000 rows); rows are independent, so chunks change nothing
CHUNK_BYTES = 100e6


def infer_latent(stats: TrainingStats, Ys, observed=None, n_init: int = 1, max_iters: int = 200,
                 gtol: float = 1e-3, ftol: float = 1e-9, xtol: float = 1e-7,
                 precondition: bool = True) -> LatentFit:
    """q(x*_i) = N(mu_i, diag S_i) for independent test rows: maximises, for every row,
    F_hat(q(X), q(x*_i)) - KL(q(x*_i) || N(0, I)) with the model and q(X) fixed
    (eq:predictive1; the missing entries of a row simply do not enter, app:partialtestBound).

    Ys (n*, D), observed (n*, D) bool (None: non-NaN entries; every row must observe
    something). All rows are optimised together (``batch_lbfgs``; in chunks of
    ``CHUNK_BYTES`` of per-row statistics), each from the q(x_n) of the best of its
    ``n_init`` nearest training rows in the observed dims (the one with the highest
    objective). Parameters: S through the model's softplus with a floor (log-like for small
    S); mu = mu0 + sqrt(S0) z with (mu0, S0) the starting q(x_n), so that z is on the scale
    of the posterior spread in every latent dimension (``precondition``): without it,
    dimensions the ARD weights switch on and off differ in curvature by orders of magnitude
    and L-BFGS needs several times more iterations. Stopping tests (per row, in these
    units): ``gtol`` on the gradient, ``ftol`` relative on the objective, ``xtol`` on the step.
    """
    Ys = np.array(Ys, dtype=np.float64, ndmin=2)
    observed = ~np.isnan(Ys) if observed is None else np.asarray(observed, dtype=bool)
    Ys = np.where(observed, Ys, 0.0)
    empty = np.flatnonzero(~observed.any(axis=1))
    if empty.size:
        raise ValueError(f"test rows {empty[:10].tolist()} observe nothing")
    n = Ys.shape[0]
    chunk = max(64, int(CHUNK_BYTES / (16.0 * stats.M ** 2)))
    fits = []
    with single_threaded_blas(), cfg.thread_limit(n):  # few rows: Numba threads set once
        for a in range(0, n, chunk):
            fits.append(_infer(stats, Ys[a:a + chunk], observed[a:a + chunk], n_init, max_iters,
                               gtol, ftol, xtol, precondition))
    if len(fits) == 1:
        return fits[0]
    cat = lambda name: np.concatenate([getattr(f, name) for f in fits])  # noqa: E731
    return LatentFit(mu=cat("mu"), S=cat("S"), gain=cat("gain"), kl=cat("kl"),
                     log_density=cat("log_density"), init_rows=cat("init_rows"),
                     iterations=cat("iterations"), status=cat("status"),
                     n_evals=sum(f.n_evals for f in fits))


def _infer(stats, Ys, observed, n_init, max_iters, gtol, ftol, xtol, precondition) -> LatentFit:
    """``infer_latent`` for one chunk of rows (BLAS limited to one thread by the caller)."""
    tb = TestBound(stats, Ys, observed)
    return optimise_rows(tb, stats.mu, stats.S, nearest_rows(stats, Ys, observed, k=n_init), max_iters, gtol,
                         ftol, xtol, precondition)


def optimise_rows(tb, mu_train: np.ndarray, S_train: np.ndarray, cand: np.ndarray, max_iters: int,
                  gtol: float, ftol: float, xtol: float, precondition: bool) -> LatentFit:
    """``infer_latent``'s optimisation of independent rows, for any bound ``tb`` with
    ``evaluate_rows(mu, S, rows, grad) -> (gain, dmu, dS)`` (a ``TestBound``, or the sum of
    several views' for ``MRD``): each row starts from the best (by its objective) of its
    candidate training rows ``cand`` (n*, k) whose q(x_n) = N(mu_train, S_train) (N, Q)."""
    from .batch_lbfgs import minimize_batch
    from .transforms import POSITIVE_FLOOR as tr

    n, Q = cand.shape[0], mu_train.shape[1]

    def objective_natural(mu, S, idx, grad=True):
        """-(gain - KL) of rows idx and its gradients w.r.t. mu, S (rows idx)."""
        gain, dmu, dS = tb.evaluate_rows(mu, S, idx, grad)
        kl, dkl_mu, dkl_S = kl_rows(mu, S)
        if not grad:
            return kl - gain, None, None
        return kl - gain, dkl_mu - dmu, dkl_S - dS

    # start: the best of the candidate training rows' q(x_n)
    rows_all = np.arange(n)
    init_rows = cand[:, 0].copy()
    n_evals = 0
    if cand.shape[1] > 1:
        best = np.full(n, np.inf)
        for c in range(cand.shape[1]):
            fc, _, _ = objective_natural(mu_train[cand[:, c]], S_train[cand[:, c]], rows_all, grad=False)
            n_evals += n
            better = fc < best
            best[better] = fc[better]
            init_rows[better] = cand[better, c]
    mu0 = np.ascontiguousarray(mu_train[init_rows])
    S0 = np.maximum(S_train[init_rows], 2e-10)
    scale = np.sqrt(S0) if precondition else np.ones((n, Q))

    def objective(X, idx):
        mu, S, dSds = _natural(X, idx, mu0, scale, tr.lower)
        gain, dmu, dS = tb.evaluate_rows(mu, S, idx)
        return _objective_rows(idx, mu, S, dSds, scale, gain, dmu, dS)

    x0 = np.hstack([np.zeros((n, Q)), tr.inverse(S0)])
    res = minimize_batch(objective, x0, max_iters=max_iters, gtol=gtol, ftol=ftol, xtol=xtol)
    mu = mu0 + scale * res.x[:, :Q]
    S = tr.forward(res.x[:, Q:])
    kl, _, _ = kl_rows(mu, S)
    gain = kl - res.f  # res.f: the objective at res.x
    return LatentFit(mu=mu, S=S, gain=gain, kl=kl, log_density=gain - kl, init_rows=init_rows,
                     iterations=res.iterations, status=res.status, n_evals=n_evals + res.n_evals)
