"""Manifold Relevance Determination (``bgplvm.MRD``): several views sharing one q(X)."""

from __future__ import annotations

import numpy as np
import pytest

from bgplvm import MRD, BayesianGPLVM
from gradcheck import assert_model_block_gradients
from mrd_data import three_views as _toy


def _same_values(mrd, single):
    """Set ``mrd`` (one view) at ``single``'s parameters."""
    v = single._values()
    name = mrd.view_names[0]
    z = "Z" if mrd.inducing == "shared" else f"{name}.Z"
    values = {"mu": v["mu"], "S": v["S"], z: v["Z"], f"{name}.noise_variance": v["noise_variance"],
              **{f"{name}.{k}": p for k, p in v.items() if k.startswith("kernel.")}}
    mrd._set_x(mrd._layout.pack(values))


@pytest.mark.parametrize("inducing", ["per_view", "shared"])
@pytest.mark.parametrize("missing", [False, True])
def test_one_view_is_the_single_view_model(inducing, missing):
    Y = _toy()["a"]
    if missing:
        Y = Y.copy()
        Y[np.random.default_rng(1).random(Y.shape) < 0.2] = np.nan
    single = BayesianGPLVM(Y, latent_dim=3, num_inducing=10, seed=0).fit(max_iters=30, progress=False)
    mrd = MRD({"a": Y}, latent_dim=3, num_inducing=10, seed=0, inducing=inducing)
    _same_values(mrd, single)
    F1, g1 = single._bound(single._x)
    F2, g2 = mrd._bound(mrd._x)
    assert F2 == pytest.approx(F1, rel=1e-12, abs=1e-12)
    # the gradient, block by block under the views' names
    names = {"mu": "mu", "S": "S", "Z": "Z" if inducing == "shared" else "a.Z", "noise_variance": "a.noise_variance"}
    names.update({k: f"a.{k}" for k in single._layout.names if k.startswith("kernel.")})
    for k1, k2 in names.items():
        a, b = g1[single._layout.slices[k1]], g2[mrd._layout.slices[k2]]
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-12 * max(1.0, np.abs(a).max()))
    X = single.latent_mean[:5]
    for a, b in zip(single.predict(X), mrd.predict(X, view="a")):
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("inducing", ["per_view", "shared"])
def test_gradients_by_central_differences(inducing):
    views = _toy(N=30)
    views["b"] = views["b"].copy()
    views["b"][:6] = np.nan  # whole view missing for some rows
    views["c"] = views["c"].copy()
    views["c"][np.random.default_rng(2).random(views["c"].shape) < 0.15] = np.nan
    m = MRD(views, latent_dim=3, num_inducing=6, kernel=["rbf", "linear", "rbf+bias"], seed=0, inducing=inducing)
    m._set_x(m._x + 0.05 * np.random.default_rng(3).standard_normal(m._x.size))
    assert_model_block_gradients(m)


def test_bound_is_the_views_bounds_minus_one_kl():
    views = _toy(N=40)
    m = MRD(views, latent_dim=4, num_inducing=8, seed=0)
    parts = [m.view(n) for n in m.view_names]
    kl = m._qx().kl
    total = sum(p.elbo() + kl for p in parts) - kl  # each single-view bound counts the KL once
    assert m.elbo() == pytest.approx(total, rel=1e-10)


def test_fit_finds_the_shared_and_private_dimensions():
    views = _toy(N=100, seed=4)
    m = MRD(views, latent_dim=6, num_inducing=20, seed=0).fit(max_iters=600, progress=False)
    seg = m.segmentation()
    w = m.ard_weights
    assert set(w) == {"a", "b", "c"} and all(a.shape == (6,) for a in w.values())
    # every view switches some dimension on, a dimension is shared by all three, and c has
    # a dimension the others do not use (its own x3)
    assert all(seg.on[n] for n in "abc")
    assert any(set(who) == {"a", "b", "c"} for who in seg.shared), seg.describe()
    assert seg.private["c"], seg.describe()
    text = m.summary()
    assert "shared by" in text and "private to c" in text and "view 'a'" in text


