"""bgplvm.calibration: per-output scales of the predictive sd learned from held-out entries
of the training rows (``BayesianGPLVM.calibrate``), applied by every prediction, saved with
the model and refused on other data."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from bgplvm import BayesianGPLVM
from bgplvm.bound import posterior_from_stats, predictive_moments
from bgplvm.calibration import Calibration, _posteriors, fit_scale
from bgplvm.metrics import gaussian_scores
from bgplvm.training_stats import TrainingStats
from roundtrip import roundtrip


def _curve(N=240, D=8, noise=0.05, seed=0, curve=0):
    """Rows on a closed 1-D curve in D dimensions (one curve per ``curve``; ``seed``: which
    points): half a row can fit two places."""
    W = np.random.default_rng(100 + curve).standard_normal((4, D))
    rng = np.random.default_rng(seed)
    t = rng.uniform(0, 2 * np.pi, N)
    return np.c_[np.cos(t), np.sin(t), np.cos(2 * t), np.sin(2 * t)] @ W + noise * rng.standard_normal((N, D))


@pytest.fixture(scope="module")
def fitted():
    return BayesianGPLVM(_curve(), latent_dim=2, num_inducing=15, seed=0).fit(max_iters=300, progress=False)


def test_fold_statistics_predict_as_a_model_of_the_other_rows(fitted):
    """The held-out path's q(u) (statistics of the rows outside the fold) equals that of a
    model built on those rows alone with the same parameters."""
    m = fitted
    keep = np.arange(m.Y.shape[0]) % 4 != 0
    v = m._values()
    other = BayesianGPLVM(m.Y[keep], latent_dim=2, num_inducing=15, seed=0)
    out = other.outputs  # the held-out path centres with the whole model's mean
    out.mean, out.Yc = m.Y_mean, m.Y[keep] - m.Y_mean
    out.stats = type(m.outputs.stats).from_centred(out.Yc)
    other._set_x(other._layout.pack({**v, "mu": v["mu"][keep], "S": v["S"][keep]}))
    st = TrainingStats.from_arrays(m.kernel, m.inducing_inputs, m.latent_mean[keep], m.latent_variance[keep],
                                   m.noise_variance, m.Y[keep], m.Y_mean)
    X, S = m.latent_mean[~keep][:10], m.latent_variance[~keep][:10]
    mean, var = predictive_moments(st.kernel, st.Z, _posteriors(st, posterior_from_stats), m.Y.shape[1], X, S)
    m2, v2 = other.predict(X, S, include_noise=False)
    assert np.allclose(mean + m.Y_mean, m2, atol=1e-10) and np.allclose(var, v2, atol=1e-10)


def test_calibrated_intervals_hold_their_level_on_entries_not_tuned_on():
    """Outputs of very different noise under one noise variance: the noisy outputs' intervals
    are too narrow and the quiet ones' too wide; the per-output scales mend both, on new rows
    the calibration never saw."""
    noise = np.geomspace(0.01, 0.4, 8)
    m = BayesianGPLVM(_curve(600, noise=noise), latent_dim=2, num_inducing=15, seed=0).fit(max_iters=300,
                                                                                            progress=False)
    cal = m.calibrate(rows=600, folds=4)
    assert cal.per_output and cal.scale.shape == (8,) and cal.n_entries == 4 * 600
    # The two noisiest outputs' intervals widen, the two quietest narrow. (Not the last
    # output alone: rounding-level differences, such as a kernel compiled in this process
    # against the same kernel loaded from Numba's cache, move L-BFGS to nearby optima in
    # which the noisiest output's scale is 1.45-2.17 and the next one's 1.91-2.09.)
    assert cal.scale[-2:].min() > 1.4 > 0.7 > cal.scale[:2].max(), cal.scale
    assert abs(cal.after["coverage"]["0.95"] - 0.95) < 0.03, cal.after["coverage"]
    Yt = _curve(1000, noise=noise, seed=7)
    rng = np.random.default_rng(3)
    miss = np.zeros(Yt.shape, bool)
    for i in range(Yt.shape[0]):
        miss[i, rng.permutation(8)[:4]] = True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the k-NN note, if any
        raw = m.reconstruct(np.where(miss, np.nan, Yt), calibrated=False)
        new = m.reconstruct(np.where(miss, np.nan, Yt))
    for d, (lo, hi) in [(7, (0.0, 0.9)), (0, (0.975, 1.0))]:  # the noisiest (too narrow) and the quietest (too wide)
        assert lo <= gaussian_scores(*(a[:, d] for a in raw), Yt[:, d], mask=miss[:, d]).coverage[0.95] <= hi
        assert abs(gaussian_scores(*(a[:, d] for a in new), Yt[:, d], mask=miss[:, d]).coverage[0.95] - 0.95) < 0.05
    after = gaussian_scores(*new, Yt, mask=miss)
    assert abs(after.coverage[0.95] - 0.95) < 0.03 and after.rmse == gaussian_scores(*raw, Yt, mask=miss).rmse


def test_predict_scales_the_variance_of_y_only_and_can_be_turned_off(fitted):
    m = roundtrip(fitted)
    X, S = m.latent_mean[:5], m.latent_variance[:5]
    mean0, var0 = m.predict(X, S)
    m.calibrate(rows=120, folds=3)
    mean1, var1 = m.predict(X, S)
    assert np.array_equal(mean0, mean1)
    assert np.allclose(var1, var0 * m.calibration.scale ** 2, rtol=1e-12)
    assert np.array_equal(m.predict(X, S, calibrated=False)[1], var0)
    f_var = fitted.predict(X, S, include_noise=False)[1]
    assert np.allclose(m.predict(X, S, include_noise=False)[1], f_var * m.calibration.scale ** 2, rtol=1e-12)
    m.calibration = None
    assert np.array_equal(m.predict(X, S)[1], var0)


def test_a_calibration_travels_in_the_model_file_and_is_refused_on_other_data(fitted, tmp_path):
    m = roundtrip(fitted)
    cal = m.calibrate(rows=120, folds=3)
    m.save(tmp_path / "m.npz")
    back = BayesianGPLVM.load(tmp_path / "m.npz")
    assert isinstance(back.calibration, Calibration)
    assert np.array_equal(back.calibration.scale, cal.scale) and back.calibration.after == cal.after
    assert np.array_equal(back.predict(m.latent_mean[:3])[1], m.predict(m.latent_mean[:3])[1])
    assert "calibrated (quantile" in back.summary()
    other = BayesianGPLVM(_curve(curve=5), latent_dim=2, num_inducing=15, seed=0)
    with pytest.raises(ValueError, match="other data"):
        other.calibration = cal
    with pytest.raises(TypeError, match="Calibration"):
        other.calibration = cal.scale


def test_a_model_fitted_after_its_calibration_warns_and_uses_none(fitted):
    m = roundtrip(fitted)
    m.calibrate(rows=120, folds=3)
    m.fit(max_iters=3, progress=False)
    X = m.latent_mean[:2]
    with pytest.warns(UserWarning, match="calibrate\\(\\) again"):
        var = m.predict(X)[1]
    assert np.array_equal(var, m.predict(X, calibrated=False)[1])


def test_too_few_held_out_entries_are_refused_with_the_count(fitted):
    with pytest.raises(ValueError, match=r"at least 50 held-out entries.* hide 40 entries on 10 rows"):
        fitted.calibrate(rows=10, folds=2)
    for bad, match in [(dict(method="median"), "method"), (dict(level=1.0), "level"), (dict(hide=0.0), "hide"),
                       (dict(folds=1), "folds")]:
        with pytest.raises(ValueError, match=match):
            fitted.calibrate(**bad)


def test_calibration_with_missing_training_values_and_impute(fitted):
    Y = _curve(seed=2)
    rng = np.random.default_rng(4)
    hole = rng.random(Y.shape) < 0.2
    m = BayesianGPLVM(np.where(hole, np.nan, Y), latent_dim=2, num_inducing=15, seed=0).fit(max_iters=200,
                                                                                             progress=False)
    cal = m.calibrate(rows=240, folds=4)
    assert cal.n_entries >= 50 and np.all(np.isfinite(cal.scale))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mean, var = m.impute()
        _, var0 = m.impute(calibrated=False)
    # the row factor from each row's observed entries at q(x_n) (adaptive, the default)
    m_all, v_all = m.predict(m.latent_mean, m.latent_variance, calibrated=False)
    r = cal.row_factor(m_all, v_all, np.where(hole, 0.0, Y), ~hole)
    assert cal.adaptive and np.ptp(r) > 0.1
    assert np.allclose(var[hole], (var0 * cal.scale ** 2 * r[:, None] ** 2)[hole]) and np.all(var[~hole] == 0)
    imp = m.calibrate(rows=240, folds=4, hide=0.2, path="impute")
    assert imp.path == "impute" and imp.n_entries >= 240 and np.all(np.isfinite(imp.scale))
    assert abs(imp.after["coverage"]["0.95"] - 0.95) < 0.05
    with pytest.raises(ValueError, match="path"):
        m.calibrate(path="forecast")


def test_scale_rules():
    rng = np.random.default_rng(0)
    z = rng.standard_normal((4000, 2)) * np.array([1.0, 3.0])
    held = np.ones_like(z, dtype=bool)
    q = fit_scale(z, held, 0.95, "quantile", per_output=True)
    v = fit_scale(z, held, 0.95, "variance", per_output=True)
    assert np.allclose(q, [1.0, 3.0], rtol=0.06) and np.allclose(v, [1.0, 3.0], rtol=0.04)
    pooled = fit_scale(z, held, 0.95, "quantile", per_output=False)
    assert pooled[0] == pooled[1]


def test_a_semi_supervised_model_refuses_calibration_and_a_dynamical_model_a_static_ones():
    from bgplvm import DynamicalGPLVM, SemiSupervisedGPR

    t = np.arange(20.0)
    Y = _curve(20)
    X = np.c_[t, np.cos(t)]
    X[3:9, 1] = np.nan
    with pytest.raises(TypeError, match="partly missing"):
        SemiSupervisedGPR(X, np.sin(t)[:, None], num_inducing=5).calibrate()
    # a static model's calibration (rows) is not one of a dynamical model's (stretches of frames)
    static = BayesianGPLVM(Y, latent_dim=2, num_inducing=5, seed=0)
    cal = static.calibrate(rows=20, folds=2)
    with pytest.raises(ValueError, match="held-out rows of a static model"):
        DynamicalGPLVM(Y, t, latent_dim=2, num_inducing=5).calibration = cal


def test_calibration_for_the_columns_predictions_will_miss(fitted):
    """hide= columns: each held-out row loses exactly those outputs (a body part), the way
    the predictions will miss them; those outputs get their own scales, the others the
    pooled one."""
    m = roundtrip(fitted)
    cal = m.calibrate(rows=240, folds=4, hide=[5, 6, 7], per_output=True)
    assert cal.hide == [5, 6, 7] and cal.n_entries == 3 * 240
    assert len(set(cal.scale[:5])) == 1 and cal.per_output
    mask = np.zeros(8, bool)
    mask[[5, 6, 7]] = True
    assert m.calibrate(rows=240, folds=4, hide=mask).hide == [5, 6, 7]
    for bad in ([8], list(range(8)), [], np.ones(3, bool), 1.0, True):
        with pytest.raises(ValueError, match="hide"):
            m.calibrate(hide=bad)


def test_impute_path_defaults_to_the_models_missing_fraction_and_needs_missing_values(fitted):
    Y = _curve(seed=2)
    hole = np.random.default_rng(4).random(Y.shape) < 0.2
    m = BayesianGPLVM(np.where(hole, np.nan, Y), latent_dim=2, num_inducing=15, seed=0)
    assert m.calibrate(rows=240, folds=4, path="impute").hide == pytest.approx(m.missing_fraction)
    assert m.calibrate(rows=240, folds=4).hide == 0.5
    with pytest.raises(ValueError, match="miss none"):
        fitted.calibrate(path="impute")


def test_folds_of_whole_groups_leave_every_row_of_the_group_out(fitted):
    """A fold of whole groups predicts its held-out rows from q(u) of the rows outside its
    groups (all of them left out, not only the held-out rows), as a new sequence would be."""
    from bgplvm.calibration import held_out_predictions
    from bgplvm.testbound import infer_latent

    m = fitted
    N = m.Y.shape[0]
    groups = np.arange(N) // 40  # 6 groups of 40 rows
    rows = np.array([0, 5, 50, 170])  # held-out rows of groups 0, 0, 1, 4
    held = np.zeros((4, m.Y.shape[1]), bool)
    held[:, :3] = True
    fold_of, out_of_fold = np.array([0, 0, 1, 1]), np.where(groups < 2, groups, np.where(groups == 4, 1, 2))
    mean, var, _, _ = held_out_predictions(m, rows, held, fold_of, 0.5, 0, "reconstruct", out_of_fold)
    for f in (0, 1):
        keep = out_of_fold != f
        st = TrainingStats.from_arrays(m.kernel, m.inducing_inputs, m.latent_mean[keep], m.latent_variance[keep],
                                       m.noise_variance, m.Y[keep], m.Y_mean)
        idx = np.flatnonzero(fold_of == f)
        fit = infer_latent(st, np.where(held[idx], 0.0, m.Y[rows[idx]]), ~held[idx])
        mu, v = predictive_moments(st.kernel, st.Z, _posteriors(st, posterior_from_stats), m.Y.shape[1], fit.mu, fit.S)
        assert np.allclose(mean[idx], mu + m.Y_mean, atol=1e-10) and np.allclose(var[idx], v + m.noise_variance)
    cal = m.calibrate(rows=120, folds=4, groups=groups)
    assert cal.n_groups == 6 and cal.folds == 4 and "folds of 6 groups" in cal.describe()
    with pytest.raises(ValueError, match="one label per training row"):
        m.calibrate(groups=groups[:-1])
    with pytest.raises(ValueError, match="single group"):
        m.calibrate(groups=np.zeros(N))


def test_row_factor_is_the_rows_misfit_relative_to_the_calibrations():
    from bgplvm.calibration import ROW_PRIOR, row_factor

    mean, var = np.zeros((3, 4)), np.full((3, 4), 2.0)
    c = 0.5
    Y = np.sqrt(2 * c) * np.ones((3, 4))  # z^2 = c on every entry
    Y[1] *= 2.0  # z^2 = 4 c
    visible = np.ones((3, 4), bool)
    visible[2] = False  # nothing visible: the prior's r = 1
    r = row_factor(mean, var, Y, visible, c)
    assert np.allclose(r, [1.0, np.sqrt((16 * c + ROW_PRIOR * c) / ((4 + ROW_PRIOR) * c)), 1.0])
    assert np.array_equal(row_factor(mean, var, Y, visible, float("nan")), np.ones(3))


def test_an_adaptive_calibration_widens_the_rows_that_fit_worse(fitted, tmp_path):
    """Rows off the training curve (a shift the calibration never saw) fit their visible
    entries worse and get wider intervals; rows like the training rows keep theirs."""
    m = roundtrip(fitted)
    cal = m.calibrate(rows=200, folds=4)
    assert cal.adaptive and cal.row_misfit > 0 and "misfit" in cal.describe()
    plain = roundtrip(fitted)
    plain.calibrate(rows=200, folds=4, adaptive=False)
    assert not plain.calibration.adaptive
    Yt = _curve(200, seed=11)
    miss = np.zeros(Yt.shape, bool)
    miss[:, :4] = True
    shifted = Yt + np.where(miss, 0.0, 0.3)  # the visible half moved off the curve
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        var_near = m.reconstruct(np.where(miss, np.nan, Yt))[1][miss]
        var_off = m.reconstruct(np.where(miss, np.nan, shifted))[1][miss]
        var_off_plain = plain.reconstruct(np.where(miss, np.nan, shifted))[1][miss]
    assert np.median(var_off / var_off_plain) > 2.0
    assert 0.5 < np.median(var_near / plain.reconstruct(np.where(miss, np.nan, Yt))[1][miss]) < 2.0
    assert np.median(var_off) > 2 * np.median(var_near)
    m.save(tmp_path / "m.npz")
    back = BayesianGPLVM.load(tmp_path / "m.npz")
    assert back.calibration.row_misfit == cal.row_misfit
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert np.array_equal(back.reconstruct(np.where(miss, np.nan, shifted))[1][miss], var_off)
