"""Calibrated intervals across views: ``MRD.calibrate``.

A view predicted from the others (``MRD.predict_views`` / ``reconstruct``) rests on q(x*)
inferred from the observed views alone, and that q(x*) can be sure and wrong. On the
three-view toy (``datasets.synthetic.mrd_views``: 200 rows fitted, 100 held out, Q = 6,
M = 20, 6 seeds) view c predicted from a and b held 12-62 % of the held-out truth in its
nominal 95 % intervals, b from a and c 29-73 %. In one fit (seed 2) a's and c's private
dimensions were merged into one latent dimension that a uses weakly (relative ARD weight
0.08) at a tiny noise (0.0025): a pins q(x*) there (S 0.015), at the place that fits a, and
c is predicted confidently from a wrong place. That is a property of the fitted model that
held-out rows of its own training data show as well, so it is calibrated as
``bgplvm.calibration`` calibrates one view (its steps 2-5), with the target view's columns
as the hidden entries:

1. ``rows`` training rows that observe the target view and some entry of the observed
   views are split into ``folds``;
2. for each fold, every view's training statistics (q(u)) are recomputed without the
   fold's rows (``TrainingStats.from_arrays``: kernel, inducing inputs, noise and the other
   rows' q(x_n) fixed), q(x*) of each of the fold's rows is inferred from its observed views
   (``mrd_inference.ViewsBound``, the sum of the views' test bounds, from the nearest
   training row in each view) and the target view is predicted at q(x*) (meanFstar /
   covFstar plus the noise; the undetermined dimensions as ``undetermined`` says);
3. the normalised residuals of the target's entries give its per-output sd scales
   (``calibration.summarise``: split-conformal quantile, a row factor from the observed
   views' residuals at q(x*), cross-fitted before / after scores), and k-NN (neighbours in
   the observed views) and the column mean predict the same entries, so that
   ``predict_views`` / ``reconstruct`` say when a simple baseline predicts the target
   better.

Measured (``bgplvm reproduce mrd-toy``: 6 seeds, the views of 8, 5 and 40 columns, 200 rows
fitted and 100 held out at random): a view from the other two held 92.7-98.9 % of the
held-out truth in its 95 % intervals as fitted, 94.0-99.0 % calibrated. (The 12-62 % above
came from holding out the last third of the toy's latent path: configurations no training
row has.) The widest are the 40-column view from the two others: about 4 % of the
training rows (where the latent path passes near itself) are ambiguous from the other
views and predicted with errors of ~1.1 against ~0.06, and the calibration, which sees
them, widens for them; the 100 test rows held few of them.

One calibration per target view, each for the set of views it was inferred from: a
prediction from another set of views is not scaled (with a warning). ``ViewsCalibration``
holds them; the model file keeps it.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field, replace
from types import SimpleNamespace

import numpy as np

from .calibration import (MIN_ENTRIES, Calibration, HeldOut, _folds, _posteriors, check_groups, check_method_level,
                          fingerprint, summarise)


@dataclass(frozen=True)
class ViewCalibration:
    """The calibration of one target view predicted from the views ``observed``.

    calibration : its ``Calibration`` (scale (D_target,), scores before / after, k-NN);
    undetermined : how the dimensions no observed view uses were filled ("prior" / "nearest");
    mean_rmse : the held-out entries' RMSE of the target's training column means."""

    calibration: Calibration
    observed: tuple
    undetermined: str
    mean_rmse: float = math.nan

    def baseline_warning(self, target: str) -> str | None:
        """The warning when k-NN or the column mean predicted the held-out target better."""
        c = self.calibration
        best = min((c.knn_rmse, f"k-nearest neighbours in the observed views (k = {c.knn_k})"),
                   (self.mean_rmse, "the training column means"))
        if not best[0] < c.model_rmse:
            return None
        return (f"view {target!r} from {list(self.observed)}: {best[1]} predicted {c.n_entries} held-out entries "
                f"with RMSE {best[0]:.4g}, the model with {c.model_rmse:.4g} (measured by calibrate()): for point "
                "predictions the simple baseline may serve better")


@dataclass(frozen=True)
class ViewsCalibration:
    """``MRD``'s calibrations, one per target view (``ViewCalibration``); ``data`` and
    ``params`` fingerprint the views and the parameter vector they were made on."""

    targets: dict = field(default_factory=dict)
    data: str = ""
    params: str = ""

    @property
    def scale(self) -> np.ndarray:
        """All targets' scales end to end (in ``targets``' order): the model file's array."""
        parts = [v.calibration.scale for v in self.targets.values()]
        return np.concatenate(parts) if parts else np.zeros(0)

    def meta(self) -> dict:
        return {"kind": "views", "data": self.data, "params": self.params,
                "targets": {t: {"observed": list(v.observed), "undetermined": v.undetermined,
                                "mean_rmse": v.mean_rmse, "size": int(v.calibration.scale.size),
                                "calibration": v.calibration.meta()} for t, v in self.targets.items()}}

    @classmethod
    def from_file(cls, meta: dict, scale: np.ndarray) -> "ViewsCalibration":
        targets, at = {}, 0
        for t, v in meta["targets"].items():
            s = np.asarray(scale[at:at + v["size"]], dtype=np.float64)
            at += v["size"]
            targets[t] = ViewCalibration(Calibration.from_file(v["calibration"], s), tuple(v["observed"]),
                                         v["undetermined"], float(v["mean_rmse"]))
        if at != np.asarray(scale).size:
            raise ValueError("the calibration's scales do not match its targets: truncated or corrupt")
        return cls(targets=targets, data=meta["data"], params=meta["params"])

    def with_target(self, target: str, vc: ViewCalibration, data: str, params: str) -> "ViewsCalibration":
        """These calibrations with ``target``'s replaced (all of them dropped if they were
        made at other data or parameters)."""
        keep = self.targets if (self.data, self.params) == (data, params) else {}
        return replace(self, targets={**keep, target: vc}, data=data, params=params)

    def describe(self) -> str:
        return "\n".join(f"{t} from {'+'.join(v.observed)}: {v.calibration.describe()}"
                         for t, v in self.targets.items())

    @property
    def knn_better(self) -> bool:
        return any(v.calibration.knn_better for v in self.targets.values())


