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
   meanFstar / covFstar plus the noise (the ``reconstruct`` path).
   ``groups`` (one label per training row: the sequence, the trial, the stretch of a
   video) makes the folds of whole groups and leaves *every* row of a fold's groups out
   of its statistics, as a new trial is predicted with none of its frames in q(u). On
   CMU 35 (Q = 9, M = 50, 1000 iterations; the legs of test trial 35_29 from the rest of
   the body) folds of the 31 training trials gave 93.5 % for a nominal 95 %, row folds
   92.4 % (without the row factor of step 3; with it, 94.2 % both).
   ``path="impute"``
   calibrates the other path, a training row's missing entries: the fold's rows stay in
   the statistics without their held entries (as a row's missing entries are absent from
   the fitted q(u)), and each loses the model's own fraction of missing entries (``hide``
   None). On oil with 10 / 30 / 50 % of the readings missing, the imputed entries' 95 %
   intervals held 92.5 / 90.3 / 87.6 % as fitted, 94.8 / 94.7 / 96.0 % calibrated so;
   scales from the reconstruct path (hide 0.1) gave 95.0 / 98.3 / 97.5 %: a row re-inferred
   without itself in q(u) is less sure than the jointly fitted q(x_n) it is imputed at.
3. Rows that fit the model worse than the training rows get wider intervals (``adaptive``,
   the default; normalised split-conformal scores). A row's kept entries say how well it
   fits: r_n^2 = (sum_kept z^2 + K c) / ((n_kept + K) c), z the kept entries' normalised
   residuals at q(x*), c their mean over the calibration's rows (``row_misfit``) and
   K = ``ROW_PRIOR`` pseudo-entries that pull a row with few kept entries to r = 1. The
   held-out residuals are divided by r_n before step 4, and a prediction's sd multiplied by
   its row's r (``row_factor``: ``reconstruct`` from the row's observed entries, ``impute``
   from the training row's). Frey frames 300-399, after the 300 training frames, fit worse
   (median r 1.8): their 95 % intervals held 76.8 % calibrated without it, 94.0 % with it,
   while the frames held out within the training window went from 95.6 % to 96.6 %. Half
   an oil test row (6 readings, Q = 10) is fitted nearly exactly: 95.2 % without, 95.0 %
   with it; oil's imputed readings (10 / 30 / 50 % missing): 94.7 / 92.6 / 94.5 % without,
   94.9 / 93.8 / 95.1 % with it.
4. Each output's predictive sd is then multiplied by a scale s_d:

   - ``method="quantile"`` (default; split-conformal): s = q / z_level, q the
     ceil((n + 1) level) / n empirical quantile of the normalised residuals ``|y - m| / sd``,
     so that a nominal ``level`` interval holds ``level`` of held-out entries;
   - ``method="variance"``: s^2 = mean((y - m)^2 / var) (the NLPD-optimal scale of a
     Gaussian, too wide at 95 % when the residuals have heavy tails).

   Per output where an output has at least ``MIN_PER_OUTPUT`` held-out entries, elsewhere
   the scale of all of them pooled.
5. The scales kept are learned on all held-out entries. What they do is reported by
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
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field

import numpy as np
from scipy.special import ndtri

from .metrics import gaussian_scores

#: fewest held-out entries a calibration accepts
MIN_ENTRIES = 50
#: held-out entries each output needs for a scale of its own (else one scale for all) ...
MIN_PER_OUTPUT = 100
#: ... from this many independent units (rows; a dynamical model's stretches of frames). Frey
#: forecasts (560 pixels, two held-out stretches of 100 frames): per-pixel scales held 89.7 %
#: of frames 300-399 at 95 %, one pooled scale 92.4 %
MIN_UNITS_PER_OUTPUT = 10
METHODS = ("quantile", "variance")
#: the predictions a calibration is made for: new rows, or the training rows' missing entries
PATHS = ("reconstruct", "impute")
#: pseudo-entries at the calibration's typical misfit in a row's factor (module docstring, step 3)
ROW_PRIOR = 10.0


def fingerprint(a: np.ndarray) -> str:
    """sha256 of an array's shape and float64 bytes (NaN included)."""
    a = np.ascontiguousarray(a, dtype=np.float64)
    return fingerprint_parts(a.shape, [a])


