"""Missing values in the training outputs (model/missing.py).

- values: the grouped bound equals the sum over columns of the collapsed bound of each
  column's observed rows, computed directly (real data: oil; random and block patterns);
  with nothing missing the grouped code is today's arithmetic, bit for bit (bound, gradient,
  a fit);
- gradients by central differences, random and block patterns, several kernels, the
  dynamical prior in both forms;
- the rules at the boundary (inf, empty rows, thin columns, mostly missing, masks);
- imputation, predictions per group of outputs, files.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from gradcheck import assert_model_block_gradients
from mirror import needs_data
from bgplvm import BayesianGPLVM, DynamicalGPLVM
from bgplvm.bound import OutputStats, collapsed_bound, data_bound
from bgplvm.missing import MissingOutputs


def _data(N, D, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, 2))
    return np.sin(X @ rng.standard_normal((2, D))) + 0.5 * X[:, :1] + 0.1 * rng.standard_normal((N, D))


def random_holes(Y, frac, seed=1):
    Y = Y.copy()
    Y[np.random.default_rng(seed).random(Y.shape) < frac] = np.nan
    return Y


def block_holes(Y, n_blocks, seed=2):
    """Whole readings (a few columns) missing for blocks of consecutive rows."""
    rng = np.random.default_rng(seed)
    Y = Y.copy()
    N, D = Y.shape
    size = max(2, N // (2 * n_blocks))
    for b in range(n_blocks):
        r0 = rng.integers(0, N - size)
        Y[r0:r0 + size, rng.choice(D, max(1, D // 3), replace=False)] = np.nan
    return Y


def per_column_bound(m) -> float:
    """The reference: sum_j of the collapsed bound (FdFinal) of column j over the rows that
    observe it, each from its own psi statistics (no groups, no complements)."""
    v = m._values()
    m._sync_kernel(v)
    k = m.kernel
    qx = m.prior.q(v, grad=False)
    mu, S, Z = qx.mu, qx.S, v["Z"]
    beta = 1.0 / float(v["noise_variance"])
    obs = m.Y_observed
    F = 0.0
    for j in range(m.Y.shape[1]):
        r = np.flatnonzero(obs[:, j])
        yc = (m.Y[r, j] - m.Y_mean[j])[:, None]
        F += collapsed_bound(k.K(Z), k.psi0(mu[r], S[r]), k.psi1(mu[r], S[r], Z), k.psi2(mu[r], S[r], Z),
                             beta, OutputStats.from_centred(yc), grad=False).F
    return F - qx.kl


# ------------------------------------------------------------------------------------------
# values
# ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def oil():
    from bgplvm.datasets import load

    return np.asarray(load("oil").Y)


@needs_data("oil")
@pytest.mark.parametrize("pattern", ["random 10%", "random 30%", "random 50%", "blocks"])
def test_grouped_bound_equals_the_sum_of_per_column_bounds_on_oil(oil, pattern):
    """At the start of a fit to 1e-10; after 20 iterations to 1e-8: there Kuu + beta Psi2_g
    has a condition number of ~1e10, and the bound itself moves by ~1e-9 (relative) when
    Psi2 is summed in another order (a 1e-16 relative change of one column's Psi2 moves F
    by 1.7e-11 of |F|)."""
    Y = block_holes(oil, 20) if pattern == "blocks" else random_holes(oil, float(pattern[7:-1]) / 100)
    m = BayesianGPLVM(Y, latent_dim=10, num_inducing=50, seed=0)
    F, ref = m.elbo(), per_column_bound(m)
    assert abs(F - ref) <= 1e-10 * abs(ref), (F, ref)
    m.fit(max_iters=20, progress=False)  # away from the start
    F, ref = m.elbo(), per_column_bound(m)
    assert abs(F - ref) <= 1e-8 * abs(ref), (F, ref)
    assert sum(g.cols.size for g in m._missing.groups) == 12


@pytest.mark.parametrize("kernel", ["rbf", "rbf+bias+white", "linear"])
def test_grouped_bound_equals_per_column_bounds_with_few_observed_rows(kernel):
    """Groups observed on few rows and on most, with the RBF kernel's one pass and the
    generic one pass per group."""
    Y = _data(40, 6)
    Y[5:, 0] = np.nan  # column 0: 5 rows
    Y[:30, 1] = np.nan  # column 1: 10 rows
    Y[::3, 2] = np.nan
    m = BayesianGPLVM(Y, latent_dim=2, num_inducing=6, kernel=kernel, seed=0)
    assert sorted(g.rows.size for g in m._missing.groups) == [5, 10, 26, 40]
    assert m.elbo() == pytest.approx(per_column_bound(m), rel=1e-12)


@pytest.mark.parametrize("kernel", ["rbf", "rbf+bias+white"])  # the RBF pass and the generic one
def test_with_nothing_missing_the_grouped_bound_is_todays(kernel):
    """Complete data never take the grouped path (a fit with 0 % missing is today's, bit
    for bit: ``m._missing is None``); forced onto it, one group of every row and column,
    the bound and gradients equal today's to rounding (the groups' algebra is batched:
    Li Psi2 Li^T by products, not by triangular solves), and a fit ends where today's does."""
    Y = _data(80, 7)
    m = BayesianGPLVM(Y, latent_dim=3, num_inducing=10, kernel=kernel, seed=1)
    assert m._missing is None and m.missing_fraction == 0.0
    grouped = MissingOutputs(m._Yc, np.ones(Y.shape, dtype=bool))
    v = m._values()
    qx = m.prior.q(v, grad=False)
    beta = 1.0 / float(v["noise_variance"])
    F0, d0 = data_bound(m.kernel, qx.mu, qx.S, v["Z"], beta, m.outputs.stats)
    F1, d1 = grouped.bound(m.kernel, qx.mu, qx.S, v["Z"], beta)
    assert F1 == pytest.approx(F0, rel=1e-12) and d1.dbeta == pytest.approx(d0.dbeta, rel=1e-10)
    for a, b in [(d0.dmu, d1.dmu), (d0.dS, d1.dS), (d0.dZ, d1.dZ)] + [
            (d0.dtheta[n], d1.dtheta[n]) for n in d0.dtheta]:
        assert np.max(np.abs(a - b)) <= 1e-9 * np.max(np.abs(a))
    # and a whole fit: the model on the grouped code path ends where today's does
    m2 = BayesianGPLVM(Y, latent_dim=3, num_inducing=10, kernel=kernel, seed=1)
    m2.outputs.missing, m2.outputs.stats = grouped, None
    m.fit(max_iters=25, progress=False)
    m2.fit(max_iters=25, progress=False)
    assert m2.elbo() == pytest.approx(m.elbo(), rel=1e-9)
    assert np.allclose(m._x, m2._x, rtol=1e-6, atol=1e-6)


