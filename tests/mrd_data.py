"""Multi-view test data with a known shared / private structure (``bgplvm.MRD`` tests)."""

from __future__ import annotations

import numpy as np


def three_views(N=80, seed=0, noise=0.05):
    """Three views of a 4-D latent space (as GPy's mrd_simulation): x0 shared by all, x1
    shared by views a and b, x2 private to a, x3 private to c."""
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 4 * np.pi, N)
    X = np.c_[np.sin(t), np.cos(t / 2), np.sin(2 * t + 1), np.cos(1.5 * t + 2)]
    uses = {"a": [0, 1, 2], "b": [0, 1], "c": [0, 3]}
    dims = {"a": 8, "b": 5, "c": 12}
    views = {}
    for n, cols in uses.items():
        W = rng.standard_normal((len(cols), dims[n]))
        views[n] = np.tanh(X[:, cols] @ W) + noise * rng.standard_normal((N, dims[n]))
    return views
