"""The fit's L-BFGS (model/_lbfgs.py) takes L-BFGS-B's steps on unconstrained problems."""

import numpy as np
import pytest
from scipy.optimize import minimize, rosen, rosen_der

from bgplvm._lbfgs import minimize_lbfgs


def _rosen(x):
    return rosen(x), rosen_der(x)


@pytest.mark.parametrize("memory", [3, 10, 50])
def test_iterates_are_scipys_lbfgsb(memory):
    """Same first step, same quasi-Newton directions, same Moré-Thuente line search: the
    iterates agree with scipy's L-BFGS-B to rounding for 40 iterations."""
    x0 = np.tile([-1.2, 1.0], 10)
    ours, ref = [], []
    minimize_lbfgs(_rosen, x0, 40, 1000, memory=memory, callback=lambda r: ours.append(r.x.copy()))
    minimize(_rosen, x0, jac=True, method="L-BFGS-B", callback=lambda xk: ref.append(xk.copy()),
             options=dict(maxcor=memory, maxiter=40))
    assert len(ours) == len(ref) == 40
    np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-8)


def test_converges_and_reports_why():
    r = minimize_lbfgs(_rosen, np.tile([-1.2, 1.0], 5), 1000, 10000, memory=10)
    assert r.status == 0 and r.message.startswith("CONVERGENCE") and r.fun < 1e-8
    np.testing.assert_allclose(r.x, 1.0, atol=1e-4)
    r = minimize_lbfgs(_rosen, np.tile([-1.2, 1.0], 5), 5, 10000)
    assert r.status == 1 and r.nit == 5


def test_a_failed_evaluation_shortens_the_step():
    """A huge value (what the fit returns for a Cholesky failure) beyond |x| > 2 makes the
    line search back off; the run still converges inside."""
    def f(x):
        if np.any(np.abs(x) > 2.0):
            return 1e300, np.zeros_like(x)
        return float(np.sum((x - 1.5) ** 2)), 2 * (x - 1.5)

    r = minimize_lbfgs(f, np.zeros(4), 100, 1000)
    assert r.status == 0 and np.all(np.abs(r.x) <= 2.0)
    np.testing.assert_allclose(r.x, 1.5, atol=1e-6)


def test_a_line_search_that_cannot_descend_ends_abnormally():
    """A gradient that points the wrong way (f rises along -g): no step lowers f, the
    memory is empty, the run ends with status 2 at the start point."""
    r = minimize_lbfgs(lambda x: (float(x @ x), -2 * x), np.ones(3), 10, 100)
    assert r.status == 2 and r.message.startswith("ABNORMAL")
    np.testing.assert_array_equal(r.x, np.ones(3))


def test_the_fit_falls_back_to_scipy_without_the_line_search(monkeypatch):
    """Where scipy lacks its private DCSRCH the fit runs scipy's L-BFGS-B: same steps."""
    from bgplvm import BayesianGPLVM, _lbfgs

    Y = np.random.default_rng(0).standard_normal((30, 4))
    a = BayesianGPLVM(Y, latent_dim=2, num_inducing=5, seed=0).fit(max_iters=15, progress=False)
    monkeypatch.setattr(_lbfgs, "AVAILABLE", False)
    b = BayesianGPLVM(Y, latent_dim=2, num_inducing=5, seed=0).fit(max_iters=15, progress=False)
    assert a.fit_info["iterations"] == b.fit_info["iterations"] == 15
    np.testing.assert_allclose(a.elbo(), b.elbo(), rtol=1e-6)


def test_a_noisy_objective_keeps_descending():
    """f = a smooth quadratic + deterministic noise of 1e-2 (the bound's rounding noise
    at an ill-conditioned Kuu), exact gradient: Moré-Thuente fails near f ~ 1e-2, the
    noise-tolerant search (relaxed Armijo, eps_f estimated) goes on to the minimum."""
    a = np.logspace(0, 3, 20)
    w = np.random.default_rng(0).standard_normal(20)

    def f(x):
        return 0.5 * float(np.sum(a * x * x)) + 1e-2 * np.sin(1e9 * float(x @ w)), a * x

    r = minimize_lbfgs(f, np.ones(20), 2000, 20000, memory=10)
    assert r.status == 0
    assert 0.5 * np.sum(a * r.x**2) < 1e-8


def test_noise_level_sees_the_noise_and_not_the_slope():
    from bgplvm._lbfgs import noise_level

    x = np.ones(5)
    eps, n = noise_level(lambda z: (float(z @ z), 2 * z), x, 5.0)
    assert n == 4 and eps < 1e-8
    rng = np.random.default_rng(1)
    eps, _ = noise_level(lambda z: (float(z @ z) + rng.normal(scale=0.1), 2 * z), x, 5.0)
    assert 0.02 < eps < 0.5
