"""A generative classifier from one Bayesian GP-LVM per class (paper, section "Class
Conditional Density Estimation", sec:classification).

Each class c gets its own model of its training rows; a test row y* is scored by the
class-conditional density log p(y* | Y_c) ~ F(q(X_c), q(x*)) - F(q(X_c)) (eq:predictive1,
``BayesianGPLVM.log_density``) and, with a uniform prior over classes, labelled by the
highest one. ``predict_log_proba`` normalises the densities over the classes (Bayes' rule
with the uniform prior). Conventions follow scikit-learn: ``fit(Y, labels)`` returns the
classifier, ``classes_`` holds the sorted labels, rows of ``predict_log_proba`` follow it.
"""

from __future__ import annotations

from numbers import Integral

import numpy as np
from scipy.special import logsumexp

from .gplvm import BayesianGPLVM, _check_Y, _check_int


class GPLVMClassifier:
    """One ``BayesianGPLVM`` per class; label = the class of highest density p(y* | Y_c).

    Parameters
    ----------
    latent_dim, num_inducing, kernel, seed
        Passed to every class model (num_inducing is capped at the class's number of rows).
    max_iters : int
        Iterations of each class model's fit.
    infer_kw : dict, optional
        Options for the inference of q(x*) in each class model (``n_init``, ``max_iters``;
        see ``BayesianGPLVM.infer_latent``).
    """

    def __init__(self, latent_dim: int = 10, num_inducing: int = 50, kernel="rbf",
                 max_iters: int = 2000, seed: int | None = 0, infer_kw: dict | None = None,
                 progress: bool | None = False):
        self.latent_dim = latent_dim
        self.num_inducing = num_inducing
        self.kernel = kernel
        self.max_iters = max_iters
        self.seed = seed
        self.infer_kw = dict(infer_kw or {})
        self.progress = progress

    # --- fitting ------------------------------------------------------------------------------
    def fit(self, Y, labels) -> "GPLVMClassifier":
        """Fit one model per class on the rows of Y (N, D) with that label (N,)."""
        Y = _check_Y(Y)
        labels = _check_labels(labels, Y.shape[0])
        _check_int("latent_dim", self.latent_dim, 1)
        _check_int("num_inducing", self.num_inducing, 1)
        classes, counts = np.unique(labels, return_counts=True)
        if classes.size < 2:
            raise ValueError(f"need at least 2 classes, got only {classes.tolist()}")
        small = classes[counts < 2]
        if small.size:
            raise ValueError(f"class {_fmt(small[0])} has {int(counts[classes == small[0]][0])} "
                             "row; every class needs at least 2 rows to fit its model"
                             + (f" (also: {', '.join(_fmt(c) for c in small[1:])})" if small.size > 1 else ""))
        for attr in ("classes_", "models_", "n_features_in_"):  # a refit replaces the old fit
            self.__dict__.pop(attr, None)
        models = []
        for c in classes:
            Yc = Y[labels == c]
            m = BayesianGPLVM(Yc, latent_dim=self.latent_dim,
                              num_inducing=min(int(self.num_inducing), Yc.shape[0]),
                              kernel=self.kernel, seed=self.seed)
            m.fit(max_iters=self.max_iters, progress=self.progress)
            if m.fit_info.get("reason") == "interrupted":  # Ctrl-C: not the next classes too
                raise KeyboardInterrupt(f"GPLVMClassifier.fit interrupted in the model of class "
                                        f"{_fmt(c)}; the classifier is not fitted")
            models.append(m)
        self.classes_, self.models_ = classes, models
        self.n_features_in_ = Y.shape[1]
        return self

    # --- prediction ---------------------------------------------------------------------------
    def _check_fitted(self) -> None:
        if not hasattr(self, "models_"):
            raise RuntimeError("this GPLVMClassifier is not fitted yet: call fit(Y, labels) first")

    def class_log_density(self, Y_star) -> np.ndarray:
        """(n*, n_classes) log p(y*_O | Y_c) of every class model (NaN = missing entries)."""
        self._check_fitted()
        return np.column_stack([m.log_density(Y_star, **self.infer_kw) for m in self.models_])

    def predict_log_proba(self, Y_star) -> np.ndarray:
        """(n*, n_classes) log p(c | y*) under a uniform class prior, columns as ``classes_``."""
        L = self.class_log_density(Y_star)
        return L - logsumexp(L, axis=1, keepdims=True)

    def predict_proba(self, Y_star) -> np.ndarray:
        return np.exp(self.predict_log_proba(Y_star))

    def predict(self, Y_star) -> np.ndarray:
        """(n*,) the class of highest density for every row."""
        self._check_fitted()
        return self.classes_[np.argmax(self.class_log_density(Y_star), axis=1)]

    def score(self, Y_star, labels) -> float:
        """Accuracy on (Y_star, labels)."""
        pred = self.predict(Y_star)
        labels = np.asarray(labels)
        if labels.shape != pred.shape:
            raise ValueError(f"labels must have one entry per row of Y_star ({pred.shape[0]}), got shape "
                             f"{labels.shape}")
        return float(np.mean(pred == labels))

    def __repr__(self) -> str:
        return (f"GPLVMClassifier(latent_dim={self.latent_dim}, num_inducing={self.num_inducing}, "
                f"kernel={self.kernel!r})")


def _fmt(c) -> str:
    return repr(c.item() if hasattr(c, "item") else c)


def _check_labels(labels, N: int) -> np.ndarray:
    """One label per row: numbers (integer-valued or real, no NaN) or strings, as
    scikit-learn's classifiers take them; ``classes_`` and ``predict`` give them back."""
    # a list of numbers and strings would become all strings in np.asarray: see each value
    lab = labels if isinstance(labels, np.ndarray) else np.asarray(labels, dtype=object)
    if lab.ndim != 1 or lab.shape[0] != N:
        raise ValueError(f"labels must give one label per row of Y: expected shape ({N},), got {lab.shape}")
    if lab.dtype.kind == "O":  # a list, or e.g. a pandas column of Python ints or of strings
        values = lab.tolist()
        if all(isinstance(v, (Integral, float, np.number)) for v in values):
            lab = np.asarray(values)
        elif all(isinstance(v, str) for v in values):
            lab = np.asarray(values, dtype=str)
        else:
            kinds = ", ".join(sorted({type(v).__name__ for v in values}))
            raise ValueError(f"labels must be all numbers or all strings, got a mix of {kinds}: convert them to "
                             "one type (and give every row a label) first")
    if lab.dtype.kind not in "iufbUS":
        raise ValueError(f"labels must be numbers or strings, got {lab.dtype} values such as {lab[0]!r}")
    if lab.dtype.kind == "f" and not np.all(np.isfinite(lab)):
        rows = np.flatnonzero(~np.isfinite(lab))
        raise ValueError(f"labels contain NaN or inf at rows {rows[:5].tolist()}")
    return lab
