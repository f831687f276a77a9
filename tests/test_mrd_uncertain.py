"""MRD with observed, uncertain inputs (``bgplvm.UncertainInputMRD``, issue 45 point 1: the
uncertain-input prior in a multi-view model)."""

from __future__ import annotations

import io

import numpy as np
import pytest

from bgplvm import MRD, UncertainInputGPR, UncertainInputMRD
from gradcheck import assert_model_block_gradients


def noisy_inputs(seed=1, N=80, sd=0.15):
    """True inputs X (N, 2), their noisy observation Z, and two views: a depends on x0
    only, b on x1 (and x0 + x1)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, (N, 2))
    Z = X + sd * rng.standard_normal(X.shape)
    a = np.c_[np.sin(2 * X[:, 0]), np.cos(X[:, 0]), X[:, 0]] + 0.03 * rng.standard_normal((N, 3))
    b = np.c_[X[:, 1] ** 2, np.sin(X.sum(1)), X[:, 1]] + 0.03 * rng.standard_normal((N, 3))
    return X, Z, {"a": a, "b": b}


def test_one_view_is_the_uncertain_input_regression():
    _, Z, views = noisy_inputs()
    single = UncertainInputGPR(Z, views["a"], num_inducing=10, seed=0, input_variance=0.01)
    single.fit(max_iters=30, progress=False)
    m = UncertainInputMRD(Z, {"a": views["a"]}, num_inducing=10, seed=0, input_variance=0.01)
    v = single._values()
    values = {k: v[k] for k in ("mu", "S", "Sigma_z")}
    values.update({"a.Z": v["Z"], "a.noise_variance": v["noise_variance"],
                   **{f"a.{k}": p for k, p in v.items() if k.startswith("kernel.")}})
    m._set_x(m._layout.pack(values))
    assert m.elbo() == pytest.approx(single.elbo(), rel=1e-12)
    np.testing.assert_allclose(m.predict(Z[:5], view="a")[0], single.predict(Z[:5])[0], rtol=1e-12)


def test_gradients_hold():
    _, Z, views = noisy_inputs()
    m = UncertainInputMRD(Z, views, num_inducing=10, seed=0)
    # eps 1e-4: the KL to p(X | Z) with small variances makes smaller differences round off,
    # as for UncertainInputGPR (analytic and numeric agree to 3e-5 there at eps 1e-6). Here,
    # the kernel variance of view a: 1.7e-7 relative at eps 1e-3, 1.2e-6 at 1e-4, 2.2e-5 at
    # 1e-5 (the round-off; 1.1e-5 with the fast-math flags before 2026-12-07), 2.3e-4 at 1e-6
    assert_model_block_gradients(m, eps=1e-4)
    assert_model_block_gradients(UncertainInputMRD(Z, views, num_inducing=10, seed=0, inducing="shared"), eps=1e-4)


def test_two_views_place_the_inputs_better_than_either_alone():
    """Each view's evidence about where an input was informs the other: q(X)'s means move
    towards the true inputs in the dimensions each view depends on, and together in both."""
    X, Z, views = noisy_inputs()
    err = lambda mu: np.sqrt(np.mean((mu - X) ** 2, axis=0))  # noqa: E731
    both = UncertainInputMRD(Z, views, num_inducing=15, seed=0).fit(max_iters=500, progress=False)
    alone = {n: UncertainInputGPR(Z, Y, num_inducing=15, seed=0, input_variance=0.01 * Z.var(0)
                                  ).fit(max_iters=500, progress=False) for n, Y in views.items()}
    e_z, e_both = err(Z), err(both.latent_mean)
    e_a, e_b = err(alone["a"].latent_mean), err(alone["b"].latent_mean)
    assert e_both[0] < 0.5 * e_z[0] and e_both[1] < 0.6 * e_z[1]
    assert e_both[0] <= 1.1 * e_a[0] and e_both[1] <= 1.1 * e_b[1]  # as good as the view that sees it
    assert np.all(e_both < np.minimum(e_a, e_b) + 1e-9) or np.sum(e_both) < min(np.sum(e_a), np.sum(e_b))
    seg = both.segmentation()
    assert 0 in seg.on["a"] and 1 not in seg.on["a"] and 1 in seg.on["b"]
    sz = np.asarray(both._values()["Sigma_z"])
    assert np.all((sz > 0.15 ** 2 / 4) & (sz < 0.15 ** 2 * 4))  # the input noise, learned (sd 0.15)


def test_it_saves_and_refuses_the_gplvms_inference():
    _, Z, views = noisy_inputs()
    m = UncertainInputMRD(Z, views, num_inducing=10, seed=0, tie_mean=True).fit(max_iters=40, progress=False)
    buf = io.BytesIO()
    m.save(buf)
    buf.seek(0)
    back = MRD.load(buf)
    assert type(back) is UncertainInputMRD and back.tie_mean and back.view_names == ["a", "b"]
    assert back.elbo() == pytest.approx(m.elbo(), rel=1e-12)
    np.testing.assert_array_equal(back.inputs, m.inputs)
    with pytest.raises(TypeError, match="is a regression model"):
        m.infer_latent({"a": views["a"][:2]})
    with pytest.raises(ValueError, match="same number of rows"):
        UncertainInputMRD(Z[:10], views)