def test_rows_missing_a_whole_view_are_placed_by_the_others_and_imputed():
    views = _toy(N=60, seed=5)
    full_b = views["b"].copy()
    views["b"] = full_b.copy()
    views["b"][40:] = np.nan
    m = MRD(views, latent_dim=4, num_inducing=12, seed=0).fit(max_iters=300, progress=False)
    mean, var = m.impute()["b"]
    err = np.sqrt(np.mean((mean[40:] - full_b[40:]) ** 2))
    assert err < 0.5 * full_b[40:].std(), err  # better than the column mean by far
    assert np.all(var[40:] > 0) and np.all(var[:40] == 0)


def test_bad_views_are_refused_with_what_to_do():
    views = _toy(N=20)
    with pytest.raises(ValueError, match="same rows.*a: 20, b: 19"):
        MRD({"a": views["a"], "b": views["b"][:-1]})
    both = {"a": views["a"].copy(), "b": views["b"].copy()}
    both["a"][3] = np.nan
    both["b"][3] = np.nan
    with pytest.raises(ValueError, match=r"nothing observed in any view \(rows \[3\]\)"):
        MRD(both)
    with pytest.raises(ValueError, match="views is empty"):
        MRD({})
    with pytest.raises(ValueError, match="one per view"):
        MRD(views, kernel=["rbf", "rbf"])
    with pytest.raises(ValueError, match="inducing must be"):
        MRD(views, inducing="some")
    m = MRD(views, latent_dim=2, num_inducing=5)
    with pytest.raises(KeyError, match="no view 'd'"):
        m.calibrate(target="d")
    with pytest.raises(ValueError, match=r"unknown view\(s\) \['d'\]"):
        m.infer_latent({"d": views["a"][:2]})
    with pytest.raises(ValueError, match=r"rows \[1\] observe nothing"):
        m.infer_latent({"a": np.where(np.arange(2)[:, None] == 1, np.nan, views["a"][:2])})
    with pytest.raises(TypeError, match="observed must be a dict"):
        m.infer_latent(views["a"][:2])
    with pytest.raises(KeyError, match="no view 'd'"):
        MRD(views, latent_dim=2, num_inducing=5).view("d")


@pytest.fixture(scope="module")
def fitted_toy():
    """An MRD of 100 rows of the toy and 40 held-out rows of it, every 7th row from the
    5th: the toy's rows follow a path in the latent space, so held-out rows are taken
    along all of it (a contiguous block would be latent configurations no training row has)."""
    views = _toy(N=140, seed=6)
    held = np.arange(140) % 7 >= 5
    train = {n: Y[~held] for n, Y in views.items()}
    test = {n: Y[held] for n, Y in views.items()}
    return MRD(train, latent_dim=5, num_inducing=20, seed=0).fit(max_iters=500, progress=False), test


def test_one_view_inference_is_the_single_view_models():
    Y = _toy()["a"]
    single = BayesianGPLVM(Y[:60], latent_dim=3, num_inducing=10, seed=0).fit(max_iters=60, progress=False)
    mrd = MRD({"a": Y[:60]}, latent_dim=3, num_inducing=10, seed=0)
    _same_values(mrd, single)
    Ys = Y[60:].copy()
    Ys[:, :3] = np.nan
    mu1, S1 = single.infer_latent(Ys)
    mu2, S2 = mrd.infer_latent({"a": Ys})
    np.testing.assert_allclose(mu2, mu1, rtol=1e-8, atol=1e-9)
    np.testing.assert_allclose(S2, S1, rtol=1e-8, atol=1e-9)
    np.testing.assert_allclose(mrd.reconstruct({"a": Ys}, target="a")[0], single.reconstruct(Ys)[0], atol=1e-9)