def test_a_mask_of_all_true_is_complete_data():
    Y = _data(30, 4)
    a = BayesianGPLVM(Y, num_inducing=5)
    b = BayesianGPLVM(Y, num_inducing=5, mask=np.ones(Y.shape, dtype=bool))
    assert b._missing is None
    assert a.elbo() == b.elbo()


@pytest.mark.parametrize("G", [1, 4, 5, 11])  # the subset sums' chunks of 4 groups: 1, 1, 2, 3
def test_the_rbf_kernels_one_pass_equals_one_pass_per_group(G):
    """``RBF.psi2_groups`` / ``psi_gradients_groups`` (rows sorted by pattern, one compiled
    pass, subset sums per chunk of groups) against the generic ``Kernel`` forms (one
    ``psi2`` / ``psi_gradients`` per group)."""
    from bgplvm.kernels import RBF, Kernel

    rng = np.random.default_rng(G)
    N, Q, M, R = 203, 3, 9, 7
    k = RBF(Q, variance=1.3, lengthscale=rng.uniform(0.5, 2.0, Q))
    mu, S, Z = rng.standard_normal((N, Q)), rng.uniform(0.05, 0.5, (N, Q)), rng.standard_normal((M, Q))
    seg = rng.integers(0, R, N)
    inc = (rng.random((G, R)) < 0.6).astype(float)
    inc[0] = 1.0  # a group every pattern observes
    fast, slow = k.psi2_groups(mu, S, Z, seg, inc), Kernel.psi2_groups(k, mu, S, Z, seg, inc)
    assert np.allclose(fast, slow, rtol=1e-13, atol=1e-15 * np.abs(slow).max())
    W = rng.standard_normal((G, M, M))
    W = W + W.transpose(0, 2, 1)
    d0, d1 = rng.standard_normal(N), rng.standard_normal((N, M))
    a = k.psi_gradients_groups(d0, d1, W, seg, inc, mu, S, Z)
    b = Kernel.psi_gradients_groups(k, d0, d1, W, seg, inc, mu, S, Z)
    for x, y in zip(a[:3], b[:3]):
        assert np.allclose(x, y, rtol=1e-10, atol=1e-10 * np.abs(y).max())
    for n in a[3]:
        assert np.allclose(a[3][n], b[3][n], rtol=1e-10)


