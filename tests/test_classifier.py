"""GPLVMClassifier: one Bayesian GP-LVM per class, labels by the highest class-conditional
density (paper, section "Class Conditional Density Estimation")."""

from __future__ import annotations

import numpy as np
import pytest

from mirror import find_mirror
from bgplvm import GPLVMClassifier

SHARED = find_mirror("digits/digits.npy")


def _blobs(seed=0):
    """Two classes on different curves in 6-D (easy), 12 rows each, plus test rows."""
    rng = np.random.default_rng(seed)
    t = rng.uniform(-1, 1, (32, 1))
    A = np.hstack([np.sin(3 * t), np.cos(3 * t), t, t**2, -t, 0.5 * t])
    B = np.hstack([t, -t, np.sin(2 * t), 0.3 + t**2, np.cos(2 * t), -t**3])
    Y = np.vstack([A, B]) + 0.05 * rng.standard_normal((64, 6))
    lab = np.repeat([3, 8], 32)
    test = np.r_[0:8, 32:40]
    train = np.setdiff1d(np.arange(64), test)
    return Y[train], lab[train], Y[test], lab[test]


@pytest.fixture(scope="module")
def fitted():
    Ytr, ltr, Yte, lte = _blobs()
    clf = GPLVMClassifier(latent_dim=2, num_inducing=8, max_iters=150).fit(Ytr, ltr)
    return clf, Yte, lte


def test_sklearn_conventions(fitted):
    clf, Yte, lte = fitted
    np.testing.assert_array_equal(clf.classes_, [3, 8])
    assert len(clf.models_) == 2 and clf.n_features_in_ == 6
    logp = clf.predict_log_proba(Yte)
    assert logp.shape == (len(Yte), 2)
    np.testing.assert_allclose(np.exp(logp).sum(1), 1.0, rtol=1e-12)
    pred = clf.predict(Yte)
    np.testing.assert_array_equal(pred, clf.classes_[np.argmax(logp, 1)])
    assert clf.score(Yte, lte) == 1.0
    # uniform prior: the log-probabilities are the densities shifted per row
    L = clf.class_log_density(Yte)
    np.testing.assert_allclose(L - logp, (L - logp)[:, :1] * np.ones((1, 2)), rtol=1e-10)


def test_missing_entries_are_allowed_in_test_rows(fitted):
    """Rows with NaN are scored by each class model's density of their observed entries (not
    by NaN filled with a number) and still classified right."""
    clf, Yte, lte = fitted
    Y = Yte.copy()
    Y[:, 4:] = np.nan
    assert clf.score(Y, lte) == 1.0
    Y[::3, :2] = np.nan  # and another pattern in some rows
    L = clf.class_log_density(Y)
    for j, m in enumerate(clf.models_):
        np.testing.assert_allclose(L[:, j], m.log_density(Y), rtol=1e-10)
    zero = clf.class_log_density(np.nan_to_num(Y))
    assert np.all(np.abs(L - zero) > 1e-3)


def test_fit_errors_name_the_problem():
    Ytr, ltr, _, _ = _blobs()
    clf = GPLVMClassifier(latent_dim=2, num_inducing=5, max_iters=5)
    with pytest.raises(ValueError, match="all numbers or all strings, got a mix of int, str"):
        clf.fit(Ytr, ["three" if v == 3 else 8 for v in ltr])  # np.asarray would make 8 "8"
    with pytest.raises(ValueError, match="a mix of NoneType, str"):
        clf.fit(Ytr, [None] + ["a"] * (len(Ytr) - 1))
    # numbers in an object array are numbers (a list of Python ints via pandas, say)
    assert GPLVMClassifier(latent_dim=2, num_inducing=5, max_iters=2).fit(
        Ytr, ltr.astype(object)).classes_.dtype.kind in "iu"
    lab = ltr.copy()
    lab[0] = 5
    with pytest.raises(ValueError, match="class 5 has 1 row"):
        clf.fit(Ytr, lab)
    with pytest.raises(ValueError, match="one label per row"):
        clf.fit(Ytr, ltr[:-1])
    with pytest.raises(ValueError, match="at least 2 classes"):
        clf.fit(Ytr, np.zeros(len(Ytr), dtype=int))
    with pytest.raises(RuntimeError, match="not fitted"):
        GPLVMClassifier().predict(Ytr)