def fingerprint_parts(shape: tuple, parts) -> str:
    """``fingerprint`` of the array of ``shape`` whose consecutive rows are the arrays
    ``parts`` (an iterable: a distributed model's rows, streamed from the workers)."""
    h = hashlib.sha256(json.dumps([int(n) for n in shape]).encode())
    for a in parts:
        h.update(np.ascontiguousarray(a, dtype=np.float64).tobytes())
    return h.hexdigest()


class ScaleRecord:
    """The model-file form of a calibration dataclass: its ``scale`` array and the rest as
    JSON metadata (``Calibration``, ``forecast_calibration.ForecastCalibration``)."""

    def meta(self) -> dict:
        """Everything but ``scale``, as JSON-ready values (the model file's metadata)."""
        d = asdict(self)
        d.pop("scale")
        return d

    @classmethod
    def from_file(cls, meta: dict, scale: np.ndarray):
        return cls(scale=np.asarray(scale, dtype=np.float64), **meta)


@dataclass(frozen=True)
class Calibration(ScaleRecord):
    """Per-output scales of the predictive sd (module docstring) and how they were measured.

    scale : (D,) sd multipliers;  level, method : what was matched;  per_output : one scale
    per output (else one shared);  n_rows, n_entries : held-out rows and entries (both halves)
    before, after : ``Scores.as_dict()`` of all held-out entries, uncalibrated and
    calibrated by cross-fitting (each half with the scales learned on the other)
    tuned : their scores with the scales kept (learned on all of them)
    n_groups : the folds were made of whole groups of rows (``groups``), 0: of rows
    row_misfit : c of the row factor (step 3), NaN without one (``adaptive=False``)
    stretches, horizon : a dynamical model's held-out stretches and their frames (0: sequences)
    unit_coverage : [min, median, max] of the held-out stretches' own coverage at ``level``
    (cross-fitted): how much one sequence's coverage varies about the whole
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
    n_groups: int = 0  # the folds were made of this many groups of rows (``groups``), 0: of rows
    stretches: int = 0  # a dynamical model's held-out stretches of frames (``calibration_sequences``)
    horizon: int = 0  # frames per held-out stretch (dynamical; 0: whole sequences)
    row_misfit: float = math.nan  # c of step 3: mean squared normalised residual of kept entries; NaN: no row factor
    unit_coverage: list = field(default_factory=list)  # [min, median, max] over held-out stretches (dynamical)
    before: dict = field(default_factory=dict)
    after: dict = field(default_factory=dict)
    tuned: dict = field(default_factory=dict)
    model_rmse: float = math.nan
    knn_rmse: float = math.nan
    knn_k: int = 0
    data: str = ""
    params: str = ""

    @property
    def adaptive(self) -> bool:
        """Predictions are widened by their row's misfit (``row_factor``)."""
        return bool(np.isfinite(self.row_misfit) and self.row_misfit > 0)

    def row_factor(self, mean: np.ndarray, var: np.ndarray, Y: np.ndarray, visible: np.ndarray) -> np.ndarray:
        """(n,) r_n of step 3 from the entries ``visible`` (n, D) of rows Y (n, D), predicted
        with ``mean`` and uncalibrated ``var`` (n, D); ones without a row factor."""
        return row_factor(mean, var, Y, visible, self.row_misfit)

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
        scales += ", x each row's misfit" if self.adaptive else ""
        scales += f", folds of {self.n_groups} groups" if self.n_groups else ""
        if self.stretches:
            scales += f", {self.stretches} held-out " + (f"stretches of {self.horizon} frames" if self.horizon
                                                          else "sequences")
        spread = ""
        if self.unit_coverage:
            lo, _, hi = self.unit_coverage
            spread = f"; {100 * lo:.0f}-{100 * hi:.0f} % within one stretch"
        return (f"calibrated ({self.method}, {scales}): a nominal {100 * self.level:g} % interval held "
                f"{100 * b:.1f} % -> {100 * a:.1f} % of {self.after['n']} held-out entries (cross-fitted{spread})")

    def baseline_warning(self) -> str | None:
        """The warning ``impute`` / ``reconstruct`` give when k-NN did better, else None."""
        if not self.knn_better:  # NaN (no k-NN: a forecast sees no entries of its frames) included
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


