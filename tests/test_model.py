"""BayesianGPLVM: limits of the bound, gradients of the packed vector, fitting, predictions,
persistence and the errors users get for bad input."""

import io
import json
import zipfile

import numpy as np
import pytest

from bgplvm import BayesianGPLVM, CholeskyError, ModelFileError
from bgplvm.bound import OutputStats, collapsed_bound
from bgplvm.kernels import RBF
from bgplvm.linalg import jittered_cholesky

KERNELS = ["rbf", "linear", "rbf+bias+white", "rbf+linear+bias"]


def _data(N=12, D=4, seed=0):
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 3, N)
    return np.c_[np.sin(t), np.cos(2 * t), t, t**2][:, :D] + 0.05 * rng.standard_normal((N, D))


def _central_difference(m, x, v, eps=1e-5):
    m.set_param_vector(x + eps * v)
    fp = m.elbo()
    m.set_param_vector(x - eps * v)
    fm = m.elbo()
    m.set_param_vector(x)
    return (fp - fm) / (2 * eps)


# --- limits ---------------------------------------------------------------------------------
def _exact_log_marginal(kern, X, Yc, noise):
    K = kern.K(X) + noise * np.eye(len(X))
    L = np.linalg.cholesky(K)
    a = np.linalg.solve(L, Yc)
    N, D = Yc.shape
    return -0.5 * N * D * np.log(2 * np.pi) - D * np.sum(np.log(np.diag(L))) - 0.5 * np.sum(a * a)


def _F_hat(kern, mu, S, Z, noise, Yc):
    return collapsed_bound(kern.K(Z), kern.psi0(mu, S), kern.psi1(mu, S, Z), kern.psi2(mu, S, Z),
                           1.0 / noise, OutputStats.from_centred(Yc), grad=False).F


def test_inducing_at_data_small_S_gives_exact_gp_marginal():
    rng = np.random.default_rng(3)
    N, Q = 15, 2
    X = rng.standard_normal((N, Q))
    kern = RBF(Q, variance=1.3, lengthscale=np.array([0.9, 1.4]))
    Yc = rng.standard_normal((N, 3))
    noise = 0.1
    exact = _exact_log_marginal(kern, X, Yc, noise)
    S = np.full((N, Q), 1e-12)
    assert _F_hat(kern, X, S, X, noise, Yc) == pytest.approx(exact, rel=1e-5)
    # fewer inducing points: a strict lower bound
    for M in (3, 8, 14):
        assert _F_hat(kern, X, S, X[:M], noise, Yc) < exact


# --- gradients -------------------------------------------------------------------------------
@pytest.mark.parametrize("kernel", KERNELS)
def test_gradient_blocks_and_random_direction(kernel):
    # a pure linear kernel has rank-Q Kuu: M > Q would leave only the jitter to invert it
    M = 2 if kernel == "linear" else 5
    m = BayesianGPLVM(_data(), latent_dim=2, num_inducing=M, kernel=kernel, seed=1)
    x = m.get_param_vector()
    _, g = m.elbo_and_gradient()
    rng = np.random.default_rng(0)
    layout = m._layout
    for name in m.param_names:  # every block, along a random direction inside it
        v = np.zeros_like(x)
        v[layout.slices[name]] = rng.standard_normal(layout.slices[name].stop - layout.slices[name].start)
        num = _central_difference(m, x, v)
        assert g @ v == pytest.approx(num, rel=1e-5, abs=1e-6), name
    v = rng.standard_normal(x.size)  # the whole vector at once
    assert g @ v == pytest.approx(_central_difference(m, x, v), rel=1e-5, abs=1e-6)


def test_gradient_finite_at_degenerate_points():
    m = BayesianGPLVM(_data(), latent_dim=2, num_inducing=4, kernel="rbf+linear+bias", seed=0)
    v = m._values()
    v["Z"][0] = v["mu"][0]  # an inducing input exactly on a latent mean
    v["S"][:3] = 1e-9  # almost no input uncertainty
    m._set_x(m._layout.pack(v))
    F, g = m.elbo_and_gradient()
    assert np.isfinite(F) and np.all(np.isfinite(g))


