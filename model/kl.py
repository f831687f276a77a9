"""KL divergences between q(X) and the prior p(X)."""

from __future__ import annotations

import numpy as np


def kl_static(mu: np.ndarray, S: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """KL(q(X) || N(0, I)) for q(X) = prod_n N(mu_n, diag S_n)  (KLstatic).

    mu, S : (N, Q). Returns (KL, dKL/dmu (N, Q), dKL/dS (N, Q)).
    """
    kl = 0.5 * float(np.sum(mu * mu + S - np.log(S))) - 0.5 * mu.size
    return kl, mu.copy(), 0.5 * (1.0 - 1.0 / S)
