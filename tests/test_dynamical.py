"""DynamicalGPLVM and its temporal prior: time kernels, the reparametrised q(X)
(SFixedPointQ), the KL (KLasSummationOverQ) against a dense computation, gradients of every
parameter block, forecasting (qxstar), bad input and model files."""

import io

import numpy as np
import pytest

from gradcheck import assert_close_gradient, assert_gradient, assert_model_block_gradients, numerical_gradient
from bgplvm import BayesianGPLVM, DynamicalGPLVM
from bgplvm.priors import DynamicalPrior, GaussianBlocks
from bgplvm.time_kernels import TIME_KERNEL_NAMES, make_time_kernel

TIME_KERNELS = ["matern32", "rbf", "matern52", "periodic", "rbf+white", "matern32+bias+white",
                "rbf+periodic", "matern12"]


def _sequences():
    """Two sequences with their own, unequally spaced time stamps."""
    t = np.r_[np.arange(9.0), 0.5 + 1.5 * np.arange(6.0)]
    seq = np.r_[np.zeros(9, int), np.full(6, 3)]
    return t, seq


def _data(t, D=4, seed=0):
    rng = np.random.default_rng(seed)
    X = np.c_[np.sin(t / 2.0), np.cos(t / 3.0)]
    return np.tanh(X @ rng.standard_normal((2, D))) + 0.05 * rng.standard_normal((len(t), D))


# --- time kernels ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", TIME_KERNEL_NAMES)
def test_time_kernel_matrix_is_symmetric_psd(name):
    k = make_time_kernel(name)
    t = np.linspace(0, 5, 12)
    K = k.K(t)
    np.testing.assert_allclose(K, K.T)
    assert np.linalg.eigvalsh(K).min() > -1e-10
    np.testing.assert_allclose(np.diag(K), k.Kdiag(t))


def test_time_kernel_closed_forms():
    """Each stationary kernel's k(r) against its textbook formula (the symmetry, PSD and
    gradient tests cannot see a wrong constant such as sqrt(3) in the Matern 5/2)."""
    r = np.array([0.0, 0.7, 2.0])
    t = np.r_[0.0, r[1:]]
    m32 = make_time_kernel("matern32")
    m32.set_params(variance=2.0, lengthscale=1.5)
    a = np.sqrt(3) * r / 1.5
    np.testing.assert_allclose(m32.K(t[:1], t)[0], 2.0 * (1 + a) * np.exp(-a))
    m12 = make_time_kernel("matern12")
    m12.set_params(variance=2.0, lengthscale=1.5)
    np.testing.assert_allclose(m12.K(t[:1], t)[0], 2.0 * np.exp(-r / 1.5))
    m52 = make_time_kernel("matern52")
    m52.set_params(variance=2.0, lengthscale=1.5)
    b = np.sqrt(5) * r / 1.5
    np.testing.assert_allclose(m52.K(t[:1], t)[0], 2.0 * (1 + b + b**2 / 3) * np.exp(-b))
    rbf = make_time_kernel("rbf")
    rbf.set_params(variance=2.0, lengthscale=1.5)
    np.testing.assert_allclose(rbf.K(t[:1], t)[0], 2.0 * np.exp(-0.5 * r**2 / 1.5**2))
    per = make_time_kernel("periodic")
    per.set_params(variance=1.0, lengthscale=0.8, period=2.0)
    np.testing.assert_allclose(per.K(t[:1], t)[0], np.exp(-2 * np.sin(np.pi * r / 2.0) ** 2 / 0.64))
    np.testing.assert_allclose(per.K(np.r_[0.0], np.r_[2.0, 4.0]), 1.0)  # period 2
    white = make_time_kernel("white")
    np.testing.assert_allclose(white.K(t, t + 0.0), 0.0)  # only on K(t) itself


@pytest.mark.parametrize("name", TIME_KERNELS)
def test_time_kernel_parameter_gradients(name):
    k = make_time_kernel(name)
    t = np.r_[0.0, 0.3, 1.1, 2.5, 2.6]
    W = np.random.default_rng(0).standard_normal((5, 5))
    names = list(k.params)
    x0 = np.array([float(v) * 1.3 for v in k.params.values()])

    def f(x):
        k.set_params(**dict(zip(names, x)))
        return float(np.sum(W * k.K(t))), np.array([k.grad(t, W)[n] for n in names])

    assert_gradient(f, x0, rtol=1e-6)


