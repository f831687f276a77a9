"""Calibrated intervals for the dynamical model: ``DynamicalGPLVM.calibrate``.

The dynamical model predicts frames through the time prior, never a row alone, so its
calibration holds out *stretches of frames* and predicts each exactly as the model predicts
new frames, with the model fixed and the held-out frames out of q(u)'s statistics
(``TrainingStats.from_arrays`` on the other rows, as ``calibration`` does for rows). Two
paths (``PATHS``):

- ``"reconstruct"``: frames of a new sequence with some entries observed
  (``reconstruct(Y_star, t_star, sequence=None)``). Each fold holds out whole training
  sequences (``groups`` pools them: by default each is its own group; a model of one
  sequence is cut into stretches of ``horizon`` frames). A held-out stretch loses ``hide``
  of its observed entries (default half, or columns: a body part); q(X*) is inferred from
  the rest under the time prior of a new sequence (``sequence_inference.infer_sequence``) and
  the hidden entries are predicted with q(u) conditioned on its observed entries too
  (``conditioned_predict``, as ``reconstruct`` does).
- ``"forecast"``: frames that continue a training sequence past what is known
  (``forecast``; with some entries observed, ``reconstruct(..., sequence=s)``). For each
  sequence, forecast origins o = n_s - h, n_s - 2h, ... (up to ``folds`` of them, each with
  at least h known frames; h = ``horizon``): the frames before o are known, the h frames
  from o are held out, and they and every later frame of the sequence leave q(u)'s
  statistics. With every entry hidden (``hide`` None, the default) q(X*) is the time-prior
  conditional given the known frames' sites (eq. qxstar: their lambda and pseudo-targets
  mu + mu_bar / lambda; with every frame known this is ``latent_at`` exactly). With some
  entries observed, q(X*) is inferred from them under the conditional prior given the known
  frames' means (``sequence_inference.conditional_prior`` on the known frames), as
  ``reconstruct(..., sequence=s)`` does.

The scales, the row factor and the cross-fitted report are ``calibration.summarise``'s, the
held-out stretches being the units split in two.
"""

from __future__ import annotations

import numpy as np

from .bound import posterior_from_stats, predictive_moments
from .calibration import HeldOut, check_hide, summarise
from .linalg import JITTER, jittered_cholesky, solve_lower
from .training_stats import TrainingStats

PATHS = ("reconstruct", "forecast")
#: known frames a forecast origin conditions on (the latest ones): an n x n Cholesky each
KNOWN_MAX_FRAMES = 2000


def _without(m, keep: np.ndarray):
    """The model with the rows not in ``keep`` out of q(u)'s statistics: a
    ``distributed.sequences.SequenceView`` (what ``infer_sequence`` and
    ``conditioned_predict`` read of a model) of the other rows' ``TrainingStats``."""
    from .distributed.sequences import SequenceView

    obs = m.Y_observed[keep] if m.missing_fraction > 0 else None
    Yk = np.where(m.Y_observed, m.Y, 0.0)[keep]
    stats = TrainingStats.from_arrays(m.kernel, m.inducing_inputs, m.latent_mean[keep], m.latent_variance[keep],
                                      m.noise_variance, Yk, m.Y_mean, observed=obs)
    return SequenceView(stats, m.time_kernel, m.prior.form, getattr(m.prior, "state_space_options", {}))