def test_a_view_is_predicted_from_another(fitted_toy):
    """View b (x0, x1) from view a (x0, x1, x2), on rows the model never saw: far better
    than b's column mean; from view c (x0, x3) alone, b's x1 is unknown and b is predicted
    worse, with larger variances."""
    m, test = fitted_toy
    truth = test["b"]
    mean_a, var_a = m.predict_views({"a": test["a"]})["b"]
    mean_c, var_c = m.predict_views({"c": test["c"]}, target="b")["b"]
    rmse = lambda p: float(np.sqrt(np.mean((p - truth) ** 2)))  # noqa: E731
    base = rmse(np.broadcast_to(m.views["b"].mean, truth.shape))
    assert rmse(mean_a) < 0.35 * base, (rmse(mean_a), base)
    assert rmse(mean_a) < rmse(mean_c) and np.median(var_a) < np.median(var_c)
    both = m.predict_views({"a": test["a"], "c": test["c"]})
    assert set(both) == {"b"}
    # a partly observed target keeps its observed entries
    part = test["b"].copy()
    part[:, :2] = np.nan
    mean, var = m.reconstruct({"a": test["a"], "b": part}, target="b")
    np.testing.assert_array_equal(mean[:, 2:], test["b"][:, 2:])
    assert np.all(var[:, 2:] == 0) and np.all(var[:, :2] > 0)
    assert m.log_density({"a": test["a"]}).shape == (40,)


def test_undetermined_dimensions_from_the_prior_or_the_nearest_training_row(fitted_toy):
    """From view c alone the dimensions c does not switch on are its prior's ("prior", the
    default) or the starting training row's q(x_n) ("nearest"); those c uses are x*'s."""
    from bgplvm.mrd_inference import fill_undetermined

    m, test = fitted_toy
    obs = {"c": test["c"][:10]}
    fit = m.infer_latent(obs, return_fit=True)
    on = m.segmentation().on["c"]
    off = [q for q in range(m.latent_dim) if q not in on]
    assert on and off
    mu, S = fill_undetermined(m, obs, fit, "nearest")
    np.testing.assert_array_equal(mu[:, on], fit.mu[:, on])
    np.testing.assert_array_equal(mu[:, off], m.latent_mean[fit.init_rows][:, off])
    np.testing.assert_array_equal(S[:, off], m.latent_variance[fit.init_rows][:, off])
    assert fill_undetermined(m, obs, fit)[0] is fit.mu
    prior = m.reconstruct(obs, target="b")
    np.testing.assert_allclose(m.reconstruct(obs, target="b", undetermined="prior")[0], prior[0])
    near = m.reconstruct(obs, target="b", undetermined="nearest")
    np.testing.assert_allclose(near[0], m.view("b").predict(mu, S)[0])
    with pytest.raises(ValueError, match="undetermined must be one of"):
        m.predict_views(obs, undetermined="mean")


def test_long_starting_widths_are_nearly_linear_and_kept_in_the_model_file(tmp_path):
    from bgplvm.mrd import LONG_WIDTHS

    views = _toy(N=40)
    short = MRD(views, latent_dim=4, num_inducing=8, seed=0)
    long = MRD(views, latent_dim=4, num_inducing=8, seed=0, widths="long")
    for n in views:
        a_short, a_long = short.ard_weights[n], long.ard_weights[n]
        assert np.all(a_long <= LONG_WIDTHS + 1e-12) and np.all(a_long < a_short)
        assert a_long[0] == pytest.approx(LONG_WIDTHS) and np.all(np.diff(a_long) <= 0)  # in the PCA's order
    long.save(tmp_path / "m.npz")
    assert MRD.load(tmp_path / "m.npz").widths == "long"
    with pytest.raises(ValueError, match="widths must be one of"):
        MRD(views, latent_dim=4, num_inducing=8, widths="short")


def test_candidates_are_distinct_optima_best_first(fitted_toy):
    m, test = fitted_toy
    obs = {"c": test["c"][:8]}
    cands = m.infer_candidates(obs, n_starts=6)
    assert cands.mu.shape == (8, 6, 5) and np.all(cands.count >= 1)
    for i in range(8):
        ld = cands.log_density[i, :cands.count[i]]
        assert np.all(np.diff(ld) <= 0) and np.all(np.isinf(cands.log_density[i, cands.count[i]:]))
    best = m.infer_latent(obs, return_fit=True)
    assert np.all(cands.log_density[:, 0] >= best.log_density - 1e-3 * np.abs(best.log_density))


