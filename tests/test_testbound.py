"""The test-time bound (model/testbound.py) and the model's predictions for new outputs.

- values: the bound of test rows with the training data equals the collapsed bound
  (model/bound.py) of the enlarged data set, column by column when entries are missing;
- gradients w.r.t. mu*, S* by central differences, with and without missing entries, for
  independent points, batches and compressed (D > M) data;
- the Numba building blocks against NumPy/SciPy, serial vs parallel;
- inference: batched equals one point at a time; the optimum is a stationary point;
- reconstruct, log_density, meanFstar/covFstar against Monte Carlo; input validation.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.linalg import solve_triangular

from gradcheck import assert_gradient
from bgplvm import BayesianGPLVM
from bgplvm import _numba_config as cfg
from bgplvm import testbound as tbm
from bgplvm.batch_lbfgs import minimize_batch
from bgplvm.bound import OutputStats, collapsed_bound
from bgplvm.testbound import TestBound, TrainingStats, check_test_outputs, infer_latent, test_bound


# ------------------------------------------------------------------------------------------
# small fitted models (module-scoped: fitting is the slow part)
# ------------------------------------------------------------------------------------------
def _data(N, D, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, 2))
    W = rng.standard_normal((2, D))
    return np.sin(X @ W) + 0.5 * X[:, :1] + 0.1 * rng.standard_normal((N, D))


@pytest.fixture(scope="module")
def model_small():
    """D = 5 <= M: the test rows' data enter as they are."""
    Y = _data(34, 5)
    m = BayesianGPLVM(Y[:30], latent_dim=2, num_inducing=8, kernel="rbf+bias+white", seed=0)
    m.fit(max_iters=60, progress=False)
    return m, Y[30:]


@pytest.fixture(scope="module")
def model_wide():
    """D = 20 > M = 5: test data are projected (``_compress_*``)."""
    Y = _data(34, 20, seed=1)
    m = BayesianGPLVM(Y[:30], latent_dim=2, num_inducing=5, seed=0)
    m.fit(max_iters=60, progress=False)
    return m, Y[30:]


def stats_of(m) -> TrainingStats:
    return m._test_stats()


def q_star(n, Q, seed=3):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, Q)), rng.uniform(0.1, 0.5, (n, Q))


MISSING = np.array([[1, 1, 1, 1, 1], [1, 1, 0, 1, 1], [0, 0, 0, 1, 1], [1, 1, 1, 1, 0]], dtype=bool)


def observed_mask(D, kind):
    if kind == "none missing":
        return np.ones((4, D), dtype=bool)
    rng = np.random.default_rng(5)
    obs = rng.random((4, D)) > 0.4
    obs[:, 0] = True  # every row observes something
    obs[1] = np.ones(D, dtype=bool)
    return obs


def enlarged_bound(st: TrainingStats, rows, mu_s, S_s, Yt, obs) -> float:
    """sum_j collapsed bound (bound.py) of the training rows plus the test rows ``rows``
    observing j: the independent reference of the test bound."""
    k, Z = st.kernel, st.Z
    Kuu = k.K(Z)
    total = 0.0
    for j in range(st.D):
        r = [i for i in rows if obs[i, j]]
        mu = np.vstack([st.mu, mu_s[r]])
        S = np.vstack([st.S, S_s[r]])
        y = np.concatenate([st.Yc[:, j], Yt[r, j] - st.Y_mean[j]])[:, None]
        total += collapsed_bound(Kuu, k.psi0(mu, S), k.psi1(mu, S, Z), k.psi2(mu, S, Z), st.beta,
                                 OutputStats.from_centred(y), grad=False).F
    return total


# ------------------------------------------------------------------------------------------
# values
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("which", ["model_small", "model_wide"])
def test_training_F_hat_is_the_collapsed_bound(which, request):
    m, _ = request.getfixturevalue(which)
    st = stats_of(m)
    k = st.kernel
    F = collapsed_bound(k.K(st.Z), k.psi0(st.mu, st.S), k.psi1(st.mu, st.S, st.Z),
                        k.psi2(st.mu, st.S, st.Z), st.beta, OutputStats.from_centred(st.Yc),
                        grad=False).F
    assert st.F_hat == pytest.approx(F, rel=1e-12)


