"""Input validation shared by the kernel classes (compiled kernels get only clean arrays)."""

from __future__ import annotations

import numpy as np

from .. import _numba_config as cfg


def as_points(X, input_dim: int, name: str = "X") -> np.ndarray:
    """C-contiguous float64 (N, input_dim) array; a 1-D array is read as one point."""
    X = np.ascontiguousarray(X, dtype=np.float64)
    if X.ndim == 1:
        X = X.reshape(1, -1)
    if X.ndim != 2 or X.shape[1] != input_dim:
        raise ValueError(f"{name} must have shape (N, {input_dim}), got {X.shape}")
    return X


def as_gaussians(mu, S, input_dim: int) -> tuple[np.ndarray, np.ndarray]:
    """Means and diagonal variances of q(X), both C-contiguous float64 (N, Q)."""
    mu = as_points(mu, input_dim, "mu")
    S = as_points(S, input_dim, "S")
    if S.shape != mu.shape:
        raise ValueError(f"S must have the shape of mu {mu.shape}, got {S.shape}")
    return mu, S


def as_array(a, shape: tuple, name: str) -> np.ndarray:
    """C-contiguous float64 array of exactly ``shape``."""
    a = np.ascontiguousarray(a, dtype=np.float64)
    if a.shape != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)}, got {a.shape}")
    return a


def positive_vector(value, input_dim: int, name: str) -> np.ndarray:
    """(input_dim,) float64 array from a scalar or a vector of positive numbers."""
    v = np.asarray(value, dtype=np.float64)
    if v.ndim == 0:
        v = np.full(input_dim, float(v))
    if v.shape != (input_dim,):
        raise ValueError(f"{name} must be a scalar or have shape ({input_dim},), got {v.shape}")
    if not np.all(v > 0):
        raise ValueError(f"{name} must be positive, got {v}")
    return v.copy()


def positive_scalar(value, name: str) -> np.ndarray:
    v = np.asarray(value, dtype=np.float64)
    if v.shape != () or not v > 0:
        raise ValueError(f"{name} must be a positive scalar, got {value!r}")
    return v.copy()


def run_blocks(kernel, n_points: int, *args):
    """Call a compiled kernel over ``n_points`` data points: its ``cfg.n_chunks`` blocks of
    points on ``cfg.threads_for`` threads (one when the points are few or the machine is
    busy; never more than the calling thread's ``numba.get_num_threads()``)."""
    with cfg.thread_limit(n_points):
        return kernel(*args, cfg.n_chunks(n_points))


def psi_gradient_inputs(kernel, dL_dpsi0, dL_dPsi1, dL_dPsi2, mu, S, Z):
    """Validated (dL_dpsi0 (N,), dL_dPsi1 (N, M), dL_dPsi2 (M, M), mu, S (N, Q), Z (M, Q)),
    the arguments of every ``psi_gradients``."""
    mu, S = as_gaussians(mu, S, kernel.input_dim)
    Z = as_points(Z, kernel.input_dim, "Z")
    N, M = mu.shape[0], Z.shape[0]
    return (as_array(dL_dpsi0, (N,), "dL_dpsi0"), as_array(dL_dPsi1, (N, M), "dL_dPsi1"),
            as_array(dL_dPsi2, (M, M), "dL_dPsi2"), mu, S, Z)


def psi_gradient_n_inputs(kernel, dL_dpsi0, dL_dPsi1, dL_dPsi2n, mu, S, Z):
    """Validated (dL_dpsi0 (N,), dL_dPsi1 (N, M), dL_dPsi2n (N, M, M), mu, S (N, Q), Z (M, Q)),
    the arguments of every ``psi_gradients_n``."""
    mu, S = as_gaussians(mu, S, kernel.input_dim)
    Z = as_points(Z, kernel.input_dim, "Z")
    N, M = mu.shape[0], Z.shape[0]
    return (as_array(dL_dpsi0, (N,), "dL_dpsi0"), as_array(dL_dPsi1, (N, M), "dL_dPsi1"),
            as_array(dL_dPsi2n, (N, M, M), "dL_dPsi2n"), mu, S, Z)
