"""Issue 12's synthetic set in CI: the default fit finds exactly the true latent dimensions."""

import numpy as np
import pytest

from bgplvm.datasets.synthetic import gp_latent
from bgplvm import BayesianGPLVM

#: an ARD weight above this fraction of the largest counts as "on" (as bench/bench_fit.py)
ACTIVE_FRACTION = 0.05


@pytest.mark.parametrize("seed", [1])
def test_default_fit_keeps_exactly_the_three_true_dimensions(seed):
    """N=300, D=30 outputs of a smooth GP (lengthscale 1.5, noise sd 0.05) of 3-D Gaussian
    inputs; Q=8, M=30. The issue saw seed 1 stop at a bound of -903 with a fourth
    dimension half on (2000 iterations, the old defaults), GPy's own fit -380. The default
    ``fit()`` now keeps exactly 3 dimensions, ends near or above GPy 1.15's median bound
    after 3000 evaluations (473; ours 481-490 for seeds 0-2, bench/README.md; asserted with
    room for rounding-path changes), and its 3 active dimensions carry the true inputs: a
    linear map from them explains most of X's variance (R^2 0.97-0.99 measured)."""
    Y, X = gp_latent(N=300, D=30, latent_dim=3, lengthscale=1.5, noise_sd=0.05, seed=0)
    m = BayesianGPLVM(Y, latent_dim=8, num_inducing=30, seed=seed).fit(progress=False)
    w = np.asarray(m.ard_weights)
    on = w > ACTIVE_FRACTION * w.max()
    assert on.sum() == 3, f"ARD weights {np.round(w / w.max(), 3)}"
    assert m.elbo() > 450
    mu = np.asarray(m.latent_mean)[:, on]
    A = np.c_[mu, np.ones(len(mu))]
    resid = X - A @ np.linalg.lstsq(A, X, rcond=None)[0]
    r2 = 1 - resid.var(0) / X.var(0)
    assert np.all(r2 > 0.8), f"R^2 of the true inputs from the active dims: {np.round(r2, 3)}"
