"""ARD linear kernel k(x, x') = sum_q b_q x_q x'_q (paper, appendix "Calculating the Psi
Quantities", linear covariance)."""

from __future__ import annotations

import numpy as np

from . import _linear_numba as _nb
from ._util import (as_array, as_gaussians, as_points, positive_vector, psi_gradient_inputs,
                    psi_gradient_n_inputs, run_blocks)
from .base import Kernel


class Linear(Kernel):
    """k(x, x') = x^T diag(b) x'. Parameter ``variances`` = b, shape (Q,); ``ard_weights`` = b.

    Formulas for the psi statistics and their gradients: see ``_linear_numba``.
    """

    name = "linear"

    def __init__(self, input_dim: int, variances=None):
        super().__init__(input_dim)
        #: given here: a model keeps them as its start (else they start from the data)
        self.user_set = frozenset({"variances"} if variances is not None else ())
        self.params = {"variances": positive_vector(1.0 if variances is None else variances,
                                                    self.input_dim, "variances")}

    @property
    def variances(self) -> np.ndarray:
        return np.ascontiguousarray(self.params["variances"], dtype=np.float64)

    @property
    def ard_weights(self) -> np.ndarray:
        return self.variances.copy()

    # --- deterministic inputs ---------------------------------------------------------
    def K(self, X, X2=None):
        X = as_points(X, self.input_dim)
        if X2 is not None:
            return run_blocks(_nb.K, X.shape[0], X, as_points(X2, self.input_dim, "X2"), self.variances)
        K = run_blocks(_nb.K, X.shape[0], X, X, self.variances)
        return np.triu(K) + np.triu(K, 1).T  # exactly symmetric (vectorised sums may differ)

    def Kdiag(self, X):
        X = as_points(X, self.input_dim)
        return (X * X) @ self.variances

    def K_gradients(self, dL_dK, X):
        X = as_points(X, self.input_dim)
        dL_dK = as_array(dL_dK, (X.shape[0], X.shape[0]), "dL_dK")
        dX, db = _nb.K_gradients(dL_dK, X, self.variances)
        return dX, {"variances": db}

    # --- psi statistics ---------------------------------------------------------------
    def psi0(self, mu, S):
        mu, S = as_gaussians(mu, S, self.input_dim)
        return (mu * mu + S) @ self.variances

    def psi1(self, mu, S, Z):
        mu, S = as_gaussians(mu, S, self.input_dim)
        Z = as_points(Z, self.input_dim, "Z")
        return run_blocks(_nb.K, mu.shape[0], mu, Z, self.variances)

    def second_moment(self, mu, S) -> np.ndarray:
        """(Q, Q) sum_n E[x_n x_n^T] = mu^T mu + diag(sum_n S_n)."""
        mu, S = as_gaussians(mu, S, self.input_dim)
        return run_blocks(_nb.second_moment, mu.shape[0], mu, S)

    def psi2(self, mu, S, Z):
        Z = as_points(Z, self.input_dim, "Z")
        A = Z * self.variances
        P = A @ self.second_moment(mu, S) @ A.T
        return 0.5 * (P + P.T)

    def psi2n(self, mu, S, Z):
        mu, S = as_gaussians(mu, S, self.input_dim)
        Z = as_points(Z, self.input_dim, "Z")
        A = np.ascontiguousarray(Z * self.variances)
        return run_blocks(_nb.psi2n, mu.shape[0], mu, S, A)

    def psi2n_centred(self, mu, S, Z):
        """Exactly A diag(S_n) A^T, A = Z diag(b): the covariance of x_n mapped by A."""
        mu, S = as_gaussians(mu, S, self.input_dim)
        A = as_points(Z, self.input_dim, "Z") * self.variances
        return np.einsum("mq,nq,kq->nmk", A, S, A)

    def psi_gradients(self, dL_dpsi0, dL_dPsi1, dL_dPsi2, mu, S, Z):
        """See :meth:`Kernel.psi_gradients`. Exact for any (M, M) dL_dPsi2, symmetric or not."""
        dL_dpsi0, dL_dPsi1, dL_dPsi2, mu, S, Z = psi_gradient_inputs(
            self, dL_dpsi0, dL_dPsi1, dL_dPsi2, mu, S, Z)
        N = mu.shape[0]
        b = self.variances
        A = np.ascontiguousarray(Z * b)
        Wsym = 0.5 * (dL_dPsi2 + dL_dPsi2.T)
        K2 = np.ascontiguousarray(A.T @ Wsym @ A)
        dmu, dS, R, C, db = run_blocks(_nb.psi_gradients, N, dL_dpsi0, dL_dPsi1, mu, S, A, K2, b)
        G = R + 2.0 * (Wsym @ A @ C)  # dL/dA
        return dmu, dS, G * b, {"variances": db + np.sum(G * Z, axis=0)}

    def psi_gradients_n(self, dL_dpsi0, dL_dPsi1, dL_dPsi2n, mu, S, Z):
        """See :meth:`Kernel.psi_gradients_n`; formulas in ``_linear_numba._grad_n_rows``."""
        dL_dpsi0, dL_dPsi1, dL_dPsi2n, mu, S, Z = psi_gradient_n_inputs(
            self, dL_dpsi0, dL_dPsi1, dL_dPsi2n, mu, S, Z)
        b = self.variances
        A = np.ascontiguousarray(Z * b)
        return run_blocks(_nb.psi_gradients_n, mu.shape[0], dL_dpsi0, dL_dPsi1, dL_dPsi2n, mu, S, A, b)