def check_views_calibration(cal, data: str, dims: dict) -> ViewsCalibration:
    """``cal`` if it is an MRD calibration made on the views whose ``fingerprint`` is
    ``data`` and whose widths are ``dims`` ({view: D_v}), else an error saying what to do."""
    if not isinstance(cal, ViewsCalibration):
        raise TypeError(f"an MRD model's calibration is a ViewsCalibration (from MRD.calibrate()), got "
                        f"{type(cal).__name__}")
    if cal.data != data:
        raise ValueError("this calibration was made on other views than this model's: call calibrate() on it")
    for t, v in cal.targets.items():
        if t not in dims or v.calibration.scale.shape != (dims[t],):
            raise ValueError(f"this calibration's target {t!r} is not a view of this model: call calibrate() on it")
    return cal


class ViewsCalibrated:
    """The calibration contract of a model of several views, in process (``MRD``) and on
    Dask (``DistributedMRD``, whose calibration is made in process): before
    ``calibration.Calibrated`` in the bases, it checks a ``ViewsCalibration`` against the
    views (``_data_record``: the fingerprint of the views side by side; ``_view_dims``:
    {view: D_v}) and reads a model file's."""

    def _check_calibration(self, cal) -> ViewsCalibration:
        return check_views_calibration(cal, self._data_record()[1], self._view_dims())

    @classmethod
    def _calibration_from_file(cls, meta: dict, scale) -> ViewsCalibration:
        return ViewsCalibration.from_file(meta, scale)


def views_fingerprint(m) -> str:
    """A fingerprint of every view's training outputs, in the model's view order."""
    return fingerprint(np.hstack([m.views[n].Y for n in m.view_names]))


def calibrate_views(m, target=None, observed=None, rows: int = 1000, folds: int = 5, level: float = 0.95,
                    method: str = "quantile", per_output: bool | None = None, seed: int = 0,
                    undetermined: str = "prior", groups=None, adaptive: bool = True,
                    max_iters: int = 200) -> ViewsCalibration:
    """``MRD.calibrate`` (module docstring): the model's ``ViewsCalibration`` with the
    targets' calibrations added (each target from ``observed``, default every other view)."""
    from .mrd_inference import UNDETERMINED

    targets = list(m.view_names) if target is None else [target] if isinstance(target, str) else list(target)
    for t in targets:
        m.view(t)  # unknown names: KeyError naming the views
    if observed is not None:
        observed = [observed] if isinstance(observed, str) else list(observed)
        for n in observed:
            m.view(n)
    check_method_level(method, level)
    if undetermined not in UNDETERMINED:
        raise ValueError(f"undetermined must be one of {UNDETERMINED}, got {undetermined!r}")
    if int(folds) < 2:
        raise ValueError(f"folds must be at least 2 (a fold's rows are predicted from the others), got {folds}")
    N = m.views[m.view_names[0]].shape[0]
    labels = None if groups is None else check_groups(groups, N, int(folds), "reconstruct")
    data, params = views_fingerprint(m), m._params_fingerprint()
    cal = m._calibration if isinstance(m._calibration, ViewsCalibration) else ViewsCalibration()
    for t in targets:
        obs = [n for n in m.view_names if n != t] if observed is None else [n for n in observed if n != t]
        if not obs:
            raise ValueError(f"view {t!r} has no other view to be predicted from: pass observed= other views")
        vc = _calibrate_target(m, t, obs, rows, int(folds), level, method, per_output, seed, undetermined,
                               labels, adaptive, max_iters)
        cal = cal.with_target(t, vc, data, params)
    return cal


