"""``bgplvm reproduce mrd-pose``: the pose of a person from the silhouette it casts (MRD).

Data: ``ankur_pose`` (Agarwal & Triggs), two views of each frame, 'silhouette' (100
numbers) and 'pose' (21 body points in 3-D, 63 numbers); 1927 training frames and the 418
frames of its test split. The paper (Damianou, Ek, Titsias & Lawrence, ICML 2012, section
"Human pose") fits MRD to both views of the training frames, then for a test silhouette
infers q(x*) from the silhouette alone and reads the pose off the latent space.

Error: the mean over test frames and the 21 body points of the Euclidean 3-D distance
between predicted and true point, in the data's units (svargplvm's ``xyzankurError``).

Rows (all from the 1927 training frames; the test frames are used only for the errors):

- MRD (Q = ``LATENT_DIM``, M = ``NUM_INDUCING`` per view, ``ITERS`` iterations), q(x*) from
  the silhouette (``MRD.infer_latent``, started at the nearest training silhouette's q(x_n)),
  then the pose by one of four read-outs:
  *GP mean at x** (``MRD.reconstruct``: the pose view's predictive mean at q(x*));
  *GP mean, best of K starts* (``MRD.infer_candidates`` from the K nearest training
  silhouettes, the best bound kept);
  *nearest training latent in the shared dims* (the paper's read-out: the training pose
  whose latent mean is nearest x* in the dimensions both views switch on; not applicable
  when none is shared);
  *GP mean, undetermined dims from the nearest silhouette*
  (``MRD.reconstruct(..., undetermined="nearest")``: q(x*) in the dimensions the silhouette
  switches on, the nearest training silhouette's q(x_n) in the others, then the pose view's
  predictive mean there; svargplvm's demo blends these two points likewise).
- the pose of the nearest training silhouette (Euclidean distance); the mean training pose.
- GPy 1.15's ``MRD`` (same Q, M, iteration cap), run in ``.bench-venv`` as a subprocess
  (``reproduce/mrd_pose_gpy.py``) where that venv exists.

Which start (``init`` of q(X), and ``widths``, the kernels' starting inverse widths:
vargplvm's or nearly linear as GPy's) and which read-out the headline MRD row uses is chosen
on training frames only: each of the four starts is fitted on the training frames less a
held-out block (``VALIDATION``, 300 frames of the long walk), and the (start, read-out) with
the lowest error on that block is refitted on all 1927 frames. The segmentation and the ARD figure are
those of that final fit.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np

from . import gpy_worker
from .report import Context, Result, Table

LATENT_DIM, NUM_INDUCING, ITERS = 10, 50, 1000
N_STARTS = 5  # starts of the "best of K starts" read-out
VALIDATION = (900, 1200)  # held-out training frames for the choices (inside the long walk, frames 471-1530)
INITS = ("scaled_pca", "first_view")
WIDTHS = ("vargplvm", "long")
STARTS = [(init, widths) for widths in WIDTHS for init in INITS]
READOUTS = ("gp_mean", "shared_nn", "nearest")  # compared on the validation block (best-of-K too slow there)
READOUT_NAMES = {"gp_mean": "GP mean at x*", "best_of_k": f"GP mean at x*, best of {N_STARTS} starts",
                 "shared_nn": "training pose of the nearest latent point in the shared dims",
                 "nearest": "GP mean at x*, undetermined dims from the nearest silhouette's q(x_n) "
                            "(undetermined=\"nearest\")"}
QUICK = dict(n_train=120, val=(40, 80), n_test=30, iters=30, Q=4, M=10)
GPY_TIMEOUT = float(os.environ.get("BGPLVM_MRD_POSE_GPY_TIMEOUT", 1500))
COLOURS = {"silhouette": "#1f77b4", "pose": "#d62728"}


def pose_error(pred: np.ndarray, true: np.ndarray) -> float:
    """Mean over frames and the 21 body points of the Euclidean 3-D distance."""
    n = true.shape[0]
    return float(np.mean(np.linalg.norm((np.asarray(pred) - true).reshape(n, -1, 3), axis=2)))


def nearest(Yq: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """Index of each row of Yq's nearest row of Y (Euclidean)."""
    d = (Yq * Yq).sum(1)[:, None] - 2.0 * Yq @ Y.T + (Y * Y).sum(1)[None, :]
    return np.argmin(d, axis=1)


