"""The dynamical prior p(X | t) = prod_q N(x_q | 0, Kt) and its reparametrised q(X).

Paper section "The Dynamical Variational GP-LVM for Sequence Data". For every latent
dimension q, q(x_q) = N(mu_q, S_q) with (SFixedPointQ)

    S_q = (Kt^{-1} + Lambda_q)^{-1},   mu_q = Kt mu_bar_q,   Lambda_q = diag(lambda_q) > 0,

so the free parameters are mu_bar, lambda (N, Q). Everything goes through the stable
matrix A_q = I + D Kt D >= I, D = Lambda_q^{1/2} (no jitter, Kt never inverted), and its
inverse Abar_q = A_q^{-1} from the Cholesky factor:

    B_q = D Abar D = (Kt + Lambda^{-1})^{-1},   S_q = Kt - Kt B_q Kt = D^{-1} (I - Abar) D^{-1},
    Kt^{-1} S_q = I - B_q Kt = D Abar D^{-1} =: P_q,
    KL_q = 1/2 [tr Abar + mu_bar^T Kt mu_bar + log|A| - n]           (KLasSummationOverQ)

(tr(Kt^{-1} S) = tr((I + Lambda Kt)^{-1}) = tr Abar;  log|Kt| - log|S| = log|A|;
mu^T Kt^{-1} mu = mu_bar^T Kt mu_bar). With g_mu = dF_hat/dmu_q, g = dF_hat/d diag(S_q)
and F = F_hat - KL (derivatives appendix, in this notation):

    dF/dmu_bar_q = Kt (g_mu - mu_bar_q)
    dF/dlambda_q = -diag(S_q diag(g) S_q) - 1/2 diag(S_q B_q Kt)
                 = -(1/lambda_i) sum_j (I - Abar)_ij^2 (g_j / lambda_j + 1/2)
    dF/dKt       = sum_q [P_q diag(g) P_q^T - 1/2 B_q Kt B_q + g_mu mu_bar_q^T - 1/2 mu_bar_q mu_bar_q^T]
                 = sum_q [D Abar diag(g/lambda + 1/2) Abar D - 1/2 D Abar D] + (mean terms)

so one block costs a Cholesky and its inverse per q (n^3 / 3 + 2 n^3 / 3 flops) and one
symmetric rank-(Q n) update for dF/dKt (syrk, n^3 per q); the diagonal of S, the KL and
dF/dlambda are O(n^2) (``_dynamical_numba``). For tiny lambda_i (data that says nothing
about frame i) S_ii = (1 - Abar_ii) / lambda_i loses relative precision ~1e-16 /
(lambda_i Kt_ii); lambda is kept above LAMBDA_FLOOR. dF/dKt is mapped onto the time
kernel's parameters by the kernel. Independent sequences make Kt block-diagonal: each block
is handled on its own, so the cost is sum_s n_s^3 Q, not N^3 Q, and blocks (or, for one
long sequence, ranges of q) run on a small thread pool. ``GaussianBlocks`` also serves
test-time inference, where the prior of new frames is a fixed Gaussian N(m, C) (mean
offset m, covariance C).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np
from scipy.linalg import solve_triangular

from .._restore import is_restoring
from ..linalg import chol_solve, jittered_cholesky
from ..params import Block
from ..transforms import IDENTITY, POSITIVE, Softplus
from ..time_kernels import TimeKernel, make_time_kernel
from . import _dynamical_numba as _nb
from .base import QX, LatentPrior


#: lambda's lower bound (softplus offset): keeps S = (1 - Abar_ii) / lambda_i accurate
LAMBDA_FLOOR = 1e-8
LAMBDA_POSITIVE = Softplus(lower=LAMBDA_FLOOR)

#: median variance of q(X) to start from (vargplvm's initCovarMedian)
INIT_S_MEDIAN = 0.18


def _block_forward(K: np.ndarray, mb: np.ndarray, lb: np.ndarray):
    """One block: K (n, n), mu_bar and lambda (n, Q). Returns (K mu_bar (n, Q), diag S (Q, n),
    kl, cache).

    With D = Lambda^{1/2} and Abar = A^{-1} (from the Cholesky factor: LAPACK potrf, then
    potri, in ``_dynamical_numba.block_forward``; no general inverse),
    S = (K^{-1} + Lambda)^{-1} = D^{-1} (I - Abar) D^{-1}, so diag S needs no product with K:
    S_ii = (1 - Abar_ii) / lambda_i."""
    n, Q = mb.shape
    lam = np.ascontiguousarray(lb.T)  # (Q, n)
    d = np.sqrt(lam)
    Abar = np.empty((Q, n, n))
    logdetA = np.empty(Q)
    diagAbar = np.empty((Q, n))
    info = _nb.block_forward(np.ascontiguousarray(K), d, Abar, logdetA, diagAbar)
    if info != 0:
        raise np.linalg.LinAlgError(f"Cholesky factorisation or inverse of I + D Kt D failed "
                                    f"(LAPACK info {info})")
    Sd = (1.0 - diagAbar) / lam
    Kmb = K @ mb
    kl = 0.5 * float(diagAbar.sum() + np.sum(mb * Kmb) + logdetA.sum() - n * Q)
    return Kmb, Sd, kl, (d, lam, Abar)


def _block_backward(K, mb, lb, cache, gmu, gS):
    """Gradients of F_hat - KL for one block given gmu, gS = dF_hat/dmu, dF_hat/d diag S
    (n, Q). Returns (dmu_bar (n, Q), dlambda (n, Q), dK (n, n)).

    In terms of Abar (module docstring: P = I - B K = D Abar D^{-1}, S G S and S B K have
    diagonals (1/lambda_i) sum_j (I - Abar)_ij^2 (g_j/lambda_j) and (1/lambda_i) sum_j
    (I - Abar)_ij^2, B K B = D (Abar - Abar^2) D), with h = g / lambda + 1/2:

        dF/dlambda_i = -(1/lambda_i) sum_j (I - Abar)_ij^2 h_j
        dF/dK        = sum_q D Abar diag(h) Abar D - 1/2 D Abar D + g_mu mu_bar^T - 1/2 mu_bar mu_bar^T

    The first sum is R+^T R+ - R-^T R- with the rows sqrt|h_j| (D Abar)[:, j] split by the
    sign of h: two BLAS syrk calls of n^2 Q n multiply-adds in all
    (``_dynamical_numba.block_backward``); the rest is O(n^2 Q)."""
    d, lam, Abar = cache
    Q, n, _ = Abar.shape
    mb = np.ascontiguousarray(mb)
    h = np.ascontiguousarray(gS.T) / lam + 0.5
    dmb = np.empty((n, Q))
    dlam = np.empty((Q, n))
    dK = np.empty((n, n))
    _nb.block_backward(np.ascontiguousarray(K), mb, np.ascontiguousarray(gmu), Abar, d, lam, h,
                       dmb, dlam, dK, np.empty((Q * n, n)))
    return dmb, dlam.T, dK


class GaussianBlocks:
    """q(X) under a block-diagonal Gaussian prior prod_q N(x_q | m_q, K) with the
    (mu_bar, lambda) parametrisation: mu = m + K mu_bar, S = (K^{-1} + Lambda)^{-1}.

    index : list of row-index arrays, one per block (together a partition of 0..N-1).
    """

    def __init__(self, index: list[np.ndarray]):
        self.index = [np.asarray(ix, dtype=np.intp) for ix in index]
        self.N = int(sum(len(ix) for ix in self.index))
        rows = np.concatenate(self.index) if self.index else np.zeros(0, dtype=np.intp)
        if not np.array_equal(np.sort(rows), np.arange(self.N)):
            raise ValueError("the blocks' row indices must partition 0..N-1 (each row in exactly one block)")

    def q(self, Ks: list[np.ndarray], mu_bar: np.ndarray, lam: np.ndarray,
          m: np.ndarray | None = None, grad: bool = True):
        """Marginals mu, S (N, Q), the KL and (with ``grad``) a chain function
        (gmu, gS) -> (dmu_bar, dlambda, [dK per block])."""
        Q = mu_bar.shape[1]
        mu = np.empty_like(mu_bar)
        Sd = np.empty_like(mu_bar)
        parallel = sum(K.shape[0] ** 3 for K in Ks) * Q > _PARALLEL_WORK
        jobs = _jobs([K.shape[0] for K in Ks], Q, _workers() if parallel else 1)
        fwd = _map(lambda j: _block_forward(Ks[j[0]], mu_bar[self.index[j[0]], j[1]:j[2]],
                                            lam[self.index[j[0]], j[1]:j[2]]), jobs, parallel)
        kl = 0.0
        for (b, q0, q1), (Kmb, S, klb, _) in zip(jobs, fwd):
            mu[self.index[b], q0:q1] = Kmb
            Sd[self.index[b], q0:q1] = S.T
            kl += klb
        if m is not None:
            mu = mu + m
        if not grad:
            return mu, np.maximum(Sd, 1e-300), kl, None

        def chain(gmu, gS):
            dmb = np.empty_like(mu_bar)
            dlam = np.empty_like(lam)

            def back(i):
                b, q0, q1 = jobs[i]
                ix = self.index[b]
                return _block_backward(Ks[b], mu_bar[ix, q0:q1], lam[ix, q0:q1], fwd[i][3],
                                       gmu[ix, q0:q1], gS[ix, q0:q1])

            dKs = [0.0] * len(Ks)
            for (b, q0, q1), (db, dl, dK) in zip(jobs, _map(back, range(len(jobs)), parallel)):
                ix = self.index[b]
                dmb[ix, q0:q1], dlam[ix, q0:q1] = db, dl
                dKs[b] = dKs[b] + dK
            return dmb, dlam, dKs

        return mu, np.maximum(Sd, 1e-300), kl, chain


#: below this many multiply-adds (sum over blocks of n^3 Q) the blocks run in this thread
_PARALLEL_WORK = 2e6
_pool: ThreadPoolExecutor | None = None


def _workers() -> int:
    """Threads of the prior's pool: one per Numba thread."""
    return numba.get_num_threads()