def held_out_predictions(m, rows: np.ndarray, held: np.ndarray, fold_of: np.ndarray, hide: float,
                         seed: int = 0, path: str = "reconstruct", out_of_fold: np.ndarray | None = None):
    """Mean and variance (len(rows), D) of the rows' entries, each fold's rows inferred from
    their kept entries (``~held`` and observed) with q(u) from the other rows only (module
    docstring, step 2; ``path="impute"``: from every row but the held entries, as a training
    row's missing entries are predicted), variances with the noise, no calibration; and the
    k-NN baseline's mean, its neighbours among the same rows (never the row itself).
    fold_of : (len(rows),) each row's fold;  out_of_fold : (N,) the fold whose statistics
    leave each training row out as well (its groups'), -1 for none (default: only ``rows``).
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
    for f in np.unique(fold_of):
        idx = np.flatnonzero(fold_of == f)
        keep = np.ones(N, dtype=bool)
        keep[rows[idx]] = path == "impute"
        if out_of_fold is not None and path != "impute":
            keep &= out_of_fold != f
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


def posteriors_without(m, left_out: np.ndarray) -> list:
    """q(u) ([(columns, Posterior)], as ``BayesianGPLVM._posteriors``) from the training
    rows not ``left_out`` (N,), the kernel, inducing inputs, noise and their q(x_n) fixed
    (missing entries, if any, left out as in the fit)."""
    from .bound import posterior_from_stats
    from .training_stats import TrainingStats

    keep = ~np.asarray(left_out, dtype=bool)
    observed = m.Y_observed[keep] if m.missing_fraction > 0 else None
    st = TrainingStats.from_arrays(m.kernel, m.inducing_inputs, m.latent_mean[keep], m.latent_variance[keep],
                                   m.noise_variance, np.nan_to_num(m.Y[keep]), m.Y_mean, observed=observed)
    return _posteriors(st, posterior_from_stats)


@contextmanager
def rows_left_out(m, left_out: np.ndarray):
    """Within the block, model ``m`` predicts with q(u) from the training rows not
    ``left_out`` (``posteriors_without``); its own q(u) is back afterwards."""
    saved = m._cache.get("posteriors")
    m._cache["posteriors"] = posteriors_without(m, left_out)
    try:
        yield m
    finally:
        m._cache.pop("posteriors", None)
        if saved is not None:
            m._cache["posteriors"] = saved


def fit_scale(z: np.ndarray, held: np.ndarray, level: float, method: str, per_output: bool | None,
              unit: np.ndarray | None = None) -> np.ndarray:
    """(D,) sd scales from normalised residuals z (n, D), used where ``held`` (step 4):
    one for all outputs (``per_output`` False), or each output's own where it has
    ``MIN_PER_OUTPUT`` held entries from ``MIN_UNITS_PER_OUTPUT`` independent units or more
    (None; ``unit`` (n,) labels the rows' units, e.g. stretches of frames, whose entries are
    correlated; None: each row its own) or any (True), the pooled one elsewhere."""
    def one(v):
        if method == "variance":
            return math.sqrt(float(np.mean(v * v)))
        n = v.size
        q = np.quantile(np.abs(v), min(1.0, math.ceil((n + 1) * level) / n), method="higher")
        return float(q) / float(ndtri(0.5 + 0.5 * level))

    pooled = one(z[held])
    counts = held.sum(axis=0)
    enough = counts >= (1 if per_output else MIN_PER_OUTPUT)
    if unit is not None and per_output is None:
        enough &= np.array([np.unique(unit[held[:, d]]).size for d in range(z.shape[1])]) >= MIN_UNITS_PER_OUTPUT
    if per_output is False or not enough.any():
        return np.full(z.shape[1], pooled)
    return np.array([one(z[held[:, d], d]) if enough[d] else pooled for d in range(z.shape[1])])


def check_groups(groups, N: int, folds: int, path: str) -> np.ndarray:
    """(N,) int labels 0..G-1 of ``groups`` (one label per training row), with at least
    two groups; ValueError otherwise."""
    if path == "impute":
        raise ValueError("groups= makes folds of whole groups for path='reconstruct' (new sequences); the impute "
                         "path keeps every row in q(u), so groups would change nothing")
    g = np.asarray(groups)
    if g.shape != (N,):
        raise ValueError(f"groups must give one label per training row ({N}), got shape {g.shape}")
    _, labels = np.unique(g, return_inverse=True)
    if labels.max() < 1:
        raise ValueError("groups has a single group: the folds need at least two groups (one predicted from the "
                         "others); pass sequences, trials or stretches of rows")
    return labels.reshape(N)


def _folds(chosen: np.ndarray, folds: int, labels: np.ndarray | None, rng):
    """(len(chosen),) the fold of each held-out row, and (N,) the fold whose statistics
    leave each training row out (None without groups: only the held-out rows)."""
    if labels is None:
        return np.arange(chosen.size) % folds, None
    fold_of_group = np.empty(labels.max() + 1, dtype=np.int64)
    fold_of_group[rng.permutation(labels.max() + 1)] = np.arange(labels.max() + 1) % folds
    return fold_of_group[labels[chosen]], fold_of_group[labels]


def check_method_level(method: str, level: float) -> None:
    """ValueError unless ``method`` is one of ``METHODS`` and 0 < ``level`` < 1."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")