# ------------------------------------------------------------------------------------------
# gradients
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kernel", ["rbf", "linear", "rbf+bias+white", "linear+bias"])
@pytest.mark.parametrize("pattern", ["random", "blocks"])
def test_gradients_by_central_differences(kernel, pattern):
    Y = _data(50, 8, seed=3)
    Y = random_holes(Y, 0.3) if pattern == "random" else block_holes(Y, 4)
    m = BayesianGPLVM(Y, latent_dim=3, num_inducing=7, kernel=kernel, seed=2)
    m.fit(max_iters=10, progress=False)
    assert_model_block_gradients(m, rtol=1e-5)


@pytest.mark.parametrize("time_prior", ["dense", "state_space"])
def test_dynamical_gradients_and_bound_with_missing_values(time_prior):
    Y = random_holes(_data(60, 6, seed=4), 0.25)
    Y[10:25, :3] = np.nan  # a marker lost for a while
    t = np.linspace(0.0, 3.0, 60)
    m = DynamicalGPLVM(Y, t, latent_dim=2, num_inducing=6, sequences=np.repeat([0, 1], 30),
                       time_prior=time_prior)
    m.fit(max_iters=10, progress=False)
    assert m.elbo() == pytest.approx(per_column_bound(m), rel=1e-11)
    assert_model_block_gradients(m, rtol=1e-5)


def test_uncertain_input_regression_with_missing_outputs():
    from bgplvm import UncertainInputGPR

    rng = np.random.default_rng(7)
    Z = rng.standard_normal((40, 2))
    Y = random_holes(np.c_[np.sin(Z[:, :1] * 2), Z[:, 1:] ** 2, Z.sum(1, keepdims=True)]
                     + 0.05 * rng.standard_normal((40, 3)), 0.2)
    m = UncertainInputGPR(Z, Y, num_inducing=8, input_variance=0.01)
    m.fit(max_iters=10, progress=False)
    assert m.elbo() == pytest.approx(per_column_bound(m), rel=1e-11)
    # a larger step: with inputs this sure the differences at 1e-6 carry ~1e-5 of rounding
    # noise, with or without missing outputs
    assert_model_block_gradients(m, rtol=1e-5, eps=1e-4)


# ------------------------------------------------------------------------------------------
# the rules at the boundary
# ------------------------------------------------------------------------------------------
def test_inf_is_refused_with_its_positions():
    Y = _data(20, 3)
    Y[4, 1] = np.inf
    Y[7, 2] = -np.inf
    with pytest.raises(ValueError, match=r"2 infinite value\(s\) at \(row, column\) \(4, 1\), \(7, 2\)"):
        BayesianGPLVM(Y)


def test_a_row_with_nothing_observed_is_refused_with_its_index():
    Y = _data(20, 3)
    Y[6] = np.nan
    with pytest.raises(ValueError, match=r"rows \[6\]"):
        BayesianGPLVM(Y)


def test_a_column_observed_on_fewer_than_two_rows_is_refused_with_its_index():
    Y = _data(20, 3)
    Y[1:, 2] = np.nan
    with pytest.raises(ValueError, match=r"columns \[2\]"):
        BayesianGPLVM(Y)


def test_mostly_missing_data_warn_with_the_fraction():
    rng = np.random.default_rng(0)
    Y = np.full((80, 40), np.nan)
    for i in range(80):  # every row one entry, every column two
        Y[i, i % 40] = rng.standard_normal()
    with pytest.warns(UserWarning, match=r"97\.5% of Y's entries are missing"):
        BayesianGPLVM(Y, num_inducing=5)


def test_mask_marks_entries_missing_beside_nan():
    Y = _data(30, 4)
    mask = np.ones(Y.shape, dtype=bool)
    mask[3, 1] = mask[8, 2] = False
    Yn = Y.copy()
    Yn[3, 1] = Yn[8, 2] = np.nan
    a = BayesianGPLVM(Y, num_inducing=5, mask=mask)
    b = BayesianGPLVM(Yn, num_inducing=5)
    assert a.elbo() == b.elbo()
    assert np.isnan(a.Y[3, 1]) and a.missing_fraction == pytest.approx(2 / 120)
    with pytest.raises(ValueError, match="mask must be a bool array"):
        BayesianGPLVM(Y, mask=mask.astype(int))
    with pytest.raises(ValueError, match="mask must be a bool array"):
        BayesianGPLVM(Y, mask=mask[:-1])


