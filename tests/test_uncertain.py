"""Uncertain inputs (paper section "Extensions for Different Kinds of Inputs"): the prior
p(X | Z) = prod N(z_n, Sigma_z) (uncertainInputsPX) and its KL against a dense formula,
gradients of every block for free and tied q(X), the exact-GP limit, autoregressive k-step
forecasts, the semi-supervised GP's frozen entries, per-entry freeze masks, bad input and
model files."""

import io
import warnings

import numpy as np
import pytest
from scipy.linalg import cho_solve

from gradcheck import assert_gradient, assert_model_block_gradients
from bgplvm import AutoregressiveGP, BayesianGPLVM, ForecastSpreadWarning, SemiSupervisedGPR, UncertainInputGPR
from bgplvm.autoregressive import lagged_pairs
from bgplvm.params import Block, ParamLayout
from bgplvm.priors import UncertainInputPrior
from bgplvm.transforms import IDENTITY, POSITIVE, POSITIVE_FLOOR


def _regression_data(N=15, Q=2, D=2, seed=0):
    rng = np.random.default_rng(seed)
    Z = rng.uniform(-2, 2, (N, Q))
    F = np.c_[np.sin(1.5 * Z[:, 0]) + 0.3 * Z[:, 1], np.cos(Z[:, 0] * Z[:, 1])][:, :D]
    return Z, F + 0.05 * rng.standard_normal((N, D))


def _set(m, **values):
    v = m._values()
    v.update({k: np.broadcast_to(np.asarray(val, dtype=np.float64), v[k].shape).copy() for k, val in values.items()})
    m._set_x(m._layout.pack(v))


# --- the prior: KL and its gradients --------------------------------------------------------------
def _dense_kl(mu, S, Z, sigma):
    """sum_n KL(N(mu_n, diag S_n) || N(z_n, diag sigma)) with explicit matrices (reference)."""
    kl = 0.0
    P = np.diag(sigma)
    for n in range(mu.shape[0]):
        C = np.diag(S[n])
        d = Z[n] - mu[n]
        kl += 0.5 * (np.trace(np.linalg.solve(P, C)) + d @ np.linalg.solve(P, d) - len(d)
                     + np.linalg.slogdet(P)[1] - np.linalg.slogdet(C)[1])
    return kl


@pytest.mark.parametrize("tie", [False, True])
def test_kl_matches_dense_formula_and_vanishes_at_the_prior(tie):
    rng = np.random.default_rng(0)
    Z = rng.standard_normal((6, 3))
    prior = UncertainInputPrior(Z, tie_mean=tie)
    mu = Z + 0.3 * rng.standard_normal(Z.shape)
    S = rng.uniform(0.1, 2.0, Z.shape)
    sigma = rng.uniform(0.2, 1.5, 3)
    qx = prior.q({"mu": mu, "S": S, "Sigma_z": sigma}, grad=False)
    assert qx.kl == pytest.approx(_dense_kl(Z if tie else mu, S, Z, sigma), rel=1e-12)
    np.testing.assert_array_equal(qx.mu, Z if tie else mu)
    # q(X) equal to the prior: KL = 0
    at_prior = prior.q({"mu": Z, "S": np.tile(sigma, (6, 1)), "Sigma_z": sigma}, grad=False)
    assert at_prior.kl == pytest.approx(0.0, abs=1e-12)
    assert [b.name for b in prior.blocks()] == (["S", "Sigma_z"] if tie else ["mu", "S", "Sigma_z"])


@pytest.mark.parametrize("tie", [False, True])
def test_prior_chain_rule_gradients(tie):
    """F = sum(w1 mu) + sum(w2 S) - KL against central differences in (mu, log S, log sigma)."""
    rng = np.random.default_rng(1)
    N, Q = 5, 3
    Z = rng.standard_normal((N, Q))
    prior = UncertainInputPrior(Z, tie_mean=tie)
    w1, w2 = rng.standard_normal((N, Q)), rng.standard_normal((N, Q))

    def f(x):
        mu = x[: N * Q].reshape(N, Q)
        S = np.exp(x[N * Q: 2 * N * Q]).reshape(N, Q)
        sig = np.exp(x[2 * N * Q:])
        qx = prior.q({"mu": mu, "S": S, "Sigma_z": sig})
        g = qx.chain(w1, w2)
        gmu = g["mu"] if not tie else np.zeros((N, Q))
        F = float(np.sum(w1 * qx.mu) + np.sum(w2 * qx.S)) - qx.kl
        return F, np.r_[gmu.ravel(), (g["S"] * S).ravel(), g["Sigma_z"] * sig]

    x0 = np.r_[(Z + 0.2 * rng.standard_normal((N, Q))).ravel(), rng.uniform(-2, 1, N * Q), rng.uniform(-1, 1, Q)]
    assert_gradient(f, x0, rtol=1e-6)


# --- the model's gradients, every block -------------------------------------------------------------
@pytest.mark.parametrize("tie, kernel", [(False, "rbf"), (True, "rbf"), (False, "rbf+linear+bias")])
def test_gradients_every_block(tie, kernel):
    Z, Y = _regression_data()
    m = UncertainInputGPR(Z, Y, num_inducing=6, kernel=kernel, tie_mean=tie, seed=0)
    rng = np.random.default_rng(2)
    values = {"S": rng.uniform(0.02, 0.3, Z.shape), "Sigma_z": np.array([0.1, 0.4])}
    if not tie:
        values["mu"] = Z + 0.1 * rng.standard_normal(Z.shape)
    _set(m, **values)
    assert {"S", "Sigma_z", "Z", "noise_variance"} <= set(m.param_names)
    assert ("mu" in m.param_names) is (not tie)
    assert_model_block_gradients(m)


def test_sigma_z_gradient_is_the_kl_derivative():
    """Only the KL depends on Sigma_z: its gradient is d(-KL)/d sigma in closed form."""
    Z, Y = _regression_data()
    m = UncertainInputGPR(Z, Y, num_inducing=5, seed=0)
    rng = np.random.default_rng(4)
    mu, S, sig = Z + 0.2 * rng.standard_normal(Z.shape), rng.uniform(0.05, 0.5, Z.shape), np.array([0.3, 0.07])
    _set(m, mu=mu, S=S, Sigma_z=sig)
    _, g = m._bound(m._x)
    sl = m._layout.slices["Sigma_z"]
    factor = POSITIVE_FLOOR.gradfactor(m._x[sl])  # d sigma / d raw
    expected = -0.5 * (len(Z) / sig - ((S + (mu - Z) ** 2).sum(0)) / sig**2)
    np.testing.assert_allclose(g[sl] / factor, expected, rtol=1e-10)