@pytest.mark.parametrize("kind", ["none missing", "missing"])
@pytest.mark.parametrize("which", ["model_small", "model_wide"])
def test_bound_equals_collapsed_bound_of_enlarged_data(which, kind, request):
    """Every row alone and two batches of two rows: F_hat of a batch is the collapsed
    bound of the training data plus the batch, each column with the rows observing it."""
    m, Yt = request.getfixturevalue(which)
    st = stats_of(m)
    obs = observed_mask(st.D, kind)
    mu_s, S_s = q_star(4, st.Q)
    Ys = np.where(obs, Yt, np.nan)
    F, _, _ = test_bound(st, mu_s, S_s, Ys, obs)
    ref = [enlarged_bound(st, [i], mu_s, S_s, Yt, obs) for i in range(4)]
    np.testing.assert_allclose(F, ref, rtol=1e-11)
    F, _, _ = test_bound(st, mu_s, S_s, Ys, obs, batch=np.array([7, 3, 7, 3]))
    ref = [enlarged_bound(st, [1, 3], mu_s, S_s, Yt, obs), enlarged_bound(st, [0, 2], mu_s, S_s, Yt, obs)]
    np.testing.assert_allclose(F, ref, rtol=1e-11)  # batches in the order of sorted ids (3, 7)


def test_training_point_with_its_own_q(model_small):
    """A copy of training row n with q(x*) = q(x_n): the enlarged data set has row n twice."""
    m, _ = model_small
    st = stats_of(m)
    n = 4
    F, _, _ = test_bound(st, st.mu[[n]], st.S[[n]], m.Y[[n]], None)
    k, Z = st.kernel, st.Z
    mu, S = np.vstack([st.mu, st.mu[[n]]]), np.vstack([st.S, st.S[[n]]])
    Yc = np.vstack([st.Yc, st.Yc[[n]]])
    ref = collapsed_bound(k.K(Z), k.psi0(mu, S), k.psi1(mu, S, Z), k.psi2(mu, S, Z), st.beta,
                          OutputStats.from_centred(Yc), grad=False).F
    # 1e-10: the kernels are compiled with fastmath reassociation, and a fresh compile and
    # a cached one have been seen to differ by 2e-12 relative in this sum
    assert F[0] == pytest.approx(ref, rel=1e-10)
    assert F[0] < st.F_hat  # one more point to explain costs density (log p < 0 here)


def test_rows_observing_nothing_change_nothing(model_small):
    m, Yt = model_small
    st = stats_of(m)
    obs = np.ones((2, st.D), dtype=bool)
    obs[1] = False
    mu_s, S_s = q_star(2, st.Q)
    F, dmu, dS = test_bound(st, mu_s, S_s, Yt[:2], obs)
    assert F[1] == st.F_hat
    assert not dmu[1].any() and not dS[1].any()


# ------------------------------------------------------------------------------------------
# gradients
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("batch", [None, np.array([0, 0, 1, 1])], ids=["independent", "batches"])
@pytest.mark.parametrize("kind", ["none missing", "missing"])
@pytest.mark.parametrize("which", ["model_small", "model_wide"])
def test_gradients_by_central_differences(which, kind, batch, request):
    m, Yt = request.getfixturevalue(which)
    st = stats_of(m)
    obs = observed_mask(st.D, kind)
    mu_s, S_s = q_star(4, st.Q, seed=7)
    tb = TestBound(st, np.where(obs, Yt, np.nan), obs, batch)
    nQ = mu_s.size

    def f(x):
        g, dmu, dS = tb.evaluate(x[:nQ].reshape(mu_s.shape), x[nQ:].reshape(S_s.shape))
        return g.sum(), np.concatenate([dmu.ravel(), dS.ravel()])

    assert_gradient(f, np.concatenate([mu_s.ravel(), S_s.ravel()]), rtol=1e-6, atol=1e-7, eps=1e-5)