def test_frozen_blocks_leave_the_free_vector():
    m = BayesianGPLVM(_data(), latent_dim=2, num_inducing=4, seed=0)
    n_all = m.get_param_vector().size
    m.freeze("Z", "noise_variance")
    assert m.get_param_vector().size == n_all - 4 * 2 - 1
    Z0, noise0 = m.inducing_inputs.copy(), m.noise_variance
    m.fit(max_iters=20, progress=False)
    np.testing.assert_array_equal(m.inducing_inputs, Z0)
    assert m.noise_variance == noise0


def test_the_noise_variance_can_be_set_and_held_through_a_fit_and_a_model_file(tmp_path):
    m = BayesianGPLVM(_data(), latent_dim=2, num_inducing=4, seed=0)
    x0 = m.get_param_vector()
    m.noise_variance = 0.125
    assert m.noise_variance == pytest.approx(0.125, rel=1e-14)
    changed = np.flatnonzero(m.get_param_vector() != x0)
    assert changed.tolist() == [m._layout.slices["noise_variance"].start]  # nothing else moved
    m.freeze("noise_variance")
    m.fit(max_iters=20, progress=False)
    assert m.noise_variance == pytest.approx(0.125, rel=1e-14)
    m.save(tmp_path / "m.npz")
    assert BayesianGPLVM.load(tmp_path / "m.npz").noise_variance == m.noise_variance
    for bad in (0.0, -1.0, np.inf, np.nan):
        with pytest.raises(ValueError, match="positive, finite"):
            m.noise_variance = bad
    with pytest.raises(TypeError, match="positive number"):
        m.noise_variance = "small"
    assert m.noise_variance == pytest.approx(0.125, rel=1e-14)


# --- fitting -----------------------------------------------------------------------------------
def test_fit_increases_bound_and_reports_progress():
    m = BayesianGPLVM(_data(N=30, D=4), latent_dim=3, num_inducing=8, seed=0)
    before = m.elbo()
    seen = []
    m.fit(max_iters=60, init_iters=10, callback=lambda p: seen.append(p) and False, progress=False)
    assert m.elbo() > before
    assert seen[0].phase == "init" and seen[-1].phase == "main"
    assert [p.iteration for p in seen] == list(range(1, len(seen) + 1))
    assert m.fit_info["bound"] == pytest.approx(m.elbo())


def test_noise_is_held_only_while_the_model_wants_less_of_it():
    """fit's first phase holds the noise at signal-to-noise 100; after INIT_CHECK iterations
    it goes on only while dF/d noise < 0 (``BayesianGPLVM._hold_helps``)."""
    from bgplvm.gplvm import INIT_CHECK

    rng = np.random.default_rng(0)
    # no structure at all: the data support far more noise than held -> released
    m = BayesianGPLVM(rng.standard_normal((60, 5)), latent_dim=2, num_inducing=8, seed=0)
    m.fit(max_iters=400, init_iters=200, progress=False)
    assert m.fit_info["held_iterations"] == INIT_CHECK
    assert m.noise_variance > 0.5
    # a smooth map of 2 latent dims with noise sd 0.001: the hold runs its full length
    X = rng.standard_normal((60, 2))
    Y = np.tanh(X @ rng.standard_normal((2, 8))) + 0.001 * rng.standard_normal((60, 8))
    m = BayesianGPLVM(Y, latent_dim=2, num_inducing=8, seed=0)
    m.fit(max_iters=400, init_iters=200, progress=False)
    assert m.fit_info["held_iterations"] == 200


def test_callback_stops_the_fit():
    m = BayesianGPLVM(_data(N=30), latent_dim=2, num_inducing=6, seed=0)
    m.fit(max_iters=500, callback=lambda p: p.iteration >= 5, progress=False)
    assert m.fit_info["iterations"] == 5 and m.fit_info["stopped"]