def _load(ctx: Context):
    from bgplvm.datasets import load

    kw = dict(mirror=ctx.mirror, progress=ctx.verbose) if ctx.mirror else dict(progress=ctx.verbose)
    tr, te = load("ankur_pose", split="train", **kw), load("ankur_pose", split="test", **kw)
    return ({k: np.asarray(v, dtype=float) for k, v in tr.views.items()},
            {k: np.asarray(v, dtype=float) for k, v in te.views.items()})


def fit(views: dict, init: str, widths: str, Q: int, M: int, iters: int, seed: int):
    from bgplvm import MRD

    t0 = time.perf_counter()
    m = MRD({"silhouette": views["silhouette"], "pose": views["pose"]}, latent_dim=Q, num_inducing=M,
            seed=seed, init=init, widths=widths)
    m.fit(max_iters=iters, progress=False)
    return m, time.perf_counter() - t0


def readouts(m, sil_train: np.ndarray, pose_train: np.ndarray, sil_q: np.ndarray, which) -> dict:
    """{read-out: (predicted poses (n, 63), seconds)} (module docstring)."""
    out = {}
    seg = m.segmentation()
    shared = sorted(q for who, dims in seg.shared.items() if set(who) == {"silhouette", "pose"} for q in dims)
    mu = m.latent_mean
    pose_view = m.view("pose")
    t0 = time.perf_counter()
    mus, Ss = m.infer_latent({"silhouette": sil_q})
    t_inf = time.perf_counter() - t0
    if "gp_mean" in which:
        t0 = time.perf_counter()
        out["gp_mean"] = (pose_view.predict(mus, Ss)[0], t_inf + time.perf_counter() - t0)
    if "best_of_k" in which:
        t0 = time.perf_counter()
        c = m.infer_candidates({"silhouette": sil_q}, n_starts=N_STARTS)
        out["best_of_k"] = (pose_view.predict(c.mu[:, 0], c.S[:, 0])[0], time.perf_counter() - t0)
    if "shared_nn" in which:
        t0 = time.perf_counter()
        out["shared_nn"] = ((pose_train[nearest(mus[:, shared], mu[:, shared])], t_inf + time.perf_counter() - t0)
                            if shared else (None, 0.0))
    if "nearest" in which:
        t0 = time.perf_counter()
        out["nearest"] = (m.reconstruct({"silhouette": sil_q}, target="pose", undetermined="nearest")[0],
                          time.perf_counter() - t0)
    return out


def describe_fit(m) -> dict:
    seg = m.segmentation()
    nv, w = m.noise_variance, m.ard_weights
    return dict(segmentation=seg.as_dict(), ard={n: a.tolist() for n, a in w.items()}, noise_variance=nv,
                signal_variance={n: float(np.ravel(m.kernels[n].params["variance"])[0]) for n in m.view_names},
                latent_variance_mean=m.latent_variance.mean(0).tolist(), bound=float(m.elbo()),
                fit=dict(iterations=m.fit_info.get("iterations"), reason=m.fit_info.get("reason"),
                         held_iterations=m.fit_info.get("held_iterations")))


# --- GPy --------------------------------------------------------------------------------------
def gpy_python() -> Path | None:
    """``.bench-venv``'s python (``gpy_worker.gpy_python``; ``BGPLVM_MRD_POSE_GPY=0`` skips GPy)."""
    return gpy_worker.gpy_python("BGPLVM_MRD_POSE_GPY")


def fit_gpy(python: Path, train: dict, sil_test: np.ndarray, Q: int, M: int, iters: int, seed: int,
            timeout: float) -> dict:
    """Run ``mrd_pose_gpy`` in GPy's venv; its result dict (+ "pose") or {"error": ...}."""
    res, arrays = gpy_worker.run(python, Path(__file__).with_name("mrd_pose_gpy.py"),
                                 dict(silhouette=train["silhouette"], pose=train["pose"], silhouette_test=sil_test),
                                 dict(Q=Q, M=M, max_iters=iters, seed=seed), timeout)
    if arrays is not None:
        res["pose"] = arrays["pose"]
    return res