def test_group_kernel_derivatives_wrt_psi_statistics(model_small):
    """dP and dPsi1 of the compiled group kernel against central differences of its own gain
    in P and Psi1 (the statistics, before the kernel's chain rule)."""
    m, Yt = model_small
    st = stats_of(m)
    tb = TestBound(st, Yt[:2], None, batch=np.array([0, 0]))
    mu_s, S_s = q_star(2, st.Q)
    k = st.kernel
    psi0 = k.psi0(mu_s, S_s)
    Psi1 = k.psi1(mu_s, S_s, st.Z)
    Psi2n = k.psi2n(mu_s, S_s, st.Z)
    def run(Psi1, Psi2n, grad):
        return tbm.groups(tb.g_ptr, tb.g_rows, tb.g_d, tb.g_pat, tb.g_tg, tb.g_yoff, tb.g_width,
                          tb.Yc_flat, tb.g_ysq, tb.pat_foff, tb.pat_k, tb.F_flat,
                          np.arange(2), psi0, Psi1, Psi2n, st.R0s, st.R0Ts, st.Kinv, st.beta,
                          grad, tb.g_rows.size, 1)

    gain, dP, dPsi1 = run(Psi1, Psi2n, True)
    assert tb.n_groups == 1 and tb.g_rows.tolist() == [0, 1]
    # realistic directions (a random one leaves the range where the gain is near-linear at
    # any step above its rounding noise): the statistics of a neighbouring q(x*)
    _, S2 = q_star(2, st.Q, seed=9)
    V = k.psi2n(mu_s + 0.1, S2, st.Z)[0]
    W = k.psi1(mu_s + 0.1, S2, st.Z)
    eps = 1e-5
    num = (run(Psi1, Psi2n + eps * V, False)[0][0] - run(Psi1, Psi2n - eps * V, False)[0][0]) / (2 * eps)
    assert np.sum(dP[0] * V) * 2 == pytest.approx(num, rel=1e-6)  # P = Psi2n[0] + Psi2n[1]
    num = (run(Psi1 + eps * W, Psi2n, False)[0][0] - run(Psi1 - eps * W, Psi2n, False)[0][0]) / (2 * eps)
    assert np.sum(dPsi1 * W) == pytest.approx(num, rel=1e-6)


# ------------------------------------------------------------------------------------------
# compiled building blocks
# ------------------------------------------------------------------------------------------
def test_triangular_helpers_match_numpy():
    rng = np.random.default_rng(0)
    M = 9
    A = rng.standard_normal((M, M))
    A = A @ A.T + M * np.eye(M)
    L = A.copy()
    assert tbm._cholesky_inplace(L)
    np.testing.assert_allclose(L, np.linalg.cholesky(A), rtol=1e-13, atol=1e-13)
    X = rng.standard_normal((M, 4))
    Y = X.copy()
    tbm._solve_lower_inplace(L, Y)
    np.testing.assert_allclose(Y, solve_triangular(L, X, lower=True), rtol=1e-12)
    Y = X.copy()
    tbm._solve_lower_t_inplace(L, Y)
    np.testing.assert_allclose(Y, solve_triangular(L, X, lower=True, trans="T"), rtol=1e-12)
    R = np.tril(rng.standard_normal((M, M)))
    Y = R.copy()
    tbm._solve_lower_tri_inplace(L, Y)
    np.testing.assert_allclose(Y, solve_triangular(L, R, lower=True), rtol=1e-12, atol=1e-14)
    B = -np.eye(3)
    assert not tbm._cholesky_inplace(B)