def predict_view(view, mu: np.ndarray, S: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and variance (n, D) of y at q(X*) = N(mu, diag S) from a view's statistics (the
    training q(u) alone, as ``forecast``), the noise included."""
    from .calibration import _posteriors

    st = view.stats
    mean, var = predictive_moments(st.kernel, st.Z, _posteriors(st, posterior_from_stats), st.D, mu, S)
    return mean + st.Y_mean, var + view.noise_variance


def _sequences(m) -> list[np.ndarray]:
    """The rows of each training sequence, in time order."""
    return [m.prior.rows_of(s) for s in m.prior.sequence_ids]


def new_sequence_units(m, folds: int, groups, horizon: int, rng) -> tuple[list[np.ndarray], np.ndarray]:
    """(units, fold of each unit) for path "reconstruct": whole sequences (split by
    ``groups`` labels where a group cuts one), or stretches of ``horizon`` frames of a
    model with one sequence; units of one group share a fold."""
    seqs = _sequences(m)
    if groups is not None:
        from .calibration import check_groups

        labels = check_groups(groups, m.Y.shape[0], folds, "reconstruct")
        units = [ix[labels[ix] == g] for ix in seqs for g in np.unique(labels[ix])]
        unit_group = np.array([labels[u[0]] for u in units])
    elif len(seqs) >= 2:
        units, unit_group = seqs, np.arange(len(seqs))
    else:
        ix = seqs[0]
        units = [ix[i:i + horizon] for i in range(0, ix.size, horizon)]
        if units[-1].size < horizon // 2 and len(units) > 1:  # a short tail joins its neighbour
            units[-2] = np.concatenate([units[-2], units.pop()])
        unit_group = np.arange(len(units))
    n_groups = int(unit_group.max()) + 1
    if n_groups < 2:
        raise ValueError("calibrating a dynamical model's reconstructions needs two or more sequences (or "
                         f"stretches: horizon= frames each); this one gives {n_groups}")
    fold_of_group = np.empty(n_groups, dtype=np.int64)
    fold_of_group[rng.permutation(n_groups)] = np.arange(n_groups) % folds
    return units, fold_of_group[unit_group]


def forecast_units(m, folds: int, horizon: int) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """[(known rows, held-out rows, rows out of q(u))] of every forecast origin (path
    "forecast", module docstring)."""
    out = []
    for ix in _sequences(m):
        for k in range(1, folds + 1):
            o = ix.size - k * horizon
            if o < horizon:
                break
            out.append((ix[max(0, o - KNOWN_MAX_FRAMES):o], ix[o:o + horizon], ix[o:]))
    return out


def _time_kernel(m):
    values = m._values()
    m.prior.sync(values)
    return m.prior.time_kernel, values


def continuation_latent(m, known: np.ndarray, t_star: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """q(X*) (mu, S (n*, Q)) at times t_star after the ``known`` rows of one sequence, from
    their sites alone (module docstring): per latent dimension q, with lambda = lambda_q,
    mu* = K_*k (K_kk + Lambda^-1)^-1 (mu + mu_bar / lambda),
    var* = k_** - K_*k (K_kk + Lambda^-1)^-1 K_k*  (qxstar)."""
    tk, values = _time_kernel(m)
    t_k = m.prior.t[known]
    K, Ksk, kss = tk.K(t_k), tk.K(t_star, t_k), tk.Kdiag(t_star)
    lam = np.maximum(values["lambda"][known], 1e-12)
    site = m.latent_mean[known] + values["mu_bar"][known] / lam
    mu, S = np.empty((t_star.size, m.latent_dim)), np.empty((t_star.size, m.latent_dim))
    for q in range(m.latent_dim):
        # (K + Lambda^-1)^-1 = sl B^-1 sl with B = I + sl K sl >= I (no jitter; as latent_at)
        sl = np.sqrt(lam[:, q])
        L = np.linalg.cholesky(np.eye(sl.size) + sl[:, None] * K * sl[None, :])
        W = solve_lower(L, sl[:, None] * Ksk.T)  # (n_k, n*)
        mu[:, q] = W.T @ solve_lower(L, sl * site[:, q])
        S[:, q] = kss - np.sum(W * W, axis=0)
    return mu, np.maximum(S, 1e-12)


def continuation_prior(m, known: np.ndarray, t_star: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mean (n*, Q), C (n*, n*)) of X* given the known frames' means (as
    ``sequence_inference.conditional_prior`` with every frame of a sequence known)."""
    tk, _ = _time_kernel(m)
    t_k = m.prior.t[known]
    L = jittered_cholesky(tk.K(t_k), JITTER * float(np.mean(tk.Kdiag(t_k))), what="Kt of the known frames")
    A = solve_lower(L, tk.K(t_star, t_k).T)
    mean = A.T @ solve_lower(L, m.latent_mean[known])
    C = tk.K(t_star) - A.T @ A
    return mean, 0.5 * (C + C.T)


def _hidden(m, rows: np.ndarray, hide, rng) -> np.ndarray:
    """(len(rows), D) bool: the observed entries the rows lose (every one: ``hide`` None)."""
    from .calibration import _hide

    observed = m.Y_observed[rows]
    return observed.copy() if hide is None else _hide(m.Y_observed, rows, hide, rng)


def _predict_unit(m, view, rows, held, known, max_iters: int):
    """Mean and variance (len(rows), D) of a held-out stretch (module docstring)."""
    from .sequence_inference import conditioned_predict, infer_sequence

    t_star = m.prior.t[rows]
    vis = m.Y_observed[rows] & ~held
    if not vis.any():  # a forecast
        mu, S = continuation_latent(m, known, t_star)
        return predict_view(view, mu, S)
    Ys = np.where(vis, m.Y[rows], 0.0)
    prior = None if known is None else continuation_prior(m, known, t_star)
    sequence = None if known is None else m.prior.sequences[rows[0]]
    fit = infer_sequence(view, Ys, vis, t_star, sequence, max_iters=max_iters, prior=prior)
    return conditioned_predict(view, fit.mu, fit.S, Ys, vis)


