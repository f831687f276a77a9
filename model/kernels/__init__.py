"""Covariance functions with closed-form psi statistics and exact gradients (Numba)."""

from .base import Kernel
from .rbf import RBF

KERNEL_NAMES = ("rbf",)


def make_kernel(spec, input_dim: int) -> Kernel:
    """Temporary: only "rbf" until the other kernels land."""
    if isinstance(spec, Kernel):
        if spec.input_dim != int(input_dim):
            raise ValueError(f"kernel has input_dim {spec.input_dim}, expected {input_dim}")
        return spec
    name = str(spec).replace(" ", "").lower()
    if name != "rbf":
        raise ValueError(f"unknown kernel {spec!r}; known names: {', '.join(KERNEL_NAMES)}")
    return RBF(input_dim)


def warmup() -> None:
    import numpy as np

    from .. import _numba_config as cfg

    rng = np.random.default_rng(0)
    mu, S, Z = rng.standard_normal((3, 2)), np.full((3, 2), 0.5), rng.standard_normal((2, 2))
    k = RBF(2)
    for par in (False, True):
        with cfg.parallel_mode(par):
            k.K(Z), k.K(mu, Z), k.K_gradients(np.eye(2), Z)
            k.psi0(mu, S), k.psi1(mu, S, Z), k.psi2(mu, S, Z), k.psi2n(mu, S, Z)
            k.psi_gradients(np.ones(3), np.ones((3, 2)), np.eye(2), mu, S, Z)


__all__ = ["Kernel", "RBF", "make_kernel", "warmup", "KERNEL_NAMES"]
