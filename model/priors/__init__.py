"""Priors on the latent inputs X, each owning the free parameters of q(X).

The bound (jensensSplit2) is F = F_hat(q(X)) - KL(q(X) || p(X)), and F_hat needs only the
marginals of q(X): means mu (N, Q) and diagonal variances S (N, Q) for the psi statistics.
A prior object turns its own free parameters into (mu, S), returns the KL term and chains
dF_hat/dmu, dF_hat/dS back to those parameters, so that the bound, fitting, saving and
predictions keep one code path whatever the prior:

- ``StaticPrior``: p(X) = prod N(x_n | 0, I), q(X) = prod N(mu_n, diag S_n)   (KLstatic)
- ``DynamicalPrior``: p(X | t) = prod_q N(x_q | 0, Kt), q reparametrised by (mu_bar, lambda)
  (SFixedPointQ, KLasSummationOverQ), one block of Kt per independent sequence.
- ``StateSpacePrior``: the same prior and q(X) by Kalman filtering and smoothing over the
  time kernel's state-space form, linear in the number of frames.
- ``UncertainInputPrior``: p(X | Z) = prod N(x_n | z_n, Sigma_z) for observed noisy inputs Z
  (uncertainInputsPX), q(X) free or with its means tied to Z.
"""

from .base import LatentPrior, QX  # noqa: F401
from .dynamical import DynamicalPrior, GaussianBlocks  # noqa: F401
from .state_space import StateSpacePrior  # noqa: F401
from .static import StaticPrior  # noqa: F401
from .uncertain import UncertainInputPrior  # noqa: F401