def test_string_labels_come_back_as_strings(fitted):
    """Labels may be strings (a pandas column of names, say), as scikit-learn's classifiers
    take them: the class models are those of the numeric labels, in sorted order."""
    clf, Yte, lte = fitted
    Ytr, ltr, _, _ = _blobs()
    names = {3: "three", 8: "eight"}
    named = GPLVMClassifier(latent_dim=2, num_inducing=8, max_iters=150).fit(
        Ytr, np.array([names[v] for v in ltr], dtype=object))
    np.testing.assert_array_equal(named.classes_, ["eight", "three"])
    pred = named.predict(Yte)
    np.testing.assert_array_equal(pred, [names[v] for v in clf.predict(Yte)])
    assert named.score(Yte, [names[v] for v in lte]) == 1.0
    # columns follow classes_: "eight" first, so the numeric classifier's columns swap
    np.testing.assert_allclose(named.predict_log_proba(Yte), clf.predict_log_proba(Yte)[:, ::-1], rtol=1e-10)


def test_predict_errors(fitted):
    clf, Yte, _ = fitted
    with pytest.raises(ValueError, match="D=6"):
        clf.predict(Yte[:, :5])
    Y = Yte.copy()
    Y[2] = np.nan
    with pytest.raises(ValueError, match=r"row \[2\]"):
        clf.predict(Y)


@pytest.mark.skipif(SHARED is None, reason="offline data mirror (digits) not found")
def test_three_digit_classes(tmp_path):
    """digits 3, 5, 8 (de Campos et al.: 55 per class, 16x16): 35 per class to train, the
    other 20 to test. Q = 3, M = 15, 100 iterations per class model. Measured: 60/60
    correct (a 1-NN classifier on the pixels gets 57/60)."""
    from bgplvm.datasets import load

    ds = load("digits", mirror=SHARED, cache_dir=tmp_path, progress=False)
    rng = np.random.default_rng(0)
    train, test = [], []
    for c in (3, 5, 8):
        ix = rng.permutation(np.flatnonzero(ds.labels == c))
        train += ix[:35].tolist()
        test += ix[35:].tolist()
    clf = GPLVMClassifier(latent_dim=3, num_inducing=15, max_iters=100).fit(ds.Y[train], ds.labels[train])
    acc = clf.score(ds.Y[test], ds.labels[test])
    assert acc >= 0.9, acc


def test_ctrl_c_stops_the_whole_classifier_fit(monkeypatch, sigint_raises):
    """Ctrl-C in one class model's fit ends the classifier's fit (the next classes were
    fitted on regardless) and leaves it unfitted, saying so."""
    import os
    import signal

    from bgplvm import BayesianGPLVM

    Ytr, ltr, _, _ = _blobs()
    fits = []
    real_fit = BayesianGPLVM.fit

    def fit(self, *a, **k):
        fits.append(self)
        k["callback"] = lambda p: p.iteration == 3 and os.kill(os.getpid(), signal.SIGINT)
        return real_fit(self, *a, **k)

    monkeypatch.setattr(BayesianGPLVM, "fit", fit)
    clf = GPLVMClassifier(latent_dim=2, num_inducing=5, max_iters=50)
    with pytest.warns(UserWarning, match="interrupted"), \
            pytest.raises(KeyboardInterrupt, match="class 3; the classifier is not fitted"):
        clf.fit(Ytr, ltr)
    assert len(fits) == 1 and fits[0].fit_info["iterations"] == 3
    with pytest.raises(RuntimeError, match="not fitted"):
        clf.predict(Ytr)
