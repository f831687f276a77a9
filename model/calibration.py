"""Calibrated predictive intervals without new data: ``BayesianGPLVM.calibrate``.

A predictive variance is a claim that held-out truth can check (``metrics``). Where the
model's claim is off (half an oil row fits more than one place in the latent space, and a
unimodal q(x*) is sure of one of them: 59 % of a nominal 95 % interval), the model can still
be measured on the data it was fitted to, exactly as a new row would be predicted:

1. ``rows`` training rows (at random, seed ``seed``) each lose a fraction ``hide`` of their
   observed entries (at least one kept), or their entries in the columns ``hide`` (a list
   of columns or a (D,) mask: the outputs the predictions will miss, e.g. a body part).
2. The rows are split into ``folds``; for each fold the training statistics of q(u) are
   recomputed *without that fold's rows* (``TrainingStats.from_arrays`` on the others, the
   kernel, inducing inputs, noise and the other rows' q(x_n) fixed), so that a held-out
   entry never informs its own prediction; q(x*) of each row is inferred from its kept
   entries (``testbound.infer_latent``, eq:predictive1) and the hidden ones are predicted by
   meanFstar / covFstar plus the noise (the ``reconstruct`` path). ``path="impute"``
   calibrates the other path, a training row's missing entries: the fold's rows stay in
   the statistics without their held entries (as a row's missing entries are absent from
   the fitted q(u)), and each loses the model's own fraction of missing entries (``hide``
   None). On oil with 10 / 30 / 50 % of the readings missing, the imputed entries' 95 %
   intervals held 92.5 / 90.3 / 87.6 % as fitted, 94.8 / 94.7 / 96.0 % calibrated so;
   scales from the reconstruct path (hide 0.1) gave 95.0 / 98.3 / 97.5 %: a row re-inferred
   without itself in q(u) is less sure than the jointly fitted q(x_n) it is imputed at.
3. Each output's predictive sd is then multiplied by a scale s_d:
   - ``method="quantile"`` (default; split-conformal): s = q / z_level, q the
     ceil((n + 1) level) / n empirical quantile of the normalised residuals |y - m| / sd,
     so that a nominal ``level`` interval holds ``level`` of held-out entries;
   - ``method="variance"``: s^2 = mean((y - m)^2 / var) (the NLPD-optimal scale of a
     Gaussian, too wide at 95 % when the residuals have heavy tails).
   Per output where an output has at least ``MIN_PER_OUTPUT`` held-out entries, elsewhere
   the scale of all of them pooled.
4. The scales kept are learned on all held-out entries. What they do is reported by
   cross-fitting: the held-out rows are split in two, the scales learned on each half
   and applied to the other, so every entry's calibrated interval in ``after`` comes
   from scales that did not see it. (Learned on one half only, the per-output 95 %
   quantiles rested on ~100 entries each and varied by +-2 % of coverage from draw to
   draw.)

The same held-out entries are predicted by the k-NN baseline (``baselines.KNNBaseline``,
its k chosen by cross-validation), so that ``impute`` and ``reconstruct`` can say when the
simple baseline predicts this data better.

A ``Calibration`` records the data (a hash of Y and its shape) and the parameters (a hash of
the parameter vector) it was made on: it is refused on a model of other data, and a model
fitted further ignores it with a warning until calibrated again.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, field

import numpy as np
from scipy.special import ndtri

from .metrics import gaussian_scores

#: fewest held-out entries a calibration accepts
MIN_ENTRIES = 50
#: held-out entries each output needs for a scale of its own (else one scale for all)
MIN_PER_OUTPUT = 100
METHODS = ("quantile", "variance")
#: the predictions a calibration is made for: new rows, or the training rows' missing entries
PATHS = ("reconstruct", "impute")


def fingerprint(a: np.ndarray) -> str:
    """sha256 of an array's shape and float64 bytes (NaN included)."""
    a = np.ascontiguousarray(a, dtype=np.float64)
    h = hashlib.sha256(json.dumps(list(a.shape)).encode())
    h.update(a.tobytes())
    return h.hexdigest()