def _jobs(sizes: list[int], Q: int, workers: int) -> list[tuple[int, int, int]]:
    """Units of work (block, q0, q1), largest first (balances the pool). The latent
    dimensions of a block are independent (the KL and q(X) factorise over q, dK sums over
    q), so with fewer blocks than 2 x ``workers`` (one long video sequence) each block is
    split into ``workers`` ranges of q as well."""
    split = workers if 1 < workers and len(sizes) < 2 * workers else 1
    edges = np.linspace(0, Q, min(split, Q) + 1).round().astype(int)
    jobs = [(b, int(q0), int(q1)) for b in range(len(sizes))
            for q0, q1 in zip(edges[:-1], edges[1:])]
    return sorted(jobs, key=lambda j: -sizes[j[0]] ** 3 * (j[2] - j[1]))


def _map(fn, items, parallel: bool) -> list:
    """[fn(x) for x in items], spread over a small thread pool when ``parallel`` and there
    is more than one item and more than one worker (the compiled block passes and NumPy's
    BLAS release the GIL, ``_dynamical_numba``)."""
    global _pool
    items = list(items)
    workers = _workers()
    if parallel and workers > 1 and len(items) > 1:
        if _pool is None or _pool._max_workers != workers:
            _pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="bgplvm-prior")
        return list(_pool.map(fn, items))
    return [fn(x) for x in items]


