"""A dynamical model's calibration (``bgplvm.calibration_sequences``): held-out stretches of
frames predicted exactly as the model predicts new frames, and the scales they give."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from bgplvm import BayesianGPLVM, DynamicalGPLVM
from bgplvm.calibration_sequences import _without, continuation_latent, continuation_prior, predict_view
from bgplvm.metrics import gaussian_scores
from bgplvm.sequence_inference import conditional_prior, conditioned_predict
from roundtrip import roundtrip


def _walks(n_seq=6, length=40, D=5, seed=0):
    """Sequences of a smooth 2-D path through one nonlinear map, each its own phase."""
    rng = np.random.default_rng(seed)
    W = rng.standard_normal((2, D))
    t = np.tile(np.arange(length, dtype=float), n_seq)
    seq = np.repeat(np.arange(n_seq), length)
    phase = rng.uniform(0, 2 * np.pi, n_seq)[seq]
    X = np.c_[np.sin(t / 5.0 + phase), np.cos(t / 7.0 + 2 * phase)]
    return np.tanh(X @ W) + 0.05 * rng.standard_normal((t.size, D)), t, seq


@pytest.fixture(scope="module", params=["dense", "state_space"])
def fitted(request):
    Y, t, seq = _walks()
    m = DynamicalGPLVM(Y, t, sequences=seq, latent_dim=2, num_inducing=10, time_kernel="matern32", seed=0,
                       time_prior=request.param)
    return m.fit(max_iters=150, progress=False)


def test_with_every_frame_known_the_held_out_paths_are_the_models_own(fitted):
    """The forms the calibration uses on part of a sequence reduce to the model's own when
    the part is the whole: the sites' conditional is ``latent_at``, the means' conditional
    ``conditional_prior``, and q(u) with every row is the model's."""
    m = fitted
    ix = m.prior.rows_of(2)
    t_new = np.array([40.0, 41.5, 47.0])
    mu, S = continuation_latent(m, ix, t_new)
    mu0, S0 = m.latent_at(t_new, sequence=2)
    np.testing.assert_allclose(mu, mu0, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(S, S0, rtol=1e-6, atol=1e-8)
    mean, C = continuation_prior(m, ix, t_new)
    mean0, C0 = conditional_prior(m.prior, m._values(), t_new, 2)
    # Kt^-1 mu of the known frames against the model's mu_bar: equal but for the jitter of
    # an ill-conditioned Kt (1e-6 of its diagonal)
    np.testing.assert_allclose(mean, mean0, rtol=2e-3, atol=1e-6)
    np.testing.assert_allclose(C, C0, atol=1e-6)
    view = _without(m, np.ones(m.Y.shape[0], dtype=bool))
    X, XS = m.latent_mean[:7], m.latent_variance[:7]
    for a, b in zip(predict_view(view, X, XS), m.predict(X, XS)):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    Ys, vis = m.Y[:7].copy(), np.ones((7, 5), dtype=bool)
    vis[:, :2] = False
    for a, b in zip(conditioned_predict(view, X, XS, Ys, vis), conditioned_predict(m, X, XS, Ys, vis)):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


def test_reconstruct_calibration_holds_out_whole_sequences(fitted):
    m = roundtrip(fitted)
    cal = m.calibrate(rows=120, hide=0.4, folds=3, max_iters=60)
    assert cal.path == "reconstruct" and cal.stretches == 3 and cal.horizon == 0 and cal.n_rows == 120
    assert np.all(np.isfinite(cal.scale)) and cal.adaptive and len(cal.unit_coverage) == 3
    assert "3 held-out sequences" in cal.describe() and np.isfinite(cal.knn_rmse)
    Ys = np.where(np.arange(5) < 2, np.nan, m.Y[:20])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the k-NN note, if any
        mean, var = m.reconstruct(Ys, m.prior.t[:20], sequence=None, max_iters=60)
        mean0, var0 = m.reconstruct(Ys, m.prior.t[:20], sequence=None, max_iters=60, calibrated=False)
    np.testing.assert_array_equal(mean, mean0)
    assert np.all(var[:, 2:] == 0) and not np.allclose(var[:, :2], var0[:, :2])
    back = roundtrip(m)
    assert back.calibration.stretches == 3 and back.calibration.unit_coverage == cal.unit_coverage


def test_forecast_calibration_holds_out_the_frames_after_each_origin(fitted):
    m = roundtrip(fitted)
    cal = m.calibrate(path="forecast", horizon=10, folds=2, rows=10_000)
    assert cal.stretches == 12 and cal.horizon == 10 and cal.n_entries == 12 * 10 * 5  # 6 sequences x 2 origins
    assert np.isnan(cal.knn_rmse) and cal.baseline_warning() is None  # k-NN sees nothing of a forecast
    assert not cal.adaptive or np.isnan(cal.row_misfit)  # nothing observed: no row factor
    assert abs(cal.after["coverage"]["0.95"] - 0.95) < 0.06
    t_new = np.arange(40.0, 50.0)
    mean, var = m.forecast(t_new, sequence=1)
    mean0, var0 = m.forecast(t_new, sequence=1, calibrated=False)
    np.testing.assert_array_equal(mean, mean0)
    np.testing.assert_allclose(var, var0 * cal.scale ** 2, rtol=1e-12)


def test_bad_settings_are_refused_with_what_to_change(fitted):
    m = roundtrip(fitted)
    with pytest.raises(ValueError, match="path must be one of"):
        m.calibrate(path="impute")
    with pytest.raises(ValueError, match="lower horizon="):
        m.calibrate(path="forecast", horizon=30)
    with pytest.raises(ValueError, match="groups= pools sequences"):
        m.calibrate(path="forecast", groups=np.zeros(m.Y.shape[0]))
    one = DynamicalGPLVM(m.Y[:40], m.prior.t[:40], latent_dim=2, num_inducing=6, seed=0)
    cal = one.calibrate(rows=40, horizon=8, folds=2, max_iters=20)  # one sequence: stretches of it
    assert cal.stretches >= 2 and cal.horizon == 8
    with pytest.raises(ValueError, match="held-out stretches of a dynamical model's frames"):
        BayesianGPLVM(m.Y[:40], latent_dim=2, num_inducing=6, seed=0).calibration = cal


def test_calibrated_forecast_coverage_on_a_fresh_draw():
    """Forecasts past the training frames of sequences drawn again from the same process
    (the frames after each training sequence's end), before and after calibration."""
    Y, t, seq = _walks(n_seq=8, length=60, seed=5)
    train = t < 45
    m = DynamicalGPLVM(Y[train], t[train], sequences=seq[train], latent_dim=2, num_inducing=10, seed=0)
    m.fit(max_iters=150, progress=False)
    m.calibrate(path="forecast", horizon=15, folds=2, rows=10_000)
    means, vars_, vars0, truth = [], [], [], []
    for s in range(8):
        rows = np.flatnonzero((seq == s) & ~train)
        mean, var = m.forecast(t[rows], sequence=s)
        means.append(mean), vars_.append(var), truth.append(Y[rows])
        vars0.append(m.forecast(t[rows], sequence=s, calibrated=False)[1])
    after = gaussian_scores(np.vstack(means), np.vstack(vars_), np.vstack(truth))
    before = gaussian_scores(np.vstack(means), np.vstack(vars0), np.vstack(truth))
    assert abs(after.coverage[0.95] - 0.95) <= abs(before.coverage[0.95] - 0.95) + 0.01
    assert 0.85 < after.coverage[0.95] <= 1.0