@dataclass(frozen=True)
class Calibration:
    """Per-output scales of the predictive sd (module docstring) and how they were measured.

    scale : (D,) sd multipliers;  level, method : what was matched;  per_output : one scale
    per output (else one shared);  n_rows, n_entries : held-out rows and entries (both halves)
    before, after : ``Scores.as_dict()`` of all held-out entries, uncalibrated and
    calibrated by cross-fitting (each half with the scales learned on the other)
    tuned : their scores with the scales kept (learned on all of them)
    model_rmse, knn_rmse, knn_k : point errors of the model and of k-NN on all held-out entries
    data, params : fingerprints of Y and of the parameter vector it was made on
    """

    scale: np.ndarray
    level: float
    method: str
    per_output: bool
    n_rows: int
    n_entries: int
    hide: float | list  # the fraction of a row's observed entries held out, or the columns
    folds: int
    seed: int
    path: str = "reconstruct"  # the predictions it was made for (``PATHS``)
    before: dict = field(default_factory=dict)
    after: dict = field(default_factory=dict)
    tuned: dict = field(default_factory=dict)
    model_rmse: float = math.nan
    knn_rmse: float = math.nan
    knn_k: int = 0
    data: str = ""
    params: str = ""

    def meta(self) -> dict:
        """Everything but ``scale``, as JSON-ready values (the model file's metadata)."""
        d = asdict(self)
        d.pop("scale")
        return d

    @classmethod
    def from_file(cls, meta: dict, scale: np.ndarray) -> "Calibration":
        return cls(scale=np.asarray(scale, dtype=np.float64), **meta)

    @property
    def knn_better(self) -> bool:
        """k-NN predicted the held-out entries with a smaller RMSE than the model."""
        return bool(self.knn_rmse < self.model_rmse)

    def describe(self) -> str:
        """One line: the scales and the held-out entries' coverage before -> after (cross-fitted)."""
        key = f"{self.level:g}"
        b, a = self.before["coverage"][key], self.after["coverage"][key]
        s = self.scale
        scales = f"sd x {s[0]:.3g}" if not self.per_output else f"sd x {s.min():.3g}-{s.max():.3g} per output"
        return (f"calibrated ({self.method}, {scales}): a nominal {100 * self.level:g} % interval held "
                f"{100 * b:.1f} % -> {100 * a:.1f} % of {self.after['n']} held-out entries (cross-fitted)")

    def baseline_warning(self) -> str | None:
        """The warning ``impute`` / ``reconstruct`` give when k-NN did better, else None."""
        if not self.knn_better:
            return None
        return (f"k-nearest neighbours (k = {self.knn_k}) predicted {self.n_entries} held-out entries of this "
                f"data with RMSE {self.knn_rmse:.4g}, the model with {self.model_rmse:.4g} (measured by "
                "calibrate()): for point predictions bgplvm.baselines.KNNBaseline may serve better; "
                "more inducing inputs or a longer fit may close the gap")


def check_hide(hide, D: int):
    """A fraction in (0, 1), or the (sorted) columns to hide as a list of ints."""
    if isinstance(hide, (float, int)) and not isinstance(hide, bool):
        if not 0 < hide < 1:
            raise ValueError(f"hide must be a fraction in (0, 1) or the columns to hide, got {hide!r}")
        return float(hide)
    a = np.asarray(hide)
    if a.dtype == bool:
        if a.shape != (D,):
            raise ValueError(f"hide as a mask must have one entry per output ({D}), got shape {a.shape}")
        a = np.flatnonzero(a)
    if a.ndim != 1 or a.size == 0 or not np.issubdtype(a.dtype, np.integer) or a.min() < 0 or a.max() >= D:
        raise ValueError(f"hide must be a fraction in (0, 1) or columns of the outputs (0 .. {D - 1}), got {hide!r}")
    if a.size == D:
        raise ValueError("hide names every output: a held-out row must keep some observed entries to be inferred from")
    return sorted(set(int(c) for c in a))


def _hide(observed: np.ndarray, rows: np.ndarray, hide, rng) -> np.ndarray:
    """(len(rows), D) bool: the entries each row loses: a fraction of its observed ones (at
    least one hidden and one kept), or its observed entries in the columns ``hide``."""
    from .baselines import hide_fraction

    if isinstance(hide, float):
        return hide_fraction(observed[rows], hide, rng)
    held = np.zeros((rows.size, observed.shape[1]), dtype=bool)
    held[:, hide] = observed[rows][:, hide]
    return held


def _candidates(observed: np.ndarray, hide) -> np.ndarray:
    """Rows that can lose entries to ``hide`` and keep one to be inferred from."""
    if isinstance(hide, float):
        return np.flatnonzero(observed.sum(axis=1) >= 2)
    cols = np.zeros(observed.shape[1], dtype=bool)
    cols[hide] = True
    return np.flatnonzero((observed & cols).any(axis=1) & (observed & ~cols).any(axis=1))