def calibrate(m, rows: int = 1000, hide=None, folds: int = 5, level: float = 0.95,
              method: str = "quantile", per_output: bool | None = None, seed: int = 0,
              path: str = "reconstruct", groups=None, adaptive: bool = True) -> Calibration:
    """A ``Calibration`` of model ``m`` (module docstring): see ``BayesianGPLVM.calibrate``."""
    if path not in PATHS:
        raise ValueError(f"path must be one of {PATHS} (the predictions to calibrate), got {path!r}")
    if path == "impute" and not m.missing_fraction > 0:
        raise ValueError("path='impute' calibrates the predictions of missing training entries, and this model's "
                         "training data miss none")
    if hide is None:
        hide = min(0.5, max(float(m.missing_fraction), 0.05)) if path == "impute" else 0.5
    check_method_level(method, level)
    hide = check_hide(hide, m.Y.shape[1])
    folds = int(folds)
    if folds < 2:
        raise ValueError(f"folds must be at least 2 (a fold's rows are predicted from the others), got {folds}")
    Y, observed = m.Y, m.Y_observed
    labels = None if groups is None else check_groups(groups, Y.shape[0], folds, path)
    candidates = _candidates(observed, hide)
    rng = np.random.default_rng(seed)
    chosen = rng.permutation(candidates)[:int(rows)]
    held = _hide(observed, chosen, hide, rng)
    fold_of, out_of_fold = _folds(chosen, folds, labels, rng)
    n_entries = int(held.sum())
    if n_entries < MIN_ENTRIES or chosen.size < 2 * folds:
        raise ValueError(f"calibration needs at least {MIN_ENTRIES} held-out entries on {2 * folds} rows or more; "
                         f"these settings hide {n_entries} entries on {chosen.size} rows ({candidates.size} rows "
                         "can lose entries and keep one): raise rows= or hide=, or calibrate on more data")
    knn_hide = hide if isinstance(hide, float) else float(held.sum() / max(1, observed[chosen].sum()))
    mean, var, k_mean, knn_k = held_out_predictions(m, chosen, held, fold_of, knn_hide, seed, path, out_of_fold)
    out = HeldOut(mean=mean, var=var, truth=Y[chosen], held=held, kept=observed[chosen] & ~held,
                  knn_mean=k_mean, knn_k=knn_k)
    return summarise(m, out, rng, level=level, method=method, per_output=per_output, adaptive=adaptive,
                     hide=hide, folds=int(np.unique(fold_of).size), seed=int(seed), path=path,
                     n_groups=0 if labels is None else int(labels.max() + 1))


@dataclass
class HeldOut:
    """Held-out predictions, uncalibrated: mean, var (with the noise), truth, and the
    entries held out (scored) and kept (seen by the prediction), all (n, D); the k-NN
    baseline's mean (n, D) or None where it has nothing to go on; unit (n,) the
    independent pieces (rows, or stretches of frames) that cross-fitting splits in two
    (None: rows)."""

    mean: np.ndarray
    var: np.ndarray
    truth: np.ndarray
    held: np.ndarray
    kept: np.ndarray
    knn_mean: np.ndarray | None = None
    knn_k: int = 0
    unit: np.ndarray | None = None


