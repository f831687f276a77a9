"""scikit-learn estimators around the Bayesian GP-LVM (``pip install bgplvm[sklearn]``).

``GPLVMTransformer`` is a transformer in scikit-learn's sense: ``fit(X)`` fits a
``BayesianGPLVM`` to the rows of X, ``transform(X_new)`` gives the means of q(x*) of new rows
(``BayesianGPLVM.infer_latent``; with ``return_variance`` the pair (means, variances)),
``inverse_transform(Z)`` the predictive mean of the outputs at latent points Z
(``BayesianGPLVM.predict``), ``score_samples(X)`` the per-row bound on log p(x* | X)
(``BayesianGPLVM.log_density``) and ``score(X)`` its mean, the criterion ``GridSearchCV``
maximises when given no ``scoring``. NaN marks missing entries, in fit and in transform
(the ``allow_nan`` input tag).

``DynamicalGPLVMTransformer`` is the same for sequences (``DynamicalGPLVM``): the time
stamps are a fit parameter, ``fit(X, t=..., sequences=...)``, as sample-aligned data are in
scikit-learn (``sample_weight``, ``groups``); in a ``Pipeline`` pass them as
``pipe.fit(X, gplvm__t=t)``.

The core package never imports this module (nor scikit-learn).

Conventions that differ from a deterministic transformer, and why
------------------------------------------------------------------
* ``fit_transform(X)`` returns the training rows' q(X) means (``latent_mean_``), the
  model's own posterior over their latent points, not ``fit(X).transform(X)``: the latter
  infers each training row again as if it were new (a second copy of the row beside the
  fitted q(X)), which is close to q(x_n) but not equal to it. A ``Pipeline`` hence trains
  its next step on q(X) and predicts from q(x*), as the paper's oil experiments do.
* ``num_inducing`` is capped at the number of training rows (``num_inducing_`` is the
  number used): a model cannot have more inducing inputs than data points, and a grid
  search over small folds should not fail for it.
* ``transform`` of a row with nothing observed (all NaN) gives the prior, mean 0 and
  variance 1, and ``score_samples`` 0 for it (the density of no observation).
"""

from __future__ import annotations

import io
from numbers import Integral

import numpy as np

try:
    from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
    from sklearn.utils import check_random_state
    from sklearn.utils.validation import check_is_fitted, validate_data
except ImportError as e:  # pragma: no cover - exercised only without scikit-learn
    raise ImportError("bgplvm.sklearn needs scikit-learn (>= 1.6): pip install bgplvm[sklearn] "
                      "(or pip install scikit-learn)") from e

from .dynamical import DynamicalGPLVM, check_times
from .gplvm import BayesianGPLVM

__all__ = ["GPLVMTransformer", "DynamicalGPLVMTransformer", "EXPECTED_FAILED_CHECKS",
           "DYNAMICAL_EXPECTED_FAILED_CHECKS"]

#: scikit-learn's common checks (``check_estimator``) that cannot hold for a latent-variable
#: model, by check name, with the reason: pass it as ``expected_failed_checks``.
EXPECTED_FAILED_CHECKS: dict[str, str] = {
    "check_transformer_general": (
        "fit_transform(X) returns the fitted q(X) means of the training rows, while "
        "fit(X).transform(X) infers q(x*) for each row again as a new point (the row is then "
        "in the data twice): the two differ by more than the check's atol=1e-2 on its tiny "
        "data sets. Both are the right answer to their own question."),
    "check_transformer_data_not_an_array": (
        "the same comparison of fit_transform with fit().transform() as "
        "check_transformer_general, on a list-like input"),
}

#: as ``EXPECTED_FAILED_CHECKS``, for ``DynamicalGPLVMTransformer``, whose rows are frames of
#: one sequence (coupled through the time prior) unless ``sequences`` says otherwise
DYNAMICAL_EXPECTED_FAILED_CHECKS: dict[str, str] = {
    **EXPECTED_FAILED_CHECKS,
    "check_methods_subset_invariance": (
        "transform(X) treats the rows of X as the frames of one new sequence at times "
        "0, 1, ... (no t given): q(X*) of a frame depends on its neighbours through the "
        "time prior, so a subset of the rows (another sequence) gets other latent points"),
    "check_methods_sample_order_invariance": (
        "rows are frames in time order: shuffling them makes another sequence, with other "
        "latent points"),
}


