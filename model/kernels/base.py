"""The kernel interface: covariance functions with closed-form psi statistics.

The split follows GPy's psi-statistics design (code without autodiff): the bound
(``model/bound.py``) returns dL/dpsi0, dL/dPsi1, dL/dPsi2 and dL/dKuu, and each kernel
maps those to gradients of its own parameters and of mu, S, Z.

Notation (paper, section "Variational Gaussian Process Latent Variable Models"):
    mu, S : (N, Q) means and diagonal variances of q(X) = prod_n N(x_n | mu_n, diag(S_n))
    Z     : (M, Q) inducing inputs
    psi0  : (N,)   psi0_n  = <k(x_n, x_n)>                        (eq:psi0)
    Psi1  : (N, M) Psi1_nm = <k(x_n, z_m)>                        (eq:psi1)
    Psi2  : (M, M) Psi2    = sum_n <k(z_m, x_n) k(x_n, z_m')>     (eq:psi2)

Parameters are positive arrays held by the kernel (``params`` dict, name -> float64
array; scalars have shape ()). The model packs them into its free vector through a
positive transform; kernels themselves never see unconstrained values.
"""

from __future__ import annotations

import numpy as np


class Kernel:
    """Abstract covariance function on R^Q. Subclasses implement every method below."""

    #: short name used in kernel strings ("rbf", "linear", "bias", "white")
    name: str = "kernel"

    def __init__(self, input_dim: int):
        self.input_dim = int(input_dim)
        self.params: dict[str, np.ndarray] = {}

    # --- parameters -----------------------------------------------------------------
    def get_params(self) -> dict[str, np.ndarray]:
        """Copy of the positive parameters, name -> float64 array."""
        return {k: np.array(v, dtype=np.float64, copy=True) for k, v in self.params.items()}

    def set_params(self, **values) -> None:
        """Set parameters by name; shapes must match the current ones."""
        for k, v in values.items():
            if k not in self.params:
                raise KeyError(f"{type(self).__name__} has no parameter {k!r}; has {list(self.params)}")
            v = np.asarray(v, dtype=np.float64)
            if v.shape != self.params[k].shape:
                raise ValueError(f"parameter {k!r} must have shape {self.params[k].shape}, got {v.shape}")
            self.params[k] = v.copy()

    # --- deterministic inputs ---------------------------------------------------------
    def K(self, X: np.ndarray, X2: np.ndarray | None = None) -> np.ndarray:
        """Kernel matrix (N, N2). ``X2=None`` means X2 = X (white noise counts only then)."""
        raise NotImplementedError

    def Kdiag(self, X: np.ndarray) -> np.ndarray:
        """Diagonal of K(X), shape (N,)."""
        raise NotImplementedError

    def K_gradients(self, dL_dK: np.ndarray, X: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Given dL/dK for K = K(X) (X2 None; (N, N), symmetric), return (dL_dX (N, Q), dL_dtheta)."""
        raise NotImplementedError

    # --- psi statistics (Gaussian inputs) -------------------------------------------------
    def psi0(self, mu: np.ndarray, S: np.ndarray) -> np.ndarray:
        """(N,) psi0_n = <k(x_n, x_n)>_{N(mu_n, S_n)} (eq:psi0)."""
        raise NotImplementedError

    def psi1(self, mu: np.ndarray, S: np.ndarray, Z: np.ndarray) -> np.ndarray:
        """(N, M) Psi1 (eq:psi1)."""
        raise NotImplementedError

    def psi2(self, mu: np.ndarray, S: np.ndarray, Z: np.ndarray) -> np.ndarray:
        """(M, M) Psi2 = sum_n Psi2^n (eq:psi2)."""
        raise NotImplementedError

    def psi2n(self, mu: np.ndarray, S: np.ndarray, Z: np.ndarray) -> np.ndarray:
        """(N, M, M) per-point Psi2^n. Only for few points (predictions)."""
        raise NotImplementedError

    def psi2n_centred(self, mu: np.ndarray, S: np.ndarray, Z: np.ndarray) -> np.ndarray:
        """(N, M, M) Psi2^n - psi1_n psi1_n^T, the covariance over q(x_n) of k(x_n, Z): the
        part of covFstar that vanishes as S -> 0. Kernels whose Psi2^n and psi1 psi1^T
        nearly cancel there override this with a form that does not subtract them."""
        P1 = self.psi1(mu, S, Z)
        return self.psi2n(mu, S, Z) - P1[:, :, None] * P1[:, None, :]

    def psi_stats_n(self, mu: np.ndarray, S: np.ndarray, Z: np.ndarray):
        """(psi0 (N,), Psi1 (N, M), Psi2^n (N, M, M)) of a few points in one call: the inner
        loop of test-time inference, where kernels may share the work and the checks."""
        return self.psi0(mu, S), self.psi1(mu, S, Z), self.psi2n(mu, S, Z)

    def psi_gradients(self, dL_dpsi0, dL_dPsi1, dL_dPsi2, mu, S, Z):
        """Chain rule through the psi statistics.

        dL_dpsi0 (N,), dL_dPsi1 (N, M), dL_dPsi2 (M, M) (symmetric, applied to every n).
        Returns (dL_dmu (N, Q), dL_dS (N, Q), dL_dZ (M, Q), dL_dtheta dict name -> array
        shaped like the parameter).
        """
        raise NotImplementedError

    def psi_gradients_n(self, dL_dpsi0, dL_dPsi1, dL_dPsi2n, mu, S, Z):
        """Chain rule through the psi statistics with a different Psi2 weight per point.

        L = sum_n [dL_dpsi0_n psi0_n + dL_dPsi1[n] . Psi1[n] + sum dL_dPsi2n[n] * Psi2^n]
        with dL_dpsi0 (N,), dL_dPsi1 (N, M), dL_dPsi2n (N, M, M) (any, not necessarily
        symmetric). Used at test time, where every test point has its own factorisation
        (``model/testbound.py``). Returns (dL_dmu (N, Q), dL_dS (N, Q)) only: Z and the
        kernel parameters are held fixed there, so their gradients are not computed.
        """
        raise NotImplementedError

    # --- groups of rows (missing outputs, ``bgplvm.missing``) ------------------------------
    # Rows fall into R patterns (seg (N,) int, each row's pattern) and the sums are over the
    # G groups of patterns given by the 0/1 incidence inc (G, R): group g holds the rows n
    # with inc[g, seg[n]] = 1. Generic forms below (one pass per group); the RBF kernel
    # overrides them with one pass over the rows.
    def psi2_groups(self, mu, S, Z, seg, inc) -> np.ndarray:
        """(G, M, M) Psi2_g = sum of Psi2^n over the rows of group g (eq:psi2)."""
        return np.stack([self.psi2(mu[o], S[o], Z) for o in inc[:, seg] > 0])

    def psi_gradients_groups(self, dL_dpsi0, dL_dPsi1, dL_dPsi2g, seg, inc, mu, S, Z):
        """``psi_gradients`` with a dL/dPsi2 per group, dL_dPsi2g (G, M, M): row n's Psi2^n
        is weighted by the sum over the groups holding it. Generic form: one pass over all
        rows with the weights of the groups holding most rows, then one per other group,
        over its rows (or, for those of the first kind, over the rows it lacks, subtracted)."""
        obs = inc[:, seg] > 0  # (G, N)
        big = obs.sum(1) * 2 > obs.shape[1]
        M = Z.shape[0]
        dmu, dS, dZ, dth = self.psi_gradients(dL_dpsi0, dL_dPsi1, dL_dPsi2g[big].sum(0), mu, S, Z)
        for g in range(obs.shape[0]):
            rows = np.flatnonzero(~obs[g] if big[g] else obs[g])
            if rows.size == 0:
                continue
            W = -dL_dPsi2g[g] if big[g] else dL_dPsi2g[g]
            gmu, gS, gZ, gth = self.psi_gradients(np.zeros(rows.size), np.zeros((rows.size, M)), W,
                                                  mu[rows], S[rows], Z)
            dmu[rows] += gmu
            dS[rows] += gS
            dZ += gZ
            dth = {n: dth[n] + gth[n] for n in dth}
        return dmu, dS, dZ, dth

    # --- ARD ------------------------------------------------------------------------------
    @property
    def ard_weights(self) -> np.ndarray | None:
        """(Q,) relevance of each input dimension, or None if the kernel has none."""
        return None

    def __add__(self, other: "Kernel") -> "Kernel":
        from .sum import Sum

        return Sum([self, other])

    def __repr__(self) -> str:
        def fmt(v):  # 4 significant digits: 4 decimals showed variance=0.0 for data of a small scale
            v = np.asarray(v)
            return f"{float(v):.4g}" if v.ndim == 0 else "[" + ", ".join(f"{x:.4g}" for x in v.ravel()) + "]"

        ps = ", ".join(f"{k}={fmt(v)}" for k, v in self.params.items())
        return f"{type(self).__name__}({ps})"