def held_out_predictions(m, rows: np.ndarray, held: np.ndarray, folds: int, hide: float, seed: int = 0,
                         path: str = "reconstruct"):
    """Mean and variance (len(rows), D) of the rows' entries, each fold's rows inferred from
    their kept entries (``~held`` and observed) with q(u) from the other rows only (module
    docstring, step 2; ``path="impute"``: from every row but the held entries, as a training
    row's missing entries are predicted), variances with the noise, no calibration; and the
    k-NN baseline's mean, its neighbours among the same rows (never the row itself).
    Returns (mean, var, knn_mean, knn_k)."""
    from .baselines import KNNBaseline
    from .bound import posterior_from_stats, predictive_moments
    from .testbound import infer_latent
    from .training_stats import TrainingStats

    m._sync_kernel()
    Y, observed = m.Y, m.Y_observed
    missing = m.missing_fraction > 0
    mu, S, Z = m.latent_mean, m.latent_variance, m.inducing_inputs
    N, D = Y.shape
    mean, var, knn_mean = np.empty((rows.size, D)), np.empty((rows.size, D)), np.empty((rows.size, D))
    ks = []
    fold_of = np.arange(rows.size) % folds
    for f in range(folds):
        idx = np.flatnonzero(fold_of == f)
        keep = np.ones(N, dtype=bool)
        keep[rows[idx]] = path == "impute"
        obs_keep = observed[keep] if missing else None
        if path == "impute" or (obs_keep is not None and not obs_keep.any(axis=0).all()):
            # the rows stay without their held entries (impute; or a column observed on this
            # fold's rows only)
            keep[:] = True
            obs_keep = observed & ~_full(held[idx], rows[idx], N)
        Yk = np.where(observed, Y, np.nan)[keep]
        st = TrainingStats.from_arrays(m.kernel, Z, mu[keep], S[keep], m.noise_variance, np.nan_to_num(Yk),
                                       m.Y_mean, observed=obs_keep)
        vis = observed[rows[idx]] & ~held[idx]
        Ys = np.where(vis, Y[rows[idx]], np.nan)
        fit = infer_latent(st, np.nan_to_num(Ys), vis)
        mean[idx], var[idx] = predictive_moments(st.kernel, st.Z, _posteriors(st, posterior_from_stats), D,
                                                 fit.mu, fit.S)
        knn = KNNBaseline(np.where(obs_keep, Yk, np.nan) if obs_keep is not None else Yk, hide=hide, seed=seed)
        knn_mean[idx] = knn.predict(Ys, exclude=rows[idx] if keep.all() else None)[0]
        ks.append(knn.k)
    return mean + m.Y_mean, var + m.noise_variance, knn_mean, int(np.median(ks))


def _posteriors(st, posterior_from_stats) -> list:
    """[(columns, Posterior)] of training statistics (``BayesianGPLVM._posteriors``)."""
    Kuu = st.kernel.K(st.Z)
    if st.Psi2g is None:
        return [(slice(None), posterior_from_stats(Kuu, st.Psi2, st.beta, st.E))]
    out = []
    for g in range(st.n_groups):
        cols = np.flatnonzero(st.col_group == g)
        out.append((cols, posterior_from_stats(Kuu, st.Psi2g[g], st.beta, st.E[:, cols])))
    return out


def fit_scale(z: np.ndarray, held: np.ndarray, level: float, method: str, per_output: bool | None) -> np.ndarray:
    """(D,) sd scales from normalised residuals z (n, D), used where ``held`` (step 3):
    one for all outputs (``per_output`` False), or each output's own where it has
    ``MIN_PER_OUTPUT`` held entries (None) or any (True), the pooled one elsewhere."""
    def one(v):
        if method == "variance":
            return math.sqrt(float(np.mean(v * v)))
        n = v.size
        q = np.quantile(np.abs(v), min(1.0, math.ceil((n + 1) * level) / n), method="higher")
        return float(q) / float(ndtri(0.5 + 0.5 * level))

    pooled = one(z[held])
    counts = held.sum(axis=0)
    enough = counts >= (1 if per_output else MIN_PER_OUTPUT)
    if per_output is False or not enough.any():
        return np.full(z.shape[1], pooled)
    return np.array([one(z[held[:, d], d]) if enough[d] else pooled for d in range(z.shape[1])])


