"""ARD exponentiated quadratic (RBF) kernel (paper eq. "ard")."""

from __future__ import annotations

import numpy as np

from . import _rbf_groups_numba as _gnb
from . import _rbf_numba as _nb
from ._util import (as_array, as_gaussians, as_points, positive_scalar, positive_vector,
                    psi_gradient_inputs, psi_gradient_n_inputs, run_blocks)
from .base import Kernel


class RBF(Kernel):
    """k(x, x') = sf2 exp(-1/2 sum_q alpha_q (x_q - x'_q)^2), alpha_q = 1 / lengthscale_q^2.

    Parameters (positive): ``variance`` = sf2, shape (); ``lengthscale``, shape (Q,).
    ``ard_weights`` = alpha. Gradients are returned w.r.t. ``variance`` and ``lengthscale``.
    Psi statistics and their derivatives: see ``_rbf_numba``.
    """

    name = "rbf"

    def __init__(self, input_dim: int, variance=None, lengthscale=None):
        super().__init__(input_dim)
        #: the parameters given here: a model keeps them as its start (the others, 1.0 here,
        #: start from the data: ``BayesianGPLVM._init_kernel``)
        self.user_set = frozenset(n for n, v in (("variance", variance), ("lengthscale", lengthscale))
                                  if v is not None)
        self.params = {
            "variance": positive_scalar(1.0 if variance is None else variance, "variance"),
            "lengthscale": positive_vector(1.0 if lengthscale is None else lengthscale,
                                           self.input_dim, "lengthscale"),
        }

    # --- parameters -------------------------------------------------------------------
    @property
    def sf2(self) -> float:
        return float(self.params["variance"])

    @property
    def alpha(self) -> np.ndarray:
        """(Q,) inverse squared lengthscales."""
        return np.ascontiguousarray(1.0 / self.params["lengthscale"] ** 2)

    @property
    def ard_weights(self) -> np.ndarray:
        return self.alpha

    def _theta_grads(self, dsf2: float, dalpha: np.ndarray) -> dict[str, np.ndarray]:
        # alpha = l^-2  =>  dalpha/dl = -2 l^-3 = -2 alpha / l
        ell = self.params["lengthscale"]
        return {"variance": np.asarray(dsf2, dtype=np.float64),
                "lengthscale": dalpha * (-2.0 / ell**3)}

    # --- deterministic inputs ---------------------------------------------------------
    def K(self, X, X2=None):
        X = as_points(X, self.input_dim)
        X2 = X if X2 is None else as_points(X2, self.input_dim, "X2")
        return run_blocks(_nb.K, X.shape[0], X, X2, self.sf2, self.alpha)

    def Kdiag(self, X):
        X = as_points(X, self.input_dim)
        return np.full(X.shape[0], self.sf2)

    def K_gradients(self, dL_dK, X):
        X = as_points(X, self.input_dim)
        dL_dK = as_array(dL_dK, (X.shape[0], X.shape[0]), "dL_dK")
        dX, dsf2, dalpha = _nb.K_gradients(dL_dK, X, self.sf2, self.alpha)
        return dX, self._theta_grads(dsf2, dalpha)

    # --- psi statistics ---------------------------------------------------------------
    def psi0(self, mu, S):
        mu, S = as_gaussians(mu, S, self.input_dim)
        return np.full(mu.shape[0], self.sf2)

    def psi1(self, mu, S, Z):
        mu, S = as_gaussians(mu, S, self.input_dim)
        Z = as_points(Z, self.input_dim, "Z")
        return run_blocks(_nb.psi1, mu.shape[0], mu, S, Z, self.sf2, self.alpha)

    def psi2(self, mu, S, Z):
        mu, S = as_gaussians(mu, S, self.input_dim)
        Z = as_points(Z, self.input_dim, "Z")
        return run_blocks(_nb.psi2, mu.shape[0], mu, S, Z, self.sf2, self.alpha)

    def _pair_tables(self, Z: np.ndarray) -> tuple:
        """(ZT, pm, pm2, zbar, D0): Z^T and the pair tables of Z (``_rbf_numba.pair_tables``),
        kept for the last Z and lengthscales. Test-time inference evaluates Psi2^n of a few
        points many times with one Z; the tables (O(M^2 Q)) would otherwise dominate."""
        key = (Z.shape, Z.tobytes(), self.params["lengthscale"].tobytes())
        cached = self.__dict__.get("_tables")
        if cached is None or cached[0] != key:
            cached = (key, (np.ascontiguousarray(Z.T),) + tuple(_nb.pair_tables(Z, self.alpha)))
            self._tables = cached
        return cached[1]

    def psi2n(self, mu, S, Z):
        mu, S = as_gaussians(mu, S, self.input_dim)
        Z = as_points(Z, self.input_dim, "Z")
        _, pm, pm2, zbar, D0 = self._pair_tables(Z)
        return run_blocks(_nb.psi2n_tab, mu.shape[0], mu, S, pm, pm2, zbar, D0, self.sf2,
                          self.alpha, Z.shape[0])

    def psi2n_centred(self, mu, S, Z):
        """See :meth:`Kernel.psi2n_centred`: psi1_m psi1_m' expm1(log Psi2^n_mm' - log psi1_m
        psi1_m'), whose logarithm, per latent dimension with s = alpha S_n, is

            log1p(s) - log1p(2 s) / 2 + alpha s (mu_n - zbar)^2 / ((1 + s)(1 + 2 s))
                - alpha s d^2 / (1 + s),    zbar = (z_m + z_m') / 2,  d = (z_m - z_m') / 2:

        every term is O(s), so nothing large cancels as S -> 0 (the difference of Psi2^n and
        psi1 psi1^T lost all its digits there: covFstar of a nearly noise-free model came
        out 50x too wide, or negative). Compiled over the pairs m <= m' (``_rbf_numba``)."""
        mu, S = as_gaussians(mu, S, self.input_dim)
        Z = as_points(Z, self.input_dim, "Z")
        _, pm, pm2, zbar, _ = self._pair_tables(Z)
        P1 = run_blocks(_nb.psi1, mu.shape[0], mu, S, Z, self.sf2, self.alpha)
        return run_blocks(_nb.psi2n_centred, mu.shape[0], mu, S, Z, P1, self.sf2, self.alpha, pm, pm2, zbar)

    def psi_stats_n(self, mu, S, Z):
        """See :meth:`Kernel.psi_stats_n`: one check of the inputs and one alpha for all three."""
        mu, S = as_gaussians(mu, S, self.input_dim)
        Z = as_points(Z, self.input_dim, "Z")
        sf2, alpha, N = self.sf2, self.alpha, mu.shape[0]
        _, pm, pm2, zbar, D0 = self._pair_tables(Z)
        return (np.full(N, sf2), run_blocks(_nb.psi1, N, mu, S, Z, sf2, alpha),
                run_blocks(_nb.psi2n_tab, N, mu, S, pm, pm2, zbar, D0, sf2, alpha, Z.shape[0]))

    def psi_gradients(self, dL_dpsi0, dL_dPsi1, dL_dPsi2, mu, S, Z):
        """See :meth:`Kernel.psi_gradients`. Exact for any (M, M) dL_dPsi2, symmetric or not."""
        dL_dpsi0, dL_dPsi1, dL_dPsi2, mu, S, Z = psi_gradient_inputs(
            self, dL_dpsi0, dL_dPsi1, dL_dPsi2, mu, S, Z)
        N = mu.shape[0]
        do1, do2 = bool(dL_dPsi1.any()), bool(dL_dPsi2.any())
        dmu, dS, dZ, dsf2, dalpha = run_blocks(
            _nb.psi_gradients, N, dL_dpsi0, dL_dPsi1, dL_dPsi2, mu, S, Z, self.sf2, self.alpha, do1, do2)
        return dmu, dS, dZ, self._theta_grads(dsf2, dalpha)

    def psi2_groups(self, mu, S, Z, seg, inc):
        """See :meth:`Kernel.psi2_groups`: one pass over the rows sorted by pattern, each
        pattern's run added to its groups (``_rbf_groups_numba``)."""
        mu, S = as_gaussians(mu, S, self.input_dim)
        Z = as_points(Z, self.input_dim, "Z")
        seg = np.asarray(seg, dtype=np.int64)
        order = np.argsort(seg, kind="stable")
        pairs = run_blocks(_gnb.psi2_groups, mu.shape[0], np.ascontiguousarray(mu[order]),
                           np.ascontiguousarray(S[order]), Z, self.sf2, self.alpha,
                           np.ascontiguousarray(seg[order]), _subsets(inc), inc.shape[0])
        _, pm, pm2, _, _ = self._pair_tables(Z)
        M = Z.shape[0]
        return np.stack([_nb.pairs_to_matrix(v, pm, pm2, M) for v in pairs])

    def psi_gradients_groups(self, dL_dpsi0, dL_dPsi1, dL_dPsi2g, seg, inc, mu, S, Z):
        """See :meth:`Kernel.psi_gradients_groups`: one pass over the rows, each weighted
        by the sum of its groups' pair weights (``_rbf_numba.psi_gradients_w``)."""
        dL_dpsi0, dL_dPsi1, _, mu, S, Z = psi_gradient_inputs(
            self, dL_dpsi0, dL_dPsi1, dL_dPsi2g[0], mu, S, Z)
        _, pm, pm2, _, _ = self._pair_tables(Z)
        w2 = np.stack([_nb.pair_weights(W, pm, pm2) for W in dL_dPsi2g])  # (G, P)
        do1, do2 = bool(dL_dPsi1.any()), bool(w2.any())
        dmu, dS, dZ, dsf2, dalpha = run_blocks(
            _nb.psi_gradients_w, mu.shape[0], dL_dpsi0, dL_dPsi1, w2, np.asarray(seg, dtype=np.int64),
            _subsets(inc), mu, S, Z, self.sf2, self.alpha, do1, do2)
        return dmu, dS, dZ, self._theta_grads(dsf2, dalpha)

    def psi_gradients_n(self, dL_dpsi0, dL_dPsi1, dL_dPsi2n, mu, S, Z):
        """See :meth:`Kernel.psi_gradients_n` (psi0 = sf2 does not depend on mu, S)."""
        dL_dpsi0, dL_dPsi1, dL_dPsi2n, mu, S, Z = psi_gradient_n_inputs(
            self, dL_dpsi0, dL_dPsi1, dL_dPsi2n, mu, S, Z)
        do1, do2 = bool(dL_dPsi1.any()), bool(dL_dPsi2n.any())
        ZT, pm, pm2, zbar, D0 = self._pair_tables(Z)
        return run_blocks(_nb.psi_gradients_n, mu.shape[0], dL_dPsi1, dL_dPsi2n, mu, S, ZT, pm, pm2,
                          zbar, D0, self.sf2, self.alpha, do1, do2)



def _subsets(inc: np.ndarray) -> np.ndarray:
    """(R, C) int64: bit i of entry [r, c] is set where pattern r observes group c B + i
    (inc (G, R) 1 where pattern r observes group g; B = ``SUBSET_BITS``, C = ceil(G / B))."""
    B = _nb.SUBSET_BITS
    G, R = inc.shape
    bits = np.zeros((-(-G // B) * B, R), dtype=np.int64)
    bits[:G] = inc > 0
    return np.ascontiguousarray((bits.reshape(-1, B, R) << np.arange(B)[None, :, None]).sum(1).T)
