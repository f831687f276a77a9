"""Constant (bias) and white-noise kernels. Their statistics are constants or zeros, so
they are plain NumPy (no loops to compile)."""

from __future__ import annotations

import numpy as np

from ._util import as_array, as_gaussians, as_points, positive_scalar, psi_gradient_n_inputs
from .base import Kernel


class _ScalarVariance(Kernel):
    """A kernel whose only parameter is a scalar ``variance``."""

    def __init__(self, input_dim: int, variance=1.0):
        super().__init__(input_dim)
        self.params = {"variance": positive_scalar(variance, "variance")}

    @property
    def variance(self) -> float:
        return float(self.params["variance"])

    def psi_gradients_n(self, dL_dpsi0, dL_dPsi1, dL_dPsi2n, mu, S, Z):
        """See :meth:`Kernel.psi_gradients_n`: the statistics do not depend on mu, S."""
        _, _, _, mu, S, _ = psi_gradient_n_inputs(self, dL_dpsi0, dL_dPsi1, dL_dPsi2n, mu, S, Z)
        return np.zeros_like(mu), np.zeros_like(S)


class Bias(_ScalarVariance):
    """k(x, x') = v (parameter ``variance`` = v, shape ()).

    psi0_n = v, Psi1 = v, Psi2 = N v^2 (every entry), Psi2^n = v^2.
    """

    name = "bias"

    def K(self, X, X2=None):
        X = as_points(X, self.input_dim)
        N2 = X.shape[0] if X2 is None else as_points(X2, self.input_dim, "X2").shape[0]
        return np.full((X.shape[0], N2), self.variance)

    def Kdiag(self, X):
        return np.full(as_points(X, self.input_dim).shape[0], self.variance)

    def K_gradients(self, dL_dK, X):
        X = as_points(X, self.input_dim)
        dL_dK = as_array(dL_dK, (X.shape[0], X.shape[0]), "dL_dK")
        return np.zeros_like(X), {"variance": np.asarray(dL_dK.sum())}

    def psi0(self, mu, S):
        mu, S = as_gaussians(mu, S, self.input_dim)
        return np.full(mu.shape[0], self.variance)

    def psi1(self, mu, S, Z):
        mu, S = as_gaussians(mu, S, self.input_dim)
        return np.full((mu.shape[0], as_points(Z, self.input_dim, "Z").shape[0]), self.variance)

    def psi2(self, mu, S, Z):
        mu, S = as_gaussians(mu, S, self.input_dim)
        M = as_points(Z, self.input_dim, "Z").shape[0]
        return np.full((M, M), mu.shape[0] * self.variance**2)

    def psi2n(self, mu, S, Z):
        mu, S = as_gaussians(mu, S, self.input_dim)
        M = as_points(Z, self.input_dim, "Z").shape[0]
        return np.full((mu.shape[0], M, M), self.variance**2)

    def psi2n_centred(self, mu, S, Z):
        """A constant does not vary with x: zero."""
        mu, S = as_gaussians(mu, S, self.input_dim)
        M = as_points(Z, self.input_dim, "Z").shape[0]
        return np.zeros((mu.shape[0], M, M))

    def psi_gradients(self, dL_dpsi0, dL_dPsi1, dL_dPsi2, mu, S, Z):
        mu, S = as_gaussians(mu, S, self.input_dim)
        Z = as_points(Z, self.input_dim, "Z")
        N = mu.shape[0]
        dv = (np.sum(dL_dpsi0) + np.sum(dL_dPsi1)
              + 2.0 * N * self.variance * np.sum(dL_dPsi2))
        return np.zeros_like(mu), np.zeros_like(S), np.zeros_like(Z), {"variance": np.asarray(float(dv))}


class White(_ScalarVariance):
    """White noise: k(x, x') = v [x is x'] (parameter ``variance`` = v, shape ()).

    As in GPy: only K(X) with ``X2=None`` is v I; K(X, X2) = 0 for a given X2 (even if it
    is the same array). Hence psi0_n = <k(x_n, x_n)> = v, Psi1 = 0, Psi2 = 0, and the
    white part of a sum adds v I to Kuu = K(Z).
    """

    name = "white"

    def K(self, X, X2=None):
        X = as_points(X, self.input_dim)
        if X2 is None:
            return self.variance * np.eye(X.shape[0])
        return np.zeros((X.shape[0], as_points(X2, self.input_dim, "X2").shape[0]))

    def Kdiag(self, X):
        return np.full(as_points(X, self.input_dim).shape[0], self.variance)

    def K_gradients(self, dL_dK, X):
        X = as_points(X, self.input_dim)
        dL_dK = as_array(dL_dK, (X.shape[0], X.shape[0]), "dL_dK")
        return np.zeros_like(X), {"variance": np.asarray(np.trace(dL_dK))}

    def psi0(self, mu, S):
        mu, S = as_gaussians(mu, S, self.input_dim)
        return np.full(mu.shape[0], self.variance)

    def psi1(self, mu, S, Z):
        mu, S = as_gaussians(mu, S, self.input_dim)
        return np.zeros((mu.shape[0], as_points(Z, self.input_dim, "Z").shape[0]))

    def psi2(self, mu, S, Z):
        M = as_points(Z, self.input_dim, "Z").shape[0]
        return np.zeros((M, M))

    def psi2n(self, mu, S, Z):
        mu, S = as_gaussians(mu, S, self.input_dim)
        M = as_points(Z, self.input_dim, "Z").shape[0]
        return np.zeros((mu.shape[0], M, M))

    def psi_gradients(self, dL_dpsi0, dL_dPsi1, dL_dPsi2, mu, S, Z):
        mu, S = as_gaussians(mu, S, self.input_dim)
        Z = as_points(Z, self.input_dim, "Z")
        return (np.zeros_like(mu), np.zeros_like(S), np.zeros_like(Z),
                {"variance": np.asarray(float(np.sum(dL_dpsi0)))})