def _seed(random_state) -> int | None:
    """``random_state`` (None, an int or a RandomState) as the model's seed."""
    if random_state is None:
        return None
    if isinstance(random_state, Integral) and not isinstance(random_state, bool):
        if random_state < 0:
            raise ValueError(f"random_state must be a non-negative integer, a RandomState or None, "
                             f"got {random_state!r}")
        return int(random_state)
    return int(check_random_state(random_state).randint(np.iinfo(np.int32).max))


class _SavedModel(bytes):
    """A fitted model in a pickle: the bytes of its ``save`` file."""


class _GPLVMBase(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """What the static and the dynamical transformer share."""

    # --- scikit-learn plumbing ----------------------------------------------------------------
    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True  # NaN = a missing entry, in fit and transform
        tags.transformer_tags.preserves_dtype = ["float64"]
        tags.non_deterministic = False
        return tags

    def __getstate__(self):
        """The fitted model is pickled in its own file format (``BayesianGPLVM.save``: npz +
        JSON, which ``load`` restores exactly), not as a Python object graph: that graph
        holds caches of closures, which do not pickle, and per-thread scratch buffers, which
        a memory-mapped (read-only) unpickling, as joblib's, could not write to."""
        state = dict(super().__getstate__())  # (for classes outside sklearn: the live __dict__)
        if isinstance(state.get("model_"), BayesianGPLVM):
            buf = io.BytesIO()
            state["model_"].save(buf)
            state["model_"] = _SavedModel(buf.getvalue())
        return state

    def __setstate__(self, state):
        if isinstance(state.get("model_"), _SavedModel):
            state = dict(state, model_=BayesianGPLVM.load(io.BytesIO(bytes(state["model_"]))))
        super().__setstate__(state)

    def _validate(self, X, reset: bool) -> np.ndarray:
        X = validate_data(self, X, reset=reset, dtype=np.float64, ensure_all_finite="allow-nan",
                          ensure_min_samples=2 if reset else 1)
        return np.ascontiguousarray(X)

    def _check_params(self) -> None:
        for name in ("n_components", "num_inducing"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, Integral) or v < 1:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        for name in ("max_iters", "infer_iters"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, Integral) or v < 0:
                raise ValueError(f"{name} must be a non-negative integer, got {v!r}")

    def _set_fitted(self, model, X: np.ndarray) -> None:
        self.model_ = model
        self.num_inducing_ = model.num_inducing
        self.latent_mean_ = model.latent_mean
        self.latent_variance_ = model.latent_variance
        self.n_components_ = model.latent_dim
        self._n_features_out = model.latent_dim
        self.fit_info_ = dict(model.fit_info)
        self.n_iter_ = int(model.fit_info.get("iterations", 0))

    def _want_variance(self, return_variance) -> bool:
        return bool(self.return_variance if return_variance is None else return_variance)

    def fit_transform(self, X, y=None, **fit_params):
        """Fit to X and return the training rows' q(X) means (N, n_components), or with
        ``return_variance`` the pair (means, variances). See the module docstring for why
        this is q(X) rather than ``fit(X).transform(X)``."""
        self.fit(X, y, **fit_params)
        if self.return_variance:
            return self.latent_mean_.copy(), self.latent_variance_.copy()
        return self.latent_mean_.copy()

    def inverse_transform(self, X, X_var=None, return_variance: bool = False):
        """Predictive mean (n, n_features) of the outputs at latent points X
        (n, n_components) (``BayesianGPLVM.predict``); ``X_var``: variances of Gaussian latent
        points N(X, diag X_var), e.g. ``transform``'s. With ``return_variance`` the pair
        (mean, variance), the variance including the noise."""
        check_is_fitted(self)
        Z = np.asarray(X, dtype=np.float64)
        if Z.ndim == 1:
            Z = Z[:, None] if self.n_components_ == 1 else Z[None, :]
        if Z.ndim != 2 or Z.shape[1] != self.n_components_:
            raise ValueError(f"X must have shape (n, {self.n_components_}) (n_components latent "
                             f"dimensions), got {np.shape(X)}")
        mean, var = self.model_.predict(Z, X_var)
        return (mean, var) if return_variance else mean


class GPLVMTransformer(_GPLVMBase):
    """The Bayesian GP-LVM as a scikit-learn transformer (``bgplvm.BayesianGPLVM``).

    Parameters
    ----------
    n_components : int
        Latent dimensions Q (the model's ``latent_dim``; ARD switches unneeded ones off,
        see ``ard_weights_``).
    num_inducing : int
        Inducing inputs M, capped at the number of training rows (``num_inducing_`` holds
        the number used).
    kernel : str or Kernel
        A kernel name ("rbf", "linear", "rbf+bias+white", ...) or a ``bgplvm`` Kernel.
    max_iters : int
        L-BFGS iterations of ``fit`` (the model's default is 3000; 1000 is enough for small
        data sets).
    infer_iters : int
        Iterations of the per-row optimisation of q(x*) in ``transform`` and
        ``score_samples`` (``infer_latent``'s ``max_iters``).
    n_init : int
        Training rows whose q(x_n) are tried as starts of each q(x*) (``infer_latent``).
    random_state : int, RandomState or None
        Seed of the initialisation.
    return_variance : bool
        ``transform`` and ``fit_transform`` return (means, variances) rather than the means
        alone (per call: ``transform(X, return_variance=True)``).

    Attributes
    ----------
    model_ : BayesianGPLVM
        The fitted model.
    latent_mean_ : ndarray of shape (N, n_components)
        The means of q(X) of the training rows.
    latent_variance_ : ndarray of shape (N, n_components)
        Their variances.
    n_components_ : int
        The latent dimensions used.
    num_inducing_ : int
        The inducing inputs used.
    n_features_in_ : int
        Columns seen by ``fit`` (and ``feature_names_in_`` when they had names).
    ard_weights_ : ndarray of shape (n_components,)
        The ARD weights.
    noise_variance_ : float
        The fitted noise variance.
    fit_info_ : dict
        The model's ``fit_info``.
    n_iter_ : int
        Iterations of the fit.
    """

    def __init__(self, n_components: int = 2, num_inducing: int = 20, kernel="rbf", max_iters: int = 1000,
                 infer_iters: int = 200, n_init: int = 1, random_state=0, return_variance: bool = False):
        self.n_components = n_components
        self.num_inducing = num_inducing
        self.kernel = kernel
        self.max_iters = max_iters
        self.infer_iters = infer_iters
        self.n_init = n_init
        self.random_state = random_state
        self.return_variance = return_variance

    def fit(self, X, y=None):
        """Fit a ``BayesianGPLVM`` to the rows of X (n_samples, n_features); NaN = missing.
        ``y`` is ignored (unsupervised)."""
        self._check_params()
        X = self._validate(X, reset=True)
        model = BayesianGPLVM(X, latent_dim=int(self.n_components),
                              num_inducing=min(int(self.num_inducing), X.shape[0]),
                              kernel=self.kernel, seed=_seed(self.random_state))
        model.fit(max_iters=int(self.max_iters), progress=False)
        self._set_fitted(model, X)
        self.ard_weights_ = model.ard_weights if model.kernel.ard_weights is not None else None
        self.noise_variance_ = model.noise_variance
        return self

    def _infer(self, X):
        """The ``LatentFit`` of the rows of X that observe something, and their indices."""
        check_is_fitted(self)
        X = self._validate(X, reset=False)
        seen = ~np.isnan(X).all(axis=1)
        rows = np.flatnonzero(seen)
        fit = self.model_.infer_latent(X[rows], n_init=self.n_init, max_iters=self.infer_iters,
                                       return_fit=True) if rows.size else None
        return X.shape[0], rows, fit

    def transform(self, X, return_variance: bool | None = None):
        """Means (n, n_components) of q(x*) for new rows X (NaN = missing entries), every
        row inferred on its own with the model fixed (``BayesianGPLVM.infer_latent``); with
        ``return_variance`` (default: the constructor's) the pair (means, variances). A row
        with nothing observed gets the prior, mean 0 and variance 1."""
        n, rows, fit = self._infer(X)
        mu = np.zeros((n, self.n_components_))
        S = np.ones((n, self.n_components_))
        if fit is not None:
            mu[rows], S[rows] = fit.mu, fit.S
        return (mu, S) if self._want_variance(return_variance) else mu

    def score_samples(self, X) -> np.ndarray:
        """(n,) the bound on log p(x*_O | X_train) of every row over its observed entries O
        (``BayesianGPLVM.log_density``); 0 for a row with nothing observed."""
        n, rows, fit = self._infer(X)
        out = np.zeros(n)
        if fit is not None:
            out[rows] = fit.log_density
        return out

    def score(self, X, y=None) -> float:
        """Mean over the rows of ``score_samples(X)``: the average log density of a row
        (higher is better; ``GridSearchCV``'s default criterion). ``y`` is ignored."""
        return float(np.mean(self.score_samples(X)))


class DynamicalGPLVMTransformer(_GPLVMBase):
    """The dynamical GP-LVM (``bgplvm.DynamicalGPLVM``, a temporal GP prior on the latent
    points) as a scikit-learn transformer. The rows of X are frames; their time stamps and
    sequence ids are fit parameters: ``fit(X, t=t, sequences=ids)`` (in a ``Pipeline``,
    ``pipe.fit(X, <step>__t=t)``). Without ``t`` the frames are taken at times 0, 1, 2, ...

    ``transform(X, t=None, sequences=None)`` infers q(X*) of new frames as new sequences
    (each id in ``sequences`` one; default: all rows one sequence at times 0, 1, ...),
    jointly within a sequence (``DynamicalGPLVM.infer_sequence``). ``score(X, t, sequences)``
    is the bound on log p(X* | X_train) of the new sequences divided by the number of frames;
    there is no per-row ``score_samples`` (frames of a sequence are not independent).

    Parameters as ``GPLVMTransformer``'s, and ``time_kernel`` ("matern32", "rbf", sums such
    as "rbf+white+bias", ..., see ``DynamicalGPLVM``). ``n_init`` does not apply.
    """

    def __init__(self, n_components: int = 2, num_inducing: int = 20, kernel="rbf", time_kernel="matern32",
                 max_iters: int = 1000, infer_iters: int = 200, random_state=0, return_variance: bool = False):
        self.n_components = n_components
        self.num_inducing = num_inducing
        self.kernel = kernel
        self.time_kernel = time_kernel
        self.max_iters = max_iters
        self.infer_iters = infer_iters
        self.random_state = random_state
        self.return_variance = return_variance

    def fit(self, X, y=None, t=None, sequences=None):
        """Fit a ``DynamicalGPLVM`` to the frames X (n_samples, n_features) at times ``t``
        (n_samples,; default 0, 1, ...) of the sequences ``sequences`` (n_samples ids; default
        one sequence). Within a sequence the rows must be in time order. ``y`` is ignored."""
        self._check_params()
        X = self._validate(X, reset=True)
        t = np.arange(X.shape[0], dtype=np.float64) if t is None else t
        model = DynamicalGPLVM(X, t, latent_dim=int(self.n_components),
                               num_inducing=min(int(self.num_inducing), X.shape[0]), kernel=self.kernel,
                               time_kernel=self.time_kernel, sequences=sequences,
                               seed=_seed(self.random_state))
        model.fit(max_iters=int(self.max_iters), progress=False)
        self._set_fitted(model, X)
        self.ard_weights_ = model.ard_weights if model.kernel.ard_weights is not None else None
        self.noise_variance_ = model.noise_variance
        return self

    def _sequences(self, X, t, sequences):
        """[(row indices, SequenceFit)] of the new sequences in X."""
        from .sequence_inference import infer_sequence
        from .testbound import check_test_outputs

        check_is_fitted(self)
        X = self._validate(X, reset=False)
        n = X.shape[0]
        t = np.arange(n, dtype=np.float64) if t is None else t
        t, ids = check_times(t, n, sequences, name="t", rows="X")
        Ys, observed = check_test_outputs(X, self.n_features_in_, name="X", allow_empty_rows=True)
        out = []
        for s in np.unique(ids):
            rows = np.flatnonzero(ids == s)
            if not observed[rows].any():  # nothing seen in the whole sequence: its prior
                out.append((rows, None, t[rows]))
                continue
            fit = infer_sequence(self.model_, Ys[rows], observed[rows], t[rows], None, self.infer_iters)
            out.append((rows, fit, t[rows]))
        return n, out

    def transform(self, X, t=None, sequences=None, return_variance: bool | None = None):
        """Means (n, n_components) of q(X*) of new frames X (NaN = missing) at times ``t``
        (default 0, 1, ...), each id of ``sequences`` a new sequence (default: one); with
        ``return_variance`` the pair (means, variances)."""
        n, seqs = self._sequences(X, t, sequences)
        mu, S = np.empty((n, self.n_components_)), np.empty((n, self.n_components_))
        for rows, fit, ts in seqs:
            if fit is None:
                mu[rows], S[rows] = self.model_.latent_at(ts, None)
            else:
                mu[rows], S[rows] = fit.mu, fit.S
        return (mu, S) if self._want_variance(return_variance) else mu

    def score(self, X, y=None, t=None, sequences=None) -> float:
        """The bound on log p(X* | X_train) of the new sequences in X (as ``transform``
        takes them), summed over the sequences and divided by the number of rows."""
        n, seqs = self._sequences(X, t, sequences)
        return float(sum(fit.gain - fit.kl for _, fit, _ in seqs if fit is not None) / n)
