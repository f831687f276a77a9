"""bgplvm.sklearn: the GP-LVM as a scikit-learn transformer (issue 46, point 4).

scikit-learn's common checks (``parametrize_with_checks``, the checks that cannot hold for
a latent-variable model listed with their reasons in ``bgplvm.sklearn``), the transformer's
answers against the model's own methods, missing values, and use in a ``Pipeline`` and in
``GridSearchCV``. Small models and few iterations: the file runs in well under a minute.
"""

from __future__ import annotations

import pickle
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("sklearn", minversion="1.6")

from sklearn.base import clone  # noqa: E402
from sklearn.exceptions import NotFittedError  # noqa: E402
from sklearn.model_selection import GridSearchCV, train_test_split  # noqa: E402
from sklearn.neighbors import KNeighborsClassifier  # noqa: E402
from sklearn.pipeline import Pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402
from sklearn.utils import get_tags  # noqa: E402
from sklearn.utils.estimator_checks import parametrize_with_checks  # noqa: E402

from bgplvm.sklearn import (  # noqa: E402
    DYNAMICAL_EXPECTED_FAILED_CHECKS,
    EXPECTED_FAILED_CHECKS,
    DynamicalGPLVMTransformer,
    GPLVMTransformer,
)

# few iterations: the common checks fit some hundred tiny data sets
FAST = dict(num_inducing=5, max_iters=30, infer_iters=50)


def _expected_failures(estimator) -> dict[str, str]:
    if isinstance(estimator, DynamicalGPLVMTransformer):
        return DYNAMICAL_EXPECTED_FAILED_CHECKS
    return EXPECTED_FAILED_CHECKS


# xfail_strict: an expected failure that starts passing fails the test, so the lists stay true
@parametrize_with_checks([GPLVMTransformer(**FAST), DynamicalGPLVMTransformer(**FAST)],
                         expected_failed_checks=_expected_failures, xfail_strict=True)
def test_sklearn_common_checks(estimator, check):
    check(estimator)


def test_expected_failures_are_explained():
    for table in (EXPECTED_FAILED_CHECKS, DYNAMICAL_EXPECTED_FAILED_CHECKS):
        assert table and all(name.startswith("check_") and len(why) > 40 for name, why in table.items())
    assert get_tags(GPLVMTransformer()).input_tags.allow_nan