# --- the exact-GP limit -------------------------------------------------------------------------------
def _rbf(A, B, variance, lengthscale):
    r2 = np.sum(((A[:, None, :] - B[None, :, :]) / lengthscale) ** 2, axis=-1)
    return variance * np.exp(-0.5 * r2)


def _exact_gp(X, Y, Xs, variance, lengthscale, noise):
    """Exact GP regression (centred outputs, mean added back): predictive mean and variance
    of y*, and the log marginal likelihood, by one Cholesky."""
    Ym = Y.mean(0)
    Yc = Y - Ym
    L = np.linalg.cholesky(_rbf(X, X, variance, lengthscale) + noise * np.eye(len(X)))
    Ks = _rbf(Xs, X, variance, lengthscale)
    mean = Ks @ cho_solve((L, True), Yc) + Ym
    W = np.linalg.solve(L, Ks.T)
    var = variance - np.sum(W * W, 0) + noise
    a = np.linalg.solve(L, Yc)
    N, D = Yc.shape
    lml = -0.5 * N * D * np.log(2 * np.pi) - D * np.sum(np.log(np.diag(L))) - 0.5 * np.sum(a * a)
    return mean, var, lml


def test_sigma_z_to_zero_with_q_at_the_inputs_gives_the_exact_gp():
    Z, Y = _regression_data(N=15)
    Zs = np.random.default_rng(5).uniform(-2.5, 2.5, (7, 2))
    hyp = dict(variance=1.3, lengthscale=np.array([0.8, 1.5]), noise=0.05)
    mean_ex, var_ex, lml = _exact_gp(Z, Y, Zs, **hyp)
    m = UncertainInputGPR(Z, Y, num_inducing=len(Z), tie_mean=True, seed=0)
    errors = []
    for s in [1e-2, 1e-4, 1e-6, 1e-9]:
        _set(m, S=s, Sigma_z=s, Z=Z, **{"kernel.variance": hyp["variance"],
                                         "kernel.lengthscale": hyp["lengthscale"],
                                         "noise_variance": hyp["noise"]})
        mean, var = m.predict(Zs)  # x* ~ N(z*, Sigma_z): the uncertain-input predictive
        errors.append(np.max(np.abs(mean - mean_ex)) + np.max(np.abs(var - var_ex[:, None])))
    assert all(b < a for a, b in zip(errors, errors[1:])), errors
    # what is left is the jitter on Kuu (1e-6 x max(1, variance), ``bound.kuu_jitter``):
    # O(jitter / noise) = 2.6e-5 here
    np.testing.assert_allclose(mean, mean_ex, rtol=1e-4, atol=5e-5)
    np.testing.assert_allclose(var, np.repeat(var_ex[:, None], 2, 1), rtol=1e-4, atol=5e-5)
    # q(X) = p(X | Z) (KL = 0), inducing inputs at the data: the bound is the exact marginal
    assert m.elbo() == pytest.approx(lml, abs=1e-3)
    # deterministic test inputs without Sigma_z: the projected-process predictive, same answer
    np.testing.assert_allclose(m.predict(Zs, input_noise=False)[0], mean_ex, rtol=1e-4, atol=5e-5)


def test_fixed_inputs_model_is_a_gp_regression_and_keeps_q_fixed():
    Z, Y = _regression_data(N=20)
    m = UncertainInputGPR(Z, Y, num_inducing=20, fixed_inputs=True, seed=0)
    S0 = m.latent_variance.copy()
    m.fit(max_iters=60, progress=False)
    np.testing.assert_array_equal(m.latent_mean, Z)
    np.testing.assert_array_equal(m.latent_variance, S0)
    np.testing.assert_array_equal(m.input_noise_variance, 0.0)
    # with the fitted hyperparameters the exact GP gives the same predictions (M = N)
    v = m._values()
    Zs = np.random.default_rng(6).uniform(-2, 2, (5, 2))
    mean_ex, var_ex, _ = _exact_gp(Z, Y, Zs, float(v["kernel.variance"]), v["kernel.lengthscale"],
                                   float(v["noise_variance"]))
    mean, var = m.predict(Zs)
    # the inducing inputs moved during the fit: the sparse model is close, not identical
    np.testing.assert_allclose(mean, mean_ex, atol=0.02 * np.ptp(Y))
    np.testing.assert_allclose(var, np.repeat(var_ex[:, None], 2, 1), rtol=0.1)


def test_uncertain_test_inputs_give_the_moments_of_the_prediction():
    """predict(z, Z_star_var=V) is the mean and variance of the prediction at x* ~ N(z, V +
    Sigma_z) (meanFstar / covFstar, exact moments): against Monte Carlo over x* of the
    deterministic-input prediction. The test input's variance widens the prediction far
    beyond the fitted input noise's (a Z_star_var that was checked but not added passed the
    earlier 'v1 > v0' test on Sigma_z's 1e-6 alone)."""
    Z, Y = _regression_data(N=25)
    m = UncertainInputGPR(Z, Y, num_inducing=10, seed=0).fit(max_iters=80, progress=False)
    zs, V = np.array([[0.3, -0.4]]), np.array([[0.5, 0.5]])
    _, v0 = m.predict(zs, input_noise=False)
    mean1, v1 = m.predict(zs, Z_star_var=V)
    xs = zs + np.sqrt(V + m.input_noise_variance) * np.random.default_rng(3).standard_normal((40000, 2))
    mu_x, var_x = m.predict(xs, input_noise=False)
    se = mu_x.std(0) / np.sqrt(len(xs))
    assert np.all(np.abs(mean1[0] - mu_x.mean(0)) < 5 * se)
    np.testing.assert_allclose(v1[0], var_x.mean(0) + mu_x.var(0), rtol=0.03)
    assert np.all(v1 > 3 * v0)


# --- autoregressive forecasting ---------------------------------------------------------------------------
def _series(T=70):
    t = np.arange(T, dtype=np.float64)
    return np.sin(t / 4.0) + 0.5 * np.sin(t / 9.0)


def test_lagged_pairs_layout():
    y = np.arange(12.0).reshape(6, 2)  # T=6, D=2
    Z, Y = lagged_pairs(y, 2)
    np.testing.assert_array_equal(Z[0], [0, 1, 2, 3])
    np.testing.assert_array_equal(Y[0], [4, 5])
    np.testing.assert_array_equal(Z[-1], [6, 7, 8, 9])
    assert Z.shape == (4, 4) and Y.shape == (4, 2)


