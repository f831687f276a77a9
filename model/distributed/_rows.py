"""The worker's side of a distributed model: one block of rows and its q(X) parameters.

A ``RowBlock`` is a Dask actor living on one worker. It holds its rows of Y (centred once
the driver knows the column means), the unconstrained parameters of their q(X) (the
latent prior's blocks over these rows: mu, S for the static prior) and the optimiser's
vectors over them (``vlbfgs.Part``). Per evaluation of the bound it sends the driver its
sums (``bound.DataSums``: psi0, Psi1^T Yc, Psi2, and its KL term) and gets back what its
rows' gradients need (``bound.SumsGrads``); nothing of size n leaves the worker.
"""

from __future__ import annotations

import numpy as np

from .._threads import single_threaded_blas
from ..bound import SumsGrads
from ..params import ParamLayout
from ..priors import StaticPrior
from .vlbfgs import Part


def _worker_threads() -> int:
    """Threads the worker gives a task (``--nthreads``), 1 outside a worker."""
    try:
        from distributed import get_worker

        return max(1, int(get_worker().state.nthreads))
    except (ImportError, ValueError, AttributeError):
        return 1


class RowBlock:
    """Rows Y (n, D) of the data and q(X) over them (static prior N(0, I))."""

    def __init__(self, Y, kernel, Q: int, memory: int):
        self.Y = np.ascontiguousarray(np.asarray(Y, dtype=np.float64))
        if self.Y.ndim != 2:
            raise ValueError(f"a block of rows must be 2-D, got shape {self.Y.shape}")
        self.n, self.D = self.Y.shape
        self.kernel = kernel
        self.prior = StaticPrior(self.n, Q)
        self.layout = ParamLayout(self.prior.blocks())
        self.part = Part(np.zeros(self.layout.size), memory)
        self.Yc: np.ndarray | None = None
        self._fwd: tuple | None = None  # (x, qx) of the last trial point
        self._threads = _worker_threads()

    def _numba_threads(self) -> None:
        import numba

        numba.set_num_threads(min(self._threads, numba.config.NUMBA_NUM_THREADS))

    # --- set-up ------------------------------------------------------------------------
    def ping(self) -> int:
        return self.n

    def checkpoint(self, folder: str, i: int, k: int) -> None:
        """Write the block's parameters at the current iterate (``checkpoint.write_block``)."""
        from .checkpoint import write_block

        write_block(folder, i, k, self.part.x)

    def restore(self, folder: str, i: int, k: int) -> None:
        """Read the block's parameters from iteration ``k``'s checkpoint."""
        from .checkpoint import read_block

        self.set_x(read_block(folder, i, k, self.layout.size))

    def describe(self) -> dict:
        """n, D, the column sums (for the mean) and the rows with NaN / inf (first ones)."""
        bad = ~np.isfinite(self.Y).all(axis=1)
        return dict(n=self.n, D=self.D, colsum=np.where(np.isfinite(self.Y), self.Y, 0.0).sum(0),
                    bad_rows=int(bad.sum()), first_bad=np.flatnonzero(bad)[:5].tolist())

    def centre(self, Y_mean: np.ndarray) -> dict:
        """Centre the rows; returns their Yc^T Yc (D, D) and tr(Yc Yc^T) (for the PCA start)."""
        with single_threaded_blas():
            self.Yc = np.ascontiguousarray(self.Y - Y_mean)
            return dict(YtY=self.Yc.T @ self.Yc, trYYT=float(np.sum(self.Yc * self.Yc)))

    def init_latent(self, V: np.ndarray, seed, block: int) -> dict:
        """mu = Yc V (V: (D, Q), the scaled principal directions), S ~ U(0.45, 0.55) as
        ``init.init_params``; returns the columns' (min, max) of mu."""
        rng = np.random.default_rng(None if seed is None else [int(seed), int(block)])
        mu = self.Yc @ V
        S = rng.uniform(0.45, 0.55, size=mu.shape)
        self.set_values(mu, S)
        return dict(lo=mu.min(0) if self.n else None, hi=mu.max(0) if self.n else None)

    def set_values(self, mu: np.ndarray, S: np.ndarray) -> None:
        self.part.x = self.layout.pack({"mu": mu, "S": S})

    def set_x(self, x: np.ndarray) -> None:
        """The unconstrained local parameters (the prior's blocks, packed)."""
        self.part.x = np.array(x, dtype=np.float64)

    def get_x(self) -> np.ndarray:
        return self.part.x.copy()

    def rows(self, idx) -> np.ndarray:
        """mu at the given rows of this block (the inducing inputs' start)."""
        return self.layout.unpack(self.part.x)["mu"][np.asarray(idx, dtype=np.int64)]

    def latent(self) -> tuple[np.ndarray, np.ndarray]:
        qx = self.prior.q(self.layout.unpack(self.part.x), grad=False)
        return np.array(qx.mu), np.array(qx.S)

    # --- one evaluation: forward (sums), backward (the rows' gradients) --------------------
    def forward(self, stp: float, Z: np.ndarray, kparams: dict, ops: tuple = ()) -> dict:
        """The block's sums at x + stp d: psi0_sum, E = Psi1^T Yc (M, D), Psi2 (M, M), kl.
        ``ops``: the optimiser's calls queued by the driver since the last round, run first
        (("commit", slot), ("direction", a, b, c)): one round trip less each."""
        self._numba_threads()
        for op, *args in ops:
            getattr(self, op)(*args)
        with single_threaded_blas():
            x = self.part.trial_x(stp)
            self.kernel.set_params(**kparams)
            qx = self.prior.q(self.layout.unpack(x), grad=True)
            k = self.kernel
            self._fwd = (x, qx)
            return dict(psi0_sum=float(np.sum(k.psi0(qx.mu, qx.S))), E=k.psi1(qx.mu, qx.S, Z).T @ self.Yc,
                        Psi2=k.psi2(qx.mu, qx.S, Z), kl=float(qx.kl))

    def backward(self, t: SumsGrads, beta: float, Z: np.ndarray, need_rows: bool = False) -> dict:
        """The rows' part of the gradient, from the driver's ``SumsGrads``: dZ (M, Q) and the
        kernel's parameters (summed by the driver), and, kept here, the gradient of
        f = -F over the local parameters; returns its g.d and max |g| (and the gradient
        itself with ``need_rows``, for tests)."""
        self._numba_threads()
        with single_threaded_blas():
            x, qx = self._fwd
            n = self.n
            dPsi1 = beta**2 * (self.Yc @ t.GE.T)
            dmu, dS, dZ, dth = self.kernel.psi_gradients(np.full(n, t.dpsi0), dPsi1, t.dL_dPsi2, qx.mu, qx.S, Z)
            g = -self.layout.chain(x, qx.chain(dmu, dS))
            gd, gmax = self.part.set_trial(x, g)
            out = dict(dZ=dZ, dtheta=dth, gd=gd, gmax=gmax)
            if need_rows:
                out["g"] = g
            return out

    # --- the optimiser's vectors ------------------------------------------------------------
    def direction(self, a, b, c) -> None:
        self.part.direction(np.asarray(a), np.asarray(b), float(c))

    def accept(self) -> np.ndarray:
        return self.part.accept()

    def commit(self, slot: int) -> None:
        self.part.commit(int(slot))
