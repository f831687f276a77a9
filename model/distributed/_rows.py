"""The worker's side of a distributed model: one block of rows and its q(X) parameters.

A ``RowBlock`` is a Dask actor living on one worker. It holds its rows of Y (centred once
the driver knows the column means), the latent prior over these rows (static; dynamical
over whole sequences), the unconstrained values of the prior's row blocks (mu, S; or
mu_bar, lambda) and the optimiser's vectors over them (``vlbfgs.Part``). The prior's own
parameters (a time kernel's) are global: the driver sends their values with each
evaluation and sums the blocks' gradients of them. Per evaluation of the bound it sends the driver its
sums (``bound.DataSums``: psi0, Psi1^T Yc, Psi2, and its KL term) and gets back what its
rows' gradients need (``bound.SumsGrads``); nothing of size n leaves the worker.
"""

from __future__ import annotations

import numpy as np

from .._threads import single_threaded_blas
from ..params import ParamLayout
from .outputs import BlockOutputs
from .vlbfgs import Part


def _quiet():
    """A trial point far out (a step of the line search) may overflow: the driver refuses
    its non-finite sums (``training``) as the in-process fit does, without the worker's
    warnings."""
    return np.errstate(over="ignore", invalid="ignore", divide="ignore")


def _worker_threads() -> int:
    """Threads the worker gives a task (``--nthreads``), 1 outside a worker."""
    try:
        from distributed import get_worker

        return max(1, int(get_worker().state.nthreads))
    except (ImportError, ValueError, AttributeError):
        return 1