@pytest.mark.filterwarnings("ignore::bgplvm.ForecastSpreadWarning")  # a small model: its far forecast is wide
def test_k_step_variance_grows_only_when_it_is_propagated():
    s = _series()
    m = AutoregressiveGP(s, window=5, num_inducing=20, seed=0).fit(max_iters=150, progress=False)
    mean, var = m.forecast(steps=40, method="moments")
    assert mean.shape == var.shape == (40,)
    assert np.all(np.diff(var[:10]) > 0)  # each step adds the uncertainty of the last
    assert var[-1] > 100 * var[0]
    # the zero-variance variant: each step's variance is the one-step variance at an exact
    # window, nothing accumulates
    _, var0 = m.forecast(steps=40, propagate_uncertainty=False)
    assert var0.max() < 0.1 * var[-1]
    mean0, _ = m.forecast(steps=3, propagate_uncertainty=False)
    win = np.r_[s[-5:], mean0[:2]]
    one_step = m.predict(win[None, 2:7], input_noise=False)
    assert mean0[2] == pytest.approx(one_step[0][0, 0], rel=1e-10)


def test_uncertain_input_mean_tends_to_the_zero_variance_mean():
    """meanFstar / covFstar at N(window, v) tend to the deterministic predictive as v -> 0, and
    a propagated forecast whose fed-back variances are tiny follows the means-only forecast:
    the uncertain inputs change the forecast's mean only through the variances they carry."""
    s = _series()
    m = AutoregressiveGP(s, window=5, num_inducing=20, seed=0).fit(max_iters=150, progress=False)
    wins = lagged_pairs(s[:, None], 5)[0][-12:]
    mean0, var0 = m.predict(wins, input_noise=False)
    for v in (1e-6, 1e-9, 1e-12):
        mean, var = m.predict(wins, np.full(wins.shape, v), input_noise=False)
        np.testing.assert_allclose(mean, mean0, rtol=0, atol=1e3 * v + 1e-9)
        np.testing.assert_allclose(var, var0, rtol=1e-3, atol=1e3 * v + 1e-9)
    # the first step of a forecast has an exact window: both variants agree there
    fm, _ = m.forecast(steps=1, method="moments")
    fm0, _ = m.forecast(steps=1, propagate_uncertainty=False)
    assert fm[0] == pytest.approx(m.predict(s[None, -5:])[0][0, 0], rel=1e-8)
    assert abs(fm[0] - fm0[0]) < 1e-4 * max(1.0, abs(fm0[0]))


def test_sampled_trajectories_draw_each_step_from_its_own_window():
    """Monte Carlo forecasting, each step drawn on its own (joint=False): the first step's
    samples are N(mean, var) of the one-step predictive at the series' last window; a later
    step's samples follow the predictive at each trajectory's own window; the seed makes it
    reproducible."""
    s = _series()
    m = AutoregressiveGP(s, window=5, num_inducing=20, seed=0).fit(max_iters=150, progress=False)
    paths = m.sample_forecast(steps=6, n_samples=4000, seed=3, joint=False)
    assert paths.shape == (4000, 6)
    np.testing.assert_array_equal(paths, m.sample_forecast(steps=6, n_samples=4000, seed=3, joint=False))
    m1, v1 = m.predict(s[None, -5:])
    assert abs(paths[:, 0].mean() - m1[0, 0]) < 5 * np.sqrt(v1[0, 0] / 4000)
    assert paths[:, 0].var() == pytest.approx(v1[0, 0], rel=0.1)
    # step 3 of trajectory 7, given its own window (the series' end, then its first draws)
    win = np.r_[s[-3:], paths[7, :2]]
    m3, v3 = m.predict(win[None])
    rng = np.random.default_rng(3)
    rng.standard_normal((4000, 1)), rng.standard_normal((4000, 1))
    z = rng.standard_normal((4000, 1))[7, 0]
    assert paths[7, 2] == pytest.approx(m3[0, 0] + np.sqrt(v3[0, 0]) * z, rel=1e-9, abs=1e-12)
    s2 = np.c_[_series(40), np.cos(np.arange(40) / 5.0)]
    m2 = AutoregressiveGP(s2, window=3, num_inducing=8, seed=0)
    assert m2.sample_forecast(steps=4, n_samples=5).shape == (5, 4, 2)
    assert m2.sample_forecast(steps=4, n_samples=5, joint=False).shape == (5, 4, 2)
    with pytest.raises(ValueError, match="n_samples"):
        m.sample_forecast(steps=3, n_samples=0)


@pytest.mark.parametrize("D", [1, 2])
def test_joint_trajectories_are_draws_of_the_posterior_process_along_their_path(D):
    """joint=True: f at a trajectory's windows x_1..x_k is k_u(x)^T a + r(x) with one draw
    of a = Kuu^{-1} u per trajectory (bgplvm.trajectories), whatever path the draws took: its
    covariance at a path's windows is W^T W + diag(k(x, x) - |V|^2) (W = LB^{-1} V,
    V = Luu^{-1} k_u; the diagonal eq:testPosteriorF's variance). Whitened by its dense
    Cholesky factor at each trajectory's own windows the draws are standard normal (mean 0,
    covariance I over the trajectories), and independent draws per step (joint=False) are
    not; reproducible from the seed."""
    from bgplvm.linalg import solve_lower

    s = _series() if D == 1 else np.c_[_series(), np.cos(np.arange(70) / 5.0)]
    m = AutoregressiveGP(s, window=3, num_inducing=12, seed=0).fit(max_iters=100, progress=False)
    n, steps, w = 3000, 4, 3
    post = m._posteriors()[0][1]
    Z, k = m.inducing_inputs, m.kernel
    eye = np.eye(steps)

    def whiten(paths):
        series = np.concatenate([np.tile(s.reshape(-1, D)[-w:], (n, 1, 1)), paths], axis=1)  # (n, w + steps, D)
        X = np.stack([series[:, j:j + w].reshape(n, -1) for j in range(steps)], axis=1)  # each path's windows
        Kxu = k.K(X.reshape(n * steps, -1), Z)
        V = solve_lower(post.Luu, Kxu.T).T.reshape(n, steps, -1)
        Wm = solve_lower(post.LB, solve_lower(post.Luu, Kxu.T)).T.reshape(n, steps, -1)
        resid = k.sf2 - np.sum(V * V, axis=2)  # (n, steps): k(x, x) - |V|^2 of the RBF kernel
        C = Wm @ Wm.transpose(0, 2, 1) + resid[:, :, None] * eye
        mean = (Kxu @ post.Bmat).reshape(n, steps, D) + m.Y_mean
        return np.linalg.solve(np.linalg.cholesky(C), paths - mean).transpose(0, 2, 1).reshape(n * D, steps)

    paths = m.sample_forecast(steps=steps, n_samples=n, seed=5, include_noise=False).reshape(n, steps, D)
    z = whiten(paths)
    assert np.all(np.abs(z.mean(axis=0)) < 5 / np.sqrt(n * D))
    np.testing.assert_allclose(np.cov(z.T), eye, atol=0.08)
    one_by_one = m.sample_forecast(steps=steps, n_samples=n, seed=5, include_noise=False, joint=False)
    assert np.abs(np.cov(whiten(one_by_one.reshape(n, steps, D)).T) - eye).max() > 0.09  # ~5 sd of the estimate
    again = m.sample_forecast(steps=steps, n_samples=n, seed=5, include_noise=False).reshape(n, steps, D)
    np.testing.assert_array_equal(paths, again)