def test_an_ambiguous_view_gives_both_answers():
    """View c is an even function of t (t^2, |t|, cos 2t), view b odd (t, sin t, t^3): from c
    alone t and -t fit equally, and the candidates hold both, each predicting its b."""
    rng = np.random.default_rng(0)
    t = np.linspace(-2, 2, 100)
    b = np.c_[t, np.sin(t), t ** 3 / 4] + 0.02 * rng.standard_normal((100, 3))
    c = np.c_[t ** 2, np.cos(2 * t), np.abs(t)] + 0.02 * rng.standard_normal((100, 3))
    m = MRD({"b": b, "c": c}, latent_dim=2, num_inducing=15, seed=0, init="first_view")
    m.fit(max_iters=400, progress=False)
    assert list(m.segmentation().shared.values()) == [[0]]
    tt = np.array([-1.5, -1.0, 1.2, 1.7])
    cand = m.infer_candidates({"c": np.c_[tt ** 2, np.cos(2 * tt), np.abs(tt)]}, n_starts=8)
    assert np.all(cand.count == 2)
    for i in range(4):
        b0 = sorted(float(m.view("b").predict(cand.mu[i, j][None], cand.S[i, j][None])[0][0, 0]) for j in range(2))
        np.testing.assert_allclose(b0, [-abs(tt[i]), abs(tt[i])], atol=0.1)


@pytest.mark.parametrize("time_prior", ["dense", "state_space"])
def test_dynamical_mrd_one_view_is_the_dynamical_model_and_its_gradients_hold(time_prior):
    from bgplvm import DynamicalGPLVM
    from bgplvm.mrd import DynamicalMRD

    views = _toy(N=36)
    t = np.tile(np.arange(18.0), 2)
    seq = np.repeat([0, 1], 18)
    single = DynamicalGPLVM(views["a"], t, sequences=seq, latent_dim=2, num_inducing=6, seed=0,
                            time_prior=time_prior).fit(max_iters=20, progress=False)
    mrd = DynamicalMRD({"a": views["a"]}, t, sequences=seq, latent_dim=2, num_inducing=6, seed=0,
                       time_prior=time_prior)
    v = single._values()
    values = {k: p for k, p in v.items() if k in ("mu_bar", "lambda") or k.startswith("time_kernel.")}
    values.update({"a.Z": v["Z"], "a.noise_variance": v["noise_variance"],
                   **{f"a.{k}": p for k, p in v.items() if k.startswith("kernel.")}})
    mrd._set_x(mrd._layout.pack(values))
    assert mrd.elbo() == pytest.approx(single.elbo(), rel=1e-12)
    np.testing.assert_allclose(mrd.latent_at([18.5, 20.0], 1)[0], single.latent_at([18.5, 20.0], 1)[0], rtol=1e-12)
    two = DynamicalMRD({"a": views["a"], "c": views["c"]}, t, sequences=seq, latent_dim=2, num_inducing=6,
                       seed=0, time_prior=time_prior)
    two._set_x(two._x + 0.05 * np.random.default_rng(1).standard_normal(two._x.size))
    assert_model_block_gradients(two)
    two.fit(max_iters=30, progress=False)
    fc = two.forecast(np.array([18.0, 19.0]), sequence=0)
    assert set(fc) == {"a", "c"} and fc["c"][0].shape == (2, 12)


@pytest.mark.parametrize("dynamical", [False, True])
def test_a_model_file_round_trips_every_view(tmp_path, dynamical):
    from bgplvm import DynamicalMRD

    views = _toy(N=30)
    views["b"] = views["b"].copy()
    views["b"][:5] = np.nan
    kw = dict(latent_dim=3, num_inducing=6, kernel=["rbf", "linear", "rbf+bias"], seed=0)
    if dynamical:
        m = DynamicalMRD(views, np.arange(30.0), time_prior="dense", **kw)
    else:
        m = MRD(views, inducing="shared", **kw)
    m.fit(max_iters=15, progress=False)
    m.save(tmp_path / "m.npz")
    back = BayesianGPLVM.load(tmp_path / "m.npz")
    assert type(back) is type(m) and back.view_names == m.view_names and back.inducing == m.inducing
    np.testing.assert_array_equal(back._x, m._x)
    assert back.elbo() == m.elbo() and back.param_names == m.param_names
    np.testing.assert_array_equal(back.Y["b"], m.Y["b"])
    assert back.segmentation().on == m.segmentation().on
    with pytest.raises(ValueError, match="stores its views"):
        m.save(tmp_path / "n.npz", data=tmp_path / "y.npy")