class RowBlock:
    """Rows Y (n, D) of the data and q(X) over them under ``prior`` (a ``LatentPrior`` over
    these n rows, e.g. ``StaticPrior(n, Q)``)."""

    def __init__(self, Y, kernel, prior, memory: int, state: dict | None = None):
        self.out = BlockOutputs(Y) if np.ndim(Y) == 2 else None
        if self.out is None:
            raise ValueError(f"a block of rows must be 2-D, got shape {np.shape(Y)}")
        self.Y, (self.n, self.D) = self.out.Y, self.out.Y.shape
        self.kernel = kernel
        self.prior = prior
        self.layout = ParamLayout([b for b in prior.blocks() if b.name in prior.row_blocks])
        self.part = Part(np.zeros(self.layout.size), memory)
        self.Yc: np.ndarray | None = None
        self._fwd: tuple | None = None  # (x, qx) of the last trial point
        self._threads = _worker_threads()
        if state is not None:  # a block moved from another worker (``export_state``)
            vars(self.part).update(state)

    def _numba_threads(self) -> None:
        import numba

        numba.set_num_threads(min(self._threads, numba.config.NUMBA_NUM_THREADS))

    # --- set-up ------------------------------------------------------------------------
    def ping(self) -> int:
        return self.n

    def export_state(self) -> dict:
        """The optimiser's vectors over the block (``vlbfgs.Part``: x, g, d, the pairs, the
        remembered best): what a copy of the block on another worker needs to go on with the
        fit where this one is (``Blocks.move``)."""
        return {k: v for k, v in vars(self.part).items() if k != "_trial"}

    def checkpoint(self, folder: str, i: int, k: int) -> None:
        """Write the block's parameters at the current iterate (``checkpoint.write_block``)."""
        from .checkpoint import write_block

        write_block(folder, i, k, self.part.x)

    def restore(self, folder: str, i: int, k: int) -> None:
        """Read the block's parameters from iteration ``k``'s checkpoint."""
        from .checkpoint import read_block

        self.set_x(read_block(folder, i, k, self.layout.size))

    def describe(self) -> dict:
        """n and ``outputs.BlockOutputs.describe`` (per column the observed count, sum and a
        hash of which rows observe it; NaN is missing); rows with inf or with nothing
        observed (counts, first ones)."""
        inf = np.isinf(self.Y).any(axis=1)
        empty = np.isnan(self.Y).all(axis=1)
        return dict(n=self.n, **self.out.describe(),
                    inf_rows=int(inf.sum()), first_inf=np.flatnonzero(inf)[:5].tolist(),
                    empty_rows=int(empty.sum()), first_empty=np.flatnonzero(empty)[:5].tolist())

    def centre(self, Y_mean: np.ndarray, groups: dict | None = None) -> dict:
        """Centre the rows (``outputs.BlockOutputs.centre``): Yc^T Yc (D, D), each column's
        sum of squares and, with missing values, each group's rows and tr(Yc Yc^T)."""
        with single_threaded_blas():
            out = self.out.centre(Y_mean, groups)
            self.Yc = self.out.Yc
            return out

    def pca_means(self, V: np.ndarray, idx=None) -> np.ndarray:
        """Yc V (V: (D, Q), the scaled principal directions) at rows ``idx`` (all: None)."""
        return self.Yc @ V if idx is None else self.Yc[np.asarray(idx, dtype=np.int64)] @ V

    def init_latent(self, V: np.ndarray, seed, block: int, pvals: dict) -> dict:
        """The start of ``init.init_params``: PCA means mu0 = Yc V, S0 ~ U(0.45, 0.55), turned
        into the prior's values (``LatentPrior.initial_values``, with the prior's own values
        ``pvals``); returns the columns' (min, max) of mu0."""
        rng = np.random.default_rng(None if seed is None else [int(seed), int(block)])
        mu = self.Yc @ V
        S = rng.uniform(0.45, 0.55, size=mu.shape)
        if hasattr(self.prior, "sync"):
            self.prior.sync(pvals)
        values = self.prior.initial_values(mu, S)
        self.part.x = self.layout.pack({n: values[n] for n in self.prior.row_blocks})
        return dict(lo=mu.min(0) if self.n else None, hi=mu.max(0) if self.n else None)

    def set_x(self, x: np.ndarray) -> None:
        """The unconstrained local parameters (the prior's blocks, packed)."""
        self.part.x = np.array(x, dtype=np.float64)

    def get_x(self) -> np.ndarray:
        return self.part.x.copy()

    def _values(self, pvals: dict) -> dict:
        """The prior's values at the current x: the block's own (unpacked) and the global
        ``pvals`` (a time kernel's) the driver sent."""
        return {**self.layout.unpack(self.part.x), **pvals}

    def latent(self, pvals: dict, idx=None) -> tuple[np.ndarray, np.ndarray]:
        """q(X)'s (mu, S) over the block's rows (at rows ``idx``; all: None)."""
        qx = self.prior.q(self._values(pvals), grad=False)
        if idx is None:
            return np.array(qx.mu), np.array(qx.S)
        idx = np.asarray(idx, dtype=np.int64)
        return qx.mu[idx], qx.S[idx]

    def pool(self, idx, pvals: dict) -> tuple:
        """(mu, S, Yc, observed) at rows ``idx``: starting points of test-time inference
        (``pvals``: the prior's own values, as ``forward``'s)."""
        idx = np.asarray(idx, dtype=np.int64)
        mu, S = self.latent(pvals, idx)
        return mu, S, self.Yc[idx], ~np.isnan(self.Y[idx])

    def rows(self, idx=None) -> np.ndarray:
        """The block's rows of Y as given (NaN = missing), at rows ``idx`` (all: None)."""
        return self.Y.copy() if idx is None else self.Y[np.asarray(idx, dtype=np.int64)]

    # --- a training sequence of a dynamical block: test time ---------------------------------
    def latent_at(self, pvals: dict, t_new: np.ndarray, sequence) -> tuple[np.ndarray, np.ndarray]:
        """q(X*)'s (mu, S) (n*, Q) at times t_new of the block's training sequence
        ``sequence`` (the prior's ``latent_at``: qxstar); its path does not leave the worker."""
        return self.prior.latent_at(self._values(pvals), t_new, sequence)

    def conditional_prior(self, pvals: dict, t_star: np.ndarray, sequence) -> tuple[np.ndarray, np.ndarray]:
        """(m (n*, Q), C (n*, n*)): p(X*) of new frames at t_star of the block's training
        sequence ``sequence`` (``sequence_inference.conditional_prior``)."""
        from ..sequence_inference import conditional_prior

        return conditional_prior(self.prior, self._values(pvals), t_star, sequence)

    def totals(self, Z: np.ndarray, kparams: dict, pvals: dict) -> tuple[float, np.ndarray]:
        """(sum of psi0, Psi2 (M, M)) over all the block's rows at the current x (with
        missing values the forward gives them per group only)."""
        with single_threaded_blas():
            return psi_totals(self.kernel, kparams, self.prior.q(self._values(pvals), grad=False), Z)

    # --- one evaluation: forward (sums), backward (the rows' gradients) --------------------
    def forward(self, stp: float, Z: np.ndarray, kparams: dict, pvals: dict, ops: tuple = ()) -> dict:
        """The block's sums at x + stp d (``outputs.BlockOutputs.sums``: psi0_sum,
        E = Psi1^T Yc (M, D), Psi2 (M, M), or per group) and its kl. ``ops``: the optimiser's
        calls queued by the driver since the last round, run first (``run_ops``): one round
        trip less each."""
        self._numba_threads()
        self.run_ops(ops)
        with single_threaded_blas(), _quiet():
            qx = self._trial_q(stp, pvals)
            self.kernel.set_params(**kparams)
            return {**self.out.sums(self.kernel, qx.mu, qx.S, Z), "kl": float(qx.kl)}

    def _trial_q(self, stp: float, pvals: dict):
        """q(X) at the trial point x + stp d (kept for ``backward``)."""
        x = self.part.trial_x(stp)
        qx = self.prior.q({**self.layout.unpack(x), **pvals}, grad=True)
        self._fwd = (x, qx)
        return qx

    def backward(self, t, beta: float, Z: np.ndarray, need_rows: bool = False) -> dict:
        """The rows' part of the gradient, from the driver's ``bound.SumsGrads`` (or, with
        missing values, ``missing.GroupSumsGrads``): dZ (M, Q), the
        kernel's and the prior's own parameters (summed by the driver), and, kept here, the gradient of
        f = -F over the local parameters; returns its g.d and max |g| (and the gradient
        itself with ``need_rows``, for tests)."""
        self._numba_threads()
        with single_threaded_blas(), _quiet():
            qx = self._fwd[1]
            dmu, dS, dZ, dth = self.out.gradients(self.kernel, t, beta, qx.mu, qx.S, Z)
            return self._rows_gradient(dmu, dS, need_rows, dZ=dZ, dtheta=dth)

    def _rows_gradient(self, dmu: np.ndarray, dS: np.ndarray, need_rows: bool, **out) -> dict:
        """From dF/dmu, dF/dS (n, Q) at the trial point: the gradient of f = -F over the local
        parameters, kept (``vlbfgs.Part.set_trial``); ``out`` with the prior's own
        parameters' gradient "dprior", g.d "gd", max |g| "gmax" (and "g" with ``need_rows``)."""
        x, qx = self._fwd
        grads = qx.chain(dmu, dS)
        g = -self.layout.chain(x, grads)
        gd, gmax = self.part.set_trial(x, g)
        dprior = {n: np.asarray(v, dtype=np.float64) for n, v in grads.items() if n not in self.prior.row_blocks}
        out.update(dprior=dprior, gd=gd, gmax=gmax)
        if need_rows:
            out["g"] = g
        return out

    # --- the optimiser's vectors ------------------------------------------------------------
    def direction(self, a, b, c) -> None:
        self.part.direction(np.asarray(a), np.asarray(b), float(c))

    def perturb(self, k: int) -> None:
        self.part.perturb(int(k))

    def accept(self) -> np.ndarray:
        return self.part.accept()

    def commit(self, slot: int) -> None:
        self.part.commit(int(slot))

    def keep(self) -> None:
        self.part.keep()

    def to_best(self) -> None:
        self.part.to_best()

    def run_ops(self, ops: tuple) -> None:
        """The optimiser's calls queued by the driver (("commit", slot), ("keep",), ...)."""
        for op, *args in ops:
            getattr(self, op)(*args)


def psi_totals(kernel, kparams: dict, qx, Z: np.ndarray) -> tuple[float, np.ndarray]:
    """(sum of psi0, Psi2 (M, M)) of q(X) ``qx`` with ``kernel`` at ``kparams`` and Z."""
    kernel.set_params(**kparams)
    return float(np.sum(kernel.psi0(qx.mu, qx.S))), kernel.psi2(qx.mu, qx.S, Z)


def export_state(actor) -> dict:
    """A task on the worker of ``actor`` (a ``RowBlock``): its ``export_state``, kept on that
    worker until the block's copy elsewhere takes it (worker to worker)."""
    return actor.export_state().result()