# --- figure -------------------------------------------------------------------------------------
def ard_figure(path, ard: dict, threshold: float, shared: list[int]) -> None:
    """One panel per view: a bar per latent dimension, its ARD weight over the view's
    largest, the segmentation threshold dashed; shared dimensions' labels in bold."""
    from bgplvm.explorer.figures import Axes

    from .lineplots import canvas, line

    names = list(ard)
    Q = len(next(iter(ard.values())))
    W, Hp = 140 + 34 * max(Q, 10), 210
    c = canvas(W, 60 + Hp * len(names))
    c.text(W / 2, 24, "ARD weights per view (relative to the view's largest)", size=14, anchor="middle", bold=True)
    for i, n in enumerate(names):
        a = np.asarray(ard[n], dtype=float)
        rel = a / a.max() if a.max() > 0 else a
        ax = Axes(c, (80, 60 + Hp * i + 20, W - 110, Hp - 80), (-0.5, Q - 0.5), (0.0, 1.08))
        for q in range(Q):
            X0, X1 = float(ax.px(q - 0.35)), float(ax.px(q + 0.35))
            Y0, Y1 = float(ax.py(rel[q])), float(ax.py(0))
            c.rect(X0, Y0, X1 - X0, max(Y1 - Y0, 0.5), fill=COLOURS.get(n, "#555555"),
                   opacity=1.0 if rel[q] > threshold else 0.35, stroke="#555555", width=0.6)
        line(ax, [-0.5, Q - 0.5], [threshold, threshold], "#888888", width=1.0, dash=True)
        ax.frame(title=f"{n} (largest weight {a.max():.3g})", ylabel="alpha / max",
                 xcats=[(q, f"{q}*" if q in shared else str(q)) for q in range(Q)])
    c.text(W / 2, 60 + Hp * len(names) - 12, f"latent dimension (* shared); dashed: threshold {threshold:g}",
           size=11, anchor="middle")
    Path(path).write_bytes(c.to_bytes())