def test_zero_variance_model_is_a_standard_gp_on_the_windows():
    s = _series()
    m = AutoregressiveGP(s, window=5, num_inducing=15, propagate_uncertainty=False, seed=0)
    assert m.fixed_inputs and "Sigma_z" in m._layout.frozen
    m.fit(max_iters=60, progress=False)
    mean, var = m.forecast(steps=30)
    assert np.all(np.isfinite(mean)) and var.max() < 10 * var.min() + 10 * m.noise_variance
    np.testing.assert_array_equal(m.input_noise_variance, 0.0)


def test_uncertain_model_started_from_the_fixed_input_fit():
    """from_fixed_inputs: the fixed-input fit's kernel, inducing inputs and noise, q(X) at the
    inputs with its variances, so the two are the same GP at the start: the same bound, the
    same forecast when means are fed back (the default start's variances, 6e-7 here, moved
    one-step means by 0.2 % and the Mackey-Glass bounds by 40-80). Its fit holds nothing at
    the start and only raises the bound; the fixed model is not changed."""
    s = _series()
    fixed = AutoregressiveGP(s, window=5, num_inducing=15, propagate_uncertainty=False, seed=0)
    fixed.fit(max_iters=100, progress=False)
    x_fixed = fixed._x.copy()
    m = AutoregressiveGP.from_fixed_inputs(fixed)
    assert m.propagate_uncertainty and not m.fixed_inputs and m.window == 5 and m.seed == 0
    v, vf = m._values(), fixed._values()
    for k in vf:
        if k.startswith("kernel.") or k in ("Z", "noise_variance"):
            np.testing.assert_allclose(v[k], vf[k], rtol=1e-12)  # a transform's round trip: 1 ulp
    np.testing.assert_allclose(m.latent_mean, fixed.inputs)
    np.testing.assert_allclose(m.latent_variance, fixed.latent_variance, rtol=1e-9)
    assert m.input_noise_variance.max() < 1e-8
    # this nearly noise-free fit's bound moves by ~0.008 for parameters 1e-15 apart, its
    # 10-step forecast by ~1e-4 (relative); the default start's variances moved them by
    # 14 and 1e-2
    assert m.elbo() == pytest.approx(fixed.elbo(), abs=0.1)
    one_f, one_m = (g.predict(fixed.inputs, None, input_noise=False)[0] for g in (fixed, m))
    np.testing.assert_allclose(one_m, one_f, rtol=0, atol=2e-4 * np.abs(one_f).max())
    mean_f = fixed.forecast(steps=10)[0]
    np.testing.assert_allclose(m.forecast(steps=10, propagate_uncertainty=False)[0], mean_f, rtol=0,
                               atol=1e-3 * np.abs(mean_f).max())
    start = m.elbo()
    m.fit(max_iters=40, progress=False)
    assert m.fit_info["held_iterations"] == 0 and m.elbo() >= start
    np.testing.assert_array_equal(fixed._x, x_fixed)
    z = UncertainInputGPR(fixed.inputs, fixed.Y, num_inducing=15, fixed_inputs=True, seed=1)
    twin = UncertainInputGPR.from_fixed_inputs(z)
    assert twin.tie_mean and not twin.fixed_inputs and twin.seed == 1
    for bad in (m, BayesianGPLVM(fixed.Y, latent_dim=1, num_inducing=5)):
        with pytest.raises(TypeError, match="fixed_inputs=True"):
            AutoregressiveGP.from_fixed_inputs(bad)


def test_multivariate_series_forecast_shapes():
    s = np.c_[_series(40), np.cos(np.arange(40) / 5.0)]
    m = AutoregressiveGP(s, window=3, num_inducing=8, seed=0)
    assert m.inputs.shape == (37, 6) and m.Y.shape == (37, 2)
    mean, var = m.forecast(steps=4)
    assert mean.shape == var.shape == (4, 2) and np.all(var > 0)


# --- per-entry freeze masks -----------------------------------------------------------------------------------
def test_entry_masks_combine_with_block_freezing():
    layout = ParamLayout([Block("a", (2, 3), IDENTITY), Block("b", (2,), POSITIVE)])
    mask = np.array([[True, False, True], [False, False, False]])
    layout.freeze_entries("a", mask)
    np.testing.assert_array_equal(layout.free_mask(), [False, True, False, True, True, True, True, True])
    layout.freeze("a")  # the block wins while frozen ...
    np.testing.assert_array_equal(layout.free_mask()[:6], False)
    layout.unfreeze("a")  # ... and the entry mask is still there after
    np.testing.assert_array_equal(layout.free_mask()[:6], ~mask.ravel())
    layout.unfreeze_entries("a")
    assert layout.free_mask().all()
    with pytest.raises(ValueError, match=r"shape \(2, 3\)"):
        layout.freeze_entries("a", np.ones((3, 2), bool))
    with pytest.raises(KeyError, match="unknown parameter 'c'"):
        layout.freeze_entries("c", np.ones(2, bool))


def test_block_freezing_unchanged_without_entry_masks():
    Y = np.random.default_rng(0).standard_normal((10, 3))
    m = BayesianGPLVM(Y, latent_dim=2, num_inducing=4, seed=0)
    n = m.get_param_vector().size
    m.freeze("Z")
    assert m.get_param_vector().size == n - 8
    m.freeze_entries("mu", np.eye(10, 2, dtype=bool))
    assert m.get_param_vector().size == n - 8 - 2
    F, g = m.elbo_and_gradient()
    assert g.size == n - 10


