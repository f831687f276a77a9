"""p(X) = prod_n N(x_n | 0, I) with q(X) = prod_n N(mu_n, diag S_n)  (qXstatic, KLstatic)."""

from __future__ import annotations

import numpy as np

from ..kl import kl_static
from ..params import Block
from ..transforms import IDENTITY, POSITIVE_FLOOR
from .base import QX, LatentPrior


class StaticPrior(LatentPrior):
    """The standard variational GP-LVM prior. Free parameters: "mu" (N, Q) and "S" (N, Q)."""

    kind = "static"
    row_blocks = ("mu", "S")

    def __init__(self, N: int, Q: int):
        self.N, self.Q = int(N), int(Q)

    def blocks(self):
        return [Block("mu", (self.N, self.Q), IDENTITY), Block("S", (self.N, self.Q), POSITIVE_FLOOR)]

    def initial_values(self, mu0, S0):
        return {"mu": np.asarray(mu0, dtype=np.float64), "S": np.asarray(S0, dtype=np.float64)}

    def q(self, values, grad=True):
        mu, S = values["mu"], values["S"]
        kl, dkl_dmu, dkl_dS = kl_static(mu, S)
        return QX(mu=mu, S=S, kl=kl,
                  chain=lambda dmu, dS: {"mu": dmu - dkl_dmu, "S": dS - dkl_dS})