def sequence_index(sequences: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    """Ids in order of first appearance and the rows of each id."""
    ids, first = np.unique(sequences, return_index=True)
    ids = ids[np.argsort(first)]
    return ids, [np.flatnonzero(sequences == s) for s in ids]


def sequence_number(sequence_ids: np.ndarray, sequence) -> int:
    """Position of ``sequence`` in ``sequence_ids`` (``sequence_index``'s order); an
    unknown id is refused, naming the model's."""
    hit = np.flatnonzero(sequence_ids == sequence)
    if hit.size == 0:
        raise ValueError(f"unknown sequence {sequence!r}; the model's sequences are {sequence_ids.tolist()[:20]}")
    return int(hit[0])


class DynamicalPrior(LatentPrior):
    """p(X | t) = prod_q N(x_q | 0, Kt) with Kt block-diagonal over independent sequences.

    t : (N,) time stamps; sequences : (N,) sequence ids (rows of one id in time order);
    time_kernel : a ``TimeKernel`` or its name. Free parameters: "mu_bar", "lambda" (N, Q)
    and the time kernel's "time_kernel.<name>" (learned with everything else).
    """

    kind = "dynamical"
    row_blocks = ("mu_bar", "lambda")
    #: how p(X | t) is computed (``StateSpacePrior``: "state_space")
    form = "dense"

    def __init__(self, t: np.ndarray, sequences: np.ndarray, Q: int, time_kernel="matern32"):
        self.t = np.asarray(t, dtype=np.float64)
        self.sequences = np.asarray(sequences)
        self.N, self.Q = self.t.shape[0], int(Q)
        self.time_kernel: TimeKernel = make_time_kernel(time_kernel)
        self.sequence_ids, self._index = sequence_index(self.sequences)
        self.blocks_ = GaussianBlocks(self._index)

    # --- interface -----------------------------------------------------------------------
    def blocks(self):
        N, Q = self.N, self.Q
        return ([Block("mu_bar", (N, Q), IDENTITY), Block("lambda", (N, Q), LAMBDA_POSITIVE)]
                + [Block("time_kernel." + k, (), POSITIVE) for k in self.time_kernel.params])

    def time_values(self) -> dict:
        return {"time_kernel." + k: v for k, v in self.time_kernel.params.items()}

    def sync(self, values: dict) -> None:
        self.time_kernel.set_params(**{k[12:]: v for k, v in values.items() if k.startswith("time_kernel.")})

    def Ks(self) -> list[np.ndarray]:
        return [self.time_kernel.K(self.t[ix]) for ix in self._index]

    def initial_values(self, mu0, S0):
        """Start as the paper's code does: mu = Kt mu_bar reproduces mu0 (the PCA means, up
        to a ridge of 1e-3 of the prior variance: mu_bar = (Kt + r I)^{-1} mu0, by Cholesky),
        and one constant lambda chosen so that the median of S is ``INIT_S_MEDIAN``
        (vargplvm's calibration; S0 is not used: S is fixed by Kt and lambda). A model being
        loaded gets placeholders (its saved values replace them)."""
        if is_restoring():
            return {"mu_bar": np.zeros_like(mu0), "lambda": np.ones_like(mu0), **self.time_values()}
        mu_bar = np.empty_like(mu0)
        Ks = self.Ks()
        for ix, K in zip(self._index, Ks):
            r = 1e-3 * float(np.mean(np.diag(K)))
            L = jittered_cholesky(K, r, what="Kt + ridge (initial mu_bar)")
            mu_bar[ix] = chol_solve(L, mu0[ix])
        return {"mu_bar": mu_bar, "lambda": np.full_like(mu0, self._calibrate_lambda(Ks, mu_bar)),
                **self.time_values()}

    def values_from_q(self, mu: np.ndarray, S: np.ndarray) -> dict:
        """(mu_bar, lambda) (N, Q) whose q(X) is close to a given N(mu, diag S) (e.g. a static
        model's): mu = Kt mu_bar exactly up to a ridge of 1e-6 of the prior variance, and
        lambda_nq = 1/S_nq - 1/Kt_nn (floored), which gives S where Kt^-1 is nearly diagonal
        and a smaller S where the time prior couples the frames (the fit adjusts it); lambda
        >= 1e-3, where S > Kt_nn has no such lambda."""
        mu_bar = np.empty_like(mu)
        lam = np.empty_like(mu)
        for ix, K in zip(self._index, self.Ks()):
            L = jittered_cholesky(K, 1e-6 * float(np.mean(np.diag(K))), what="Kt + ridge")
            mu_bar[ix] = chol_solve(L, mu[ix])
            lam[ix] = 1.0 / S[ix] - 1.0 / np.diag(K)[:, None]
        return {"mu_bar": mu_bar, "lambda": np.maximum(lam, 1e-3)}

    def _calibrate_lambda(self, Ks, mu_bar) -> float:
        """The constant lambda whose q(X) has median variance INIT_S_MEDIAN (bisection on
        log lambda; the median decreases as lambda grows). Uses the longest blocks only."""
        order = sorted(range(len(Ks)), key=lambda b: -Ks[b].shape[0])[:4]
        off = np.cumsum([0] + [Ks[b].shape[0] for b in order])
        sub = GaussianBlocks([np.arange(off[i], off[i + 1]) for i in range(len(order))])
        subK = [Ks[b] for b in order]
        mb = np.concatenate([mu_bar[self._index[b]][:, :1] for b in order])
        lo, hi = -9.0, 9.0  # log lambda
        for _ in range(30):
            mid = 0.5 * (lo + hi)
            _, S, _, _ = sub.q(subK, mb, np.full_like(mb, np.exp(mid)), grad=False)
            lo, hi = (mid, hi) if np.median(S) > INIT_S_MEDIAN else (lo, mid)
        return float(np.exp(0.5 * (lo + hi)))

    def q(self, values, grad=True):
        self.sync(values)
        mu, S, kl, chain = self.blocks_.q(self.Ks(), values["mu_bar"], values["lambda"], grad=grad)
        if not grad:
            return QX(mu=mu, S=S, kl=kl, chain=None)

        def full_chain(gmu, gS):
            dmb, dlam, dKs = chain(gmu, gS)
            out = {"mu_bar": dmb, "lambda": dlam}
            for k in self.time_kernel.params:
                out["time_kernel." + k] = 0.0
            for ix, dK in zip(self._index, dKs):
                for k, v in self.time_kernel.grad(self.t[ix], dK).items():
                    out["time_kernel." + k] = out["time_kernel." + k] + v
            return out

        return QX(mu=mu, S=S, kl=kl, chain=full_chain)

    # --- forecasting (qxstar) ------------------------------------------------------------------
    def rows_of(self, sequence) -> np.ndarray:
        return self._index[sequence_number(self.sequence_ids, sequence)]

    def latent_at(self, values, t_new: np.ndarray, sequence) -> tuple[np.ndarray, np.ndarray]:
        """q(X*) at times t_new of a training sequence from the GP conditional (qxstar):
        mu* = K_*n mu_bar,  var(x*_q) = k_** - K_*n (Kt + Lambda_q^{-1})^{-1} K_n*.
        A time equal to a training time is that frame: K_*n includes the time kernel's
        white part there, so q(X*) is the frame's q(x_n). ``sequence`` None: a new
        sequence, q(X*) is the prior N(0, k_**)."""
        self.sync(values)
        tk = self.time_kernel
        kss = tk.Kdiag(t_new)
        if sequence is None:
            n = t_new.shape[0]
            return np.zeros((n, self.Q)), np.repeat(kss[:, None], self.Q, axis=1)
        ix = self.rows_of(sequence)
        Ksn = tk.K(t_new, self.t[ix])  # (n*, n)
        same = t_new[:, None] == self.t[ix][None, :]
        if same.any():
            Ksn = Ksn + same * tk.white_diag(t_new)[:, None]
        K = tk.K(self.t[ix])
        mu = Ksn @ values["mu_bar"][ix]
        var = np.empty_like(mu)
        for q in range(self.Q):
            sl = np.sqrt(values["lambda"][ix, q])
            L = np.linalg.cholesky(np.eye(len(ix)) + sl[:, None] * K * sl[None, :])
            W = solve_triangular(L, sl[:, None] * Ksn.T, lower=True, check_finite=False)  # (n, n*)
            var[:, q] = kss - np.sum(W * W, 0)
        return mu, np.maximum(var, 1e-12)

    # --- files -----------------------------------------------------------------------------
    def spec(self):
        return {"kind": self.kind, "time_kernel": self.time_kernel.spec, "time_prior": self.form}

    def arrays(self):
        return {"t": self.t, "sequences": self.sequences}