# --- semi-supervised GP -----------------------------------------------------------------------------------------
def _semi_data(N=40, seed=0):
    """Inputs on a 1-D curve in 4-D (features predict each other), outputs a function of them."""
    rng = np.random.default_rng(seed)
    t = rng.uniform(-2, 2, N)
    X = np.c_[t, np.sin(t), t**2 / 2, np.cos(2 * t)] + 0.05 * rng.standard_normal((N, 4))
    Y = np.c_[np.sin(X[:, 0]) + X[:, 2], X[:, 1] * X[:, 3]] + 0.05 * rng.standard_normal((N, 2))
    return X, Y


def test_semi_supervised_fit_never_moves_frozen_entries():
    X, Y = _semi_data()
    rng = np.random.default_rng(1)
    Xm = X.copy()
    miss = np.zeros_like(X, dtype=bool)
    miss[15:] = rng.random((25, 4)) < 0.4
    miss[20] = True  # a row with nothing observed
    Xm[miss] = np.nan
    m = SemiSupervisedGPR(Xm, Y, num_inducing=12, seed=0)
    mu0, S0 = m.latent_mean.copy(), m.latent_variance.copy()
    m.fit(max_iters=40, progress=False)
    obs = ~miss
    np.testing.assert_array_equal(m.latent_mean[obs], mu0[obs])
    np.testing.assert_array_equal(m.latent_variance[obs], S0[obs])
    assert np.all(m.latent_variance[obs] < 1e-8)
    assert not np.allclose(m.latent_mean[miss], mu0[miss])  # the missing entries were learned
    mu, var = m.imputed_inputs
    np.testing.assert_array_equal(mu[obs], X[obs])
    np.testing.assert_array_equal(var[obs], 0.0)
    # imputation from the other features and the outputs beats the column means
    col_mean = np.nanmean(Xm, 0)
    err_model = np.mean((mu[miss] - X[miss]) ** 2)
    err_mean = np.mean((np.broadcast_to(col_mean, X.shape)[miss] - X[miss]) ** 2)
    assert err_model < err_mean
    assert set(m.fit_info["phases"]) == {"observed", "infer", "joint"}
    n_full = int((~miss).all(1).sum())  # the first 15 and partial rows that drew no gap
    assert m.observed_model is not None and m.observed_model.Y.shape == (n_full, 2)
    mean, var = m.predict(X[:3])
    assert mean.shape == var.shape == (3, 2)


def _gp_sample(X, ell, n_out, rng):
    K = np.exp(-0.5 * np.sum((X[:, None] - X[None]) ** 2, -1) / ell**2)
    return np.linalg.cholesky(K + 1e-8 * np.eye(len(X))) @ rng.standard_normal((len(X), n_out))


def test_rows_with_no_observed_input_do_not_spoil_the_mapping():
    """The paper's simulation in small (inputs a GP sample on a 2-D latent, outputs a GP of
    the inputs; 6 inputs, 2 outputs): 30 rows whose inputs are entirely missing beside 20
    fully observed ones. The semi-supervised GP must predict about as well as the GP on the
    20 observed rows (the paper: identical at 100% missing), and its kernel and noise stay
    those learned from the observed rows. Learning them in the joint fit too (the earlier
    default) gave 1.6 times the GP's MSE here (0.138 against 0.084): the free latent rows
    switched ARD dimensions off and raised the noise."""
    rng = np.random.default_rng(1)
    n_obs, n_part, n_test = 20, 30, 50
    h = rng.uniform(-2, 2, (n_obs + n_part + n_test, 2))
    X = _gp_sample(h, 1.0, 6, rng)
    Y = _gp_sample(X, 3.0, 2, rng) + 0.1 * rng.standard_normal((len(X), 2))
    tr, te = slice(0, n_obs + n_part), slice(n_obs + n_part, None)
    Xm = X[tr].copy()
    Xm[n_obs:] = np.nan
    gp = UncertainInputGPR(X[:n_obs], Y[:n_obs], num_inducing=20, fixed_inputs=True, seed=0)
    gp.fit(max_iters=200, progress=False)
    m = SemiSupervisedGPR(Xm, Y[tr], num_inducing=20, seed=0).fit(max_iters=200, progress=False)
    mse_gp = np.mean((gp.predict(X[te])[0] - Y[te]) ** 2)
    mse_semi = np.mean((m.predict(X[te])[0] - Y[te]) ** 2)
    assert mse_semi < 1.2 * mse_gp, (mse_semi, mse_gp)
    vo, v = m.observed_model._values(), m._values()
    for k in vo:
        if k.startswith("kernel.") or k == "noise_variance":
            np.testing.assert_allclose(v[k], vo[k], rtol=1e-14)  # held: unchanged but for
            # the last bit of the softplus round trip


# --- bad input ------------------------------------------------------------------------------------------------------
def test_bad_inputs_get_clear_errors():
    Z, Y = _regression_data()
    with pytest.raises(ValueError, match="same number of rows: 15 input rows, 14 output rows"):
        UncertainInputGPR(Z, Y[:-1])
    Yn = Y.copy()
    Yn[3, 0] = np.nan  # a missing output: fitted over the observed ones (tests/test_missing.py)
    assert UncertainInputGPR(Z, Yn, num_inducing=10).missing_fraction == pytest.approx(1 / Y.size)
    Zn = Z.copy()
    Zn[2, 1] = np.nan
    with pytest.raises(ValueError, match="Z contains NaN.*SemiSupervisedGPR"):
        UncertainInputGPR(Zn, Y)
    with pytest.raises(ValueError, match="same number of rows"):
        SemiSupervisedGPR(Zn, Y[:5])
    with pytest.raises(ValueError, match="Y contains 1 NaN.*this model needs complete outputs"):
        SemiSupervisedGPR(Zn, Yn)
    with pytest.raises(ValueError, match="at least 2 fully observed rows"):
        SemiSupervisedGPR(np.where(np.arange(15)[:, None] > 0, np.nan, Z), Y)
    Zc = Z.copy()
    Zc[:, 1] = np.nan
    with pytest.raises(ValueError, match=r"features \[2\] are missing in every row"):
        SemiSupervisedGPR(np.c_[Z, Zc[:, 1]], Y)
    s = _series(20)
    with pytest.raises(ValueError, match="window 19 is too long for a history of 20 steps"):
        AutoregressiveGP(s, window=19)
    with pytest.raises(ValueError, match="window must be a positive integer"):
        AutoregressiveGP(s, window=0)
    with pytest.raises(ValueError, match="series contains NaN/inf at steps \\[4\\]"):
        AutoregressiveGP(np.r_[s[:4], np.nan, s[5:]], window=3)
    m = AutoregressiveGP(s, window=3, num_inducing=5)
    with pytest.raises(ValueError, match="steps must be a positive integer"):
        m.forecast(steps=0)
    sm = SemiSupervisedGPR(Zn, Y, num_inducing=4)
    with pytest.raises(ValueError, match="X_star contains NaN"):
        sm.predict(Zn[:3])


