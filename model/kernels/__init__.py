"""Covariance functions with closed-form psi statistics and exact gradients (Numba).

Interface: :class:`Kernel` (``base.py``). Kernels: :class:`RBF` (ARD exponentiated
quadratic), :class:`Linear` (ARD linear), :class:`Bias`, :class:`White`, and :class:`Sum`
of them with exact Psi2 cross terms. :func:`make_kernel` builds one from a string.
Compiled code lives in the private ``_*_numba.py`` modules; flags in
``model/_numba_config.py``.

Conventions shared by every kernel:

- gradients are w.r.t. the positive parameters themselves (``variance``, ``lengthscale``,
  ``variances``); the model applies its transform's chain rule;
- ``psi_gradients`` is exact for any (M, M) dL_dPsi2 (the bound passes a symmetric one);
- limit S -> 0: psi0 -> Kdiag(mu) (white noise included, as k(x, x) holds it),
  Psi1 -> K(mu, Z), Psi2 -> K(Z, mu) K(mu, Z) (white noise contributes nothing:
  K(mu, Z) with a second argument has no white part, as in GPy).
"""

from .base import Kernel
from .bias import Bias, White
from .factory import KERNEL_NAMES, make_kernel
from .linear import Linear
from .rbf import RBF
from .sum import Sum


def warmup() -> None:
    """Compile (or load from the on-disk cache) every Numba kernel by calling each once on
    tiny arrays. (One compiled function per kernel serves any number of threads.)"""
    import numpy as np

    rng = np.random.default_rng(0)
    N, M, Q = 3, 2, 2
    mu, S, Z = rng.standard_normal((N, Q)), np.full((N, Q), 0.5), rng.standard_normal((M, Q))
    w0, W1, W2 = np.ones(N), np.ones((N, M)), np.eye(M)
    k = make_kernel("rbf+linear+bias+white", Q)
    k.K(Z), k.K(mu, Z), k.Kdiag(mu), k.K_gradients(np.eye(M), Z)
    k.psi0(mu, S), k.psi1(mu, S, Z), k.psi2(mu, S, Z), k.psi2n(mu, S, Z), k.psi2n_centred(mu, S, Z)
    k.psi_gradients(w0, W1, W2, mu, S, Z)
    k.psi_gradients_n(w0, W1, np.stack([W2] * N), mu, S, Z)
    for part in k.parts:  # the zero-weight shortcuts of the single kernels
        part.psi_gradients(w0, W1, 0 * W2, mu, S, Z)
        part.psi_gradients(w0, 0 * W1, W2, mu, S, Z)


__all__ = ["Kernel", "RBF", "Linear", "Bias", "White", "Sum", "make_kernel", "KERNEL_NAMES", "warmup"]
