"""``bgplvm reproduce walk``: forecast a motion-capture walk beyond its last training frame
(the generative use of the dynamical model, paper section ``sec:experimentsMocap`` and
"Predictions in the Dynamical Model").

One CMU 35 walk (``TRIAL``, 'cmu35gplvm' features, 30 frames/s) is cut after ``N_TRAIN``
frames; the dynamical model is fitted on those and ``forecast`` gives q(X*) at the later
time stamps from the GP conditional of the time prior, then the poses through the
uncertain-input predictive. Beside the truth we report the RMSE of the 50 joint angles
(degrees) per forecast frame, with two baselines that need no model: holding the last
training pose and the mean training pose. The figure is a strip of skeletons over time,
the generated ones with circles of 2 sd of each joint's position (from samples of the
predictive).
"""

from __future__ import annotations

import time

import numpy as np

from . import drawing
from .cmu35 import ApiMissing, ard_kept, require
from .report import Context, Result, Table

TRIAL = "35_08"
N_TRAIN = 80
LATENT_DIM = 9
NUM_INDUCING = 40
TIME_KERNEL = "rbf"
FIT_ITERS = 2000
QUICK_FIT_ITERS = 40
SHOW_EVERY = 3
N_ANGLES = 50


def load_walk(mirror=None):
    """(Y (T, 59) of ``TRIAL``, renderer)."""
    import bgplvm_datasets as bd

    ds = bd.load("cmu35", mirror=mirror, progress=False)
    s = ds.meta["trials"].index(TRIAL)
    return ds.Y[ds.sequence == s], ds.renderer


def angle_rmse_per_frame(Y_true: np.ndarray, Y_pred: np.ndarray) -> np.ndarray:
    """(n,) RMSE of the 50 joint angles (radians in the features) in degrees, per frame."""
    d = np.degrees(np.asarray(Y_true)[:, :N_ANGLES] - np.asarray(Y_pred)[:, :N_ANGLES])
    return np.sqrt(np.mean(d * d, axis=1))


def run(ctx: Context) -> Result:
    name = "walk"
    Y, renderer = load_walk(ctx.mirror)
    Y_train, Y_future = Y[:N_TRAIN], Y[N_TRAIN:]
    t_train = np.arange(N_TRAIN, dtype=np.float64)
    t_new = np.arange(N_TRAIN, len(Y), dtype=np.float64)
    iters = QUICK_FIT_ITERS if ctx.quick else FIT_ITERS
    baselines = {"hold the last training pose": np.repeat(Y_train[-1:], len(Y_future), 0),
                 "mean training pose": np.repeat(Y_train.mean(0, keepdims=True), len(Y_future), 0)}
    rmse = {k: angle_rmse_per_frame(Y_future, v) for k, v in baselines.items()}
    notes, info, figures = [], {}, []
    mean = var = None
    try:
        cls = require("DynamicalGPLVM", "fit", "forecast", issue=8)
        m = cls(Y_train, t_train, latent_dim=LATENT_DIM, num_inducing=NUM_INDUCING, kernel="rbf",
                time_kernel=TIME_KERNEL, seed=ctx.seed)
        t0 = time.perf_counter()
        m.fit(max_iters=iters, progress=False)
        info["fit_s"] = time.perf_counter() - t0
        info["ard_kept"] = ard_kept(m)
        info["iterations"] = (getattr(m, "fit_info", {}) or {}).get("iterations")
        ctx.log(f"walk: fit {info['fit_s']:.0f} s")
        mean, var = (np.asarray(a) for a in m.forecast(t_new, sequence=0))
        rmse = {"Dyn. VGP-LVM forecast": angle_rmse_per_frame(Y_future, mean), **rmse}
        figures.append(_strip(ctx, name, renderer, Y_train, Y_future, mean, var))
    except ApiMissing as e:
        notes.append(f"Dyn. VGP-LVM: {e}; only the baselines are reported and no figure is drawn.")

    horizons = [(1, 10), (11, 20), (21, len(Y_future))]
    cols = ["forecast"] + [f"frames +{a}..+{b}" for a, b in horizons] + ["all"]
    rows = [[k] + [round(float(v[a - 1:b].mean()), 2) for a, b in horizons] + [round(float(v.mean()), 2)]
            for k, v in rmse.items()]
    table = Table(f"Walk {TRIAL}: forecast after frame {N_TRAIN} (RMSE of the 50 joint angles, degrees)",
                  cols, rows,
                  f"{N_TRAIN} training frames, {len(Y_future)} forecast frames at 30 frames/s; "
                  f"time kernel {TIME_KERNEL}, Q = {LATENT_DIM}, M = {NUM_INDUCING}."
                  + (f" Fit {info['fit_s']:.0f} s, ARD keeps {info['ard_kept']} of {LATENT_DIM}." if "fit_s" in info else "")
                  + (" --quick: fitted for a few iterations only." if ctx.quick else ""))
    numbers = {"rmse_per_frame": {k: v.tolist() for k, v in rmse.items()}, "info": info}
    if var is not None:
        numbers["forecast_mean_sd_deg"] = np.degrees(np.sqrt(var[:, :N_ANGLES].mean(1))).tolist()
    settings = {"trial": TRIAL, "n_train": N_TRAIN, "n_forecast": len(Y_future), "latent_dim": LATENT_DIM,
                "num_inducing": NUM_INDUCING, "time_kernel": TIME_KERNEL, "fit_iters": iters,
                "seed": ctx.seed, "time_stamps": "frame index"}
    return Result(name=name, title=f"Forecasting a CMU 35 walk ({TRIAL}) beyond its last training frame",
                  paper_section="Human Motion Capture Data; Predictions in the Dynamical Model",
                  tables=[table], numbers=numbers, settings=settings, figures=figures, notes=notes)


def _strip(ctx, name, renderer, Y_train, Y_future, mean, var) -> str:
    from explorer.state import pose_spread

    fig = "walk_forecast.png"
    idx = np.arange(0, len(Y_future), SHOW_EVERY)
    last = [(renderer.positions(Y_train[-1]), None)]
    truth = last + [(renderer.positions(Y_future[i]), None) for i in idx]
    gen = [(renderer.positions(Y_train[-1]), None)]
    gen += [(renderer.positions(mean[i]), pose_spread(renderer, mean[i], var[i])) for i in idx]
    cols = [f"t={N_TRAIN - 1} (last train)"] + [f"+{i + 1}" for i in idx]
    drawing.pose_strip([("true walk", "#333333", truth), ("generated (2 sd)", "#1f3b73", gen)],
                       renderer.connections, cols, ctx.figure_path(name, fig),
                       title=f"CMU {TRIAL}: poses generated from time stamps alone after frame {N_TRAIN - 1}")
    return fig
