"""Manifold Relevance Determination (``bgplvm.MRD``): several views sharing one q(X)."""

from __future__ import annotations

import numpy as np
import pytest

from bgplvm import MRD, BayesianGPLVM
from gradcheck import assert_model_block_gradients


def _toy(N=80, seed=0, noise=0.05):
    """Three views of a 4-D latent space (as GPy's mrd_simulation): x0 shared by all, x1
    shared by views a and b, x2 private to a, x3 private to c."""
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 4 * np.pi, N)
    X = np.c_[np.sin(t), np.cos(t / 2), np.sin(2 * t + 1), np.cos(1.5 * t + 2)]
    uses = {"a": [0, 1, 2], "b": [0, 1], "c": [0, 3]}
    dims = {"a": 8, "b": 5, "c": 12}
    views = {}
    for n, cols in uses.items():
        W = rng.standard_normal((len(cols), dims[n]))
        views[n] = np.tanh(X[:, cols] @ W) + noise * rng.standard_normal((N, dims[n]))
    return views


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
    with pytest.raises(TypeError, match="m.view\\(name\\).reconstruct"):
        MRD(views, latent_dim=2, num_inducing=5).reconstruct(views["a"][:2])
    with pytest.raises(KeyError, match="no view 'd'"):
        MRD(views, latent_dim=2, num_inducing=5).view("d")
