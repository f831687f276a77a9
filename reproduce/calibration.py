"""``bgplvm reproduce calibration``: do the predictive intervals hold what they claim, on
every prediction path (issue 44)?

For each path, held-out truth the model never saw is scored with ``bgplvm.metrics``:
coverage of the central 50-99 % intervals, NLPD, RMSE. Beside the model: k-NN with a
Gaussian of its cross-validated residual variance (``bgplvm.baselines.KNNBaseline``) and a
plain GP where one applies. Where ``calibrate()`` applies (the static model's rows), the
model is scored as it says ("as fitted") and calibrated on held-out entries of its own
training rows, or a dynamical model on held-out stretches of its own sequences
("calibrated"): the scored truth is never among those.

Paths and data:
- ``predict`` at q(x_n): the oil training rows themselves (in-sample: the reference).
- ``reconstruct``: oil test rows with 6 of 12 readings missing; CMU 35 test trial 35_29,
  legs or body missing in frames 62-123 (the paper's protocol, ``cmu35_protocol``); Frey
  frames 300-399 (beyond the 300 training frames) with half of the pixels missing.
- ``impute``: oil training rows with 10 / 30 / 50 % of the readings missing at random; CMU
  35's training frames with 20 % missing at random, static and dynamical (the latter
  started from the static fit: ``DynamicalGPLVM.from_static``).
- dynamical ``reconstruct``: the explorer's pre-trained CMU 35 model (the test trial as a
  new sequence) and Frey model (frames 300-399 as new frames of its sequence); dynamical
  ``forecast``: the Frey model's frames 300-399 from the time prior alone.
- ``AutoregressiveGP.forecast``: Mackey-Glass, delays 17 and 30, 150 steps, window 12,
  M = 40, 100 steps ahead from each of ``MG_ORIGINS`` (the series observed up to there,
  ``forecast(history=...)``, the model fitted once on the first 150 steps; one 100-step
  trajectory is too few correlated entries to measure a coverage by): the defaults
  (signal variance tied to the series', sampled trajectories) beside the paper's choices
  (learned, Gaussian moments) and the zero-variance forecast; a plain GP on (t, y) as the
  baseline. Coverage by horizon goes to the JSON.
- ``UncertainInputGPR.predict``: a 1-D regression whose inputs are observed with noise (sd
  0.3), training and test inputs alike; the plain GP is ``fixed_inputs=True``.
- ``SemiSupervisedGPR.predict``: the ``semi-supervised`` simulation (15 inputs, 5 outputs),
  half of the partly observed rows' inputs missing; the plain GP on the complete rows.
"""

from __future__ import annotations

import os
import time
import warnings

import numpy as np

from .report import Context, Result, Table

LEVELS = (0.5, 0.8, 0.9, 0.95, 0.99)
COLUMNS = (["path", "data", "predictions", "entries"] + [f"{100 * p:g} %" for p in LEVELS] + ["NLPD", "RMSE"]
           + ["95 %: 90 % CI"])
#: the bootstrap interval of each 95 % coverage (metrics.coverage_interval, blocks of rows)
CI, CI_BOOT = 0.9, 2000
OIL_Q, OIL_M, OIL_ITERS = 10, 50, 2000
MISSING_FRACTIONS = (0.1, 0.3, 0.5)
MISSING_ITERS = 1500
CMU_MISSING, CMU_MISSING_ITERS = 0.2, 1000
FREY_TRAIN, FREY_TEST = 300, 100
FREY_STATIC_ITERS = 1000
MG_DELAYS, MG_TRAIN, MG_AHEAD, MG_WINDOW, MG_M = (17.0, 30.0), 150, 100, 12, 40
#: the longer training series that forecast calibration is also measured on
MG_LONG = 600
#: forecast origins after the training series (steps past its end), each 100 steps ahead
MG_ORIGINS = tuple(range(0, 100, 10)) + tuple(range(100, 400, 30))
#: horizons (steps ahead) whose coverage the JSON gives separately
MG_HORIZONS = ((1, 10), (11, 30), (31, 100))
#: a noise floor measured against the defaults (issue 44: "a noise floor relative to the data")
MG_NOISE_FLOOR = 1e-4
MG_HELD_NOISE = f"noise held at {MG_NOISE_FLOOR:g} of the series' variance (defaults otherwise)"
#: UncertainInputGPR on sin(2x): draws of the data (one draw's 200-row calibration is noisy),
#: rows per draw, the inputs' noise sd, and the rows' labels
UIG_DRAWS, UIG_TRAIN, UIG_TEST, UIG_INPUT_SD = 5, 200, 1000, 0.3
UIG_DATA = f"sin(2x), inputs observed with noise sd {UIG_INPUT_SD}, {UIG_DRAWS} draws of {UIG_TRAIN} + {UIG_TEST} rows"
UIG_FITTED = "uncertain inputs"
UIG_TRUE_SIGMA = "uncertain inputs, Sigma_z at the truth (diagnosis)"
UIG_CALIBRATED = "calibrated (m.calibrate(), held-out rows)"
QUICK_ITERS = 60


class Scored:
    """Rows of the table and their numbers (``metrics.Scores.as_dict``)."""

    def __init__(self, ctx: Context):
        self.ctx, self.rows, self.numbers = ctx, [], {}

    def add(self, path: str, data: str, how: str, mean, var, truth, mask=None, block: int | None = None) -> dict:
        """Score one row; ``block``: rows (axis 0) per bootstrap block of the 95 % coverage's
        interval (default ceil(rows^(1/3)); the forecasts: one origin's steps)."""
        from bgplvm.metrics import coverage_interval, gaussian_scores

        var = np.maximum(var, 1e-300)
        s = gaussian_scores(mean, var, truth, mask=mask, levels=LEVELS)
        ci = coverage_interval(mean, var, truth, 0.95, mask=mask, block=block, ci=CI, n_boot=CI_BOOT,
                               seed=self.ctx.seed)
        self.rows.append([path, data, how, s.n, *(round(100 * s.coverage[p], 1) for p in LEVELS),
                          round(s.nlpd, 3), float(f"{s.rmse:.4g}"), f"{100 * ci[0]:.1f}-{100 * ci[1]:.1f}"])
        self.numbers[f"{path} | {data} | {how}"] = {**s.as_dict(), "coverage_95_ci": list(ci)}
        self.ctx.log(f"  {path} / {data} / {how}: 95 % {100 * s.coverage[0.95]:.1f} % ({100 * ci[0]:.1f}-"
                     f"{100 * ci[1]:.1f}), NLPD {s.nlpd:.3f}, RMSE {s.rmse:.4g}")
        return s.as_dict()