# --- model files ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["free", "tied", "fixed"])
def test_save_load_uncertain_gpr(tmp_path, kind):
    Z, Y = _regression_data()
    m = UncertainInputGPR(Z, Y, num_inducing=5, tie_mean=kind == "tied", fixed_inputs=kind == "fixed")
    m.fit(max_iters=10, progress=False)
    m.save(tmp_path / "u.npz")
    m2 = BayesianGPLVM.load(tmp_path / "u.npz")
    assert type(m2) is UncertainInputGPR and (m2.tie_mean, m2.fixed_inputs) == (m.tie_mean, m.fixed_inputs)
    np.testing.assert_array_equal(m2._x, m._x)
    np.testing.assert_array_equal(m2.inputs, Z)
    assert m2.elbo() == m.elbo() and m2._layout.frozen == m._layout.frozen
    np.testing.assert_array_equal(m2.predict(Z[:3])[1], m.predict(Z[:3])[1])
    assert ("fixed at the observations" if kind == "fixed" else "Sigma_z in") in m2.summary()


def test_save_load_autoregressive_and_semi_supervised():
    s = _series(30)
    m = AutoregressiveGP(s, window=4, num_inducing=6).fit(max_iters=10, progress=False)
    buf = io.BytesIO()
    m.save(buf)
    buf.seek(0)
    m2 = AutoregressiveGP.load(buf)
    assert type(m2) is AutoregressiveGP and m2.window == 4 and m2.propagate_uncertainty
    np.testing.assert_array_equal(m2.series[:, 0], s)
    np.testing.assert_array_equal(m2.forecast(5)[1], m.forecast(5)[1])

    X, Y = _semi_data(N=20)
    X[12:, 1] = np.nan
    sm = SemiSupervisedGPR(X, Y, num_inducing=5)
    sm.fit(max_iters=8, progress=False)
    buf = io.BytesIO()
    sm.save(buf)
    buf.seek(0)
    sm2 = BayesianGPLVM.load(buf)
    assert type(sm2) is SemiSupervisedGPR
    np.testing.assert_array_equal(sm2._x, sm._x)
    np.testing.assert_array_equal(sm2._layout.frozen_entries["mu"], ~np.isnan(X))
    np.testing.assert_array_equal(sm2._layout.free_mask(), sm._layout.free_mask())
    np.testing.assert_array_equal(sm2.predict(np.nan_to_num(X[:2]))[0], sm.predict(np.nan_to_num(X[:2]))[0])
    sm.unfreeze_entries("S")  # exactly the saved masks, not the constructor's
    buf = io.BytesIO()
    sm.save(buf)
    buf.seek(0)
    assert set(BayesianGPLVM.load(buf)._layout.frozen_entries) == {"mu"}


def test_a_trial_step_that_zeroes_the_noise_is_rejected(monkeypatch):
    """Noise-free data drive the noise variance down; a line-search trial point where it
    underflows to 0 (1 / 0 in the bound) is rejected like a failed Cholesky, not raised."""
    Z, Y = _regression_data()
    m = UncertainInputGPR(Z, Y, num_inducing=5, fixed_inputs=True)
    real = m._bound
    calls = {"n": 0}

    def flaky(x, grad=True):
        calls["n"] += 1
        if calls["n"] % 4 == 0:
            raise ZeroDivisionError("float division by zero")
        return real(x, grad)

    monkeypatch.setattr(m, "_bound", flaky)
    m.fit(max_iters=15, progress=False)
    monkeypatch.undo()  # the final bound is evaluated unflaked
    assert m.fit_info["rejected_steps"] > 0 and np.isfinite(m.elbo())


# --- review fixes: no aliasing of the caller's arrays, one rule for 1-D points, the fed-back variance
def test_models_do_not_change_with_the_callers_arrays():
    """Editing the arrays a model was built from, or the arrays its properties return, changes
    nothing in the model (they are copies, not views of the parameter vector)."""
    Z, Y = _regression_data()
    for tie in (False, True):
        Zc, Yc = Z.copy(), Y.copy()
        m = UncertainInputGPR(Zc, Yc, num_inducing=6, tie_mean=tie, seed=0)
        x0 = m.get_param_vector()
        Zc += 1.0
        Yc *= 2.0
        m.latent_mean[:] += 3.0
        m.latent_variance[:] *= 5.0
        m.inducing_inputs[:] = 0.0
        np.testing.assert_array_equal(m.get_param_vector(), x0)
        np.testing.assert_array_equal(m.prior.inputs, Z)
        np.testing.assert_array_equal(m.Y, Y)
    s = _series()
    sc = s.copy()
    a = AutoregressiveGP(sc, window=5, num_inducing=10, seed=0)
    f0 = a.forecast(steps=3)
    sc[-4:] = 0.0
    np.testing.assert_array_equal(a.forecast(steps=3)[0], f0[0])
    with pytest.raises(ValueError):
        a.prior.inputs[0, 0] = 1.0  # read-only


def test_one_dimensional_points_follow_one_rule():
    """A 1-D array is n points when Q == 1 and one point when Q > 1, in every regressor; a
    1-D Z_star_var gives one variance per point when Q == 1."""
    rng = np.random.default_rng(0)
    z = rng.uniform(-2, 2, 12)
    m1 = UncertainInputGPR(z, np.sin(z)[:, None], num_inducing=5, seed=0)
    mean, var = m1.predict(z[:4], Z_star_var=np.full(4, 0.01))
    assert mean.shape == var.shape == (4, 1)
    np.testing.assert_allclose(mean, m1.predict(z[:4, None], np.full((4, 1), 0.01))[0])
    with pytest.raises(ValueError, match="Z_star_var"):
        m1.predict(z[:4], Z_star_var=np.ones(3))
    X, Y = _semi_data()
    s = SemiSupervisedGPR(X, Y, num_inducing=8, seed=0)
    np.testing.assert_allclose(s.predict(X[0])[0], s.predict(X[:1])[0])
    Z, Y2 = _regression_data()
    m2 = UncertainInputGPR(Z, Y2, num_inducing=6, seed=0)
    assert m2.predict(Z[0])[0].shape == (1, 2)