def _calibrate_target(m, target, obs, rows, folds, level, method, per_output, seed, undetermined, labels,
                      adaptive, max_iters) -> ViewCalibration:
    masks = {n: m.views[n].observed_mask for n in obs + [target]}
    sees = np.any([masks[n].any(axis=1) for n in obs], axis=0)
    candidates = np.flatnonzero(sees & masks[target].any(axis=1))
    rng = np.random.default_rng(seed)
    chosen = rng.permutation(candidates)[:int(rows)]
    n_entries = int(masks[target][chosen].sum())
    if n_entries < MIN_ENTRIES or chosen.size < 2 * folds:
        raise ValueError(f"calibrating view {target!r} needs at least {MIN_ENTRIES} held-out entries on {2 * folds} "
                         f"rows or more; {candidates.size} rows observe it and one of {obs}, and these settings "
                         f"hold out {n_entries} entries on {chosen.size} rows: raise rows= or calibrate on more data")
    fold_of, out_of_fold = _folds(chosen, folds, labels, rng)
    ho = held_out_views(m, target, obs, chosen, fold_of, out_of_fold, undetermined, max_iters, seed)
    stand_in = SimpleNamespace(Y=np.hstack([m.views[n].Y for n in m.view_names]), _x=m._x)
    D_t = m.views[target].shape[1]
    c = summarise(stand_in, ho, rng, level=level, method=method, per_output=per_output, adaptive=adaptive,
                  hide=list(range(ho.mean.shape[1] - D_t, ho.mean.shape[1])), folds=int(np.unique(fold_of).size),
                  seed=int(seed), path="reconstruct", n_groups=0 if labels is None else int(labels.max() + 1))
    c = replace(c, scale=c.scale[-D_t:])
    col_mean = np.nanmean(np.where(masks[target], m.views[target].Y, np.nan), axis=0)
    held = ho.held[:, -D_t:]
    mean_rmse = float(np.sqrt(np.mean((np.broadcast_to(col_mean, held.shape)[held]
                                       - ho.truth[:, -D_t:][held]) ** 2)))
    return ViewCalibration(calibration=c, observed=tuple(obs), undetermined=undetermined, mean_rmse=mean_rmse)


def _fold_stats(vm, keep: np.ndarray):
    """Training statistics of view model ``vm`` from the rows ``keep`` only (all rows where
    a column would be left with no observed entry)."""
    from .training_stats import TrainingStats

    observed = vm.Y_observed if vm.missing_fraction > 0 else None
    if observed is not None and not observed[keep].any(axis=0).all():
        keep = np.ones_like(keep)
    Y = np.where(vm.Y_observed, vm.Y, 0.0)
    return TrainingStats.from_arrays(vm.kernel, vm.inducing_inputs, vm.latent_mean[keep], vm.latent_variance[keep],
                                     vm.noise_variance, Y[keep], vm.Y_mean,
                                     observed=None if observed is None else observed[keep]), np.flatnonzero(keep)