# --- the experiment -----------------------------------------------------------------------------
def run(ctx: Context) -> Result:
    train, test = _load(ctx)
    if ctx.quick:
        q = QUICK
        rows = np.round(np.linspace(0, train["pose"].shape[0] - 1, q["n_train"])).astype(int)
        train = {k: v[rows] for k, v in train.items()}
        test = {k: v[: q["n_test"]] for k, v in test.items()}
        val_block, iters, Q, M = q["val"], q["iters"], q["Q"], q["M"]
    else:
        val_block, iters, Q, M = VALIDATION, ITERS, LATENT_DIM, NUM_INDUCING
    N = train["pose"].shape[0]
    val = np.arange(*val_block)
    rest = np.setdiff1d(np.arange(N), val)
    sub = {k: v[rest] for k, v in train.items()}
    ctx.log(f"mrd-pose: {N} training frames ({rest.size} + {val.size} held out for the choices), "
            f"{test['pose'].shape[0]} test frames; Q={Q}, M={M}, {iters} iterations")

    # choices on the validation block (training frames only)
    validation = {}
    for init, widths in STARTS:
        m, secs = fit(sub, init, widths, Q, M, iters, ctx.seed)
        preds = readouts(m, sub["silhouette"], sub["pose"], train["silhouette"][val], READOUTS)
        errs = {r: (pose_error(p, train["pose"][val]) if p is not None else None) for r, (p, _) in preds.items()}
        # the same fit on the test frames: shown beside the choice, never used for it
        tpreds = readouts(m, sub["silhouette"], sub["pose"], test["silhouette"], ("gp_mean", "nearest"))
        terrs = {r: pose_error(p, test["pose"]) for r, (p, _) in tpreds.items()}
        validation[f"{init}/{widths}"] = dict(init=init, widths=widths, errors=errs, test_errors=terrs, fit_s=secs,
                                              **describe_fit(m))
        ctx.log(f"mrd-pose validation, init {init}, widths {widths}: {errs} (fit {secs:.0f} s)")
    val_nn = pose_error(sub["pose"][nearest(train["silhouette"][val], sub["silhouette"])], train["pose"][val])
    val_mean = pose_error(np.tile(sub["pose"].mean(0), (val.size, 1)), train["pose"][val])
    choices = [(e, key, r) for key, v in validation.items() for r, e in v["errors"].items() if e is not None]
    _, key, readout = min(choices)
    init, widths = validation[key]["init"], validation[key]["widths"]
    ctx.log(f"mrd-pose: chosen init {init!r}, widths {widths!r}, read-out {readout!r} "
            f"(validation NN {val_nn:.3f}, mean {val_mean:.3f})")

    # the final fit on all training frames, every read-out on the test frames
    m, fit_s = fit(train, init, widths, Q, M, iters, ctx.seed)
    final = describe_fit(m)
    preds = readouts(m, train["silhouette"], train["pose"], test["silhouette"],
                     READOUTS + ("best_of_k",))
    Pt = test["pose"]
    errors = {r: (pose_error(p, Pt) if p is not None else None) for r, (p, _) in preds.items()}
    times = {r: s for r, (_, s) in preds.items()}
    nn_err = pose_error(train["pose"][nearest(test["silhouette"], train["silhouette"])], Pt)
    mean_err = pose_error(np.tile(train["pose"].mean(0), (Pt.shape[0], 1)), Pt)
    ctx.log(f"mrd-pose test: {errors}, NN {nn_err:.3f}, mean {mean_err:.3f}")

    python = gpy_python()
    gpy_note = ("not run (--quick)" if ctx.quick else
                "not run (GPy not installed: no .bench-venv; `bash bench/setup_gpy.sh` makes it)" if python is None
                else None)
    gpy = {"error": gpy_note} if gpy_note else fit_gpy(python, train, test["silhouette"], Q, M, iters, ctx.seed,
                                                       GPY_TIMEOUT)
    gpy_err = pose_error(gpy["pose"], Pt) if "pose" in gpy else None
    gpy_cell = (f"{gpy_err:.3f}" if gpy_err is not None else gpy_note if gpy_note else f"failed: {gpy['error']}")
    if gpy_err is None:
        ctx.log(f"mrd-pose GPy: {gpy.get('error')}")

    seg = m.segmentation()
    shared = sorted(q for who, dims in seg.shared.items() for q in dims)
    fig = "ard.png"
    ard_figure(ctx.figure_path("mrd-pose", fig), m.ard_weights, seg.threshold, shared)

    def cell(e):
        return None if e is None else float(e)

    def vcell(r):
        e = validation[key]["errors"].get(r)
        return "-" if e is None else f"{e:.3f}"

    rows = []
    for r in READOUTS + ("best_of_k",):
        label = f"MRD ({init}, widths {widths}): {READOUT_NAMES[r]}" + (" **(chosen)**" if r == readout else "")
        test_e = errors.get(r)
        rows.append([label, "n/a (no shared dimension)" if test_e is None else float(test_e), vcell(r),
                     f"{times[r]:.1f}"])
    rows += [["pose of the nearest training silhouette", nn_err, f"{val_nn:.3f}", "-"],
             ["mean training pose", mean_err, f"{val_mean:.3f}", "-"],
             [f"GPy {gpy.get('gpy_version', '')} MRD: GP mean at x* (infer_newX)".replace("  ", " "),
              gpy_cell, "-", f"{gpy['fit_s']:.0f} fit" if "fit_s" in gpy else "-"]]
    table = Table(
        title=f"Pose from silhouette on the {Pt.shape[0]} test frames: mean error per body point "
              f"(Q = {Q}, M = {M} per view, {iters} iterations)",
        columns=["method", "test error", f"validation error ({val.size} held-out training frames)",
                 "inference (s)"],
        rows=rows,
        note=f"Error: mean over frames and the 21 body points of the 3-D Euclidean distance (data units). "
             f"Start and read-out chosen by the validation error (training frames {val_block[0]}-{val_block[1] - 1} "
             f"held out); the test frames are used only for the test column.")
    seg_rows = []
    for who, dims in seg.shared.items():
        seg_rows.append([f"shared by {' + '.join(who)}", str(dims)])
    for n, dims in seg.private.items():
        seg_rows.append([f"private to {n}", str(dims) if dims else "none"])
    seg_rows.append(["off", str(seg.off) if seg.off else "none"])
    seg_table = Table(title=f"Segmentation of the final fit (init {init!r}, widths {widths!r}; relative ARD weight "
                            f"> {seg.threshold:g})",
                      columns=["", "latent dimensions"], rows=seg_rows)
    val_rows = [[v["init"], v["widths"], *[("-" if v["errors"].get(r) is None else float(v["errors"][r])) for r in READOUTS],
                 "; ".join([f"{'+'.join(d['views'])}: {d['dims']}" for d in v["segmentation"]["shared"]]) or "none",
                 f"{v['fit_s']:.0f}", float(v["test_errors"]["gp_mean"]), float(v["test_errors"]["nearest"])]
                for v in validation.values()]
    val_table = Table(title=f"The choice: each start fitted on {rest.size} training frames, error on the "
                            f"{val.size} held out",
                      columns=["init", "widths", *[READOUT_NAMES[r] for r in READOUTS], "shared dims", "fit (s)",
                               "test: GP mean at x*", "test: undetermined=\"nearest\""],
                      rows=val_rows,
                      note=f"On the held-out frames the nearest training silhouette's pose errs {val_nn:.3f}, "
                           f"the mean pose {val_mean:.3f}. The two test columns are these {rest.size}-frame fits' "
                           f"errors on the {Pt.shape[0]} test frames, computed after the choice and not used for it "
                           f"(the nearest silhouette's pose errs {nn_err:.3f} there).")
    best_mrd = min((e for e in errors.values() if e is not None), default=float("nan"))
    chosen_err = errors[readout]
    verdict = ("is not applicable to the final fit (no shared dimension), so it cannot beat" if chosen_err is None
               else "beats" if chosen_err < nn_err else "does not beat")
    notes = [
        f"Start used: init={init!r}, widths={widths!r} (chosen on the validation block, with the read-out "
        f"{READOUT_NAMES[readout]!r}); final fit {fit_s:.0f} s, bound {final['bound']:.1f}, "
        f"noise variance {', '.join(f'{k} {v:.3g}' for k, v in final['noise_variance'].items())}, "
        f"signal variance {', '.join(f'{k} {v:.3g}' for k, v in final['signal_variance'].items())}.",
        f"The chosen MRD read-out {verdict} the nearest silhouette's pose on the test frames "
        f"({'n/a' if chosen_err is None else f'{chosen_err:.3f}'} against {nn_err:.3f}; best MRD read-out {best_mrd:.3f}; mean pose {mean_err:.3f}).",
        "Why the GP mean at x* loses (measured while making this experiment, N = 600 training frames, "
        "held-out block as here): the silhouette fixes q(x*) only in the dimensions the silhouette uses; "
        "the pose view, at a signal-to-noise ratio of several hundred, also depends on dimensions the "
        "silhouette does not use (even ones whose relative ARD weight is below 0.01: the bound's gradient "
        "w.r.t. their latent variances is of order 100), and there q(x*) stays at its prior, so the "
        "predictive mean moves towards the mean pose (model/mrd_inference.py; validation error 4.36 with the default start, against "
        "3.16 for the nearest silhouette's pose; fitting 3000 iterations instead of 1000 raised the bound and "
        "the error, to 4.95; the best of 10 starts for x* gave 4.31). Taking those dimensions from the nearest "
        "training silhouette's q(x_n) instead (undetermined=\"nearest\") gave 3.12; the silhouette's own x* "
        "added nothing over that row's q(x_n) (3.11). GPy's MRD starts with nearly linear kernels (inverse "
        "widths (0.1 frac_q)^2); started so (widths=\"long\"), one dimension was shared and the GP mean at "
        "q(x*) erred 3.73 (scaled PCA) and 3.33 (first view) there, the nearest read-out 3.29 and 3.12.",
        gpy["prediction"] if "prediction" in gpy else f"GPy: {gpy_cell}.",
    ]
    numbers = dict(test_errors=dict(mrd={r: cell(e) for r, e in errors.items()}, nearest_silhouette=nn_err,
                                    mean_pose=mean_err, gpy=gpy_err),
                   chosen=dict(init=init, widths=widths, readout=readout), validation=validation,
                   validation_baselines=dict(nearest_silhouette=val_nn, mean_pose=val_mean),
                   final_fit=dict(fit_s=fit_s, **final), inference_s=times,
                   gpy={k: v for k, v in gpy.items() if k != "pose"})
    return Result(name="mrd-pose", title="MRD: pose from silhouette (ankur_pose), against nearest neighbour and GPy",
                  paper_section="Human pose experiment of Damianou, Ek, Titsias & Lawrence, ICML 2012 (issue 45)",
                  tables=[table, seg_table, val_table], numbers=numbers,
                  settings=dict(latent_dim=Q, num_inducing=M, iters=iters, starts=[list(s) for s in STARTS],
                                readouts=list(READOUTS) + ["best_of_k"], n_starts=N_STARTS,
                                validation=list(val_block), n_train=N, n_test=int(Pt.shape[0]),
                                seed=ctx.seed, gpy_timeout_s=GPY_TIMEOUT),
                  figures=[fig], notes=notes)