def test_forecast_without_noise_feeds_back_the_same_window():
    """include_noise=False only changes the reported variance (by the noise variance); the
    window fed back still carries y's variance, so the means are the same."""
    m = AutoregressiveGP(_series(), window=5, num_inducing=10, seed=0).fit(max_iters=30, progress=False)
    mean_y, var_y = m.forecast(steps=8)
    mean_f, var_f = m.forecast(steps=8, include_noise=False)
    np.testing.assert_array_equal(mean_f, mean_y)
    np.testing.assert_allclose(var_f, np.maximum(var_y - m.noise_variance, 0.0), rtol=1e-12, atol=1e-15)


def test_forecast_from_a_later_history_starts_from_its_last_window():
    """``history=``: a forecast from the series observed since the fit (the model fixed)
    starts from its last ``window`` steps: equal, by every method, to the forecast of the
    same model whose series ends there; shorter histories and other widths are refused."""
    y = _series()
    m = AutoregressiveGP(y[:40], window=5, num_inducing=10, seed=0).fit(max_iters=30, progress=False)
    later = y[:47]
    for kw in ({}, {"method": "moments"}, {"propagate_uncertainty": False}):
        got = m.forecast(6, history=later, **kw)
        m.series, kept = later[:, None], m.series
        want = m.forecast(6, **kw)
        m.series = kept
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
    assert not np.allclose(m.forecast(6, history=later)[0], m.forecast(6)[0])
    with pytest.raises(ValueError, match="at least window = 5 steps"):
        m.forecast(3, history=y[:4])
    with pytest.raises(ValueError, match="a series of 1 output"):
        m.forecast(3, history=np.c_[y[:10], y[:10]])


def test_semi_supervised_stop_ends_every_step():
    """A callback's stop ends the whole fit, not only the step it came in (the later steps
    ran on before); fit_info says which steps ran and why the fit ended."""
    X, Y = _semi_data()
    Xm = X.copy()
    Xm[15:, 1:3] = np.nan
    seen = []

    def cb(p):
        seen.append(p.phase)
        return p.iteration >= 4

    m = SemiSupervisedGPR(Xm, Y, num_inducing=12, seed=0).fit(max_iters=60, callback=cb, progress=False)
    assert m.fit_info["reason"] == "callback" and set(m.fit_info["phases"]) == {"observed"}
    assert len(seen) == 4
    mean, _ = m.predict(X[:3])  # still a usable model: q(X) started from the observed rows' fit
    assert np.all(np.isfinite(mean))


def test_covfstar_of_a_nearly_noise_free_model_keeps_its_digits():
    """A noise-free sine (noise variance ~4e-7, |B| ~1e5): the variance at N(z, v) is
    continuous in v down to 0, agrees with Monte Carlo over x, and a deterministic point's
    variance does not depend on the batch it is computed in. covFstar from Psi2^n - psi1
    psi1^T (cancelling ~|B|^2 terms) gave 4e-7 at v = 1e-12, 8e-6 at 1e-8 and 4e-7 at 1e-6
    (clipped negatives) where Monte Carlo gives 9e-7, 9e-7 and 3e-6; the quadratic form in
    the explicit Kuu^-1 - (Kuu + beta Psi2)^-1 moved a point's variance by a third with the
    batch."""
    x = np.linspace(0, 1, 200)[:, None]
    m = UncertainInputGPR(x, np.sin(6 * x), num_inducing=20, fixed_inputs=True).fit(300, progress=False)
    assert m.noise_variance < 1e-5
    z = np.array([[0.3]])
    v0 = m.predict(z, None, input_noise=False)[1][0, 0]
    assert m.predict(np.array([[0.3], [0.7], [0.31]]), None, input_noise=False)[1][0, 0] == pytest.approx(
        v0, rel=1e-6)
    for v in (1e-14, 1e-12):
        assert m.predict(z, v, input_noise=False)[1][0, 0] == pytest.approx(v0, rel=1e-4)
    rng = np.random.default_rng(0)
    for v in (1e-8, 1e-6, 1e-4):
        xs = 0.3 + np.sqrt(v) * rng.standard_normal((20000, 1))
        mm, vv = m.predict(xs, None, input_noise=False)
        mc = vv.mean() + mm.var()  # law of total variance, over x ~ N(0.3, v)
        assert m.predict(z, v, input_noise=False)[1][0, 0] == pytest.approx(mc, rel=0.03)


def test_a_fit_whose_line_search_fails_says_so(monkeypatch):
    """A fit whose line search finds no better point ends "stalled" with the optimiser's
    message, not "converged" or "max_iters", and keeps its best point. The bound's gradient is
    turned around, so no step along the search direction raises the bound: a noise-free
    regression whose search fails by itself (|grad| ~1e5) did so at 2 threads and ran to
    max_iters at 1, with the outcome left to rounding."""
    x = np.linspace(0, 1, 200)[:, None]
    m = UncertainInputGPR(x, np.sin(6 * x), num_inducing=20, fixed_inputs=True)
    F0, bound = m.elbo(), m._bound

    def uphill(theta, grad=True):
        F, g = bound(theta, grad=grad)
        return F, None if g is None else -g

    monkeypatch.setattr(m, "_bound", uphill)
    m.fit(50, progress=False)
    assert m.fit_info["reason"] == "stalled" and "LINE SEARCH" in m.fit_info["message"]
    assert m.fit_info["iterations"] < 50
    monkeypatch.undo()
    assert m.elbo() == pytest.approx(F0, rel=1e-9)  # the start, or steps of rounding size from it
    assert np.abs(m.elbo_and_gradient()[1]).max() > 1.0


def test_regression_models_refuse_the_gplvm_test_time_inference():
    """infer_latent / reconstruct / log_density would use the GP-LVM's N(0, I) prior on x*
    (inputs of 93 came back as 84) and, for SemiSupervisedGPR, standardised units."""
    rng = np.random.default_rng(0)
    x = np.linspace(0, 1, 40)[:, None]
    Y = np.c_[np.sin(6 * x[:, 0]), np.cos(6 * x[:, 0])] + 0.02 * rng.standard_normal((40, 2))
    X = np.c_[x, rng.standard_normal(40)]
    X[rng.random(X.shape) < 0.2] = np.nan
    X[:5] = np.c_[x[:5], np.zeros(5)]
    models = [UncertainInputGPR(100 * x, Y, 10), SemiSupervisedGPR(X, Y, 10),
              AutoregressiveGP(np.sin(np.arange(60) * 0.3), window=4, num_inducing=10)]
    for m in models:
        for name in ("infer_latent", "reconstruct", "log_density"):
            with pytest.raises(TypeError, match="regression model"):
                getattr(m, name)(Y[:2])