def test_non_finite_steps_are_rejected(monkeypatch):
    m = BayesianGPLVM(_data(N=30), latent_dim=2, num_inducing=6, seed=0)
    real = m._bound
    calls = {"n": 0}

    def flaky(x, grad=True):  # every third evaluation blows up
        calls["n"] += 1
        if calls["n"] % 3 == 0:
            return np.nan, np.full(x.size, np.nan)
        return real(x, grad)

    monkeypatch.setattr(m, "_bound", flaky)
    m.fit(max_iters=30, progress=False)
    assert m.fit_info["rejected_steps"] > 0
    monkeypatch.undo()
    assert np.isfinite(m.elbo()) and np.all(np.isfinite(m.get_param_vector()))


# --- predictions -----------------------------------------------------------------------------
def test_predictions_shapes_and_limits():
    Y = _data(N=25, D=4)
    m = BayesianGPLVM(Y, latent_dim=2, num_inducing=10, seed=0).fit(max_iters=80, progress=False)
    X = m.latent_mean[:5]
    mean, var = m.predict(X)
    assert mean.shape == (5, 4) and var.shape == (5, 4) and np.all(var > m.noise_variance * 0.999)
    # the latent means reconstruct the data
    assert np.mean((m.predict(m.latent_mean)[0] - Y) ** 2) < 0.1 * np.mean((Y - Y.mean(0)) ** 2)
    # Gaussian inputs with S -> 0 give the deterministic prediction (meanFstar/covFstar)
    mean0, var0 = m.predict(X, np.full_like(X, 1e-12))
    np.testing.assert_allclose(mean0, mean, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(var0, var, rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(m.predictive_variance(X) + m.noise_variance, var[:, 0])


def test_uncertain_input_prediction_matches_monte_carlo():
    m = BayesianGPLVM(_data(N=25, D=3), latent_dim=2, num_inducing=8, seed=0).fit(max_iters=60, progress=False)
    x, s = m.latent_mean[3], np.array([0.05, 0.02])
    mean, var = m.predict(x[None], s[None])
    rng = np.random.default_rng(0)
    Xs = x + np.sqrt(s) * rng.standard_normal((100000, 2))
    mu_s, var_s = m.predict(Xs)  # law of total variance over x ~ N(x, s)
    np.testing.assert_allclose(mean[0], mu_s.mean(0), rtol=0, atol=3e-3 * np.abs(mu_s).max())
    np.testing.assert_allclose(var[0], var_s.mean(0) + mu_s.var(0), rtol=2e-2)


# --- persistence --------------------------------------------------------------------------------
def test_save_load_round_trip_exactly(tmp_path):
    m = BayesianGPLVM(_data(), latent_dim=2, num_inducing=5, kernel="rbf+bias+white", seed=0)
    m.fit(max_iters=15, progress=False)
    m.metadata["dataset"] = "toy"
    m.freeze("Z")
    path = tmp_path / "m.npz"
    m.save(path)
    m2 = BayesianGPLVM.load(path)
    np.testing.assert_array_equal(m2._x, m._x)
    assert m2.elbo() == m.elbo() and m2.metadata == {"dataset": "toy"}
    assert m2._layout.frozen == {"Z"}
    np.testing.assert_array_equal(m2.predict(m.latent_mean[:3])[0], m.predict(m.latent_mean[:3])[0])
    buf = io.BytesIO()  # file objects too (the explorer's download)
    m.save(buf)
    buf.seek(0)
    np.testing.assert_array_equal(BayesianGPLVM.load(buf)._x, m._x)
    assert [p.name for p in tmp_path.iterdir()] == ["m.npz"]  # no temp file left behind


def test_bad_model_files(tmp_path):
    m = BayesianGPLVM(_data(), latent_dim=2, num_inducing=5, seed=0)
    good = tmp_path / "good.npz"
    m.save(good)
    raw = good.read_bytes()
    (tmp_path / "trunc.npz").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ModelFileError, match="truncated"):
        BayesianGPLVM.load(tmp_path / "trunc.npz")
    np.savez(tmp_path / "foreign.npz", a=np.zeros(3))
    with pytest.raises(ModelFileError, match="not a bgplvm model"):
        BayesianGPLVM.load(tmp_path / "foreign.npz")
    (tmp_path / "text.npz").write_text("hello")
    with pytest.raises(ModelFileError):
        BayesianGPLVM.load(tmp_path / "text.npz")
    with pytest.raises(ModelFileError, match="does not exist"):
        BayesianGPLVM.load(tmp_path / "missing.npz")
    # a newer format version
    with np.load(good) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(arrays["meta.json"].tobytes())
    meta["format_version"] = 99
    arrays["meta.json"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    np.savez(tmp_path / "new.npz", **arrays)
    with pytest.raises(ModelFileError, match="newer"):
        BayesianGPLVM.load(tmp_path / "new.npz")
    assert zipfile.is_zipfile(good)


def _tampered(tmp_path, good, name, **changes):
    with np.load(good) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(arrays["meta.json"].tobytes())
    meta.update(changes)
    arrays["meta.json"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    np.savez(tmp_path / name, **arrays)
    return tmp_path / name


def test_foreign_corrupt_and_tampered_files_get_model_file_errors(tmp_path):
    """Every unreadable file is a ModelFileError (one line in the CLI), never a raw
    numpy / zlib / JSON-shape exception."""
    m = BayesianGPLVM(_data(), latent_dim=2, num_inducing=5, seed=0)
    good = tmp_path / "good.npz"
    m.save(good)
    np.save(tmp_path / "plain.npy", np.zeros(3))
    with pytest.raises(ModelFileError, match="single numpy array"):
        BayesianGPLVM.load(tmp_path / "plain.npy")
    raw = bytearray(good.read_bytes())
    with zipfile.ZipFile(good) as zf:  # flip a byte inside the compressed parameter vector
        info = zf.getinfo("x.npy")
    raw[info.header_offset + 30 + len(info.filename) + info.compress_size // 2] ^= 0xFF
    (tmp_path / "flipped.npz").write_bytes(bytes(raw))
    with pytest.raises(ModelFileError):
        BayesianGPLVM.load(tmp_path / "flipped.npz")
    for i, changes in enumerate([dict(frozen=["bogus"]), dict(frozen=5), dict(metadata=[1, 2]),
                                 dict(fit_info="x"), dict(format_version=0), dict(format_version=True),
                                 dict(format_version="2")]):
        with pytest.raises(ModelFileError):
            BayesianGPLVM.load(_tampered(tmp_path, good, f"t{i}.npz", **changes))


def test_load_checks_the_class_and_files_keep_normal_permissions(tmp_path):
    import os

    from bgplvm import DynamicalGPLVM

    m = BayesianGPLVM(_data(), latent_dim=2, num_inducing=5, seed=0)
    path = tmp_path / "m.npz"
    m.save(path)
    with pytest.raises(ModelFileError, match="holds a BayesianGPLVM, not a DynamicalGPLVM"):
        DynamicalGPLVM.load(path)
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask  # as np.save would give, not mkstemp's 0o600
    path.chmod(0o640)
    m.save(path)  # overwriting keeps the file's permissions
    assert path.stat().st_mode & 0o777 == 0o640


# --- bad input -------------------------------------------------------------------------------------
@pytest.mark.parametrize("Y, match", [
    # NaN is a missing value (tests/test_missing.py), but not a whole row of them
    (np.array([[np.nan, np.nan], [2.0, 3.0], [0.0, 1.0]]), "nothing observed"),
    (np.array([[1.0, np.inf], [2.0, 3.0], [0.0, 1.0]]), r"infinite value\(s\) at \(row, column\) \(0, 1\)"),
    (np.ones(5), "2-D"),
    (np.ones((2, 3, 4)), "2-D"),
    ([["a", "b"], ["c", "d"]], "numeric"),
])
def test_bad_Y(Y, match):
    with pytest.raises(ValueError, match=match):
        BayesianGPLVM(Y, latent_dim=1, num_inducing=1)


@pytest.mark.parametrize("kw, exc, match", [
    (dict(latent_dim=0), ValueError, "latent_dim"),
    (dict(num_inducing=0), ValueError, "num_inducing"),
    (dict(num_inducing=13), ValueError, "N=12"),
    (dict(latent_dim=2.5), TypeError, "latent_dim"),
    (dict(kernel="matern"), ValueError, "rbf"),
])
def test_bad_arguments(kw, exc, match):
    args = dict(latent_dim=2, num_inducing=4)
    args.update(kw)
    with pytest.raises(exc, match=match):
        BayesianGPLVM(_data(), **args)


def test_failing_cholesky_names_the_cause():
    with pytest.raises(CholeskyError, match=r"Kuu \(2x2\) is not positive definite.*Likely cause"):
        jittered_cholesky(np.diag([1.0, -1.0]), what="Kuu", hint="Likely cause: x")
    m = BayesianGPLVM(_data(), latent_dim=2, num_inducing=4, seed=0)
    v = m._values()
    v["Z"][1] = np.inf  # an inducing input sent to infinity
    m._x = m._layout.pack(v)
    with pytest.raises(CholeskyError, match="Kuu .*NaN or inf"):
        m.elbo()


def test_predict_validates_latent_points():
    m = BayesianGPLVM(_data(), latent_dim=2, num_inducing=4, seed=0)
    with pytest.raises(ValueError, match=r"\(n, 2\)"):
        m.predict(np.zeros((3, 3)))
    with pytest.raises(ValueError, match="NaN"):
        m.predict(np.array([[np.nan, 0.0]]))


def test_fit_refuses_a_non_finite_start_and_reports_why_it_stopped():
    m = BayesianGPLVM(_data(), latent_dim=2, num_inducing=5, seed=0)
    v = m._values()
    v["noise_variance"] = np.asarray(1e-320)  # beta = inf
    m._set_x(m._layout.pack(v))
    with pytest.raises(ValueError, match="cannot fit"):
        m.fit(max_iters=20, progress=False)
    m = BayesianGPLVM(_data(), latent_dim=2, num_inducing=5, seed=0)
    assert m.fit(max_iters=0, progress=False).fit_info["bound"] == m.elbo()  # not -inf
    m.fit(max_iters=12, progress=False)
    assert m.fit_info["reason"] == "max_iters"
    m.fit(max_iters=50, progress=False, callback=lambda p: p.iteration >= 3)
    assert m.fit_info["reason"] == "callback" and m.fit_info["iterations"] == 3


def test_interrupted_fit_counts_its_held_iterations_and_syncs_the_kernel():
    """A KeyboardInterrupt in the held phase (here raised by the callback): the fit keeps
    its best point, fit_info counts the held iterations done, and the interrupt goes on up
    (it stops a loop of fits too); the kernel object is the kept point's, not the last trial
    point's; inside the callback the model is at the iterate just accepted."""
    m = BayesianGPLVM(_data(), latent_dim=2, num_inducing=5, seed=0)
    X = m.latent_mean[:4]
    before = m.predict(X)[0]
    inside = []

    def cb(p):
        inside.append((m.predict(X)[0], m.elbo(), p.bound))
        if p.iteration == 7:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt, match="keeps the best point"):
        m.fit(max_iters=400, progress=False, callback=cb)
    assert not np.array_equal(inside[0][0], before)  # the model moved with the fit
    assert all(elbo == pytest.approx(bound, rel=1e-12) for _, elbo, bound in inside)
    np.testing.assert_array_equal(m.predict(X)[0], inside[-1][0])  # the kept point: iteration 7
    assert m.fit_info["reason"] == "interrupted" and m.fit_info["held_iterations"] == 7
    kernel_now = {k: np.array(v) for k, v in m.kernel.params.items()}
    m._sync_kernel()
    for k, v in m.kernel.params.items():
        np.testing.assert_array_equal(kernel_now[k], v)


def test_a_callback_can_checkpoint_the_fit(tmp_path):
    """m.save in a callback writes the fit as it is (it wrote the starting point)."""
    m = BayesianGPLVM(_data(), latent_dim=2, num_inducing=5, seed=0)
    start = m.elbo()
    saved = {}

    def cb(p):
        if p.iteration == 20:
            m.save(tmp_path / "ckpt.npz")
            saved["bound"] = p.bound

    m.fit(max_iters=40, progress=False, callback=cb)
    ckpt = BayesianGPLVM.load(tmp_path / "ckpt.npz")
    assert ckpt.elbo() == pytest.approx(saved["bound"], rel=1e-10) and ckpt.elbo() > start


def test_an_error_in_the_callback_keeps_the_best_point_and_is_raised():
    m = BayesianGPLVM(_data(), latent_dim=2, num_inducing=5, seed=0)
    start = m.elbo()

    def cb(p):
        if p.iteration == 10:
            raise RuntimeError("plotting failed")

    with pytest.raises(RuntimeError, match="plotting failed"):
        m.fit(max_iters=400, progress=False, callback=cb)
    assert m.fit_info["reason"] == "error" and m.fit_info["iterations"] == 10
    assert m.elbo() == pytest.approx(max(m.fit_info["history"]), rel=1e-12) and m.elbo() > start


def test_ctrl_c_stops_after_the_iteration_and_keeps_the_best_point(sigint_raises):
    """A real SIGINT during a fit (here from the callback, between iterations) only asks the
    fit to stop: it ends after that iteration, reason "interrupted", the handler is Python's
    again afterwards. A second SIGINT keeps the best point too, then raises
    KeyboardInterrupt: a loop of fits stops as well."""
    import os
    import signal

    m = BayesianGPLVM(_data(), latent_dim=2, num_inducing=5, seed=0)

    def cb(p):
        if p.iteration == 5:
            os.kill(os.getpid(), signal.SIGINT)

    with pytest.warns(UserWarning, match="interrupted"):
        m.fit(max_iters=400, progress=False, callback=cb)
    assert m.fit_info["reason"] == "interrupted" and m.fit_info["iterations"] == 5
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler

    def twice(p):
        if p.iteration == 3:
            os.kill(os.getpid(), signal.SIGINT)
            os.kill(os.getpid(), signal.SIGINT)

    fitted = []
    with pytest.raises(KeyboardInterrupt):
        for seed in range(3):  # a sweep: the second Ctrl-C ends it
            m = BayesianGPLVM(_data(), latent_dim=2, num_inducing=5, seed=seed)
            fitted.append(m)
            m.fit(max_iters=400, progress=False, callback=twice)
    assert len(fitted) == 1
    assert m.fit_info["reason"] == "interrupted" and m.fit_info["iterations"] == 3
    assert m.elbo() == pytest.approx(max(m.fit_info["history"]), rel=1e-12)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_ctrl_c_arriving_inside_compiled_code_stops_the_fit_cleanly(sigint_raises):
    """SIGINT from outside at a random moment, mostly inside the Numba kernels: the fit
    stops at the next iteration's end (a KeyboardInterrupt raised inside a kernel used to
    surface as a SystemError that lost the fit: 4 of 9 tries)."""
    import os
    import signal
    import threading

    rng = np.random.default_rng(0)
    Y = np.sin(rng.standard_normal((600, 3)) @ rng.standard_normal((3, 12)))
    for delay in (0.3, 0.7):
        m = BayesianGPLVM(Y, latent_dim=5, num_inducing=30, seed=0)
        m.elbo()  # compiled and warm before the clock starts
        timer = threading.Timer(delay, os.kill, (os.getpid(), signal.SIGINT))
        timer.start()
        try:
            with pytest.warns(UserWarning, match="interrupted"):
                m.fit(max_iters=100_000, progress=False)
        finally:
            timer.cancel()
        assert m.fit_info["reason"] == "interrupted" and 0 < m.fit_info["iterations"] < 100_000
        assert np.isfinite(m.elbo()) and m.elbo() >= m.fit_info["history"][0]


def test_progress_bar_ends_on_the_last_update():
    from bgplvm.progress import ProgressBar

    out = io.StringIO()
    with ProgressBar(60, "fit", enabled=True, stream=out, min_interval=10.0) as bar:
        for i in range(1, 61):
            bar.update(i, "bound 1")
    assert "60/60" in out.getvalue().rsplit("\r", 1)[-1]


def test_kernel_objects_are_copied_seeds_checked_and_small_units_warned():
    from bgplvm.kernels import make_kernel

    Y = _data()
    k = make_kernel("rbf", 2)
    v0 = float(k.params["variance"])
    m = BayesianGPLVM(Y * 100, latent_dim=2, num_inducing=5, kernel=k, seed=0).fit(max_iters=5, progress=False)
    assert m.kernel is not k and float(k.params["variance"]) == v0  # the caller's object untouched
    with pytest.raises(ValueError, match="seed must be a non-negative integer"):
        BayesianGPLVM(Y, latent_dim=2, num_inducing=5, seed=np.random.default_rng(1))
    BayesianGPLVM(Y, latent_dim=2, num_inducing=5, seed=np.int64(3))  # numpy integers are integers
    with pytest.warns(UserWarning, match="Rescale Y"):
        BayesianGPLVM(Y * 1e-3, latent_dim=2, num_inducing=5, seed=0)


def test_kl_static_against_the_dense_gaussian_kl():
    """KL(q(X) || N(0, I)) (KLstatic) against the textbook KL of two Gaussians with dense
    covariances, and its gradients by central differences."""
    from bgplvm.kl import kl_static

    rng = np.random.default_rng(0)
    mu, S = rng.standard_normal((4, 3)), rng.uniform(0.1, 2.0, (4, 3))
    x, C = mu.ravel(), np.diag(S.ravel())
    k = x.size
    dense = 0.5 * (np.trace(C) + x @ x - k - np.linalg.slogdet(C)[1])
    kl, dmu, dS = kl_static(mu, S)
    assert kl == pytest.approx(dense, rel=1e-12)
    h = 1e-6
    for (i, j) in [(0, 0), (2, 1), (3, 2)]:
        e = np.zeros_like(mu)
        e[i, j] = h
        assert dmu[i, j] == pytest.approx((kl_static(mu + e, S)[0] - kl_static(mu - e, S)[0]) / (2 * h), rel=1e-6)
        assert dS[i, j] == pytest.approx((kl_static(mu, S + e)[0] - kl_static(mu, S - e)[0]) / (2 * h), rel=1e-6)


def test_kernel_object_values_are_the_start():
    """Values given to a kernel object's constructor are the model's start; the ones not
    given start from the data, as for a kernel name (they used to be overwritten too)."""
    from bgplvm.kernels import RBF, Linear, Sum

    Y = _data()
    by_name = BayesianGPLVM(Y, latent_dim=2, num_inducing=5, seed=0).kernel.params
    m = BayesianGPLVM(Y, latent_dim=2, num_inducing=5, seed=0, kernel=RBF(2, lengthscale=[0.1, 0.2]))
    np.testing.assert_array_equal(m.kernel.params["lengthscale"], [0.1, 0.2])
    assert float(m.kernel.params["variance"]) == float(by_name["variance"])
    m = BayesianGPLVM(Y, latent_dim=2, num_inducing=5, seed=0, kernel=RBF(2))
    for k, v in by_name.items():
        np.testing.assert_array_equal(m.kernel.params[k], v)
    m = BayesianGPLVM(Y, latent_dim=2, num_inducing=5, seed=0,
                      kernel=Sum([RBF(2, variance=7.0), Linear(2, variances=[0.5, 0.25])]))
    assert float(m.kernel.parts[0].params["variance"]) == 7.0
    np.testing.assert_array_equal(m.kernel.parts[1].params["variances"], [0.5, 0.25])
    with pytest.raises(KeyError, match="unknown parameter 'kernel.rbf'"):
        m.unfreeze("kernel.rbf")  # a misspelt name is an error, as in freeze


def test_boundary_errors_say_what_to_do(tmp_path):
    m = BayesianGPLVM(_data(), latent_dim=2, num_inducing=5, seed=0)
    with pytest.raises(ValueError, match="x_free must have shape"):
        m.set_param_vector(np.zeros(3))
    with pytest.raises(ValueError, match="folder"):
        m.save(tmp_path)
    with pytest.raises(TypeError, match="callback must be a function"):
        m.fit(5, callback=3, progress=False)
    with pytest.raises(ValueError, match="seed must be a non-negative integer"):
        BayesianGPLVM(_data(), latent_dim=2, num_inducing=5, seed=-1)
