"""Synthetic data with a known number of latent dimensions (for ARD checks and benchmarks)."""

from __future__ import annotations

import numpy as np


def gp_latent(N: int = 300, D: int = 30, latent_dim: int = 3, lengthscale: float = 1.5,
              noise_sd: float = 0.05, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Outputs that are a smooth GP draw of ``latent_dim``-D Gaussian inputs, plus noise.

    X ~ N(0, I) (N, latent_dim); every output column is an independent draw
    f_d ~ GP(0, k) with k(x, x') = exp(-|x - x'|^2 / (2 lengthscale^2)) at X;
    Y = F + noise_sd * eps. A Bayesian GP-LVM fitted to Y with Q > latent_dim should keep
    exactly ``latent_dim`` dimensions (issue 12's set: the defaults).

    Returns (Y (N, D), X (N, latent_dim)).
    """
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, latent_dim))
    d2 = np.sum((X[:, None, :] - X[None, :, :]) ** 2, -1)
    K = np.exp(-0.5 * d2 / lengthscale**2)
    w, V = np.linalg.eigh(K)  # K is PSD up to rounding: clip, no jitter needed
    F = (V * np.sqrt(np.clip(w, 0.0, None))) @ rng.standard_normal((N, D))
    Y = F + noise_sd * rng.standard_normal((N, D))
    return Y, X


#: the latent dimensions each view of ``mrd_views`` uses: x0 shared by all, x1 by a and b,
#: x2 private to a, x3 private to c
MRD_VIEW_DIMS = {"a": (0, 1, 2), "b": (0, 1), "c": (0, 3)}


def mrd_views(N: int = 100, dims=(8, 5, 40), noise_sd: float = 0.05, seed: int = 0) -> tuple[dict, np.ndarray]:
    """Three views of one 4-D latent space with a known segmentation (``MRD_VIEW_DIMS``), of
    very different widths (``dims``: a, b, c), as GPy's ``mrd_simulation``: smooth latent
    signals X (N, 4) (sines and cosines of different frequencies along a path), and each
    view tanh(X[:, its dims] W) + noise with W standard normal (D_v columns).

    Returns ({"a": (N, D_a), "b": ..., "c": ...}, X (N, 4))."""
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 4 * np.pi, N)
    X = np.c_[np.sin(t), np.cos(t / 2), np.sin(2 * t + 1), np.cos(1.5 * t + 2)]
    views = {}
    for (name, cols), D in zip(MRD_VIEW_DIMS.items(), dims):
        W = rng.standard_normal((len(cols), D))
        views[name] = np.tanh(X[:, list(cols)] @ W) + noise_sd * rng.standard_normal((N, D))
    return views, X