def summarise(m, ho: HeldOut, rng, level: float, method: str, per_output, adaptive: bool, **record) -> Calibration:
    """The ``Calibration`` of model ``m`` from its held-out predictions (module docstring,
    steps 3-5): the row factor, the scales, their cross-fitted and tuned scores and the
    point errors. ``record``: hide, folds, seed, path, n_groups."""
    mean, var, truth, held = ho.mean, ho.var, ho.truth, ho.held
    c = _misfit(mean, var, truth, ho.kept) if adaptive else math.nan
    r = row_factor(mean, var, truth, ho.kept, c)
    var_r = var * (r * r)[:, None]  # the row factor is part of the calibrated prediction
    z = np.where(held, (truth - mean) / np.sqrt(var_r), 0.0)
    unit = np.arange(mean.shape[0]) if ho.unit is None else np.unique(ho.unit, return_inverse=True)[1].ravel()
    n_units = int(unit.max()) + 1
    half = np.zeros(n_units, dtype=bool)
    half[rng.permutation(n_units)[:n_units // 2]] = True
    half = half[unit]
    fit = lambda mask: _usable(fit_scale(z, mask, level, method, per_output, ho.unit))  # noqa: E731
    scale = fit(held)
    crossed = np.where(half[:, None], fit(held & ~half[:, None]) ** 2, fit(held & half[:, None]) ** 2)
    s2 = scale[None, :] ** 2
    err = lambda p: float(np.sqrt(np.mean((p[held] - truth[held]) ** 2)))  # noqa: E731
    spread = [] if ho.unit is None else _unit_coverage(np.abs(z) / np.sqrt(crossed), held, unit, level)
    return Calibration(
        scale=scale, level=float(level), method=method, per_output=bool(np.unique(scale).size > 1),
        n_rows=int(mean.shape[0]), n_entries=int(held.sum()), row_misfit=c, unit_coverage=spread, **record,
        before=gaussian_scores(mean, var, truth, mask=held).as_dict(),
        after=gaussian_scores(mean, var_r * crossed, truth, mask=held).as_dict(),
        tuned=gaussian_scores(mean, var_r * s2, truth, mask=held).as_dict(),
        model_rmse=err(mean), knn_rmse=math.nan if ho.knn_mean is None else err(ho.knn_mean), knn_k=ho.knn_k,
        data=fingerprint(m.Y), params=fingerprint(m._x))


def row_factor(mean, var, Y, visible, c: float) -> np.ndarray:
    """(n,) sqrt((sum_visible z^2 + K c) / ((n_visible + K) c)), z = (Y - mean) / sqrt(var)
    (module docstring, step 3); ones when c is NaN or not positive."""
    if not (np.isfinite(c) and c > 0):
        return np.ones(Y.shape[0])
    z2 = np.where(visible, (np.where(visible, Y, 0.0) - mean) ** 2 / var, 0.0)
    return np.sqrt((z2.sum(axis=1) + ROW_PRIOR * c) / ((visible.sum(axis=1) + ROW_PRIOR) * c))


def _unit_coverage(z: np.ndarray, held: np.ndarray, unit: np.ndarray, level: float) -> list:
    """[min, median, max] over units of the fraction of their held entries with |z| inside
    the central ``level`` interval."""
    inside = np.abs(z) <= float(ndtri(0.5 + 0.5 * level))
    cov = [float(inside[unit == u][held[unit == u]].mean()) for u in np.unique(unit) if held[unit == u].any()]
    return [float(np.min(cov)), float(np.median(cov)), float(np.max(cov))]


def _misfit(mean, var, Y, kept) -> float:
    """c of step 3: the mean squared normalised residual of the ``kept`` entries (NaN if none)."""
    if not kept.any():
        return math.nan
    return float(np.mean((Y[kept] - mean[kept]) ** 2 / var[kept]))


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
    kind = "sequences" if cal.stretches else "rows"
    if kind != getattr(m, "_calibration_kind", "rows"):
        made = "held-out stretches of a dynamical model's frames" if cal.stretches else "held-out rows of a static model"
        raise ValueError(f"this calibration was made on {made}, and {type(m).__name__} predicts otherwise: call "
                         "calibrate() on this model")
    D, data = m._data_record()
    if cal.scale.shape != (D,) or cal.data != data:
        raise ValueError("this calibration was made on other data than this model's (its record of the training "
                         "outputs differs): call calibrate() on this model")
    return cal


def active_scale(m) -> np.ndarray | None:
    """(D,) the calibration's sd scales if it was made at the model's current parameters;
    else None, with a warning (the model was fitted or changed since)."""
    cal = m._calibration
    if cal.params == m._params_fingerprint():
        return cal.scale
    import warnings

    warnings.warn("the model's calibration was made at other parameters (it was fitted or changed since): "
                  "intervals are not calibrated; call calibrate() again", stacklevel=5)
    return None


def apply_calibration(var: np.ndarray, active, rows=None) -> np.ndarray:
    """``var`` (n, D) scaled by ``active`` = (scale (D,), its ``Calibration``) from
    ``Calibrated._active_calibration`` (None: unchanged): by scale^2 per output and, given
    ``rows`` = (mean, Y, visible) of the predicted rows, by each row's squared
    ``Calibration.row_factor`` (``var`` is then the uncalibrated variance of every entry,
    visible ones included). A plain function, so that a distributed model's workers apply
    it to the new rows they predict exactly as the model does in process."""
    if active is None:
        return var
    scale, cal = active
    if rows is not None:
        r = cal.row_factor(rows[0], var, rows[1], rows[2])
        scale = scale[None, :] * r[:, None]
    return var * scale ** 2


class Calibrated:
    """The calibration of a model's predictive variances, the same contract in process
    (``BayesianGPLVM``) and on Dask (``bgplvm.distributed``): the ``calibration`` property
    (checked by ``check_calibration`` when set), and the scaling its predictions apply
    (``_calibrated``). A model supplies ``_data_record`` and ``_params_fingerprint`` (here:
    from ``Y`` and the parameter vector ``_x``, memoised in ``_cache``, which is cleared
    when the parameters change)."""

    #: the model's ``Calibration`` (``calibrate``), or None
    _calibration = None
    #: why ``calibrate`` does not apply to a subclass (its held-out rows would not be
    #: predicted as its new data are), or "" where it does
    _not_calibrated_because = ""

    @property
    def calibration(self):
        """The ``Calibration`` in use (``calibrate``), or None."""
        return self._calibration

    @calibration.setter
    def calibration(self, cal) -> None:
        if cal is not None and self._not_calibrated_because:
            raise TypeError(f"{type(self).__name__} takes no calibration: {self._not_calibrated_because}")
        self._calibration = None if cal is None else self._check_calibration(cal)

    def _check_calibration(self, cal):
        """``cal`` if it was made on this model's data (``check_calibration``), else an error."""
        return check_calibration(self, cal)

    def _data_record(self) -> tuple[int, str]:
        """(D, ``fingerprint`` of the training outputs Y): what a calibration must match."""
        return self.Y.shape[1], fingerprint(self.Y)

    def _params_fingerprint(self) -> str:
        """``fingerprint`` of the parameter vector (a calibration is active at the one it was made at)."""
        if "params_fingerprint" not in self._cache:  # the cache is cleared when the parameters change
            self._cache["params_fingerprint"] = fingerprint(self._x)
        return self._cache["params_fingerprint"]

    def _active_calibration(self, calibrated: bool = True):
        """(scale (D,), ``Calibration``) to apply, if there is a calibration, ``calibrated``
        and it was made at the current parameters (``active_scale``; else a warning); None
        otherwise."""
        if not calibrated or self._calibration is None:
            return None
        scale = active_scale(self)
        return None if scale is None else (scale, self._calibration)

    def _calibrated(self, var: np.ndarray, calibrated: bool = True, rows=None) -> np.ndarray:
        """``var`` (n, D) scaled by the calibration's squared sd factors, if one is active
        and ``calibrated`` (``_active_calibration``). ``rows``: (mean, Y, visible) of the
        predicted rows, for the row factor of an adaptive calibration (``var`` is then the
        uncalibrated variance of every entry, visible ones included; ``apply_calibration``)."""
        return apply_calibration(var, self._active_calibration(calibrated), rows)

    def _baseline_warning(self) -> None:
        """Warn when the calibration found k-NN better at point predictions of this data."""
        text = None if self._calibration is None else self._calibration.baseline_warning()
        if text is not None:
            import warnings

            warnings.warn(text, stacklevel=3)
