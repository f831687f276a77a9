"""The default fit: stops when the bound stops moving, scales the parameter blocks, and on
data with 3 true latent dimensions keeps exactly 3 of 8 (issue 12)."""

from __future__ import annotations

import numpy as np
import pytest

from bgplvm_datasets.synthetic import gp_latent
from model import BayesianGPLVM
from model.io import ACTIVE_FRACTION
from model.optimize import block_scales


def _data(N=40, D=5, seed=0):
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 3, N)
    return np.c_[np.sin(t), np.cos(2 * t), t, t**2, np.sin(3 * t)][:, :D] + 0.05 * rng.standard_normal((N, D))


def test_block_scales_even_out_the_curvature_of_each_block():
    """On a quadratic with curvature c_b in block b, scales are proportional to c_b^-1/2."""
    curv = np.r_[np.full(5, 4.0), np.full(3, 1e4), [0.01]]
    blocks = [slice(0, 5), slice(5, 8), slice(8, 9)]

    def f(x):
        return -0.5 * np.sum(curv * x**2), -curv * x

    free = np.ones(9, dtype=bool)
    s, n = block_scales(f, np.ones(9), free, blocks, np.random.default_rng(0))
    assert n == 1 + len(blocks)
    np.testing.assert_allclose(s / s[0], np.sqrt(curv[0] / curv), rtol=1e-6)
    free[5:8] = False  # frozen entries are left out
    s2, _ = block_scales(f, np.ones(9), free, blocks, np.random.default_rng(0))
    assert s2.shape == (6,)
    np.testing.assert_allclose(s2[-1] / s2[0], np.sqrt(curv[0] / curv[-1]), rtol=1e-6)


def test_default_fit_stops_when_the_bound_stops_moving():
    m = BayesianGPLVM(_data(), latent_dim=2, num_inducing=8, seed=0)
    m.fit(progress=False)
    info = m.fit_info
    assert info["converged"] and not info["stopped"]
    assert info["iterations"] < 3000
    assert info["bound"] == pytest.approx(m.elbo())
    # the bound had indeed stopped moving: more iterations gain little per data value
    before = m.elbo()
    m.fit(max_iters=200, init_iters=0, tol=0, progress=False)  # tol=0: no convergence test
    assert m.fit_info["iterations"] <= 200 and not m.fit_info["converged"]
    assert m.elbo() - before < 1e-3 * m.Y.size


def test_fit_arguments_are_checked():
    m = BayesianGPLVM(_data(N=12), latent_dim=2, num_inducing=4, seed=0)
    with pytest.raises(ValueError, match="tol"):
        m.fit(tol=-1.0)
    with pytest.raises(ValueError, match="init_iters"):
        m.fit(max_iters=10, init_iters=11)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_synthetic_three_true_dimensions_are_found(seed):
    """Issue 12's set: outputs a smooth GP draw of 3-D Gaussian inputs (N=300, D=30,
    lengthscale 1.5, noise sd 0.05), Q=8, M=30. The default fit keeps exactly 3 dimensions
    (ARD weight above 5% of the largest, the model summary's rule), and those 3 carry the
    true inputs: a linear map of the 3 latent means explains most of X."""
    Y, X = gp_latent(N=300, D=30, latent_dim=3, lengthscale=1.5, noise_sd=0.05, seed=0)
    m = BayesianGPLVM(Y, latent_dim=8, num_inducing=30, seed=seed).fit(progress=False)
    w = m.ard_weights
    on = w > ACTIVE_FRACTION * w.max()
    print(f"\nseed {seed}: bound {m.elbo():.1f}, ARD {np.round(w / w.max(), 4).tolist()}, "
          f"{m.fit_info['iterations']} iterations, {m.fit_info['evaluations']} evaluations")
    assert on.sum() == 3
    H = np.c_[m.latent_mean[:, on], np.ones(len(X))]
    resid = X - H @ np.linalg.lstsq(H, X, rcond=None)[0]
    r2 = 1 - resid.var(0) / X.var(0)
    assert np.all(r2 > 0.8), r2
    assert m.noise_variance == pytest.approx(0.05**2, rel=0.5)