def test_the_observed_mean_centres_the_data():
    Y = _data(30, 3)
    Y[:10, 0] = np.nan
    m = BayesianGPLVM(Y, num_inducing=5)
    assert m.Y_mean[0] == pytest.approx(Y[10:, 0].mean(), rel=1e-14)
    assert np.all(m._Yc[:10, 0] == 0.0)


def test_models_that_need_complete_outputs_say_so():
    from bgplvm import GPLVMClassifier

    Y = random_holes(_data(30, 3), 0.2)
    with pytest.raises(ValueError, match="this model needs complete outputs"):
        GPLVMClassifier(latent_dim=2, num_inducing=4).fit(Y, np.repeat([0, 1], 15))


# ------------------------------------------------------------------------------------------
# imputation, predictions, files
# ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def fitted():
    full = _data(120, 8, seed=5)
    Y = random_holes(full, 0.2, seed=6)
    m = BayesianGPLVM(Y, latent_dim=2, num_inducing=15, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m.fit(max_iters=300, progress=False)
    return m, full


def test_impute_fills_the_holes_better_than_the_column_means(fitted):
    m, full = fitted
    mean, var = m.impute()
    obs = m.Y_observed
    assert np.array_equal(mean[obs], m.Y[obs]) and np.all(var[obs] == 0.0)
    holes = ~obs
    assert np.all(np.isfinite(mean)) and np.all(var[holes] > m.noise_variance * 0.999)
    rmse = np.sqrt(np.mean((mean[holes] - full[holes]) ** 2))
    rmse_mean = np.sqrt(np.mean((np.broadcast_to(m.Y_mean, full.shape)[holes] - full[holes]) ** 2))
    assert rmse < 0.5 * rmse_mean, (rmse, rmse_mean)
    # the stated variances fit the errors (standardised errors of about unit scale)
    z = (mean[holes] - full[holes]) / np.sqrt(var[holes])
    assert 0.3 < np.sqrt(np.mean(z**2)) < 3.0


def test_predictions_follow_each_group_of_outputs(fitted):
    """A column's prediction is that of a model fitted on its observed rows alone: q(u) of
    its group (Bmat column, variance)."""
    m, _ = fitted
    X = m.latent_mean[:4]
    mean, var = m.predict(X)
    for cols, post in m._posteriors():
        Kxu = m.kernel.K(X, m.inducing_inputs)
        assert np.allclose(mean[:, cols], Kxu @ post.Bmat + m.Y_mean[cols], rtol=1e-12, atol=1e-12)
        v = np.maximum(post.projected_variance(m.kernel.Kdiag(X), Kxu), 0.0) + m.noise_variance
        assert np.allclose(var[:, cols], v[:, None], rtol=1e-12)
    pv = m.predictive_variance(X)
    assert np.allclose(pv, (var - m.noise_variance).mean(1), rtol=1e-10)
    mean_u, var_u = m.predict(X, m.latent_variance[:4])
    assert mean_u.shape == var_u.shape == (4, 8) and np.all(var_u > 0)


def test_training_stats_keep_each_group_of_outputs(fitted):
    """The test bound's training statistics: F_hat is the model's bound without KL, and
    column j's c_j is that of its own group's factorisation."""
    m, _ = fitted
    st = m._test_stats()
    assert st.n_groups == len(m._missing.groups) > 1
    # two forms of the algebra (per group here, stacked in the model's bound): F_hat ~ 90 is
    # the sum of terms ~1e4 that cancel, so they agree to ~1e-12 relative, not to the last bit
    assert st.F_hat == pytest.approx(m.elbo() + m.prior.q(m._values(), grad=False).kl, rel=1e-10)
    for i, g in enumerate(m._missing.groups):
        assert np.all(st.col_group[g.cols] == i)


@pytest.mark.parametrize("batch", [None, "pairs"])
def test_the_test_bound_is_the_per_column_bound_of_the_enlarged_data(fitted, batch):
    """A test row joins, in each output j it observes, the training rows observing j:
    F_hat(q(X), q(x*)) = sum_j FdFinal over those rows (computed directly), with test rows
    alone and in batches, and its gradient by central differences."""
    from bgplvm.testbound import TestBound

    m, full = fitted
    st = m._test_stats()
    rng = np.random.default_rng(11)
    Ys = random_holes(full[:4] + 0.05, 0.3, seed=12)
    Ys[0] = full[0]  # one complete row: it spans every training group
    b = None if batch is None else np.array([0, 0, 1, 1])
    tb = TestBound(st, Ys, batch=b)
    mu_s = m.latent_mean[:4] + 0.1 * rng.standard_normal((4, 2))
    S_s = rng.uniform(0.05, 0.3, (4, 2))
    gain, dmu, dS = tb.evaluate(mu_s, S_s)
    k, Z, beta = st.kernel, st.Z, st.beta
    obs_t, obs_s = m.Y_observed, ~np.isnan(Ys)
    batches = [[0], [1], [2], [3]] if batch is None else [[0, 1], [2, 3]]
    for i, rows in enumerate(batches):
        F = 0.0
        for j in range(m.Y.shape[1]):
            rt = np.flatnonzero(obs_t[:, j])
            rs = [r for r in rows if obs_s[r, j]]
            mu = np.vstack([m.latent_mean[rt], mu_s[rs]])
            S = np.vstack([m.latent_variance[rt], S_s[rs]])
            y = np.r_[m.Y[rt, j], Ys[rs, j]] - m.Y_mean[j]
            F += collapsed_bound(k.K(Z), k.psi0(mu, S), k.psi1(mu, S, Z), k.psi2(mu, S, Z), beta,
                                 OutputStats.from_centred(y[:, None]), grad=False).F
        assert st.F_hat + gain[i] == pytest.approx(F, rel=1e-10)
    x = np.concatenate([mu_s.ravel(), S_s.ravel()])

    def f(x):
        return float(np.sum(tb.evaluate(x[:8].reshape(4, 2), x[8:].reshape(4, 2), grad=False)[0]))

    h = 1e-6
    num = np.array([(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(x.size)])
    assert np.allclose(np.concatenate([dmu.ravel(), dS.ravel()]), num, rtol=1e-5, atol=1e-5 * np.abs(num).max())


def test_reconstruct_infer_and_log_density_after_a_fit_with_missing_values(fitted):
    m, full = fitted
    Ys = full[:6].copy()
    Ys[:, 4:] = np.nan
    mean, var = m.reconstruct(Ys)
    assert np.array_equal(mean[:, :4], Ys[:, :4]) and np.all(var[:, :4] == 0)
    err = np.sqrt(np.mean((mean[:, 4:] - full[:6, 4:]) ** 2))
    err_mean = np.sqrt(np.mean((m.Y_mean[4:] - full[:6, 4:]) ** 2))
    assert err < 0.6 * err_mean, (err, err_mean)
    mu, S = m.infer_latent(Ys)
    assert mu.shape == S.shape == (6, 2) and np.all(S > 0)
    ld = m.log_density(Ys)
    assert np.all(np.isfinite(ld))


def test_a_model_with_missing_values_saves_and_loads(fitted, tmp_path):
    m, _ = fitted
    m.save(tmp_path / "m.npz")
    m2 = BayesianGPLVM.load(tmp_path / "m.npz")
    assert np.array_equal(m2.Y_observed, m.Y_observed)
    assert m2.elbo() == m.elbo()
    assert np.array_equal(m2.impute()[0], m.impute()[0])
    assert "missing" in m2.summary()


@pytest.mark.parametrize("time_prior", ["dense", "state_space"])
def test_a_dynamical_model_fitted_with_holes_reconstructs_and_forecasts(time_prior):
    """Training frames with holes (a marker lost for a while): new frames are reconstructed
    (the test bound and the conditioned q(u) per training group), forecasts are finite and
    the training holes are imputed."""
    t = np.linspace(0.0, 6.0, 90)
    full = np.c_[np.sin(t), np.cos(t), np.sin(2 * t), np.cos(0.5 * t)]
    full += 0.03 * np.random.default_rng(0).standard_normal(full.shape)
    Y = full.copy()
    Y[20:40, 1] = np.nan
    Y[::7, 3] = np.nan
    m = DynamicalGPLVM(Y[:80], t[:80], latent_dim=2, num_inducing=10, time_prior=time_prior)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m.fit(max_iters=150, progress=False)
    Ys = full[80:].copy()
    Ys[:, 2:] = np.nan
    mean, var = m.reconstruct(Ys, t[80:], sequence=0, max_iters=100)
    assert np.all(np.isfinite(mean)) and np.all(var[:, 2:] > 0)
    err = np.sqrt(np.mean((mean[:, 2:] - full[80:, 2:]) ** 2))
    assert err < 0.6 * np.sqrt(np.mean((m.Y_mean[2:] - full[80:, 2:]) ** 2)), err
    f_mean, f_var = m.forecast(t[80:83])
    assert np.all(np.isfinite(f_mean)) and np.all(f_var > 0)
    imputed, ivar = m.impute()
    hole = np.isnan(Y[:80])
    assert np.sqrt(np.mean((imputed[hole] - full[:80][hole]) ** 2)) < 0.5 * np.std(full[:80][hole])