def calibrate_sequences(m, rows: int = 1000, hide=None, folds: int = 5, level: float = 0.95,
                        method: str = "quantile", per_output: bool | None = None, seed: int = 0,
                        path: str = "reconstruct", groups=None, adaptive: bool = True,
                        horizon: int | None = None, max_iters: int = 300):
    """A ``Calibration`` of dynamical model ``m`` (module docstring): see
    ``DynamicalGPLVM.calibrate``."""
    from .calibration import check_method_level

    if path not in PATHS:
        raise ValueError(f"path must be one of {PATHS} for a dynamical model (the predictions to calibrate), "
                         f"got {path!r}")
    check_method_level(method, level)
    if path == "reconstruct" and hide is None:
        hide = 0.5
    hide = None if hide is None else check_hide(hide, m.Y.shape[1])
    folds = int(folds)
    if folds < 2 and path == "reconstruct":
        raise ValueError(f"folds must be at least 2 (a fold's sequences are predicted from the others), got {folds}")
    longest = max(ix.size for ix in _sequences(m))
    horizon = max(2, longest // (2 * folds)) if horizon is None else int(horizon)
    if horizon < 1:
        raise ValueError(f"horizon must be a positive number of frames, got {horizon}")
    rng = np.random.default_rng(seed)
    N = m.Y.shape[0]
    plan = []  # (rows, left out of q(u), known rows or None)
    if path == "reconstruct":
        units, fold_of = new_sequence_units(m, folds, groups, horizon, rng)
        order = rng.permutation(len(units))
        for f in np.unique(fold_of):
            out = np.concatenate([units[i] for i in np.flatnonzero(fold_of == f)])
            plan += [(units[i], out, None) for i in order if fold_of[i] == f]
    else:
        if groups is not None:
            raise ValueError("groups= pools sequences for path='reconstruct'; a forecast holds out the frames "
                             "after each origin of each sequence")
        plan = [(held, out, known) for known, held, out in forecast_units(m, folds, horizon)]
        plan = [plan[i] for i in rng.permutation(len(plan))]
    chosen, budget = [], int(rows)
    for p in plan:  # the held-out frames up to ``rows``, at least two stretches
        if budget <= 0 and len(chosen) >= 2:
            break
        chosen.append(p)
        budget -= p[0].size
    if len(chosen) < 2:
        raise ValueError(f"calibrating path={path!r} needs two or more held-out stretches; with horizon={horizon} "
                         f"this model's sequences (the longest {longest} frames) give {len(chosen)}: lower horizon=")
    parts, knn = [], _KNN(m, hide, seed, shared=path == "forecast", chosen=chosen)
    for i, (r, out, known) in enumerate(chosen):
        held = _hidden(m, r, hide, rng)
        keep = np.ones(N, dtype=bool)
        keep[out] = False
        mean, var = _predict_unit(m, _without(m, keep), r, held, known, max_iters)
        parts.append((r, held, mean, var, knn.predict(r, held, keep), np.full(r.size, i)))
    r, held, mean, var, k_mean, unit = (np.concatenate(a) for a in zip(*parts))
    n_entries = int(held.sum())
    if n_entries < 50:
        raise ValueError(f"calibration needs at least 50 held-out entries; these settings hide {n_entries} on "
                         f"{r.size} frames: raise rows= or hide=")
    kept = m.Y_observed[r] & ~held
    out = HeldOut(mean=mean, var=var, truth=m.Y[r], held=held, kept=kept, unit=unit,
                  knn_mean=k_mean if kept.any() else None, knn_k=knn.k)
    stretches = path == "forecast" or (groups is None and len(_sequences(m)) == 1)
    return summarise(m, out, rng, level=level, method=method, per_output=per_output, adaptive=adaptive,
                     hide=hide if hide is not None else 1.0, folds=folds, seed=int(seed), path=path,
                     n_groups=0, stretches=len(chosen), horizon=horizon if stretches else 0)


class _KNN:
    """The k-NN baseline on the same held-out entries, its neighbours among the rows in
    q(u)'s statistics: one per set of rows left out (one for all forecast origins: the
    rows no origin leaves out)."""

    def __init__(self, m, hide, seed: int, shared: bool, chosen: list):
        self.m, self.seed, self.k, self._ks, self._cache = m, seed, 0, [], {}
        self.hide = hide if isinstance(hide, float) else 0.5
        self.shared = None
        if shared:
            keep = np.ones(m.Y.shape[0], dtype=bool)
            for _, out, _ in chosen:
                keep[out] = False
            self.shared = keep

    def predict(self, rows, held, keep) -> np.ndarray:
        from .baselines import KNNBaseline

        m = self.m
        vis = m.Y_observed[rows] & ~held
        if not vis.any():
            return np.full(held.shape, np.nan)
        keep = self.shared if self.shared is not None else keep
        key = keep.tobytes()
        if key not in self._cache:
            self._cache[key] = KNNBaseline(np.where(m.Y_observed, m.Y, np.nan)[keep], hide=self.hide, seed=self.seed)
            self._ks.append(self._cache[key].k)
            self.k = int(np.median(self._ks))
        return self._cache[key].predict(np.where(vis, m.Y[rows], np.nan))[0]

