"""UncertainInputGPR.calibrate: per-output sd scales from training rows predicted at their
observed inputs with q(u) from the other folds (bgplvm.regression_calibration)."""

import io

import numpy as np
import pytest

from bgplvm import UncertainInputGPR
from bgplvm.calibration import Calibration, rows_left_out
from bgplvm.regression_calibration import held_out_regression


def _data(n, seed):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-3, 3, n)
    return (x + 0.3 * rng.standard_normal(n))[:, None], np.c_[np.sin(2 * x), np.cos(x)] + 0.05 * rng.standard_normal((n, 2))


@pytest.fixture(scope="module")
def fitted():
    Z, Y = _data(150, 0)
    m = UncertainInputGPR(Z, Y, num_inducing=15, seed=0).fit(max_iters=150, progress=False)
    return m, m.calibrate(folds=5)


def test_with_no_row_left_out_the_held_out_path_is_predict(fitted):
    m, _ = fitted
    rows = np.arange(10)
    ref = m.predict(m.inputs[rows], calibrated=False)
    with rows_left_out(m, np.zeros(m.Y.shape[0], dtype=bool)):
        mean, var = m.predict(m.inputs[rows], calibrated=False)
    np.testing.assert_allclose(mean, ref[0], atol=1e-10)
    np.testing.assert_allclose(var, ref[1], rtol=1e-8)
    # a fold's rows are predicted without themselves: further from their own outputs
    held = held_out_regression(m, rows, np.zeros(10, dtype=int))
    assert np.mean((held[0] - m.Y[rows]) ** 2) > np.mean((ref[0] - m.Y[rows]) ** 2)


def test_predict_scales_each_output_and_the_scales_hold_on_new_rows(fitted):
    m, cal = fitted
    assert isinstance(cal, Calibration) and cal.path == "predict" and cal.scale.shape == (2,)
    assert cal.n_rows == 150 and cal.n_entries == 300 and cal.after["coverage"]["0.95"] > 0.9
    Zt, Yt = _data(2000, 1)
    raw = m.predict(Zt, calibrated=False)
    mean, var = m.predict(Zt)
    np.testing.assert_allclose(mean, raw[0])
    np.testing.assert_allclose(var, raw[1] * cal.scale ** 2)
    inside = np.abs(Yt - mean) <= 1.96 * np.sqrt(var)
    assert 0.9 < inside.mean() < 0.99, inside.mean()
    assert "held-out entries" in cal.describe()


def test_the_file_keeps_it_and_other_data_refuse_it(fitted):
    m, cal = fitted
    buf = io.BytesIO()
    m.save(buf)
    buf.seek(0)
    back = UncertainInputGPR.load(buf)
    np.testing.assert_allclose(back.calibration.scale, cal.scale)
    Zt = np.linspace(-2, 2, 5)[:, None]
    np.testing.assert_allclose(back.predict(Zt)[1], m.predict(Zt)[1], rtol=1e-8)
    other = UncertainInputGPR(*_data(150, 3), num_inducing=15, seed=0)
    with pytest.raises(ValueError, match="other data"):
        other.calibration = cal


def test_missing_outputs_are_left_out_and_too_few_rows_refused():
    Z, Y = _data(60, 2)
    Y[::4, 1] = np.nan
    m = UncertainInputGPR(Z, Y, num_inducing=10, seed=0).fit(max_iters=40, progress=False)
    cal = m.calibrate(folds=3)
    assert cal.n_entries == int(np.isfinite(Y).sum())
    with pytest.raises(ValueError, match="at least 50 held-out outputs"):
        m.calibrate(rows=20)
    with pytest.raises(ValueError, match="folds"):
        m.calibrate(folds=1)