def test_group_kernel_serial_and_parallel_agree(model_wide):
    m, Yt = model_wide
    st = stats_of(m)
    rng = np.random.default_rng(1)
    Ys = np.repeat(Yt, 20, axis=0) + 0.01 * rng.standard_normal((80, st.D))
    Ys[rng.random(Ys.shape) < 0.3] = np.nan
    Ys[:, 0] = 0.1
    mu_s, S_s = rng.standard_normal((80, st.Q)), rng.uniform(0.1, 0.5, (80, st.Q))
    out = []
    for par in (False, True):
        with cfg.parallel_mode(par):
            out.append(TestBound(st, Ys).evaluate(mu_s, S_s))
    for a, b in zip(*out):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_nearest_rows_use_only_observed_dims(model_small):
    m, _ = model_small
    st = stats_of(m)
    rng = np.random.default_rng(2)
    Ys = rng.standard_normal((6, st.D))
    obs = rng.random((6, st.D)) > 0.5
    obs[:, 1] = True
    near = tbm.nearest_rows(st, Ys, obs, k=3)
    for i in range(6):
        d = np.sum(np.where(obs[i], (m.Y - Ys[i]) ** 2, 0.0), axis=1)
        np.testing.assert_array_equal(near[i], np.argsort(d)[:3])


def test_batch_lbfgs_solves_independent_quadratics():
    """Problems of very different conditioning reach their minimisers, and each one's
    iterates do not depend on which other problems run beside it."""
    rng = np.random.default_rng(0)
    n, p = 7, 5
    A = []
    for i in range(n):
        Qm = np.linalg.qr(rng.standard_normal((p, p)))[0]
        A.append(Qm @ np.diag(np.logspace(0, i / 2, p)) @ Qm.T)
    A = np.array(A)
    b = rng.standard_normal((n, p))

    def fun(X, idx):
        AX = np.einsum("kpq,kq->kp", A[idx], X)
        return 0.5 * np.einsum("kp,kp->k", X, AX) - np.einsum("kp,kp->k", b[idx], X), AX - b[idx]

    res = minimize_batch(fun, np.zeros((n, p)), gtol=1e-10, ftol=0.0)
    np.testing.assert_allclose(res.x, np.linalg.solve(A, b[..., None])[..., 0], rtol=1e-7, atol=1e-9)
    assert res.converged.all()
    for i in (0, 4):
        one = minimize_batch(lambda X, idx: fun(X, np.array([i])), np.zeros((1, p)), gtol=1e-10, ftol=0.0)
        np.testing.assert_array_equal(one.x[0], res.x[i])


# ------------------------------------------------------------------------------------------
# inference, reconstruction, density
# ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def oil_like():
    """A model with a few latent dims switched off by ARD, and test rows with missing dims."""
    rng = np.random.default_rng(4)
    X = rng.standard_normal((60, 2))
    Y = np.hstack([np.sin(X @ rng.standard_normal((2, 4))), X @ rng.standard_normal((2, 4))])
    Y += 0.05 * rng.standard_normal(Y.shape)
    m = BayesianGPLVM(Y[:50], latent_dim=4, num_inducing=12, seed=0).fit(max_iters=200, progress=False)
    Yt = Y[50:].copy()
    Yt[rng.random(Yt.shape) < 0.4] = np.nan
    Yt[:, 0] = Y[50:, 0]
    Yt[0] = Y[50]  # one row without missing entries
    return m, Yt, Y[50:]


