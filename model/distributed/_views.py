"""The worker's side of a distributed MRD model: one block of rows of every view and q(X).

The views are column groups of the same rows: a ``ViewsBlock`` gets the block's rows of all
views side by side (n, sum_v D_v; view v in columns cuts[v]:cuts[v + 1]) and keeps each
view's part as its own ``outputs.BlockOutputs`` (its centring, its groups of columns with
missing values, a row missing the whole view in none). q(X) over the rows, its optimiser's
vectors and the KL are the ``_rows.RowBlock``'s, once: per evaluation the block sends each
view's sums (computed with that view's kernel and inducing inputs) and the KL, and gets
back each view's ``SumsGrads``; the rows' gradient is the sum of the views' dF/dmu, dF/dS.
For predictions (``mrd_predict``) a block also gives each view's ``totals`` and, as a
single-view block, a sample of its rows (``pool``: all views side by side).
"""

from __future__ import annotations

import numpy as np

from .._threads import single_threaded_blas
from ._rows import RowBlock, _quiet, psi_totals
from .outputs import BlockOutputs


class ViewsBlock(RowBlock):
    """Rows Y (n, sum_v D_v) of every view side by side (view v in columns
    cuts[v]:cuts[v + 1]), each view's kernel in ``kernels``, q(X) under ``prior``."""

    def __init__(self, Y, cuts, kernels, prior, memory: int, state: dict | None = None):
        super().__init__(Y, None, prior, memory, state)
        self.cuts = [int(c) for c in cuts]
        if self.cuts[-1] != self.D:
            raise ValueError(f"the views' columns {self.cuts} do not cover the block's {self.D}")
        self.kernels = list(kernels)
        self.views = [BlockOutputs(self.Y[:, a:b]) for a, b in zip(self.cuts[:-1], self.cuts[1:])]

    def centre(self, Y_mean: np.ndarray, groups: list | None = None) -> dict:
        """Centre each view with its part of ``Y_mean`` (sum_v D_v,) and its column groups
        (``groups``: one per view, None for a complete view); returns the views side by
        side's Yc^T Yc (sum D_v, sum D_v: the scaled PCA start's moment), their columns' sums
        of squares and each view's ``BlockOutputs.centre`` ("views")."""
        groups = [None] * len(self.views) if groups is None else list(groups)
        with single_threaded_blas():
            per = [o.centre(Y_mean[a:b], g) for o, g, a, b in zip(self.views, groups, self.cuts[:-1], self.cuts[1:])]
            self.Yc = np.ascontiguousarray(np.hstack([o.Yc for o in self.views]))
            return dict(YtY=self.Yc.T @ self.Yc, colsq=np.concatenate([p["colsq"] for p in per]), views=per)

    def rows(self) -> np.ndarray:
        """The block's rows of every view as given (n, sum D_v; NaN = missing)."""
        return self.Y.copy()

    def forward(self, stp: float, Zs: list, kparams: list, pvals: dict, ops: tuple = ()) -> dict:
        """Each view's sums at x + stp d ("views": ``BlockOutputs.sums`` with view v's
        kernel parameters ``kparams[v]`` and inducing inputs ``Zs[v]`` (M, Q)) and the KL of
        the block's q(X), once. ``ops``: the optimiser's queued calls, run first."""
        self._numba_threads()
        self.run_ops(ops)
        with single_threaded_blas(), _quiet():
            qx = self._trial_q(stp, pvals)
            sums = []
            for o, k, Z, kp in zip(self.views, self.kernels, Zs, kparams):
                k.set_params(**kp)
                sums.append(o.sums(k, qx.mu, qx.S, Z))
            return dict(views=sums, kl=float(qx.kl))

    def backward(self, ts: list, betas: list, Zs: list, need_rows: bool = False) -> dict:
        """From each view's ``SumsGrads`` ``ts[v]`` (noise 1 / ``betas[v]``): each view's dZ
        (M, Q) and kernel gradients (lists "dZ", "dtheta", in the views' order) and, kept
        here, the rows' gradient: the views' dF/dmu, dF/dS added, chained through q(X)."""
        self._numba_threads()
        with single_threaded_blas(), _quiet():
            qx = self._fwd[1]
            dmu, dS, dZ, dth = 0.0, 0.0, [], []
            for o, k, t, beta, Z in zip(self.views, self.kernels, ts, betas, Zs):
                a, b, c, d = o.gradients(k, t, beta, qx.mu, qx.S, Z)
                dmu, dS = dmu + a, dS + b
                dZ.append(c)
                dth.append(d)
            return self._rows_gradient(dmu, dS, need_rows, dZ=dZ, dtheta=dth)

    def totals(self, Zs: list, kparams: list, pvals: dict) -> list[tuple[float, np.ndarray]]:
        """Each view's (sum of psi0, Psi2 (M, M)) over all the block's rows at the current x
        (``RowBlock.totals``; with view v's ``kparams[v]`` and ``Zs[v]``)."""
        with single_threaded_blas():
            qx = self.prior.q(self._values(pvals), grad=False)
            return [psi_totals(k, kp, qx, Z) for k, kp, Z in zip(self.kernels, kparams, Zs)]
