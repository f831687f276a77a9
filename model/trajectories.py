"""Forecast trajectories that draw f jointly along their own path
(``AutoregressiveGP.sample_forecast(joint=True)``, the default).

A trajectory of an autoregressive GP is y_{k+1} = f(x_k) + eps, x_k the window of its last
tau values. Drawing each step's f(x_k) independently from its marginal predictive (what
``joint=False`` does) treats the model's error at x_k as unrelated to its error at x_{k-1},
a window one step along the same path: the errors of a path then partly cancel, and the
trajectories spread too little at first. The posterior process of q(u),

    cov(f(x), f(x')) = k(x, x') - k_u(x)^T (Kuu^{-1} - (Kuu + beta Psi2)^{-1}) k_u(x')
                     = k(x, x') - V_x . V_x' + W_x . W_x'    (V = Luu^{-1} k_u, W = LB^{-1} V)

(eq:testPosteriorF's variance, off the diagonal), gives each trajectory's f at its windows
x_1 .. x_k jointly: with the Cholesky factor L of their covariance built one row per step,
f(x_k) = m(x_k) + l_k . xi_{1..k-1} + d_k xi_k, where l_k = L_{<k}^{-1} c_k (c_k its
covariances with the earlier windows), d_k^2 = c_kk - |l_k|^2 and xi the standard normals
already drawn. The windows are taken as exact (the model's Sigma_z is the training
windows' input noise, not the trajectory's). Cost: O(steps^2 (M + window D)) per
trajectory, trajectories in batches of at most ``BATCH_BYTES`` of buffers.

On Mackey-Glass (150 steps, window 12, M = 40, 100 steps ahead from 20 origins after the
training series, ``bgplvm reproduce calibration``): see the reproduction's table.
"""

from __future__ import annotations

import numpy as np

from .linalg import JITTER, solve_lower

#: the largest buffers (bytes) one batch of trajectories holds: L (n, steps, steps) per q(u), ...
BATCH_BYTES = 64 * 2 ** 20


def joint_trajectories(kernel, Z: np.ndarray, posteriors: list, Y_mean: np.ndarray, noise_variance: float,
                       start: np.ndarray, steps: int, n_samples: int, rng, include_noise: bool = True) -> np.ndarray:
    """(n_samples, steps, D) trajectories from the window ``start`` (tau D,), f drawn jointly
    along each (module docstring); y = f + noise when ``include_noise``, else f, goes back
    into the window. ``posteriors``: [(columns, Posterior)] (``BayesianGPLVM._posteriors``)."""
    D = Y_mean.shape[0]
    per = 8 * len(posteriors) * steps * (steps + 2 * Z.shape[0] + 2 * D) + 8 * steps * (start.size + D)
    batch = int(max(1, min(n_samples, BATCH_BYTES // per)))
    out = np.empty((n_samples, steps, D))
    for a in range(0, n_samples, batch):
        b = min(n_samples, a + batch)
        out[a:b] = _batch(kernel, Z, posteriors, Y_mean, noise_variance, start, steps, b - a, rng, include_noise)
    return out


def _batch(kernel, Z, posteriors, Y_mean, noise_variance, start, steps, n, rng, include_noise) -> np.ndarray:
    D, M = Y_mean.shape[0], Z.shape[0]
    G = len(posteriors)
    win = np.tile(start, (n, 1))
    X = np.empty((n, steps, start.size))  # each trajectory's windows
    V, W = np.empty((G, n, steps, M)), np.empty((G, n, steps, M))
    L = np.zeros((G, n, steps, steps))
    xi = np.empty((n, steps, D))
    out = np.empty((n, steps, D))
    sd_noise = np.sqrt(noise_variance) if include_noise else 0.0
    for s in range(steps):
        X[:, s] = win
        Kxu, kd = kernel.K(win, Z), kernel.Kdiag(win)
        kp = np.stack([kernel.Kpaired(win, X[:, j]) for j in range(s)], axis=1) if s else np.zeros((n, 0))
        xi[:, s] = rng.standard_normal((n, D))
        f = np.empty((n, D))
        for g, (cols, post) in enumerate(posteriors):
            v = solve_lower(post.Luu, Kxu.T).T
            w = solve_lower(post.LB, v.T).T
            V[g, :, s], W[g, :, s] = v, w
            c = kp - np.einsum("nm,nsm->ns", v, V[g, :, :s]) + np.einsum("nm,nsm->ns", w, W[g, :, :s])
            l = _forward(L[g, :, :s, :s], c)
            d2 = kd - np.sum(v * v, 1) + np.sum(w * w, 1) - np.sum(l * l, 1)
            d = np.sqrt(np.maximum(d2, 0.0) + JITTER * JITTER * kd)
            L[g, :, s, :s], L[g, :, s, s] = l, d
            f[:, cols] = Kxu @ post.Bmat + np.einsum("ns,nsd->nd", l, xi[:, :s, cols]) \
                + d[:, None] * xi[:, s, cols]
        out[:, s] = f + Y_mean + sd_noise * rng.standard_normal((n, D))
        win = np.concatenate([win[:, D:], out[:, s]], axis=1)
    return out


def _forward(L: np.ndarray, c: np.ndarray) -> np.ndarray:
    """(n, s) l with L[i] l[i] = c[i] for lower-triangular L (n, s, s) and c (n, s)."""
    l = np.empty_like(c)
    for i in range(c.shape[1]):
        l[:, i] = (c[:, i] - np.einsum("nj,nj->n", L[:, i, :i], l[:, :i])) / L[:, i, i]
    return l
