"""The latent-prior interface (see the package docstring)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..params import Block


@dataclass
class QX:
    """q(X) at one parameter value: its marginals, the KL term, and the chain rule.

    mu, S : (N, Q) marginal means and variances of q(X) (what the psi statistics see).
    kl : KL(q(X) || p(X)).
    chain(dF_dmu, dF_dS) -> dict block name -> gradient of F_hat - KL w.r.t. that block's
        (constrained) value, given dF_hat/dmu and dF_hat/dS (N, Q) each.
    """

    mu: np.ndarray
    S: np.ndarray
    kl: float
    chain: Callable[[np.ndarray, np.ndarray], dict]


class LatentPrior:
    """A prior p(X) together with the parametrisation of q(X) it implies.

    Subclasses define ``kind`` (saved in model files), ``blocks()`` (the free parameters of
    q(X) and of the prior itself, as ``Block``s), ``initial_values(mu0, S0)`` (values of
    those blocks whose q(X) has marginals close to (mu0, S0)) and ``q(values)``.
    """

    kind: str = "prior"
    #: the blocks with one row per data point (their rows go with the data's rows: a
    #: distributed model keeps them on the workers); the other blocks are the prior's own
    row_blocks: tuple[str, ...] = ()
    #: block names whose gradients the caller will not read (frozen ones, set by the model
    #: for each evaluation); ``q``'s chain may return 0 for them instead of computing them
    skip_gradients: frozenset = frozenset()

    def blocks(self) -> list[Block]:
        raise NotImplementedError

    def initial_values(self, mu0: np.ndarray, S0: np.ndarray) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def q(self, values: dict[str, np.ndarray], grad: bool = True) -> QX:
        raise NotImplementedError

    # --- what model files need besides the parameter vector ------------------------------
    def spec(self) -> dict:
        """JSON-able description (``kind`` and settings) to rebuild the prior."""
        return {"kind": self.kind}

    def arrays(self) -> dict[str, np.ndarray]:
        """Numeric arrays to rebuild the prior (e.g. time stamps), saved in the model file."""
        return {}