def _iters(ctx: Context, n: int) -> int:
    return QUICK_ITERS if ctx.quick else n


def _quiet(fn, *args, **kw):
    """fn(...) with the k-NN note of ``impute`` / ``reconstruct`` recorded, not printed."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn(*args, **kw)
    return out, [str(w.message) for w in caught]


def _half_missing(Y: np.ndarray, n_missing: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    miss = np.zeros(Y.shape, dtype=bool)
    for i in range(Y.shape[0]):
        miss[i, rng.permutation(Y.shape[1])[:n_missing]] = True
    return miss


# --------------------------------------------------------------------- static model: oil
def oil(ctx: Context, S: Scored, cal_info: dict) -> None:
    from bgplvm import BayesianGPLVM
    from bgplvm.baselines import KNNBaseline
    from bgplvm.datasets import load

    kw = dict(mirror=ctx.mirror) if ctx.mirror else {}
    Y, Yt = load("oil", split="train", progress=False, **kw).Y, load("oil", split="test", progress=False, **kw).Y
    m = BayesianGPLVM(Y, latent_dim=OIL_Q, num_inducing=OIL_M, seed=ctx.seed)
    m.fit(max_iters=_iters(ctx, OIL_ITERS), progress=False)
    miss = _half_missing(Yt, 6, ctx.seed)
    Ys = np.where(miss, np.nan, Yt)
    S.add("predict at q(x_n)", "oil training rows (in-sample)", "as fitted", *m.predict(m.latent_mean, m.latent_variance), Y)
    S.add("reconstruct", "oil test, 6 of 12 missing", "as fitted", *m.reconstruct(Ys), Yt, miss)
    cal = m.calibrate(seed=ctx.seed)
    cal_info["oil"] = dict(cal.meta(), scale=cal.scale.tolist())
    S.add("predict at q(x_n)", "oil training rows (in-sample)", "calibrated",
          *m.predict(m.latent_mean, m.latent_variance), Y)
    (rec, notes) = _quiet(m.reconstruct, Ys)
    cal_info["oil"]["warnings"] = notes
    S.add("reconstruct", "oil test, 6 of 12 missing", "calibrated", *rec, Yt, miss)
    S.add("reconstruct", "oil test, 6 of 12 missing", "k-NN baseline", *KNNBaseline(Y, seed=ctx.seed).predict(Ys),
          Yt, miss)


def oil_missing(ctx: Context, S: Scored, cal_info: dict) -> None:
    from bgplvm import BayesianGPLVM
    from bgplvm.baselines import KNNBaseline
    from bgplvm.datasets import load

    kw = dict(mirror=ctx.mirror) if ctx.mirror else {}
    Y = load("oil", split="train", progress=False, **kw).Y
    for frac in MISSING_FRACTIONS:
        rng = np.random.default_rng(ctx.seed + int(100 * frac))
        miss = rng.random(Y.shape) < frac
        Yn = np.where(miss, np.nan, Y)
        data = f"oil training rows, {100 * frac:g} % missing"
        m = BayesianGPLVM(Yn, latent_dim=OIL_Q, num_inducing=OIL_M, seed=ctx.seed)
        m.fit(max_iters=_iters(ctx, MISSING_ITERS), progress=False)
        S.add("impute", data, "as fitted", *m.impute(), Y, miss)
        cal = m.calibrate(path="impute", seed=ctx.seed)
        (imp, notes) = _quiet(m.impute)
        cal_info[data] = dict(cal.meta(), scale=cal.scale.tolist(), warnings=notes)
        S.add("impute", data, "calibrated", *imp, Y, miss)
        S.add("impute", data, "k-NN baseline", *KNNBaseline(Yn, hide=frac, seed=ctx.seed).impute(), Y, miss)


# --------------------------------------------------------------------- motion capture
def cmu35(ctx: Context, S: Scored, cal_info: dict) -> None:
    """The static model calibrated for each part with ``hide=`` its columns (what the test
    frames miss), the pre-trained dynamical model as fitted."""
    from bgplvm.assets import load_asset
    from bgplvm.baselines import KNNBaseline

    from . import cmu35_protocol as P
    from .cmu35 import PARTS, static_row

    data = P.load_data(mirror=ctx.mirror)
    _, m = static_row(data, ctx)
    s = P.FIRST_MISSING_FRAME
    dyn, _ = load_asset("cmu35", mirror=ctx.mirror)
    columns = {"legs": P.LEG_COLUMNS, "body": P.BODY_COLUMNS}
    for part in PARTS:
        Ys = P.masked_test(data.Y_test, part)
        miss = np.isnan(Ys[s:])
        label = f"CMU 35 trial 35_29, {part} missing"
        m.calibration = None
        S.add("reconstruct", label, "as fitted", *m.reconstruct(Ys[s:]), data.Y_test[s:], miss)
        cal = m.calibrate(hide=columns[part], groups=data.sequence, seed=ctx.seed)  # folds of whole trials
        cal_info[f"cmu35 {part}"] = dict(cal.meta(), scale=cal.scale.tolist())
        (rec, _) = _quiet(m.reconstruct, Ys[s:])
        S.add("reconstruct", label, "calibrated", *rec, data.Y_test[s:], miss)
        knn = KNNBaseline(data.Y, hide=float(miss.mean()), seed=ctx.seed)
        S.add("reconstruct", label, "k-NN baseline", *knn.predict(Ys[s:]), data.Y_test[s:], miss)
        dyn.calibration = None
        mean, var = dyn.reconstruct(Ys, data.t_test, sequence=None, max_iters=_iters(ctx, 500))
        S.add("dynamical reconstruct", label, "pre-trained model (new sequence)", mean[s:], var[s:],
              data.Y_test[s:], miss)
        cal = dyn.calibrate(hide=columns[part], seed=ctx.seed, max_iters=_iters(ctx, 300))  # whole sequences out
        cal_info[f"cmu35 dynamical {part}"] = dict(cal.meta(), scale=cal.scale.tolist())
        (rec, _) = _quiet(dyn.reconstruct, Ys, data.t_test, sequence=None, max_iters=_iters(ctx, 500))
        S.add("dynamical reconstruct", label, "calibrated", rec[0][s:], rec[1][s:], data.Y_test[s:], miss)


def cmu35_missing(ctx: Context, S: Scored, cal_info: dict) -> None:
    """CMU 35's training frames with 20 % of the entries missing at random, imputed by the
    static and the dynamical model (Q = 9, M = 30, as the issue's run) and by k-NN."""
    from bgplvm import BayesianGPLVM, DynamicalGPLVM
    from bgplvm.baselines import KNNBaseline

    from . import cmu35_protocol as P

    data = P.load_data(mirror=ctx.mirror)
    miss = np.random.default_rng(ctx.seed).random(data.Y.shape) < CMU_MISSING
    Yn = np.where(miss, np.nan, data.Y)
    label = f"CMU 35 training frames, {100 * CMU_MISSING:g} % missing at random"
    it = _iters(ctx, CMU_MISSING_ITERS)
    m = BayesianGPLVM(Yn, latent_dim=9, num_inducing=30, seed=ctx.seed).fit(max_iters=it, progress=False)
    S.add("impute", label, "as fitted", *m.impute(), data.Y, miss)
    cal = m.calibrate(path="impute", seed=ctx.seed)
    cal_info["cmu35 20 % missing"] = dict(cal.meta(), scale=cal.scale.tolist())
    (imp, _) = _quiet(m.impute)
    S.add("impute", label, "calibrated", *imp, data.Y, miss)
    dyn = DynamicalGPLVM.from_static(m, data.t, time_kernel="matern32", sequences=data.sequence)
    dyn.fit(max_iters=it, progress=False)
    S.add("dynamical impute", label, "started from the static fit", *dyn.impute(), data.Y, miss)
    S.add("impute", label, "k-NN baseline", *KNNBaseline(Yn, hide=CMU_MISSING, seed=ctx.seed).impute(), data.Y, miss)


# --------------------------------------------------------------------- video: Frey faces
def frey(ctx: Context, S: Scored, cal_info: dict) -> None:
    """Static: frames held out within the training window (every 5th of 0-299, the
    ``video`` split) and frames 300-399 after it (another stretch of the video: the face
    moves on); dynamical: the pre-trained model (frames 0-299) on frames 300-399."""
    from bgplvm import BayesianGPLVM
    from bgplvm.assets import load_asset
    from bgplvm.baselines import KNNBaseline
    from bgplvm.datasets import load

    from .video import split

    dyn, _ = load_asset("frey_video", mirror=ctx.mirror)
    Y = load("frey_faces", progress=False, **(dict(mirror=ctx.mirror) if ctx.mirror else {})).Y
    assert np.array_equal(Y[:FREY_TRAIN], dyn.Y), "the Frey asset was trained on other frames"
    train, within = split(FREY_TRAIN)
    after = np.arange(FREY_TRAIN, FREY_TRAIN + FREY_TEST)
    m = BayesianGPLVM(Y[train], latent_dim=dyn.latent_dim, num_inducing=dyn.num_inducing, seed=ctx.seed)
    m.fit(max_iters=_iters(ctx, FREY_STATIC_ITERS), progress=False)
    tests = {f"Frey, every 5th of frames 0-{FREY_TRAIN - 1}, half the pixels missing": within,
             f"Frey frames {FREY_TRAIN}-{FREY_TRAIN + FREY_TEST - 1}, half the pixels missing": after}
    preds = {label: np.where(_half_missing(Y[rows], Y.shape[1] // 2, ctx.seed), np.nan, Y[rows])
             for label, rows in tests.items()}
    for label, rows in tests.items():
        S.add("reconstruct", label, "as fitted", *m.reconstruct(preds[label]), Y[rows], np.isnan(preds[label]))
    cal = m.calibrate(seed=ctx.seed)
    cal_info["frey"] = dict(cal.meta(), scale_range=_range(cal.scale))
    knn = KNNBaseline(Y[train], seed=ctx.seed)
    for label, rows in tests.items():
        (rec, _) = _quiet(m.reconstruct, preds[label])
        S.add("reconstruct", label, "calibrated", *rec, Y[rows], np.isnan(preds[label]))
        S.add("reconstruct", label, "k-NN baseline", *knn.predict(preds[label]), Y[rows], np.isnan(preds[label]))
    label = list(tests)[1]
    t_after = after.astype(np.float64)
    dyn.calibration = None
    mean, var = dyn.reconstruct(preds[label], t_after, sequence=0, max_iters=_iters(ctx, 300))
    S.add("dynamical reconstruct", label, "pre-trained model (frames of its sequence)", mean, var, Y[after],
          np.isnan(preds[label]))
    # frames after a known stretch, half their pixels seen: the forecast path with hide=0.5
    cal = dyn.calibrate(path="forecast", horizon=FREY_TEST, hide=0.5, seed=ctx.seed, max_iters=_iters(ctx, 300))
    cal_info["frey dynamical, frames of its sequence"] = dict(cal.meta(), scale_range=_range(cal.scale))
    (rec, _) = _quiet(dyn.reconstruct, preds[label], t_after, sequence=0, max_iters=_iters(ctx, 300))
    S.add("dynamical reconstruct", label, "calibrated", *rec, Y[after], np.isnan(preds[label]))
    forecast = f"Frey frames {FREY_TRAIN}-{FREY_TRAIN + FREY_TEST - 1}, nothing observed"
    mean, var = dyn.forecast(t_after, sequence=0, calibrated=False)
    S.add("dynamical forecast", forecast, "pre-trained model", mean, var, Y[after])
    cal = dyn.calibrate(path="forecast", horizon=FREY_TEST, seed=ctx.seed)
    cal_info["frey dynamical, forecast"] = dict(cal.meta(), scale_range=_range(cal.scale))
    S.add("dynamical forecast", forecast, "calibrated", *dyn.forecast(t_after, sequence=0), Y[after])


def _cal_row(name: str, v: dict) -> list:
    """A row of the calibrations' table from ``Calibration.meta()``."""
    if v.get("stretches"):
        held = f"{v['stretches']} " + (f"stretches of {v['horizon']} frames" if v["horizon"] else "sequences")
    else:
        held = f"{v['n_rows']} rows" + (f", folds of {v['n_groups']} trials" if v.get("n_groups") else "")
    spread = v.get("unit_coverage") or []
    return [name, held, v["n_entries"], round(100 * v["before"]["coverage"]["0.95"], 1),
            round(100 * v["after"]["coverage"]["0.95"], 1),
            f"{100 * spread[0]:.0f}-{100 * spread[2]:.0f}" if spread else "-", f"{v['model_rmse']:.4g}",
            "-" if not np.isfinite(v["knn_rmse"]) else f"{v['knn_rmse']:.4g}", v["knn_k"] or "-"]


def _range(scale: np.ndarray) -> list:
    return [float(scale.min()), float(scale.max())]


# --------------------------------------------------------------------- regression paths
def mackey_glass(ctx: Context, S: Scored, info: dict) -> None:
    from bgplvm import AutoregressiveGP, UncertainInputGPR

    from .mackey_glass import simulate

    origins = MG_ORIGINS if not ctx.quick else MG_ORIGINS[:2]
    for delay in MG_DELAYS:
        x = simulate(MG_LONG + max(origins) + MG_AHEAD, delay=delay)
        train = x[:MG_TRAIN]
        data = f"Mackey-Glass delay {delay:g}, 100 steps ahead from {len(origins)} origins"
        kw = dict(window=MG_WINDOW, num_inducing=MG_M, seed=ctx.seed)
        it = _iters(ctx, 3000)
        n = dict(n_samples=1000 if not ctx.quick else 50)
        for how, model_kw, fc_kw in [
                ("defaults (signal variance tied, sampled trajectories)", {}, {}),
                ("paper's choices (signal variance learned, Gaussian moments)", dict(tie_signal_variance=False),
                 dict(method="moments")),
                ("zero-variance feedback (defaults' fit)", dict(propagate_uncertainty=False), {})]:
            m = AutoregressiveGP(train, **kw, **model_kw).fit(max_iters=it, progress=False)
            _score_forecasts(S, info, m, x, MG_TRAIN, origins, data, how, {**n, **fc_kw})
            if not model_kw:
                _calibrated_forecasts(ctx, S, info, m, x, MG_TRAIN, origins, data, how)
        _score_forecasts(S, info, _held_noise_fit(train, kw, it), x, MG_TRAIN, origins, data, MG_HELD_NOISE, n)
        future = np.concatenate([x[MG_TRAIN + o:MG_TRAIN + o + MG_AHEAD] for o in origins])
        t = np.arange(1, len(x) + 1, dtype=np.float64) / MG_TRAIN
        gp = UncertainInputGPR(t[:MG_TRAIN, None], train[:, None], num_inducing=MG_M, fixed_inputs=True, seed=ctx.seed)
        gp.fit(max_iters=it, progress=False)
        at = np.concatenate([t[MG_TRAIN + o:MG_TRAIN + o + MG_AHEAD] for o in origins])
        mean, var = gp.predict(at[:, None])
        S.add("AutoregressiveGP.forecast", data, "plain GP on (t, y)", mean[:, 0], var[:, 0], future,
              block=MG_AHEAD)
        # the same series and origins' offsets after a longer training series
        long = AutoregressiveGP(x[:MG_LONG], **kw).fit(max_iters=it, progress=False)
        data_long = f"Mackey-Glass delay {delay:g}, {MG_LONG} training steps, 100 ahead from {len(origins)} origins"
        how = "defaults (signal variance tied, sampled trajectories)"
        _score_forecasts(S, info, long, x, MG_LONG, origins, data_long, how, n)
        _calibrated_forecasts(ctx, S, info, long, x, MG_LONG, origins, data_long, how)
        _score_forecasts(S, info, _held_noise_fit(x[:MG_LONG], kw, it), x, MG_LONG, origins, data_long,
                         MG_HELD_NOISE, n)


def _held_noise_fit(train: np.ndarray, kw: dict, iters: int):
    """The defaults' model with its noise variance held at ``MG_NOISE_FLOOR`` of the series'
    variance (the defaults' fit takes it to ~2e-5): does a floor help the far forecasts?"""
    from bgplvm import AutoregressiveGP

    m = AutoregressiveGP(train, **kw)
    m.noise_variance = MG_NOISE_FLOOR * train.var()
    m.freeze("noise_variance")
    return m.fit(max_iters=iters, progress=False)


def _score_forecasts(S: Scored, info: dict, m, x, n_train: int, origins, data: str, how: str, fc_kw: dict,
                     **forecast) -> None:
    """Score ``m``'s forecasts of MG_AHEAD steps from each origin after ``n_train`` steps."""
    train = x[:n_train]
    future = np.concatenate([x[n_train + o:n_train + o + MG_AHEAD] for o in origins])
    lo, hi = train.min() - np.ptp(train), train.max() + np.ptp(train)
    fc, warned = zip(*(_spread_warned(m, x[:n_train + o], {**fc_kw, **forecast}) for o in origins))
    mean, var = np.concatenate([f[0] for f in fc]), np.concatenate([f[1] for f in fc])
    label = how if not forecast.get("calibrated") else "calibrated (m.calibrate(), by horizon)"
    S.add("AutoregressiveGP.forecast", data, label, mean, var, future, block=MG_AHEAD)
    info[f"{data} | {label}"] = dict(
        inside_range=bool(np.all((mean > lo) & (mean < hi))), max_var_over_series_var=float(var.max() / train.var()),
        range_variance_over_series_var=float(np.ptp(train) ** 2 / 4 / train.var()),
        origins_warned=int(sum(warned)),
        noise_variance=m.noise_variance, signal_variance_over_series_var=m.kernel_variance / train.var(),
        coverage_95_by_horizon=_by_horizon(mean, var, future, len(origins)),
        coverage_95_by_origin=[float(np.mean(np.abs(f[0] - future[i * MG_AHEAD:(i + 1) * MG_AHEAD])
                                             <= 1.959964 * np.sqrt(f[1]))) for i, f in enumerate(fc)])


def _spread_warned(m, history: np.ndarray, kw: dict) -> tuple:
    """(m.forecast(MG_AHEAD, history=history, **kw), whether it warned ForecastSpreadWarning)."""
    from bgplvm import ForecastSpreadWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ForecastSpreadWarning)
        out = m.forecast(MG_AHEAD, history=history, **kw)
    spread = [issubclass(w.category, ForecastSpreadWarning) for w in caught]
    for w, counted in zip(caught, spread):
        if not counted:  # any other warning is shown as usual
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    return out, any(spread)


def _calibrated_forecasts(ctx: Context, S: Scored, info: dict, m, x, n_train: int, origins, data: str,
                          how: str) -> None:
    """``m.calibrate()`` on its own series, then its calibrated forecasts scored as above."""
    cal = m.calibrate(seed=ctx.seed, **({} if not ctx.quick else dict(horizon=10, n_samples=50)))
    ctx.log(f"  {data}: {cal.describe()}")
    info[f"{data} | calibration"] = dict(scale=[float(v) for v in cal.scale], horizon=cal.horizon,
                                         stretches=cal.stretches, by_horizon=cal.by_horizon,
                                         before=cal.before["coverage"], after=cal.after["coverage"])
    _score_forecasts(S, info, m, x, n_train, origins, data, how, dict(n_samples=1000 if not ctx.quick else 50),
                     calibrated=True)


def _mg_note(scores: dict, mg_info: dict) -> str:
    """The note on AutoregressiveGP.forecast, with this run's numbers."""
    defaults = "defaults (signal variance tied, sampled trajectories)"
    calibrated = "calibrated (m.calibrate(), by horizon)"

    def row(data, how):
        key = f"AutoregressiveGP.forecast | {data} | {how}"
        if key not in scores:
            return "-"
        info = mg_info[f"{data} | {how}"]
        hz = " / ".join(f"{100 * v:.0f}" for v in info["coverage_95_by_horizon"].values())
        return (f"{100 * scores[key]['coverage']['0.95']:.1f} % (steps 1-10 / 11-30 / 31-100: {hz} %; largest "
                f"variance {info['max_var_over_series_var']:.1f}x the series', past its range's "
                f"{info['range_variance_over_series_var']:.1f}x from {info['origins_warned']} of "
                f"{len(info['coverage_95_by_origin'])} origins; RMSE "
                f"{scores[key]['rmse']:.3f})")

    parts = []
    for data in sorted({k.split(" | ")[0] for k in mg_info if "Mackey-Glass" in k}):
        parts.append(f"{data}: as fitted {row(data, defaults)}; calibrated {row(data, calibrated)}; noise held at "
                     f"{MG_NOISE_FLOOR:g} of the series' variance {row(data, MG_HELD_NOISE)}.")
    return ("**AutoregressiveGP.forecast**, from 20 origins (the model fitted once on the training steps; "
            "forecast(history=) from each): the learned signal variance (17-19x the series' variance) and Gaussian "
            "windows off the series' attractor made the paper's forecasts up to 60-70x the series variance; the "
            "defaults (signal variance tied to the series', sampled trajectories) stay inside the series' range. "
            "Sampled trajectories drew each step's f independently until this run, and their intervals were too "
            "narrow in the first steps (delay 30: 54 / 76 / 95 % in steps 1-10 / 11-30 / 31-100, 87.2 % in all): "
            "the model's errors at a window and at the next one along the same path are correlated, and "
            "independent draws let them cancel. Each trajectory now draws u ~ q(u) once, so f is one function along "
            "its path, plus the residual the inducing inputs cannot express at each step (bgplvm.trajectories). "
            "calibrate() learns a scale per horizon from held-out "
            "stretches of the training series, each forecast with q(u) recomputed without the pairs that see it: "
            "on 150 steps a stretch takes a third of the pairs out and the held-out forecasts are much worse than "
            "the model's (calibrate() warns), on 600 steps a fifth. The defaults' fit takes the noise to ~2e-5 "
            f"of the series' variance; a floor (the noise held at {MG_NOISE_FLOOR:g} of it) is scored beside them, "
            "and the defaults keep the fitted noise (bgplvm.autoregressive says why). forecast() warns "
            "(ForecastSpreadWarning) where a forecast's variance passes (max - min)^2 / 4 of the training series, "
            "the most a distribution inside the series' range can have (Popoviciu's inequality); the rows say from "
            "how many origins it did. " + " ".join(parts))


def _band_note(rows: list) -> str:
    """Which of the model's final rows on held-out data (per path and data: the calibrated
    row, else the defaults'; in-sample rows left out) miss 93-97 % at 95 %, and whether
    their bootstrap interval reaches the band."""
    final = {}
    for r in rows:
        if "in-sample" in r[1] or not r[2].startswith(("calibrated", "defaults")):
            continue
        if (r[0], r[1]) not in final or r[2].startswith("calibrated"):
            final[(r[0], r[1])] = r
    final = list(final.values())
    missed = [r for r in final if not 93 <= r[7] <= 97]
    if not final:
        return ""
    if not missed:
        return (f"Every one of the {len(final)} final rows on held-out data (calibrated, else the defaults') holds "
                "93-97 % of the truth at 95 %.")

    def ci(r):
        return tuple(float(v) for v in r[11].split("-"))

    def say(rs):
        return "; ".join(f"{r[0]}, {r[1]}, {r[2].split(' (')[0]}: {r[7]:.1f} % ({r[11]})" for r in rs)

    reach = [r for r in missed if ci(r)[0] <= 97 and ci(r)[1] >= 93]
    beyond = [r for r in missed if r not in reach]
    parts = ([f"still reach the band for {say(reach)}"] if reach else []) + (
        [f"lie outside it for {say(beyond)}"] if beyond else [])
    return (f"**Outside 93-97 %**: {len(missed)} of the {len(final)} final rows on held-out data (calibrated, else "
            f"the defaults'). Their 90 % bootstrap intervals " + "; they ".join(parts) + ".")


def _uig_note(scores: dict, info: dict) -> str:
    """UncertainInputGPR's coverage as fitted, at the true Sigma_z and calibrated, in this run."""
    key = f"UncertainInputGPR.predict | {UIG_DATA} | "
    try:
        a, t, b = (scores[key + h]["coverage"]["0.95"] for h in (UIG_FITTED, UIG_TRUE_SIGMA, UIG_CALIBRATED))
    except KeyError:
        return ""
    sz, d = info["Sigma_z"], info["coverage_95_by_draw"]

    def span(v, fmt="{:.1f}", times=100):
        return f"{fmt.format(times * min(v))}-{fmt.format(times * max(v))}"

    narrowed = sum(c < f for c, f in zip(d[UIG_CALIBRATED], d[UIG_FITTED]))
    return (f"Over {len(sz)} draws of the data the learned Sigma_z is {span(sz, '{:.3f}', 1)} (the truth "
            f"{UIG_INPUT_SD ** 2:g}). The training rows whose true input lies more than {UIG_INPUT_SD:g} from z_n "
            f"({span(info['far_rows'], '{:.0f}', 1)} of {UIG_TRAIN}) are where it is lost: their q(x_n) means sit "
            f"{span(info['far_mu_dev'], '{:.3f}', 1)} from z_n in mean square against the true inputs' "
            f"{span(info['far_x_dev'], '{:.3f}', 1)}, and {span(info['far_off'], '{:.0f}')} % of them end more than "
            f"{UIG_INPUT_SD:g} from the true x (a unimodal q(x_n) on another branch of sin(2x), or short of it). "
            f"The 95 % intervals hold {100 * a:.1f} % (draws: {span(d[UIG_FITTED])} %); predicting with Sigma_z at "
            f"the truth they hold {100 * t:.1f} % (draws: {span(d[UIG_TRUE_SIGMA])} %): the narrow Sigma_z is what "
            f"they miss by. calibrate() (held-out training rows predicted at their observed inputs, q(u) without "
            f"their fold) gives {100 * b:.1f} % (draws: {span(d[UIG_CALIBRATED])} %; it narrowed the intervals in "
            f"{narrowed} of {len(sz)} draws): {UIG_TRAIN} training rows leave its scale uncertain by about +-1.5 % "
            f"of coverage.")


def _by_horizon(mean, var, truth, n_origins: int) -> dict:
    """{"1-10": coverage of the 95 % intervals of those steps ahead over all origins, ...}."""
    inside = (np.abs(mean - truth) <= 1.959964 * np.sqrt(var)).reshape(n_origins, MG_AHEAD)
    return {f"{a}-{b}": float(inside[:, a - 1:b].mean()) for a, b in MG_HORIZONS}


def _uig_draw(seed: int, iters: int) -> tuple[dict, dict, np.ndarray]:
    """One draw of the sin(2x) data (``UIG_TRAIN`` training, ``UIG_TEST`` test rows) and the
    predictions of its test rows by each method: ({how: (mean, var)}, the fit (learned
    Sigma_z; over the training rows whose true x lies more than the noise sd from z: how many,
    the mean squared distance of q(x_n)'s mean and of x from z, and the fraction whose mean
    ends more than the noise sd from x), truth)."""
    from bgplvm import UncertainInputGPR
    from bgplvm.baselines import KNNBaseline

    rng = np.random.default_rng(seed)

    def draw(n):
        x = rng.uniform(-3, 3, n)
        return x, x + UIG_INPUT_SD * rng.standard_normal(n), np.sin(2 * x) + 0.05 * rng.standard_normal(n)

    x, z, y = draw(UIG_TRAIN)
    _, zt, yt = draw(UIG_TEST)
    unc = UncertainInputGPR(z[:, None], y[:, None], num_inducing=30, seed=seed).fit(max_iters=iters, progress=False)
    mu, far = unc.latent_mean[:, 0], np.abs(x - z) > UIG_INPUT_SD  # training rows whose input lies far from z
    fit = dict(Sigma_z=float(unc.input_noise_variance[0]), far_rows=int(far.sum()),
               far_mu_dev=float(np.mean((mu - z)[far] ** 2)), far_x_dev=float(np.mean((x - z)[far] ** 2)),
               far_off=float(np.mean(np.abs(mu - x)[far] > UIG_INPUT_SD)))
    gp = UncertainInputGPR(z[:, None], y[:, None], num_inducing=30, fixed_inputs=True, seed=seed)
    gp.fit(max_iters=iters, progress=False)
    out = {UIG_FITTED: unc.predict(zt[:, None]),
           UIG_TRUE_SIGMA: unc.predict(zt[:, None], np.full((zt.size, 1), UIG_INPUT_SD ** 2), input_noise=False)}
    unc.calibrate(seed=seed)
    out[UIG_CALIBRATED] = unc.predict(zt[:, None])
    out["plain GP (fixed_inputs=True)"] = gp.predict(zt[:, None])
    mean, var = KNNBaseline(np.c_[z, y], hide=0.5, seed=seed).predict(np.c_[zt, np.full(zt.size, np.nan)])
    out["k-NN baseline"] = (mean[:, 1:], var[:, 1:])
    return out, fit, yt[:, None]


def uncertain_regression(ctx: Context, S: Scored, info: dict | None = None) -> None:
    """UncertainInputGPR on ``UIG_DRAWS`` draws of the sin(2x) data (seeds ctx.seed + k),
    each method's predictions of the draws' test rows scored together; ``info`` gets each
    draw's 95 % coverage per method and its learned Sigma_z."""
    from bgplvm.metrics import gaussian_scores

    info = {} if info is None else info
    preds, truth, fits = {}, [], []
    for k in range(UIG_DRAWS if not ctx.quick else 1):
        out, fit, yt = _uig_draw(ctx.seed + k, _iters(ctx, 1000))
        for how, mv in out.items():
            preds.setdefault(how, []).append(mv)
        truth.append(yt)
        fits.append(fit)
    info.update({key: [f[key] for f in fits] for key in fits[0]})
    info.update(coverage_95_by_draw={
        how: [float(gaussian_scores(m[:, 0], v[:, 0], t[:, 0]).coverage[0.95]) for (m, v), t in zip(mv, truth)]
        for how, mv in preds.items()})
    for how, mv in preds.items():
        S.add("UncertainInputGPR.predict", UIG_DATA, how, np.concatenate([m for m, _ in mv]),
              np.concatenate([v for _, v in mv]), np.concatenate(truth))
    ctx.log(f"  UncertainInputGPR: Sigma_z {np.round(info['Sigma_z'], 3).tolist()}")


def semi_supervised(ctx: Context, S: Scored) -> None:
    from bgplvm import SemiSupervisedGPR, UncertainInputGPR
    from bgplvm.baselines import KNNBaseline

    from .semi_supervised import N_OBS, N_PART, N_TEST, missing_mask, simulate

    X, Y = simulate(ctx.seed)
    rng = np.random.default_rng(1000 + ctx.seed)
    obs, part, test = np.arange(N_OBS), np.arange(N_OBS, N_OBS + N_PART), np.arange(N_OBS + N_PART, N_OBS + N_PART + N_TEST)
    Xm = X[: N_OBS + N_PART].copy()
    Xm[part] = np.where(missing_mask(N_PART, X.shape[1], 0.5, rng), np.nan, X[part])
    data = "semi-supervised simulation, 50 % of the partial rows' inputs missing"
    it = _iters(ctx, 1000)
    m = SemiSupervisedGPR(Xm, Y[: N_OBS + N_PART], num_inducing=30, seed=ctx.seed).fit(max_iters=it, progress=False)
    S.add("SemiSupervisedGPR.predict", data, "semi-supervised GP", *m.predict(X[test]), Y[test])
    xm, xs = X[obs].mean(0), X[obs].std(0)
    gp = UncertainInputGPR((X[obs] - xm) / xs, Y[obs], num_inducing=30, fixed_inputs=True, seed=ctx.seed)
    gp.fit(max_iters=it, progress=False)
    S.add("SemiSupervisedGPR.predict", data, "plain GP (complete rows)", *gp.predict((X[test] - xm) / xs), Y[test])
    knn = KNNBaseline(np.c_[Xm, Y[: N_OBS + N_PART]], hide=0.3, seed=ctx.seed)
    mean, var = knn.predict(np.c_[X[test], np.full(Y[test].shape, np.nan)])
    q = X.shape[1]
    S.add("SemiSupervisedGPR.predict", data, "k-NN baseline", mean[:, q:], var[:, q:], Y[test])


# --------------------------------------------------------------------- figure and report
def figure(path, rows: list, numbers: dict) -> None:
    """The 95 % interval's coverage per path and data (one line each): the model as fitted
    or with the paper's choices (hollow; dynamical and regression models are not
    calibrated), calibrated or by the new defaults (filled), the baselines (grey crosses),
    each with its 90 % bootstrap interval (a thin bar); the band 93-97 % shaded."""
    from bgplvm.explorer.figures import Axes

    from . import lineplots as lp

    lines = list(dict.fromkeys((r[0], r[1]) for r in rows))
    h = 26 * len(lines) + 110
    c = lp.canvas(1330, h)
    left, width = 560, 480
    ax = Axes(c, (left, 50, width, h - 100), (0.0, 1.0), (len(lines) - 0.5, -0.5))
    lo, hi = ax.px(0.93), ax.px(0.97)
    c.rect(lo, ax.py(-0.5), hi - lo, ax.py(len(lines) - 0.5) - ax.py(-0.5), fill="#2ca02c", opacity=0.15)
    c.polyline([(ax.px(0.95), ax.py(-0.5)), (ax.px(0.95), ax.py(len(lines) - 0.5))], "#2ca02c", width=1.0)
    for i, (p, d) in enumerate(lines):
        c.text(left - 8, ax.py(i), f"{p}: {d}"[:80], size=10, anchor="end", valign="middle")
        for r in rows:
            if (r[0], r[1]) != (p, d):
                continue
            x, y = ax.px(r[7] / 100), ax.py(i)
            ci = numbers[f"{p} | {d} | {r[2]}"]["coverage_95_ci"]
            c.polyline([(ax.px(ci[0]), y), (ax.px(ci[1]), y)], "#555555", width=0.8)
            if "baseline" in r[2] or "plain GP" in r[2]:
                c.polyline([(x - 4, y - 4), (x + 4, y + 4)], "#777777", width=1.5)
                c.polyline([(x - 4, y + 4), (x + 4, y - 4)], "#777777", width=1.5)
            elif r[2] == "calibrated" or r[2].startswith("defaults"):
                c.circle(x, y, 5, fill="#1f77b4")
            else:  # as fitted: also the models calibrate() does not apply to
                c.circle(x, y, 5, stroke="#d62728", width=1.6)
    ax.frame(title="held-out truth inside the nominal 95 % interval (bars: its 90 % bootstrap interval)",
             xlabel="coverage", yticks=False)
    ax.legend([("calibrated / new defaults", "#1f77b4"), ("as fitted / paper's choices", "#d62728"),
               ("baselines (k-NN, plain GP)", "#777777")], x=left + width + 16, y=60)
    from .report import atomic_write_bytes

    atomic_write_bytes(path, c.to_bytes())


def run(ctx: Context) -> Result:
    import bgplvm

    bgplvm.warmup()
    t0 = time.perf_counter()
    S, cal_info, mg_info, uig_info, timings = Scored(ctx), {}, {}, {}, {}
    sections = [("oil", lambda: oil(ctx, S, cal_info)), ("oil missing", lambda: oil_missing(ctx, S, cal_info)),
                ("CMU 35", lambda: cmu35(ctx, S, cal_info)),
                ("CMU 35 missing", lambda: cmu35_missing(ctx, S, cal_info)), ("Frey", lambda: frey(ctx, S, cal_info)),
                ("Mackey-Glass", lambda: mackey_glass(ctx, S, mg_info)),
                ("uncertain inputs", lambda: uncertain_regression(ctx, S, uig_info)),
                ("semi-supervised", lambda: semi_supervised(ctx, S))]
    only = os.environ.get("BGPLVM_CALIBRATION_ONLY")  # a comma-separated subset of the sections, to debug
    for name, fn in sections:
        if only and name not in only.split(","):
            continue
        ctx.log(f"calibration: {name} ...")
        t = time.perf_counter()
        fn()
        timings[name] = time.perf_counter() - t
    fig = "coverage.png"
    figure(ctx.figure_path("calibration", fig), S.rows, S.numbers)
    table = Table(title="Held-out truth inside the central intervals (%), NLPD and RMSE, per prediction path",
                  columns=COLUMNS, rows=S.rows,
                  note=("'as fitted': the model's own variances; 'calibrated': after m.calibrate() on held-out "
                        "entries of the training rows, or held-out stretches of a dynamical model's training "
                        "sequences or of an autoregressive model's series, or held-out training rows of a regression "
                        "(none of the scored truth). SemiSupervisedGPR is not calibrated (calibrate() refuses it, "
                        "saying why). '95 %: 90 % CI': the 90 % interval of the 95 % coverage by a moving-block "
                        "bootstrap over the rows in their order (bgplvm.metrics.coverage_interval; blocks of "
                        "ceil(rows^(1/3)) rows, or one origin's 100 forecast steps): neighbouring frames' errors are "
                        "correlated, so a test trial of 62 frames pins its coverage down to several points. It is the "
                        "spread of the scored rows only, not that of refitting on other training data "
                        "(UncertainInputGPR's draws of the data spread further: its note below)."))
    t2 = Table(title="The calibrations: 95 % coverage of their own held-out entries (after: cross-fitted, each "
                     "half with the scales learned on the other; for a dynamical model, the range over its held-out "
                     "stretches too), and the point errors of the model and k-NN there",
               columns=["model", "held out", "entries", "95 % before", "95 % after", "one stretch", "model RMSE",
                        "k-NN RMSE", "k"],
               rows=[_cal_row(k, v) for k, v in cal_info.items()])
    notes = [
        "Causes, measured (issue 44). **reconstruct (oil test)**: half an oil row fits more than one place in "
        "the latent space and q(x*) is unimodal: for the worst 300 rows the bound of the half row is higher "
        "(median +3.5 nats) at the q(x*) it finds than at the complete row's; starts spread over the latent "
        "space (10 nearest, 20 random, a mixture weighted by the bounds) reach the same optimum (61 % coverage). "
        "More inducing inputs do not help (M = 100: RMSE 0.186 against 0.176). Calibration fixes the intervals; "
        "k-NN keeps the lower RMSE, and reconstruct says so in a warning.",
        "**impute (oil, CMU)**: a missing entry is predicted at the jointly fitted q(x_n) with a mean-field, "
        "unimodal q(x_n): the intervals are a little narrow (and more so as more is missing); calibrated on the "
        "impute path with the data's own missing fraction.",
        "**reconstruct (CMU)**: whole body parts are missing and the test trial is a new trial: calibrated with "
        "hide= the part's columns (random entries would not do: the other columns of the part are missing too) "
        "and folds of whole training trials (groups=). The body's intervals come out wide (97.8 %).",
        "**Frey frames 300-399** come after the training frames (the face moves on) and fit the model worse: "
        "the residuals of their visible half say so (a row factor of 1.8 at the median), and the adaptive "
        "calibration widens each frame's intervals by its own: 76.8 % -> 94.0 % (frames held out within the "
        "window: 96.6 %).",
        "**Dynamical models** are calibrated on held-out stretches of their own sequences, each predicted as "
        "the model predicts new frames (bgplvm.calibration_sequences): CMU, whole training trials as new "
        "sequences with the part hidden; Frey, the 100 frames after origins 100 and 200, forecast or half seen. "
        "Test trial 35_29 is harder for the dynamical model than every held-out training trial (legs RMSE 0.081 "
        "against 0.055; the held-out trials' 95 % coverage after calibration 92-97 %, 35_29's 89.4 %), and its "
        "visible entries do not say so (their mean squared normalised residual 0.42, the training trials' "
        "0.42-0.68): a calibration learned from the training trials cannot see it. The Frey forecast rests on "
        "two held-out stretches (91-98 % each): 92.4 % on frames 300-399.",
        _mg_note(S.numbers, mg_info),
        _band_note(S.rows),
        "**UncertainInputGPR** starts q(X) and Sigma_z at 1e-2 of the inputs' variance (from 1e-6 the fit "
        "kept Sigma_z at ~1e-6 and predicted as the plain GP): Sigma_z is learned and the NLPD is lower than the "
        "plain GP's at the same RMSE. " + _uig_note(S.numbers, uig_info),
    ]
    return Result(name="calibration", title="Calibrated uncertainty on every prediction path",
                  notes=[n for n in notes if n],
                  paper_section="none (issue 44): the paper reports no coverage",
                  tables=[table, t2], figures=[fig],
                  numbers=dict(scores=S.numbers, calibrations=cal_info, mackey_glass=mg_info,
                               uncertain_inputs=uig_info, section_s=timings),
                  settings=dict(seed=ctx.seed, oil=dict(Q=OIL_Q, M=OIL_M, iters=OIL_ITERS),
                                missing=dict(fractions=MISSING_FRACTIONS, iters=MISSING_ITERS),
                                frey=dict(train=FREY_TRAIN, test=FREY_TEST, static_iters=FREY_STATIC_ITERS),
                                mackey_glass=dict(delays=MG_DELAYS, train=MG_TRAIN, ahead=MG_AHEAD, window=MG_WINDOW,
                                                  M=MG_M)),
                  wall_time_s=time.perf_counter() - t0)