def test_core_package_does_not_import_sklearn():
    code = "import sys, bgplvm; assert 'sklearn' not in sys.modules, 'bgplvm imported sklearn'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_clear_error_without_sklearn():
    code = ("import sys; sys.modules['sklearn'] = None\n"
            "try:\n    import bgplvm.sklearn\n"
            "except ImportError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert "pip install bgplvm[sklearn]" in out


# --- the transformer's answers are the model's -------------------------------------------------
def _oil_like(n: int = 150, D: int = 12, seed: int = 0):
    """Three classes around three centres of a 2-D latent space, mapped non-linearly to D
    outputs (offset and scaled, as raw measurements are), with noise."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 3, n)
    x = np.array([[-2.0, 0.0], [2.0, 0.0], [0.0, 2.5]])[labels] + 0.5 * rng.standard_normal((n, 2))
    feats = np.column_stack([x, np.sin(x[:, 0]), x[:, 0] * x[:, 1] / 3])
    Y = feats @ rng.standard_normal((4, D)) + 0.1 * rng.standard_normal((n, D))
    return 5.0 + 3.0 * Y, labels


@pytest.fixture(scope="module")
def data():
    Y, labels = _oil_like()
    return train_test_split(Y, labels, test_size=0.3, random_state=0, stratify=labels)


@pytest.fixture(scope="module")
def fitted(data):
    Ytr = data[0]
    return GPLVMTransformer(n_components=3, num_inducing=15, max_iters=150).fit(Ytr)


def test_answers_are_the_models(fitted, data):
    Yte = data[1]
    m = fitted.model_
    mu, S = m.infer_latent(Yte)
    np.testing.assert_array_equal(fitted.transform(Yte), mu)
    Z, V = fitted.transform(Yte, return_variance=True)
    np.testing.assert_array_equal(Z, mu)
    np.testing.assert_array_equal(V, S)
    np.testing.assert_array_equal(fitted.inverse_transform(mu), m.predict(mu)[0])
    mean, var = fitted.inverse_transform(mu, S, return_variance=True)
    np.testing.assert_array_equal(mean, m.predict(mu, S)[0])
    np.testing.assert_array_equal(var, m.predict(mu, S)[1])
    np.testing.assert_array_equal(fitted.score_samples(Yte), m.log_density(Yte))
    assert fitted.score(Yte) == pytest.approx(float(np.mean(m.log_density(Yte))))
    # fit_transform: the training rows' q(X) (module docstring), the same on every call
    est = clone(fitted)
    np.testing.assert_array_equal(est.fit_transform(data[0]), fitted.latent_mean_)
    np.testing.assert_array_equal(fitted.latent_mean_, m.latent_mean)
    assert fitted.n_features_in_ == 12 and fitted.n_components_ == 3
    assert list(fitted.get_feature_names_out()) == ["gplvmtransformer0", "gplvmtransformer1", "gplvmtransformer2"]
    # the constructor's flag
    Z2, V2 = clone(fitted).set_params(return_variance=True).fit(data[0]).transform(Yte)
    np.testing.assert_array_equal(Z2, mu)


def test_bad_input_after_fit(fitted, data):
    # the part of check_transformer_general after its fit_transform comparison (not reached
    # there): another number of features is refused
    with pytest.raises(ValueError, match="features"):
        fitted.transform(data[1][:, :-1])
    with pytest.raises(ValueError, match=r"shape \(n, 3\)"):
        fitted.inverse_transform(np.zeros((2, 2)))
    with pytest.raises(NotFittedError):
        GPLVMTransformer().transform(data[1])
    with pytest.raises(ValueError, match="n_components"):
        GPLVMTransformer(n_components=0).fit(data[0])


def test_missing_values(data):
    Ytr, Yte = data[0].copy(), data[1].copy()
    rng = np.random.default_rng(1)
    Ytr[rng.random(Ytr.shape) < 0.2] = np.nan
    Yte[rng.random(Yte.shape) < 0.3] = np.nan
    Yte[0] = np.nan  # nothing observed: the prior
    est = GPLVMTransformer(n_components=2, num_inducing=10, max_iters=60).fit(Ytr)
    assert est.model_.missing_fraction == pytest.approx(np.isnan(Ytr).mean())
    Z, V = est.transform(Yte, return_variance=True)
    np.testing.assert_array_equal(Z[0], 0.0)
    np.testing.assert_array_equal(V[0], 1.0)
    mu, S = est.model_.infer_latent(Yte[1:])
    np.testing.assert_array_equal(Z[1:], mu)
    logp = est.score_samples(Yte)
    assert logp[0] == 0.0 and np.all(np.isfinite(logp))
    np.testing.assert_array_equal(logp[1:], est.model_.log_density(Yte[1:]))


def test_num_inducing_capped_and_pickle():
    Y = np.random.default_rng(0).standard_normal((8, 3))
    est = GPLVMTransformer(num_inducing=20, max_iters=10).fit(Y)
    assert est.num_inducing_ == 8 and est.num_inducing == 20
    back = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(back.transform(Y), est.transform(Y))
    np.testing.assert_array_equal(back.latent_mean_, est.latent_mean_)


# --- Pipeline and GridSearchCV ----------------------------------------------------------------
def test_pipeline_and_grid_search(data):
    Ytr, Yte, ltr, lte = data
    pipe = Pipeline([("scale", StandardScaler()),
                     ("gplvm", GPLVMTransformer(n_components=2, num_inducing=15, max_iters=150)),
                     ("knn", KNeighborsClassifier(5))])
    pipe.fit(Ytr, ltr)
    assert pipe.score(Yte, lte) > 0.9
    Yn = Yte.copy()
    Yn[np.random.default_rng(2).random(Yn.shape) < 0.3] = np.nan  # NaN through the pipeline
    assert pipe.score(Yn, lte) > 0.8
    # the pipeline's own score (k-NN accuracy) over the latent dimension
    gs = GridSearchCV(pipe, {"gplvm__n_components": [1, 2]}, cv=3).fit(Ytr, ltr)
    assert gs.best_params_["gplvm__n_components"] in (1, 2) and gs.best_score_ > 0.9
    # the transformer alone, scored by its density of held-out rows (score): the data have
    # two latent dimensions, one is too few
    Ys = StandardScaler().fit_transform(Ytr)
    gs = GridSearchCV(GPLVMTransformer(num_inducing=15, max_iters=150), {"n_components": [1, 3]}, cv=3).fit(Ys)
    scores = gs.cv_results_["mean_test_score"]
    assert gs.best_params_ == {"n_components": 3} and scores[1] > scores[0] + 5
    assert gs.best_estimator_.transform(Ys[:4]).shape == (4, 3)


# --- the dynamical variant ------------------------------------------------------------------------
def test_dynamical_transformer_in_a_pipeline():
    rng = np.random.default_rng(0)
    t1 = np.linspace(0.0, 6.0, 30)
    t, seq = np.concatenate([t1, t1]), np.repeat([0, 1], 30)
    x = np.column_stack([np.sin(t + seq), np.cos(1.3 * t)])
    Y = x @ rng.standard_normal((2, 6)) + 0.05 * rng.standard_normal((60, 6))
    pipe = Pipeline([("scale", StandardScaler()),
                     ("gplvm", DynamicalGPLVMTransformer(num_inducing=10, max_iters=80))])
    pipe.fit(Y, gplvm__t=t, gplvm__sequences=seq)  # time stamps as fit parameters
    est = pipe.named_steps["gplvm"]
    np.testing.assert_array_equal(est.model_.t, t)
    assert len(est.model_.prior.sequence_ids) == 2
    Ynew = pipe.named_steps["scale"].transform(Y[:15])
    Ynew[5, :3] = np.nan
    Z, V = est.transform(Ynew, t=t[:15], return_variance=True)
    assert Z.shape == V.shape == (15, 2) and np.all(np.isfinite(Z)) and np.all(V > 0)
    fit = est.model_.infer_sequence(Ynew, t[:15], max_iters=est.infer_iters)
    np.testing.assert_allclose(Z, fit.mu, rtol=1e-10, atol=1e-12)
    assert est.score(Ynew, t=t[:15]) == pytest.approx((fit.gain - fit.kl) / 15, rel=1e-9)
    # two new sequences in one call: each inferred on its own
    Z2 = est.transform(np.vstack([Ynew, Ynew]), t=np.concatenate([t[:15], t[:15]]), sequences=np.repeat([7, 8], 15))
    np.testing.assert_allclose(Z2[:15], Z, atol=1e-12)
    np.testing.assert_allclose(Z2[15:], Z, atol=1e-12)
    # a frame with nothing observed (which infer_sequence refuses) is placed by its
    # neighbours in time: near their mean, less certain than when it was observed
    Ygap = Ynew.copy()
    Ygap[3] = np.nan
    Zg, Vg = est.transform(Ygap, t=t[:15], return_variance=True)
    assert np.all(np.isfinite(Zg)) and np.all(Vg[3] > V[3])
    np.testing.assert_allclose(Zg[3], Zg[[2, 4]].mean(axis=0), atol=0.1)
    assert np.isfinite(est.score(Ygap, t=t[:15]))
    assert not hasattr(est, "score_samples")  # frames of a sequence are not independent rows
    np.testing.assert_array_equal(est.inverse_transform(Z), est.model_.predict(Z)[0])
