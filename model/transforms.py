"""Positive transforms between unconstrained optimiser space and parameter space.

``softplus`` (GPy's "logexp") is the default for every positive parameter: it is
linear for large values, so big parameters do not blow up the way exp does.
"""

from __future__ import annotations

import numpy as np


class Identity:
    name = "identity"

    @staticmethod
    def forward(x):
        return np.asarray(x, dtype=np.float64)

    @staticmethod
    def inverse(y):
        return np.asarray(y, dtype=np.float64)

    @staticmethod
    def gradfactor(x):
        """d forward(x) / dx."""
        return np.ones_like(np.asarray(x, dtype=np.float64))


class Softplus:
    """y = log(1 + exp(x)) + lower, computed without overflow."""

    name = "softplus"

    def __init__(self, lower: float = 0.0):
        self.lower = float(lower)

    def forward(self, x):
        x = np.asarray(x, dtype=np.float64)
        return np.logaddexp(0.0, x) + self.lower

    def inverse(self, y):
        y = np.asarray(y, dtype=np.float64) - self.lower
        if np.any(y <= 0):
            raise ValueError("softplus inverse needs values above the lower bound")
        # log(exp(y) - 1) = y + log(1 - exp(-y)), stable for large and small y
        return y + np.log(-np.expm1(-y))

    def gradfactor(self, x):
        x = np.asarray(x, dtype=np.float64)
        return 0.5 * (1.0 + np.tanh(0.5 * x))  # logistic sigmoid, no overflow


IDENTITY = Identity()
POSITIVE = Softplus()
#: variances of q(X): a tiny floor keeps log S finite in the KL term
POSITIVE_FLOOR = Softplus(lower=1e-10)
