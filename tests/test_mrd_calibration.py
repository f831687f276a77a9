"""Calibrated intervals across views (``MRD.calibrate``, ``bgplvm.mrd_calibration``)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from bgplvm import MRD, DynamicalMRD, mrd_calibration as mc
from bgplvm.io import load_model
from bgplvm.metrics import gaussian_scores
from mrd_data import three_views


@pytest.fixture(scope="module")
def split_toy():
    """The three-view toy (x0 shared, x1 by a and b, x2 private to a, x3 to c) with its rows
    split at random: 200 fitted, 100 held out. (Its rows follow a path in the latent space:
    the last third as test rows would be latent configurations no training row has.)"""
    views = three_views(N=300, seed=0)
    perm = np.random.default_rng(100).permutation(300)
    train = {n: Y[perm[:200]] for n, Y in views.items()}
    test = {n: Y[perm[200:]] for n, Y in views.items()}
    m = MRD(train, latent_dim=6, num_inducing=20, seed=0).fit(max_iters=1000, progress=False)
    return m, test


def test_held_out_predictions_with_every_row_in_q_u_are_the_models_own(split_toy, monkeypatch):
    """The calibration's held-out path, with no row left out of the views' q(u), predicts a
    training row's view exactly as ``reconstruct`` does (the same statistics and q(x*)):
    what calibration measures differs from the model's predictions only by the rows left out."""
    m, _ = split_toy
    rows = np.arange(0, 200, 10)
    fold_stats = mc._fold_stats
    monkeypatch.setattr(mc, "_fold_stats", lambda vm, keep: fold_stats(vm, np.ones_like(keep)))
    ho = mc.held_out_views(m, "a", ["b", "c"], rows, np.zeros(rows.size, dtype=int), None, "prior", 200, 0)
    mean, var = m.reconstruct({"b": m.Y["b"][rows], "c": m.Y["c"][rows]}, target="a", calibrated=False)
    np.testing.assert_allclose(ho.mean[:, -8:], mean, atol=1e-10)
    np.testing.assert_allclose(ho.var[:, -8:], var, rtol=1e-10)


def test_a_view_from_the_others_is_calibrated_on_rows_it_never_saw(split_toy):
    """Each view predicted from the two others: the calibration's own cross-fitted 95 %
    coverage is 93-97 %, and on the 100 held-out rows (never fitted, never calibrated on)
    the calibrated intervals hold 92-98 % of the truth in every view; the model beats the
    column mean everywhere, and warns where k-NN did better on the held-out training rows."""
    m, test = split_toy
    cal = m.calibrate(rows=200)
    assert set(cal.targets) == {"a", "b", "c"}
    for t in m.view_names:
        vc = cal.targets[t]
        assert vc.observed == tuple(n for n in m.view_names if n != t)
        assert 0.93 <= vc.calibration.after["coverage"]["0.95"] <= 0.97, (t, vc.calibration.after)
        obs = {n: test[n] for n in m.view_names if n != t}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            mean, var = m.reconstruct(obs, target=t)
        said = [str(w.message) for w in caught if "simple baseline" in str(w.message)]
        assert bool(said) == (vc.calibration.knn_rmse < vc.calibration.model_rmse), (t, said)
        cover = gaussian_scores(mean, var, test[t]).coverage[0.95]
        assert 0.92 <= cover <= 0.98, (t, cover)
        col_mean = np.sqrt(np.mean((m.views[t].mean - test[t]) ** 2))
        assert np.sqrt(np.mean((mean - test[t]) ** 2)) < 0.7 * col_mean
        mean0, var0 = m.reconstruct(obs, target=t, calibrated=False)
        np.testing.assert_array_equal(mean0, mean)
    assert "a from b+c: calibrated" in m.summary()


def test_other_observed_views_are_not_scaled_and_say_so(split_toy):
    m, test = split_toy
    m.calibrate(target="b", observed=["a", "c"], rows=120)
    with pytest.warns(UserWarning, match=r"calibrated from \['a', 'c'\].*calibrate\(target='b', observed=\['a'\]\)"):
        mean, var = m.reconstruct({"a": test["a"]}, target="b")
    _, var0 = m.reconstruct({"a": test["a"]}, target="b", calibrated=False)
    np.testing.assert_array_equal(var, var0)


def test_the_calibration_round_trips_and_is_refused_on_other_views(split_toy, tmp_path):
    m, test = split_toy
    m.calibration = None
    cal = m.calibrate(target="a", rows=120)
    cal = m.calibrate(target="c", rows=120)  # added to a's
    m.save(tmp_path / "m.npz")
    m2 = load_model(tmp_path / "m.npz")
    assert set(m2.calibration.targets) == {"a", "c"}
    for t in ("a", "c"):
        np.testing.assert_array_equal(m2.calibration.targets[t].calibration.scale, cal.targets[t].calibration.scale)
    obs = {"b": test["b"], "c": test["c"]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_allclose(m2.reconstruct(obs, target="a")[1], m.reconstruct(obs, target="a")[1],
                                   rtol=1e-6)
    other = MRD({n: Y[:50] for n, Y in m.Y.items()}, latent_dim=2, num_inducing=5)
    with pytest.raises(ValueError, match="other views than this model's"):
        other.calibration = cal
    with pytest.raises(TypeError, match="ViewsCalibration"):
        other.calibration = cal.targets["a"].calibration


def test_bad_calibrations_are_refused_with_what_to_do(split_toy):
    m, _ = split_toy
    with pytest.raises(ValueError, match=r"at least 50 held-out entries on 10 rows.*raise rows="):
        m.calibrate(target="b", rows=8)
    with pytest.raises(ValueError, match="no other view"):
        m.calibrate(target="b", observed=["b"])
    with pytest.raises(ValueError, match="undetermined must be"):
        m.calibrate(target="b", undetermined="zero")
    views = three_views(N=30, seed=1)
    dm = DynamicalMRD(views, np.linspace(0, 1, 30), latent_dim=2, num_inducing=5)
    with pytest.raises(TypeError, match="coupled through time"):
        dm.calibrate()