def held_out_views(m, target: str, obs: list, rows: np.ndarray, fold_of: np.ndarray, out_of_fold,
                   undetermined: str, max_iters: int, seed: int) -> HeldOut:
    """Held-out predictions of ``target`` for the training ``rows`` from their views ``obs``,
    each fold with every view's q(u) from the other rows (module docstring, step 2); the
    columns are the observed views' then the target's, the target's held out, the observed
    views' kept (predicted at q(x*) for the row factor). The k-NN baseline's neighbours are
    the other rows, in the observed views."""
    from .baselines import KNNBaseline
    from .bound import posterior_from_stats, predictive_moments
    from .mrd_inference import fill_undetermined, views_bound
    from .testbound import LatentFit, optimise_rows

    names = obs + [target]
    vms = {n: m._view_model(n) for n in names}
    for vm in vms.values():
        vm._sync_kernel()  # its kernel object holds the parameters only once synced
    Ymat = np.hstack([np.where(vms[n].Y_observed, vms[n].Y, np.nan) for n in names])
    seen = ~np.isnan(Ymat)
    D_t = vms[target].Y.shape[1]
    held = np.zeros((rows.size, Ymat.shape[1]), dtype=bool)
    held[:, -D_t:] = seen[rows][:, -D_t:]
    mean, var, knn_mean = (np.empty((rows.size, Ymat.shape[1])) for _ in range(3))
    N = Ymat.shape[0]
    ks = []
    for f in np.unique(fold_of):
        idx = np.flatnonzero(fold_of == f)
        keep = np.ones(N, dtype=bool)
        keep[rows[idx]] = False
        if out_of_fold is not None:
            keep &= out_of_fold != f
        stats = {n: _fold_stats(vms[n], keep) for n in names}
        r = rows[idx]
        seen_r = {n: (np.where(vms[n].Y_observed[r], vms[n].Y[r], 0.0), vms[n].Y_observed[r]) for n in obs}
        bound, cand = views_bound(m, seen_r, stats={n: stats[n] for n in obs})
        fit: LatentFit = optimise_rows(bound, m.latent_mean, m.latent_variance, cand, max_iters, 1e-3, 1e-9, 1e-7,
                                       True)
        mu, S = fill_undetermined(m, {n: None for n in obs}, fit, undetermined)
        at = 0
        for n in names:
            st, _ = stats[n]
            D = vms[n].Y.shape[1]
            mn, vr = predictive_moments(st.kernel, st.Z, _posteriors(st, posterior_from_stats), D, mu, S)
            mean[idx, at:at + D] = mn + vms[n].Y_mean
            var[idx, at:at + D] = vr + vms[n].noise_variance
            at += D
        Yq = Ymat[r].copy()
        Yq[:, -D_t:] = np.nan
        train = Ymat[keep]
        frac = float(np.clip(D_t / Ymat.shape[1], 0.05, 0.95))
        knn = KNNBaseline(train, hide=frac, seed=seed)
        knn_mean[idx] = knn.predict(Yq)[0]
        ks.append(knn.k)
    return HeldOut(mean=mean, var=var, truth=Ymat[rows], held=held, kept=seen[rows] & ~held,
                   knn_mean=knn_mean, knn_k=int(np.median(ks)))


def apply_views_calibration(m, target: str, observed: dict, mean: np.ndarray, var: np.ndarray,
                            mu: np.ndarray, S: np.ndarray, undetermined: str) -> np.ndarray:
    """``var`` (n*, D_target) of ``target`` predicted from ``observed`` (view -> (Ys, mask))
    at q(x*) = (mu, S), scaled by its calibration: the per-output scale and each row's factor
    from the observed views' residuals at q(x*). Unchanged (with a warning) where the
    calibration was made from other views, with other ``undetermined`` or at other parameters."""
    cal = m._calibration
    if not isinstance(cal, ViewsCalibration) or target not in cal.targets:
        return var
    vc = cal.targets[target]
    if cal.params != m._params_fingerprint():
        warnings.warn("the model's calibration was made at other parameters (it was fitted or changed since): "
                      "intervals are not calibrated; call calibrate() again", stacklevel=4)
        return var
    if tuple(observed) != vc.observed or undetermined != vc.undetermined:
        warnings.warn(f"view {target!r} was calibrated from {list(vc.observed)} (undetermined={vc.undetermined!r}), "
                      f"not from {list(observed)} (undetermined={undetermined!r}): its intervals are not calibrated; "
                      f"call calibrate(target={target!r}, observed={list(observed)}) for these", stacklevel=4)
        return var
    c = vc.calibration
    scale = c.scale[None, :]
    if c.adaptive:
        parts = [(m._view_model(n).predict(mu, S, calibrated=False), Ys, mask) for n, (Ys, mask) in observed.items()]
        r = c.row_factor(np.hstack([p[0][0] for p in parts]), np.hstack([p[0][1] for p in parts]),
                         np.hstack([p[1] for p in parts]), np.hstack([p[2] for p in parts]))
        scale = scale * r[:, None]
    return var * scale ** 2
