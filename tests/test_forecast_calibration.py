"""AutoregressiveGP.calibrate: per-horizon scales of the forecast's sd from held-out
stretches of the training series (bgplvm.forecast_calibration)."""

import warnings

import numpy as np
import pytest

from bgplvm import AutoregressiveGP
from bgplvm.calibration import rows_left_out
from bgplvm.forecast_calibration import ForecastCalibration, held_out_forecasts, horizon_bins


def _series(T=90, seed=0):
    t = np.arange(T, dtype=np.float64)
    rng = np.random.default_rng(seed)
    return np.sin(t / 4.0) + 0.5 * np.sin(t / 9.0) + 0.05 * rng.standard_normal(T)


@pytest.fixture(scope="module")
def fitted():
    m = AutoregressiveGP(_series(), window=5, num_inducing=15, seed=0).fit(max_iters=150, progress=False)
    cal = m.calibrate(horizon=12, n_samples=100)
    return m, cal


def test_horizon_bins_double_and_cover_every_horizon():
    assert horizon_bins(12) == [(0, 1), (1, 2), (2, 4), (4, 8), (8, 12)]
    for H in (1, 2, 7, 100):
        b = horizon_bins(H)
        assert b[0][0] == 0 and b[-1][1] == H and all(x[1] == y[0] for x, y in zip(b, b[1:]))


def test_q_u_from_every_pair_is_the_models_own(fitted):
    """The held-out path's q(u), with no pair left out, predicts as the model does."""
    m, _ = fitted
    z = m.latent_mean[:7]
    mean, var = m.predict(z)
    with rows_left_out(m, np.zeros(m.Y.shape[0], dtype=bool)):
        mean2, var2 = m.predict(z)
    np.testing.assert_allclose(mean2, mean, atol=1e-10)
    np.testing.assert_allclose(var2, var, rtol=1e-8, atol=1e-14)


def test_held_out_forecasts_leave_their_stretch_out(fitted):
    """Leaving the pairs that see a stretch out of q(u) changes its forecast; the model's own
    posterior is restored afterwards."""
    m, _ = fitted
    before = m.forecast(6, method="moments", calibrated=False)
    o = 40
    mean, var = held_out_forecasts(m, np.array([o]), 6, dict(method="moments"))
    full = m.forecast(6, method="moments", history=m.series[:o], calibrated=False)
    assert mean.shape == (1, 6, 1)
    assert not np.allclose(mean[0, :, 0], full[0])
    np.testing.assert_allclose(m.forecast(6, method="moments", calibrated=False)[1], before[1])


@pytest.mark.filterwarnings("ignore::bgplvm.ForecastSpreadWarning")  # a small model: its far forecast is wide
def test_forecast_scales_each_horizon_by_the_calibration(fitted):
    m, cal = fitted
    assert isinstance(cal, ForecastCalibration) and cal.scale.shape == (12,) and cal.forecast == "samples"
    assert np.all(cal.scale > 0) and cal.stretches >= 6 and cal.n_entries == cal.stretches * 12
    raw = m.forecast(20, n_samples=200, calibrated=False)
    scaled = m.forecast(20, n_samples=200)
    np.testing.assert_allclose(scaled[0], raw[0])
    f = np.r_[cal.scale, np.full(8, cal.scale[-1])]  # past the horizon: the last scale
    np.testing.assert_allclose(scaled[1], raw[1] * f ** 2)
    assert set(cal.by_horizon) == {"1-1", "2-2", "3-4", "5-8", "9-12"}
    assert "12 steps" in cal.describe() and "held-out values" in cal.describe()
    # the one-step predict is not scaled
    with_cal = m.predict(m.latent_mean[:3])[1]
    m.calibration = None
    try:
        np.testing.assert_allclose(with_cal, m.predict(m.latent_mean[:3])[1])
    finally:
        m.calibration = cal


def test_another_forecast_is_not_scaled_and_says_so(fitted):
    m, _ = fitted
    raw = m.forecast(5, method="moments", calibrated=False)
    with pytest.warns(UserWarning, match="'samples' forecast and this is the 'moments'"):
        got = m.forecast(5, method="moments")
    np.testing.assert_allclose(got[1], raw[1])


@pytest.mark.filterwarnings("ignore::bgplvm.ForecastSpreadWarning")  # a small model: its far forecast is wide
def test_the_model_file_keeps_it_and_another_series_refuses_it(fitted, tmp_path):
    m, cal = fitted
    m.save(tmp_path / "ar.npz")
    back = AutoregressiveGP.load(tmp_path / "ar.npz")
    assert isinstance(back.calibration, ForecastCalibration)
    np.testing.assert_allclose(back.calibration.scale, cal.scale)
    np.testing.assert_allclose(back.forecast(8, n_samples=100)[1], m.forecast(8, n_samples=100)[1], rtol=1e-8)
    other = AutoregressiveGP(_series(seed=1), window=5, num_inducing=15, seed=0)
    with pytest.raises(ValueError, match="another series"):
        other.calibration = cal


def test_a_fit_after_the_calibration_leaves_it_inactive():
    m = AutoregressiveGP(_series(), window=5, num_inducing=10, seed=0).fit(max_iters=20, progress=False)
    m.calibrate(horizon=8, n_samples=50, forecast="moments")
    m.fit(max_iters=5, progress=False)
    raw = m.forecast(4, method="moments", calibrated=False)
    with pytest.warns(UserWarning, match="other parameters"):
        got = m.forecast(4, method="moments")
    np.testing.assert_allclose(got[1], raw[1])


def test_a_zero_variance_model_is_calibrated_for_its_means():
    m = AutoregressiveGP(_series(), window=5, num_inducing=10, propagate_uncertainty=False, seed=0)
    m.fit(max_iters=20, progress=False)
    cal = m.calibrate(horizon=8)
    assert cal.forecast == "means"
    raw = m.forecast(4, calibrated=False)
    np.testing.assert_allclose(m.forecast(4)[1], raw[1] * cal.scale[:4] ** 2)


def test_a_stretch_that_takes_much_of_the_series_warns():
    m = AutoregressiveGP(_series(), window=5, num_inducing=10, seed=0).fit(max_iters=10, progress=False)
    with pytest.warns(UserWarning, match=r"takes 35 of the 85 training pairs out of q\(u\) \(41 %"):
        m.calibrate(horizon=30, n_samples=20, forecast="moments")


def test_too_short_a_series_or_bad_settings_are_refused():
    m = AutoregressiveGP(_series(40), window=5, num_inducing=10, seed=0)
    with pytest.raises(ValueError, match="needs a series of"):
        m.calibrate(horizon=40)
    with pytest.raises(ValueError, match="at least 6 held-out stretches"):
        m.calibrate(horizon=32)
    with pytest.raises(ValueError, match="at least 50 held-out values"):
        m.calibrate(horizon=2, stretches=10)
    with pytest.raises(ValueError, match="method_forecast"):
        m.calibrate(horizon=8, forecast="exact")
    with pytest.raises(ValueError, match="level"):
        m.calibrate(horizon=8, level=1.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert m.calibration is None