def test_unknown_time_kernel_is_named():
    with pytest.raises(ValueError, match="unknown time kernel.*known"):
        make_time_kernel("matern31")


# --- q(X): moments and KL against dense formulas ---------------------------------------------------
def _dense_kl(K, mu_bar, lam):
    """KL(N(mu_q, S_q) || N(0, K)) summed over q, S_q = (K^-1 + diag lam_q)^-1, mu_q = K mu_bar_q,
    with explicit inverses (reference only)."""
    n, Q = mu_bar.shape
    Kinv = np.linalg.inv(K)
    kl, mus, Ss = 0.0, [], []
    for q in range(Q):
        S = np.linalg.inv(Kinv + np.diag(lam[:, q]))
        mu = K @ mu_bar[:, q]
        kl += 0.5 * (np.trace(Kinv @ S) + mu @ Kinv @ mu + np.linalg.slogdet(K)[1]
                     - np.linalg.slogdet(S)[1] - n)
        mus.append(mu)
        Ss.append(np.diag(S))
    return kl, np.array(mus).T, np.array(Ss).T


@pytest.mark.parametrize("tk", ["matern32", "rbf+white"])
def test_moments_and_kl_match_dense_block_diagonal(tk):
    t, seq = _sequences()
    Q = 3
    prior = DynamicalPrior(t, seq, Q, tk)
    rng = np.random.default_rng(1)
    mu_bar = rng.standard_normal((len(t), Q))
    lam = rng.uniform(0.2, 3.0, (len(t), Q))
    qx = prior.q({"mu_bar": mu_bar, "lambda": lam, **prior.time_values()}, grad=False)
    Kfull = np.zeros((len(t), len(t)))
    for s in np.unique(seq):
        ix = np.flatnonzero(seq == s)
        Kfull[np.ix_(ix, ix)] = prior.time_kernel.K(t[ix])
    Kfull += 1e-9 * np.eye(len(t))  # the dense reference inverts K
    kl, mu, S = _dense_kl(Kfull, mu_bar, lam)
    assert qx.kl == pytest.approx(kl, rel=1e-6)
    np.testing.assert_allclose(qx.mu, mu, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(qx.S, S, rtol=1e-6, atol=1e-10)


def test_gaussian_blocks_gradients_with_mean_offset():
    """The block machinery alone (fixed K, prior mean m, as test-time inference uses it):
    F = sum(w1 mu) + sum(w2 S) - KL, gradients w.r.t. mu_bar, lambda and K."""
    rng = np.random.default_rng(2)
    n, Q = 7, 2
    Kt = make_time_kernel("rbf").K(np.linspace(0, 3, n)) + 0.05 * np.eye(n)
    m = rng.standard_normal((n, Q))
    w1, w2 = rng.standard_normal((n, Q)), rng.standard_normal((n, Q))
    gb = GaussianBlocks([np.arange(n)])

    def f(x, K=Kt):
        mb, lam = x[: n * Q].reshape(n, Q), np.exp(x[n * Q:]).reshape(n, Q)
        mu, S, kl, chain = gb.q([K], mb, lam, m=m)
        dmb, dlam, dK = chain(w1, w2)
        return float(np.sum(w1 * mu) + np.sum(w2 * S) - kl), np.r_[dmb.ravel(), (dlam * lam).ravel()], dK[0]

    x0 = np.r_[rng.standard_normal(n * Q), rng.uniform(-1, 1, n * Q)]
    assert_gradient(lambda x: f(x)[:2], x0, rtol=1e-6)
    dK = f(x0)[2]
    dK_num = numerical_gradient(lambda k: f(x0, k.reshape(n, n))[0], Kt.ravel()).reshape(n, n)
    # K is symmetric: compare the symmetric parts
    assert_close_gradient(0.5 * (dK + dK.T), 0.5 * (dK_num + dK_num.T), rtol=1e-6)


@pytest.mark.parametrize("n_blocks", [1, 5])
def test_gaussian_blocks_thread_pool_and_q_split_match_serial(monkeypatch, n_blocks):
    """The thread pool (and, with fewer blocks than 2 x workers, the split of each block into
    ranges of q) gives the serial path's moments, KL and gradients."""
    import bgplvm.priors.dynamical as dyn

    rng = np.random.default_rng(5)
    sizes = rng.integers(20, 40, n_blocks)
    Q = 5
    index = np.split(np.arange(sizes.sum()), np.cumsum(sizes)[:-1])
    Ks = [make_time_kernel("matern32+white").K(np.arange(float(s))) for s in sizes]
    mb = rng.standard_normal((sizes.sum(), Q))
    lam = rng.uniform(0.1, 3.0, (sizes.sum(), Q))
    g1, g2 = rng.standard_normal((2, sizes.sum(), Q))

    def run():
        mu, S, kl, chain = GaussianBlocks(index).q(Ks, mb, lam)
        return (mu, S, kl, *chain(g1, g2))

    monkeypatch.setattr(dyn, "_workers", lambda: 1)
    serial = run()
    monkeypatch.setattr(dyn, "_workers", lambda: 3)
    monkeypatch.setattr(dyn, "_PARALLEL_WORK", 0.0)
    jobs = dyn._jobs(list(sizes), Q, 3)
    assert len(jobs) == (3 * n_blocks if n_blocks < 6 else n_blocks)
    pooled = run()
    for a, b in zip(serial[:5], pooled[:5]):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    for a, b in zip(serial[5], pooled[5]):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_gaussian_blocks_report_a_failed_factorisation():
    """A time-kernel matrix that is not positive semi-definite makes I + D Kt D indefinite:
    LAPACK's failure (called from compiled code) becomes a LinAlgError that says so."""
    n = 6
    K = -2.0 * np.eye(n)
    with pytest.raises(np.linalg.LinAlgError, match="I \\+ D Kt D"):
        GaussianBlocks([np.arange(n)]).q([K], np.zeros((n, 2)), np.ones((n, 2)))


# --- the model's gradients -------------------------------------------------------------------------
@pytest.mark.parametrize("tk", TIME_KERNELS)
def test_gradients_every_block_several_sequences(tk):
    t, seq = _sequences()
    m = DynamicalGPLVM(_data(t), t, latent_dim=3, num_inducing=5, time_kernel=tk, sequences=seq)
    names = set(m.param_names)
    assert {"mu_bar", "lambda", "Z", "noise_variance"} <= names
    assert any(n.startswith("time_kernel.") for n in names)
    assert_model_block_gradients(m)


def test_full_gradient_one_sequence_at_a_moved_point():
    t = np.linspace(0, 4, 10)
    m = DynamicalGPLVM(_data(t, D=3), t, latent_dim=2, num_inducing=4, time_kernel="matern32+white")
    rng = np.random.default_rng(4)
    x = m._x + 0.3 * rng.standard_normal(m._x.size)
    m._set_x(x)
    g, num = assert_gradient(lambda v: m._bound(v), x, rtol=2e-5, atol=1e-7)
    # entry by entry as well: the check above scales its tolerance by the largest entry
    # (~1.7e3 here), which would let a wrong small entry (a lambda, ~0.2) through; the
    # central differences' own error is ~1e-6 absolute, ~1e-6 relative
    np.testing.assert_allclose(g, num, rtol=1e-5, atol=3e-6)


# --- forecasting ----------------------------------------------------------------------------------
@pytest.mark.parametrize("true_ell", [0.5, 4.0])
def test_initial_lengthscale_follows_the_data_time_scale(true_ell):
    """The time lengthscale starts where the initial latent paths say (marginal likelihood
    of mu0 under the time kernel), not at a fixed fraction of the span."""
    from bgplvm.dynamical import initial_time_scale

    rng = np.random.default_rng(3)
    t = np.arange(120.0) * 0.5
    k = make_time_kernel("matern32")
    k.set_params(lengthscale=true_ell)
    L = np.linalg.cholesky(k.K(t) + 1e-8 * np.eye(t.size))
    mu0 = L @ rng.standard_normal((t.size, 4)) + 0.1 * rng.standard_normal((t.size, 4))
    ell, _ = initial_time_scale(t, [np.arange(60), np.arange(60, 120)], mu0, make_time_kernel("matern32"))
    assert true_ell / 2 < ell < true_ell * 2


@pytest.mark.parametrize("time_kernel", ["matern32", "rbf+white+bias"])
def test_latent_at_training_times_reproduces_qX(time_kernel):
    """Also with a white part in the time kernel (a requested training time is that frame;
    the white part used to be left out of K_*n there: S 0.32 against q(X)'s 0.12)."""
    t, seq = _sequences()
    m = DynamicalGPLVM(_data(t), t, latent_dim=2, num_inducing=5, time_kernel=time_kernel, sequences=seq)
    m._set_x(m._x + 0.2 * np.random.default_rng(5).standard_normal(m._x.size))
    if "white" in time_kernel:
        v = m._values()
        v["time_kernel.white.variance"] = np.asarray(0.2)
        m._set_x(m._layout.pack(v))
        assert m.time_kernel.white_diag(t[:1])[0] == pytest.approx(0.2)
    for s in (0, 3):
        ix = np.flatnonzero(seq == s)
        mu, S = m.latent_at(t[ix], sequence=s)
        np.testing.assert_allclose(mu, m.latent_mean[ix], rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(S, m.latent_variance[ix], rtol=1e-7, atol=1e-10)


def test_forecast_uncertainty_grows_beyond_the_data():
    t = np.arange(30.0)
    Y = _data(t, D=5)
    m = DynamicalGPLVM(Y, t, latent_dim=2, num_inducing=8, time_kernel="rbf", seed=0)
    m.fit(max_iters=150, progress=False)
    _, S = m.latent_at(np.array([29.0, 32.0, 40.0, 200.0]))
    assert np.all(np.diff(S.sum(1)) > 0)
    # far away q(X*) is the prior: mean 0, variance k(t, t)
    mu_far, S_far = m.latent_at(np.array([1e4]))
    np.testing.assert_allclose(mu_far, 0.0, atol=1e-8)
    np.testing.assert_allclose(S_far, m.time_kernel.Kdiag(np.array([1e4]))[0], rtol=1e-6)
    mean, var = m.forecast(np.array([30.0, 31.0]))
    assert mean.shape == var.shape == (2, 5) and np.all(var > m.noise_variance)
    # a new sequence (None) forecasts from the prior
    mu_new, _ = m.latent_at(np.array([0.0, 1.0]), sequence=None)
    np.testing.assert_allclose(mu_new, 0.0)


@pytest.mark.parametrize("time_prior", ["dense", "state_space"])
def test_forecasts_far_past_the_data_are_the_time_priors_marginal_flat_and_finite(time_prior):
    """Issue 44: far past a training sequence the forecast is y's marginal under the time
    prior, q(x*) = N(0, k_t(t, t)) through meanFstar / covFstar, the same at every later
    time (no NaN or inf however far)."""
    t = np.arange(30.0)
    m = DynamicalGPLVM(_data(t, D=5), t, latent_dim=2, num_inducing=8, time_kernel="matern32",
                       time_prior=time_prior, seed=0).fit(max_iters=100, progress=False)
    far = np.array([1e4, 1e8, 1e12])
    mean, var = m.forecast(far)
    assert np.all(np.isfinite(mean)) and np.all(np.isfinite(var))
    prior_var = np.full((1, 2), m.time_kernel.Kdiag(far[:1])[0])
    m0, v0 = m.predict(np.zeros((1, 2)), prior_var)
    np.testing.assert_allclose(mean, np.repeat(m0, 3, axis=0), rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(var, np.repeat(v0, 3, axis=0), rtol=1e-8)


def test_fit_increases_bound_and_gives_a_smooth_trajectory():
    t = np.linspace(0, 6, 40)
    Y = _data(t, D=6, seed=1)
    dyn = DynamicalGPLVM(Y, t, latent_dim=2, num_inducing=10, time_kernel="rbf", seed=0)
    F0 = dyn.elbo()
    dyn.fit(max_iters=300, progress=False)
    assert dyn.elbo() > F0 + 10
    # the temporal prior keeps neighbouring frames close in latent space
    steps = np.linalg.norm(np.diff(dyn.latent_mean, axis=0), axis=1)
    spread = np.linalg.norm(dyn.latent_mean - dyn.latent_mean.mean(0), axis=1).mean()
    assert np.median(steps) < 0.25 * spread


def test_from_static_starts_at_the_static_fit_and_fits_from_there():
    """The warm start carries the static model's mapping and latent means over exactly; its
    variances only approximately (S = (Kt^-1 + Lambda)^-1 cannot be any diagonal); a fit
    from there climbs above the bound the static model reached (the smooth time prior
    suits smooth latent paths better than N(0, I))."""
    t, seq = _sequences()
    t = np.r_[t, 20.0 + np.arange(15.0)]
    seq = np.r_[seq, np.full(15, 7)]
    Y = _data(t, D=6, seed=2)
    static = BayesianGPLVM(Y, latent_dim=2, num_inducing=8, seed=0).fit(max_iters=300, progress=False)
    dyn = DynamicalGPLVM.from_static(static, t, time_kernel="matern32", sequences=seq)
    np.testing.assert_allclose(dyn.latent_mean, static.latent_mean, atol=1e-4)
    np.testing.assert_array_equal(dyn.inducing_inputs, static.inducing_inputs)
    # the noise and the kernel's parameters travel through their softplus transform: equal up
    # to rounding (bit-equal on earlier installs; 3e-16 apart with numpy 2.4.6, 2026-11-28)
    assert dyn.noise_variance == pytest.approx(static.noise_variance, rel=1e-14)
    np.testing.assert_allclose(dyn.ard_weights, static.ard_weights, rtol=1e-14)
    assert np.all(dyn.latent_variance <= static.latent_variance * (1 + 1e-9))
    assert "time_kernel.variance" in dyn._layout.frozen  # learn_time_variance=False as usual
    dyn.fit(max_iters=300, init_iters=0, progress=False)
    assert dyn.elbo() > static.elbo()
    with pytest.raises(TypeError, match="fitted static BayesianGPLVM"):
        DynamicalGPLVM.from_static(dyn, t, sequences=seq)


# --- bad input ----------------------------------------------------------------------------------
@pytest.mark.parametrize("t, seq, match", [
    (np.arange(9.0), None, r"one time stamp per row.*\(10,\)"),
    (np.r_[np.arange(9.0), np.nan], None, "NaN or inf at rows \\[9\\]"),
    (np.r_[np.arange(5.0), np.arange(5.0)], None, "unsorted"),
    (np.r_[0.0, 1.0, 1.0, np.arange(3.0, 10.0)], None, "duplicated.*row 2"),
    (np.r_[0.0, 2.0, 1.0, 1.0, np.arange(4.0, 10.0)], None, "unsorted.*row 2"),  # the first fault
    (np.arange(10.0), np.zeros(8, int), r"one id per row.*\(10,\)"),
    (np.arange(10.0), np.r_[np.zeros(5, int), np.ones(4, int)], r"one id per row"),
])
def test_bad_times_and_sequences_get_clear_errors(t, seq, match):
    Y = _data(np.arange(10.0))
    with pytest.raises(ValueError, match=match):
        DynamicalGPLVM(Y, t, latent_dim=2, num_inducing=4, sequences=seq)


def test_string_ids_in_an_object_array_are_accepted():
    """Sequence ids as a pandas column of strings gives (an object array of str)."""
    t, seq = _sequences()
    ids = np.array(["walk" if s == 0 else "run" for s in seq], dtype=object)
    m = DynamicalGPLVM(_data(t), t, latent_dim=2, num_inducing=4, sequences=ids)
    assert sorted(m.prior.sequence_ids) == ["run", "walk"]
    with pytest.raises(ValueError, match="integer or string ids"):
        DynamicalGPLVM(_data(t), t, latent_dim=2, num_inducing=4, sequences=np.array([object()] * len(t)))


def test_a_time_kernel_object_is_not_changed_by_fitting():
    from bgplvm.time_kernels import RBFTime

    t = np.arange(20.0)
    k = RBFTime(lengthscale=3.0)
    m = DynamicalGPLVM(_data(t), t, latent_dim=2, num_inducing=4, time_kernel=k)
    m.fit(max_iters=30, progress=False)
    assert float(k.params["lengthscale"]) == 3.0 and m.prior.time_kernel is not k
    assert float(m.prior.time_kernel.params["lengthscale"]) != 3.0  # the model's copy was fitted


def test_two_sequences_may_share_time_stamps():
    t = np.r_[np.arange(5.0), np.arange(5.0)]
    m = DynamicalGPLVM(_data(t), t, latent_dim=2, num_inducing=4, sequences=np.r_[[0] * 5, [1] * 5])
    assert np.isfinite(m.elbo())
    with pytest.raises(ValueError, match="unknown sequence 7"):
        m.latent_at([6.0], sequence=7)


@pytest.mark.parametrize("lengths", [(12,), (12, 12, 12), (9, 6, 5, 4, 3)])
def test_starting_variances_have_the_calibrated_median(lengths):
    """The start's constant lambda gives q(X) the median variance INIT_S_MEDIAN, for one
    sequence and for several (the calibration runs on the longest blocks, each its own rows),
    and the same lambda on every construction."""
    from bgplvm.priors.dynamical import INIT_S_MEDIAN

    t = np.concatenate([np.arange(float(n)) for n in lengths])
    seq = np.repeat(np.arange(len(lengths)), lengths)
    m = DynamicalGPLVM(_data(t), t, latent_dim=2, num_inducing=4, sequences=seq, seed=0)
    lam = m._values()["lambda"]
    assert np.ptp(lam) == 0.0
    longest = np.isin(seq, np.argsort(-np.asarray(lengths), kind="stable")[:4])
    assert np.median(m.latent_variance[longest, 0]) == pytest.approx(INIT_S_MEDIAN, rel=1e-3)
    again = DynamicalGPLVM(_data(t), t, latent_dim=2, num_inducing=4, sequences=seq, seed=0)
    np.testing.assert_array_equal(again._values()["lambda"], lam)


def test_gaussian_blocks_must_partition_the_rows():
    with pytest.raises(ValueError, match="partition"):
        GaussianBlocks([np.arange(3), np.arange(3)])


# --- model files ------------------------------------------------------------------------------------
def test_save_load_round_trip_is_exact(tmp_path):
    t, seq = _sequences()
    m = DynamicalGPLVM(_data(t), t, latent_dim=2, num_inducing=5, time_kernel="rbf+white", sequences=seq)
    m.fit(max_iters=20, progress=False)
    path = tmp_path / "dyn.npz"
    m.save(path)
    m2 = BayesianGPLVM.load(path)
    assert type(m2) is DynamicalGPLVM
    np.testing.assert_array_equal(m2._x, m._x)
    np.testing.assert_array_equal(m2.t, m.t)
    np.testing.assert_array_equal(m2.sequences, m.sequences)
    assert m2.time_kernel.spec == "rbf+white"
    assert m2.elbo() == m.elbo()
    np.testing.assert_array_equal(m2.forecast([9.0], sequence=0)[0], m.forecast([9.0], sequence=0)[0])
    buf = io.BytesIO()
    m.save(buf)
    buf.seek(0)
    assert DynamicalGPLVM.load(buf).elbo() == m.elbo()
    assert "time kernel" in m2.summary()


def test_load_skips_the_initial_searches(tmp_path, monkeypatch):
    """Opening a model does not redo the start-point search and calibration (its saved
    parameters replace them): on a busy machine they made opening a CMU model take minutes."""
    import bgplvm.dynamical as md
    from bgplvm.priors.dynamical import DynamicalPrior

    t, seq = _sequences()
    m = DynamicalGPLVM(_data(t), t, latent_dim=2, num_inducing=5, sequences=seq)
    m.save(tmp_path / "dyn.npz")

    def fail(*args, **kwargs):
        raise AssertionError("initialisation ran while loading")

    monkeypatch.setattr(md, "initial_time_scale", fail)
    monkeypatch.setattr(DynamicalPrior, "_calibrate_lambda", fail)
    m2 = BayesianGPLVM.load(tmp_path / "dyn.npz")
    np.testing.assert_array_equal(m2._x, m._x)
    assert m2.elbo() == m.elbo()


# --- reconstruction of partially observed frames ---------------------------------------------------
@pytest.fixture(scope="module")
def fitted():
    t = np.arange(40.0)
    Y = _data(t / 2.0, D=6, seed=2)
    m = DynamicalGPLVM(Y[:30], t[:30], latent_dim=2, num_inducing=8, time_kernel="rbf", seed=0)
    m.fit(max_iters=150, progress=False)
    return m, Y, t


@pytest.mark.parametrize("sequence", [None, 0])
def test_sequence_objective_gradient(fitted, sequence):
    from bgplvm.sequence_inference import SequenceObjective

    m, Y, t = fitted
    Ys = Y[30:36].copy()
    observed = np.ones_like(Ys, dtype=bool)
    observed[:, 3:] = False
    observed[2, :] = [True, False, True, False, True, False]  # a pattern of its own
    obj = SequenceObjective(m, np.where(observed, Ys, 0.0), observed, t[30:36], sequence)
    x = obj.x0 + 0.1 * np.random.default_rng(6).standard_normal(obj.x0.size)
    # the conditional prior of a continued sequence is nearly singular (eigenvalues down to
    # 1e-11): the objective carries ~1e-11 of rounding, so the step is 1e-4, not 1e-6
    assert_gradient(lambda v: obj(v), x, rtol=1e-5, atol=1e-7, eps=1e-4)


def test_reconstruct_passes_observed_entries_and_fills_missing(fitted):
    m, Y, t = fitted
    mean, var = m.reconstruct(Y[30:34], t[30:34], sequence=0, max_iters=30)
    np.testing.assert_array_equal(mean, Y[30:34])
    np.testing.assert_array_equal(var, 0.0)
    Ys = Y[30:34].copy()
    Ys[:, 4:] = np.nan
    mean, var = m.reconstruct(Ys, t[30:34], sequence=0, max_iters=100)
    np.testing.assert_array_equal(mean[:, :4], Y[30:34, :4])
    assert np.all(np.isfinite(mean)) and np.all(var[:, 4:] > m.noise_variance * 0.99)
    fit = m.infer_sequence(Ys, t[30:34], sequence=0, max_iters=100)
    assert fit.mu.shape == fit.S.shape == (4, 2) and np.isfinite(fit.bound)


def test_conditioned_predict_is_the_posterior_of_the_augmented_data(fitted):
    """q(u_d) conditioned on the new frames' observed entries of column d equals q(u) of the
    training data with those frames appended (their psi statistics summed in); a column
    observed in no new frame keeps the training q(u)."""
    from bgplvm.bound import fstar_moments, posterior_from_stats
    from bgplvm.sequence_inference import conditioned_predict

    m, Y, t = fitted
    Ys = Y[30:36].copy()
    observed = np.ones_like(Ys, dtype=bool)
    observed[3:, 2:4] = False  # columns 2, 3: observed in the first 3 frames only
    observed[:, 5] = False  # column 5: in none
    Ys[~observed] = 0.0
    rng = np.random.default_rng(8)
    mu, S = rng.standard_normal((6, 2)), rng.uniform(0.01, 0.3, (6, 2))
    mean, var = conditioned_predict(m, mu, S, Ys, observed, include_noise=False)

    k, Z = m.kernel, m.inducing_inputs
    beta = 1.0 / m.noise_variance
    Kuu = k.K(Z)
    stats = (k.psi0(mu, S), k.psi1(mu, S, Z), k.psi2n_centred(mu, S, Z))
    for cols, rows in ([0, 1, 4], np.arange(6)), ([2, 3], np.arange(3)):
        mu_all = np.vstack([m.latent_mean, mu[rows]])
        S_all = np.vstack([m.latent_variance, S[rows]])
        Yc_all = np.vstack([m.Y - m.Y_mean, Ys[rows] - m.Y_mean])[:, cols]
        post = posterior_from_stats(Kuu, k.psi2(mu_all, S_all, Z), beta,
                                    k.psi1(mu_all, S_all, Z).T @ Yc_all)
        ref_mean, ref_var = fstar_moments(post, *stats)
        np.testing.assert_allclose(mean[:, cols], ref_mean + m.Y_mean[cols], rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(var[:, cols], ref_var, rtol=1e-7, atol=1e-10)
    train_mean, train_var = m.predict(mu, S, include_noise=False)
    np.testing.assert_allclose(mean[:, 5], train_mean[:, 5], rtol=1e-12)
    np.testing.assert_allclose(var[:, 5], train_var[:, 5], rtol=1e-12)
    assert not np.allclose(mean[:, 2], train_mean[:, 2], rtol=1e-6)  # conditioning matters


def test_reconstruct_condition_flag(fitted):
    m, Y, t = fitted
    Ys = Y[30:36].copy()
    Ys[3:, 3:] = np.nan
    kw = dict(sequence=0, max_iters=50)
    a, va = m.reconstruct(Ys, t[30:36], condition=True, **kw)
    b, vb = m.reconstruct(Ys, t[30:36], condition=False, **kw)
    np.testing.assert_array_equal(a[:3], b[:3])  # observed entries pass through either way
    assert not np.allclose(a[3:, 3:], b[3:, 3:])
    assert np.all(va[3:, 3:] > m.noise_variance) and np.all(np.isfinite(va))


@pytest.mark.parametrize("kwargs, match", [
    (dict(Y_star=np.zeros((3, 5)), t_star=[40.0, 41.0, 42.0]), r"shape \(n\*, 6\)"),
    (dict(Y_star=np.full((2, 6), np.nan), t_star=[40.0, 41.0]), "entirely NaN"),
    (dict(Y_star=np.zeros((2, 6)), t_star=[41.0, 40.0]), "time stamps t_star are unsorted"),
    (dict(Y_star=np.zeros((2, 6)), t_star=[40.0]), r"one time stamp per row"),
    (dict(Y_star=np.zeros((2, 6)), t_star=[28.0, 29.0], sequence=0), "training frames of sequence 0"),
])
def test_reconstruct_bad_input(fitted, kwargs, match):
    m = fitted[0]
    with pytest.raises(ValueError, match=match):
        m.reconstruct(**kwargs)


def test_one_frame_with_a_scalar_time_and_fill_missing_row_check(fitted):
    m, Y, t = fitted
    y = Y[32].copy()
    y[:3] = np.nan
    mean, var = m.reconstruct(y, 32.0, max_iters=20)  # one frame: a 1-D row and a scalar time
    assert mean.shape == var.shape == (1, 6)
    fit = m.infer_sequence(Y[30:33], t[30:33], max_iters=5)
    with pytest.raises(ValueError, match="fit holds q\\(X\\*\\) of 3 frames but Y_star has 2 rows"):
        m.fill_missing(fit, Y[30:32])


def test_independent_point_inference_points_to_the_sequence_api(fitted):
    m = fitted[0]
    for fn in (m.infer_latent, m.log_density):
        with pytest.raises(TypeError, match="infer_sequence"):
            fn(np.zeros((1, 6)))


def test_latent_at_checks_its_times(fitted):
    """t_new: a scalar, (n,) or (n, 1); empty, non-finite or 2-D arrays get an error."""
    m = fitted[0]
    assert m.latent_at(40.0)[0].shape == (1, m.latent_dim)
    np.testing.assert_array_equal(m.latent_at(np.array([[40.0], [41.0]]))[0], m.latent_at([40.0, 41.0])[0])
    for bad, match in (([], "non-empty"), ([40.0, np.nan], "finite"), ([[40.0, 41.0], [42.0, 43.0]], "1-D")):
        with pytest.raises(ValueError, match=match):
            m.latent_at(bad)


@pytest.mark.parametrize("time_kernel", ["white", "bias+white"])
def test_white_alone_time_kernel_starts_at_the_static_prior(time_kernel):
    """Without a smooth part the white variance starts at 1 (the static prior), not 1e-3
    (it collapsed to 1e-221 and the fit explained everything as noise)."""
    t = np.linspace(0.0, 1.0, 30)
    Y = np.c_[np.sin(6 * t), np.cos(6 * t), t] + 0.01 * np.random.default_rng(0).standard_normal((30, 3))
    m = DynamicalGPLVM(Y, t, latent_dim=2, num_inducing=10, time_kernel=time_kernel, seed=0)
    assert m.time_kernel.white_diag(t[:1])[0] == pytest.approx(1.0)
    m.fit(max_iters=100, progress=False)
    assert np.abs(m.predict(m.latent_mean)[0] - Y).max() < 0.3 * Y.std()