def test_batched_inference_equals_one_point_at_a_time(oil_like):
    m, Yt, _ = oil_like
    fit = m.infer_latent(Yt, return_fit=True)
    assert fit.converged.all()
    for i in (0, 3, 7):
        mu1, S1 = m.infer_latent(Yt[i])
        np.testing.assert_allclose(mu1[0], fit.mu[i], rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(S1[0], fit.S[i], rtol=1e-8, atol=1e-12)


def test_chunks_of_rows_change_nothing(oil_like, monkeypatch):
    m, Yt, _ = oil_like
    st = stats_of(m)
    Ys, obs = check_test_outputs(np.vstack([Yt] * 9), st.D)  # 90 rows
    whole = infer_latent(st, Ys, obs)
    monkeypatch.setattr(tbm, "CHUNK_BYTES", 64 * 16.0 * st.M ** 2)  # chunks of 64 rows
    parts = infer_latent(st, Ys, obs)
    # rows are optimised independently; what may differ is rounding (BLAS kernels inside
    # the compiled test bound may take other paths for other array alignments), which ~20
    # L-BFGS iterations can amplify: once seen at 1e-9 after a fresh compile
    np.testing.assert_allclose(parts.mu, whole.mu, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(parts.log_density, whole.log_density, rtol=1e-9)
    np.testing.assert_allclose(parts.iterations, whole.iterations, atol=1)


def test_inferred_q_is_a_stationary_point(oil_like):
    """At the returned q(x*) the gradient of gain - KL (w.r.t. mu and log S) is ~0, and
    the objective is above the starting one."""
    m, Yt, _ = oil_like
    st = stats_of(m)
    fit = m.infer_latent(Yt, return_fit=True)
    Ys, obs = check_test_outputs(Yt, st.D)
    tb = TestBound(st, Ys, obs)
    gain, dmu, dS = tb.evaluate(fit.mu, fit.S)
    kl, dkl_mu, dkl_S = tbm.kl_rows(fit.mu, fit.S)
    # not to the last digit: with this model's long lengthscales the gain of some rows moves
    # by ~1e-7 for a 1e-15 relative change of mu (rounding noise)
    np.testing.assert_allclose(gain - kl, fit.log_density, rtol=1e-6)
    scale = np.sqrt(fit.S)
    assert np.max(np.abs((dmu - dkl_mu) * scale)) < 1e-2
    assert np.max(np.abs((dS - dkl_S) * fit.S)) < 1e-2
    g0 = tb.evaluate(st.mu[fit.init_rows], st.S[fit.init_rows], grad=False)[0]
    kl0 = tbm.kl_rows(st.mu[fit.init_rows], st.S[fit.init_rows])[0]
    assert np.all(fit.log_density >= g0 - kl0 - 1e-9)


def test_more_starting_points_never_lower_the_start(oil_like):
    """n_init > 1 starts each row from the best of its n_init nearest training rows' q(x_n)
    (the highest gain - KL), which is never below the nearest one's."""
    m, Yt, _ = oil_like
    st = stats_of(m)
    # the test rows, and noisy copies of training rows with two dims observed: for these the
    # nearest row in the observed dims is often not the best start
    rng = np.random.default_rng(1)
    extra = m.Y + 0.3 * rng.standard_normal(m.Y.shape)
    extra[np.argsort(rng.random(extra.shape), axis=1) >= 2] = np.nan
    Ys, obs = check_test_outputs(np.vstack([Yt, extra]), st.D)
    f1 = infer_latent(st, Ys, obs, n_init=1)
    f5 = infer_latent(st, Ys, obs, n_init=5)
    cand = tbm.nearest_rows(st, Ys, obs, 5)
    np.testing.assert_array_equal(f1.init_rows, cand[:, 0])
    tb = TestBound(st, Ys, obs)

    def start(rows):
        return (tb.evaluate(st.mu[rows], st.S[rows], grad=False)[0]
                - tbm.kl_rows(st.mu[rows], st.S[rows])[0])

    by_cand = np.column_stack([start(cand[:, c]) for c in range(5)])
    assert np.all(np.isin(f5.init_rows[:, None], cand).any(1))
    np.testing.assert_allclose(start(f5.init_rows), by_cand.max(1), rtol=1e-12, atol=1e-9)
    assert np.all(start(f5.init_rows) >= start(f1.init_rows) - 1e-9)
    assert np.any(f5.init_rows != f1.init_rows)  # the choice is exercised here
    assert f5.log_density.mean() >= f1.log_density.mean() - 1e-3


def test_reconstruct_passes_observed_values_through(oil_like):
    m, Yt, _ = oil_like
    full = np.nan_to_num(Yt, nan=0.3)
    mean, var = m.reconstruct(full)
    np.testing.assert_array_equal(mean, full)
    np.testing.assert_array_equal(var, 0.0)
    mean, var = m.reconstruct(Yt)
    miss = np.isnan(Yt)
    np.testing.assert_array_equal(mean[~miss], Yt[~miss])
    assert np.all(var[miss] > m.noise_variance) and np.all(var[~miss] == 0)
    assert np.all(np.isfinite(mean))


def test_reconstruction_beats_the_mean_on_held_out_entries(oil_like):
    m, Yt, truth = oil_like
    miss = np.isnan(Yt)
    mean, _ = m.reconstruct(Yt)
    err_model = np.sqrt(np.mean((mean[miss] - truth[miss]) ** 2))
    err_mean = np.sqrt(np.mean((np.broadcast_to(m.Y_mean, truth.shape)[miss] - truth[miss]) ** 2))
    assert err_model < 0.5 * err_mean


def test_training_point_is_denser_than_an_outlier(oil_like):
    m, _, _ = oil_like
    y = m.Y[3]
    far = y + 10.0 * m.Y.std(0)
    lp = m.log_density(np.vstack([y, far]))
    assert lp[0] > lp[1] + 50.0
    # missing dims: the density of fewer observed dims is a density of fewer numbers
    part = y.copy()
    part[:4] = np.nan
    assert np.isfinite(m.log_density(part)[0])


def test_uncertain_input_moments_match_monte_carlo(oil_like):
    """meanFstar / covFstar (predict with variances) against sampling x ~ q(x*) and the
    projected-process predictive at each sample (law of total variance)."""
    m, _, _ = oil_like
    rng = np.random.default_rng(0)
    mu = m.latent_mean[:2] + 0.3
    # a spread of half a lengthscale per dimension: wide enough that E[f(x)] is far from
    # f(E[x]) (checked below), so that the mean check has the power to see that mistake
    S = np.broadcast_to(np.minimum((0.5 / np.sqrt(m.ard_weights)) ** 2, 4.0), mu.shape).copy()
    mean, var = m.predict(mu, S, include_noise=False)
    at_mean, _ = m.predict(mu, include_noise=False)
    for i in range(2):
        X = mu[i] + np.sqrt(S[i]) * rng.standard_normal((100_000, mu.shape[1]))
        mX, vX = m.predict(X, include_noise=False)
        mc_mean = mX.mean(0)
        mc_var = vX.mean(0) + mX.var(0)
        se = mX.std(0) / np.sqrt(X.shape[0])
        assert np.max(np.abs(at_mean[i] - mc_mean) / se) > 10  # f(E[x]) would fail the next line
        assert np.all(np.abs(mean[i] - mc_mean) < 5 * se + 1e-12)
        np.testing.assert_allclose(var[i], mc_var, rtol=0.02)


# ------------------------------------------------------------------------------------------
# validation
# ------------------------------------------------------------------------------------------
def test_bad_test_outputs_give_clear_errors(oil_like):
    m, Yt, _ = oil_like
    D = m.Y.shape[1]
    with pytest.raises(ValueError, match=rf"shape \(n\*, {D}\).*D={D}"):
        m.infer_latent(np.zeros((2, D + 1)))
    bad = Yt.copy()
    bad[[2, 5]] = np.nan
    with pytest.raises(ValueError, match=r"rows \[2, 5\] of Y_star are entirely NaN"):
        m.reconstruct(bad)
    with pytest.raises(ValueError, match="row \\[0\\] of Y_star is entirely NaN"):
        m.log_density(np.full(D, np.nan))
    bad = Yt.copy()
    bad[1, 1] = np.inf
    with pytest.raises(ValueError, match="inf"):
        m.infer_latent(bad)
    with pytest.raises(ValueError, match="numeric"):
        m.infer_latent([["a"] * D])