def test_bad_input_variances_and_inference_options_are_refused():
    Z = np.linspace(0, 1, 20)[:, None]
    Y = np.sin(6 * Z)
    for v in (-1.0, 0.0, np.nan, np.inf, [1.0, 2.0, 3.0], "a"):
        with pytest.raises(ValueError, match="input_variance"):
            UncertainInputGPR(Z, Y, 5, input_variance=v)
    m = BayesianGPLVM(np.random.default_rng(0).standard_normal((30, 4)), 2, 5)
    for kw, name in ((dict(n_init=0), "n_init"), (dict(max_iters=-1), "max_iters")):
        for f in (m.infer_latent, m.reconstruct, m.log_density):
            with pytest.raises(ValueError, match=name):
                f(m.Y[:2], **kw)
    with pytest.raises(TypeError, match="n_init"):
        m.infer_latent(m.Y[:2], n_init=2.5)


def test_mackey_glass_tau_30_forecasts_stay_sane_by_default():
    """Issue 44, as a new user would: 150 steps of Mackey-Glass with delay 30 (raw units),
    ``AutoregressiveGP(series, window=12, num_inducing=40)``, 100 steps forecast. The fit is
    nearly noise-free (noise ~1e-6); the forecasts stay within the series' range +- its
    range, the variance below 4x the series' variance, and the truth inside the intervals.
    The signal variance learned instead (the paper's choice) runs to ~17x the series'
    variance and the propagated Gaussian moments to ~60x."""
    from bgplvm.metrics import gaussian_scores
    from bgplvm.reproduce.mackey_glass import simulate

    x = simulate(250, delay=30.0)
    train, future = x[:150], x[150:]
    lo, hi = train.min() - np.ptp(train), train.max() + np.ptp(train)
    m = AutoregressiveGP(train, window=12, num_inducing=40).fit(progress=False)
    assert m.tie_signal_variance and m.kernel_variance == pytest.approx(train[12:].var())
    mean, var = m.forecast(100)
    assert np.all((mean > lo) & (mean < hi)) and var.max() < 4 * train.var()
    assert gaussian_scores(mean, var, future).coverage[0.95] >= 0.9
    mean0, _ = m.forecast(100, propagate_uncertainty=False)
    assert np.all((mean0 > lo) & (mean0 < hi))
    with pytest.warns(ForecastSpreadWarning, match=r"\(max - min\)\^2 / 4 = 3.7x the series' variance\) from step"):
        far_mean, far_var = m.forecast(2000, n_samples=200)  # trajectories' spread levels off (~5x at 1000 steps)
    assert np.all(np.isfinite(far_mean)) and np.all(np.isfinite(far_var)) and np.all((far_mean > lo) & (far_mean < hi))
    bound = m.forecast_variance_bound[0]
    with pytest.warns(ForecastSpreadWarning):
        moments_var = m.forecast(300, method="moments")[1]
    assert far_var.max() < bound and moments_var.max() < bound


def test_a_forecast_wider_than_the_series_range_allows_warns():
    """Popoviciu: no distribution inside [min, max] has a variance above (max - min)^2 / 4, so a
    forecast's variance above it puts mass where the series has never been (per output; a
    constant output has no range and is left alone)."""
    from bgplvm.autoregressive import check_spread

    series = np.c_[np.linspace(0.0, 2.0, 50), np.linspace(-1.0, 1.0, 50), np.full(50, 3.0)]  # limits 1, 1, 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_spread(series, np.full((10, 3), 0.99))
    var = np.full((10, 3), 0.5)
    var[6:, 1] = 1.5
    said = r"= 2.9x the series' variance\) from step 7 on for output 1, up to 4.3x"
    with pytest.warns(ForecastSpreadWarning, match=said):
        check_spread(series, var)


def test_tie_signal_variance_needs_an_rbf_kernel_and_travels_in_the_file():
    s = _series()
    with pytest.raises(ValueError, match="tie_signal_variance"):
        AutoregressiveGP(s, window=5, num_inducing=10, kernel="linear", tie_signal_variance=True)
    assert not AutoregressiveGP(s, window=5, num_inducing=10, kernel="rbf+bias").tie_signal_variance
    free = AutoregressiveGP(s, window=5, num_inducing=10, tie_signal_variance=False)
    assert "kernel.variance" not in free._layout.frozen
    m = AutoregressiveGP(s, window=5, num_inducing=10)
    assert "kernel.variance" in m._layout.frozen
    buf = io.BytesIO()
    m.save(buf)
    buf.seek(0)
    back = AutoregressiveGP.load(buf)
    assert back.tie_signal_variance and "kernel.variance" in back._layout.frozen
    with pytest.raises(ValueError, match="method"):
        m.forecast(3, method="mc")


def test_the_default_start_learns_the_input_noise_of_noisy_inputs():
    """Inputs observed with noise (sd 0.3, variance 0.09): from the default start (1e-2 of
    the inputs' variance) Sigma_z grows to the input noise's scale at a higher bound than
    from a start at 1e-6 of it, where the fit stays at the inputs and explains the input
    noise as output noise; ``AutoregressiveGP``'s windows start at 1e-6 (exact inputs)."""
    rng = np.random.default_rng(3)
    x = rng.uniform(-3, 3, 200)
    z, y = x + 0.3 * rng.standard_normal(200), np.sin(2 * x) + 0.05 * rng.standard_normal(200)
    m = UncertainInputGPR(z[:, None], y[:, None], num_inducing=30, seed=3).fit(max_iters=1000, progress=False)
    tiny = UncertainInputGPR(z[:, None], y[:, None], num_inducing=30, seed=3, input_variance=1e-6 * z.var())
    tiny.fit(max_iters=1000, progress=False)
    assert 0.03 < float(m.input_noise_variance.mean()) < 0.2 and float(tiny.input_noise_variance.mean()) < 1e-4
    assert m.elbo() > tiny.elbo() + 10
    ar = AutoregressiveGP(_series(), window=5, num_inducing=10, seed=0)
    np.testing.assert_allclose(ar.latent_variance, np.broadcast_to(1e-6 * ar.inputs.var(0), ar.latent_variance.shape),
                               rtol=1e-6)