def calibrate(m, rows: int = 1000, hide=None, folds: int = 5, level: float = 0.95,
              method: str = "quantile", per_output: bool | None = None, seed: int = 0,
              path: str = "reconstruct") -> Calibration:
    """A ``Calibration`` of model ``m`` (module docstring): see ``BayesianGPLVM.calibrate``."""
    if path not in PATHS:
        raise ValueError(f"path must be one of {PATHS} (the predictions to calibrate), got {path!r}")
    if path == "impute" and not m.missing_fraction > 0:
        raise ValueError("path='impute' calibrates the predictions of missing training entries, and this model's "
                         "training data miss none")
    if hide is None:
        hide = min(0.5, max(float(m.missing_fraction), 0.05)) if path == "impute" else 0.5
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    hide = check_hide(hide, m.Y.shape[1])
    folds = int(folds)
    if folds < 2:
        raise ValueError(f"folds must be at least 2 (a fold's rows are predicted from the others), got {folds}")
    Y, observed = m.Y, m.Y_observed
    candidates = _candidates(observed, hide)
    rng = np.random.default_rng(seed)
    chosen = rng.permutation(candidates)[:int(rows)]
    held = _hide(observed, chosen, hide, rng)
    n_entries = int(held.sum())
    if n_entries < MIN_ENTRIES or chosen.size < 2 * folds:
        raise ValueError(f"calibration needs at least {MIN_ENTRIES} held-out entries on {2 * folds} rows or more; "
                         f"these settings hide {n_entries} entries on {chosen.size} rows ({candidates.size} rows "
                         "can lose entries and keep one): raise rows= or hide=, or calibrate on more data")
    knn_hide = hide if isinstance(hide, float) else float(held.sum() / max(1, observed[chosen].sum()))
    mean, var, k_mean, knn_k = held_out_predictions(m, chosen, held, folds, knn_hide, seed, path)
    truth = Y[chosen]
    z = np.where(held, (truth - mean) / np.sqrt(var), 0.0)
    half = np.zeros(chosen.size, dtype=bool)
    half[rng.permutation(chosen.size)[:chosen.size // 2]] = True
    fit = lambda mask: _usable(fit_scale(z, mask, level, method, per_output))  # noqa: E731
    scale = fit(held)
    crossed = np.where(half[:, None], fit(held & ~half[:, None]) ** 2, fit(held & half[:, None]) ** 2)
    per_output = bool(np.unique(scale).size > 1)
    s2 = scale[None, :] ** 2
    err = lambda p: float(np.sqrt(np.mean((p[held] - truth[held]) ** 2)))  # noqa: E731
    return Calibration(
        scale=scale, level=float(level), method=method, per_output=per_output, n_rows=int(chosen.size),
        n_entries=n_entries, hide=hide, folds=folds, seed=int(seed), path=path,
        before=gaussian_scores(mean, var, truth, mask=held).as_dict(),
        after=gaussian_scores(mean, var * crossed, truth, mask=held).as_dict(),
        tuned=gaussian_scores(mean, var * s2, truth, mask=held).as_dict(),
        model_rmse=err(mean), knn_rmse=err(k_mean), knn_k=knn_k,
        data=fingerprint(Y), params=fingerprint(m._x))


def _usable(scale: np.ndarray) -> np.ndarray:
    """Scales that are not finite and positive (no entries to learn from) become 1."""
    return np.where(np.isfinite(scale) & (scale > 0), scale, 1.0)


def _full(held: np.ndarray, rows: np.ndarray, N: int) -> np.ndarray:
    """(N, D) bool: ``held`` (len(rows), D) placed at ``rows``."""
    out = np.zeros((N, held.shape[1]), dtype=bool)
    out[rows] = held
    return out


def check_calibration(m, cal) -> Calibration:
    """``cal`` if it was made on model ``m``'s data (and fits its outputs), else ValueError."""
    if not isinstance(cal, Calibration):
        raise TypeError(f"a calibration must be a bgplvm.calibration.Calibration (from calibrate()), got "
                        f"{type(cal).__name__}")
    if cal.scale.shape != (m.Y.shape[1],) or cal.data != fingerprint(m.Y):
        raise ValueError("this calibration was made on other data than this model's (its record of the training "
                         "outputs differs): call calibrate() on this model")
    return cal


def active_scale(m) -> np.ndarray | None:
    """(D,) the calibration's sd scales if it was made at the model's current parameters;
    else None, with a warning (the model was fitted or changed since)."""
    cal = m._calibration
    if "calibration_current" not in m._cache:  # the cache is cleared when the parameters change
        m._cache["calibration_current"] = cal.params == fingerprint(m._x)
    if m._cache["calibration_current"]:
        return cal.scale
    import warnings

    warnings.warn("the model's calibration was made at other parameters (it was fitted or changed since): "
                  "intervals are not calibrated; call calibrate() again", stacklevel=4)
    return None
