"""Observed but noisy inputs: p(X | Z) = prod_n N(x_n | z_n, Sigma_z)  (uncertainInputsPX).

Paper section "Gaussian Process Inference with Uncertain Inputs": the observed inputs Z
(N, Q) are the latent inputs X plus Gaussian noise (uncertainInputsX), which makes p(X | Z)
a prior on X centred at the observations. Here Sigma_z = diag(sigma_z) with sigma_z (Q,)
learned with the rest. (Z here is the paper's observed inputs, held in ``inputs``; the
model's block "Z" stays the inducing inputs.) q(X) = prod_n N(mu_n, diag S_n) with either

- free means: blocks "mu" (N, Q), "S" (N, Q), "Sigma_z" (Q,), or
- means tied to the observations (mu = Z, the paper's cheaper choice): "S", "Sigma_z".

With d = mu - Z and r_q = 1 / sigma_q, the KL term is a sum of univariate Gaussian KLs

    KL = 1/2 sum_{n,q} [ (S_nq + d_nq^2) r_q - 1 - log S_nq + log sigma_q ]
    dKL/dmu_nq    = d_nq r_q
    dKL/dS_nq     = 1/2 (r_q - 1 / S_nq)
    dKL/dsigma_q  = 1/2 sum_n [ r_q - (S_nq + d_nq^2) r_q^2 ].
"""

from __future__ import annotations

import numpy as np

from ..params import Block
from ..transforms import IDENTITY, POSITIVE_FLOOR
from .base import QX, LatentPrior


def kl_uncertain(mu: np.ndarray, S: np.ndarray, inputs: np.ndarray, sigma_z: np.ndarray):
    """KL(prod N(mu_n, diag S_n) || prod N(z_n, diag sigma_z)) and its gradients.

    mu, S, inputs : (N, Q); sigma_z : (Q,). Returns (KL, dKL/dmu (N, Q), dKL/dS (N, Q),
    dKL/dsigma_z (Q,))."""
    d = mu - inputs
    r = 1.0 / sigma_z
    e = S + d * d
    N = mu.shape[0]
    kl = 0.5 * float(np.sum(e * r - 1.0 - np.log(S))) + 0.5 * N * float(np.sum(np.log(sigma_z)))
    return kl, d * r, 0.5 * (r - 1.0 / S), 0.5 * (N * r - e.sum(0) * r * r)


class UncertainInputPrior(LatentPrior):
    """p(X | Z) = prod_n N(x_n | z_n, diag sigma_z) for observed inputs Z (N, Q).

    tie_mean : q(X)'s means fixed at Z (no "mu" block) instead of free.
    """

    kind = "uncertain"

    def __init__(self, inputs: np.ndarray, tie_mean: bool = False):
        self.inputs = np.array(inputs, dtype=np.float64, order="C")  # own copy, read-only
        self.inputs.flags.writeable = False
        if self.inputs.ndim != 2:
            raise ValueError(f"inputs must be (N, Q), got shape {self.inputs.shape}")
        self.N, self.Q = self.inputs.shape
        self.tie_mean = bool(tie_mean)

    def blocks(self):
        N, Q = self.N, self.Q
        mean = [] if self.tie_mean else [Block("mu", (N, Q), IDENTITY)]
        return mean + [Block("S", (N, Q), POSITIVE_FLOOR), Block("Sigma_z", (Q,), POSITIVE_FLOOR)]

    def initial_values(self, mu0, S0):
        """q(X) = N(mu0, S0) (mu0 ignored when tied) and sigma_z = mean_n S0 (where the KL
        is smallest for these variances)."""
        S0 = np.asarray(S0, dtype=np.float64)
        out = {"S": S0, "Sigma_z": S0.mean(0)}
        if not self.tie_mean:
            out["mu"] = np.asarray(mu0, dtype=np.float64)
        return out

    def q(self, values, grad=True):
        mu = self.inputs if self.tie_mean else values["mu"]
        S, sigma_z = values["S"], values["Sigma_z"]
        kl, dmu_kl, dS_kl, dsig_kl = kl_uncertain(mu, S, self.inputs, sigma_z)

        def chain(dmu, dS):
            out = {"S": dS - dS_kl, "Sigma_z": -dsig_kl}
            if not self.tie_mean:
                out["mu"] = dmu - dmu_kl
            return out

        return QX(mu=mu, S=S, kl=kl, chain=chain if grad else None)

    def spec(self):
        return {"kind": self.kind, "tie_mean": self.tie_mean}

    def arrays(self):
        return {"inputs": self.inputs}
