"""``bgplvm reproduce cmu35``: the paper's motion-capture table (``motionCaptureTable``).

Rows: the dynamical variational GP-LVM with a Matern 3/2 and with an exponentiated
quadratic time kernel, each fitted in the dense form of its time prior (the paper's) and
in the state-space form from the same start (``forms``: exact for Matern 3/2 + white +
bias, a Taylor approximation for the EQ), the static variational GP-LVM, nearest neighbour in the angle
space and in the scaled space; columns L SC, L RA, B SC, B RA (legs / body missing in
frames 63..124 of test trial 35_29; the protocol and its validation are in
``cmu35_protocol``). Q = 9 for every model, as the paper, and M = 50 (the paper does not
say; its code's default is 100, see ``M100_NOTE``); we report how many
latent dimensions ARD keeps and the wall time of every fit.

Each row is one function returning a ``Row``; a model row whose API is not on this
branch yet (``DynamicalGPLVM`` of issue 8, ``BayesianGPLVM.reconstruct`` of issue 9) is
reported as not run, with the reason, and the table keeps the rows that ran.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import numpy as np

from . import cmu35_protocol as P
from .forms import TIME_PRIOR_FORMS, base_name, fit_in_forms, form_label, forms_table, row_name
from .models import ApiMissing, ard_kept, one_blas_thread, progress_logger, require
from .report import Context, Result, Table

LATENT_DIM = 9
NUM_INDUCING = 50
#: measured 2026-11-24 with this command's code at M = 100 (e5927af, /work/exp script)
M100_NOTE = (
    "M = 50 inducing inputs. The paper does not give M for this experiment; vargplvm's CMU "
    "scripts default to 100. With M = 100 the bounds rise and the reconstructions get worse: "
    "static 314,007 (against 301,437), L SC 15.96 / L RA 4.70 / B SC 24.51 / B RA 3.09; "
    "Matern 3/2 from it 330,998 (against 317,627 at M = 50 that day), 27.26 / 5.91 / 22.69 / 3.46.")
#: L-BFGS iterations of a fit (vargplvm's demCmu35gplvmVargplvm3: 50 with the noise fixed,
#: then 200 + 1000 + 1300 with SCG); --quick: a smoke run only.
FIT_ITERS = 2500
QUICK_FIT_ITERS = 40
#: Iterations of q(X*) for the test frames (vargplvm's reconstrIters = 2000).
RECON_ITERS = 2000
QUICK_RECON_ITERS = 30
#: What the model rows' reconstruction needs beyond the class (the test bound, issue 9).
RECONSTRUCT_MODULES = ("bgplvm.testbound",)
#: The paper's ARD result: latent dimensions kept of the 9 (section sec:experimentsMocap).
PAPER_KEPT = {"Dyn. VGP-LVM (Matern 3/2)": 4, "Dyn. VGP-LVM (Exp. Quadr.)": 3, "VGP-LVM (static)": 5}
#: Time kernels of the two dynamical rows: the smooth part with white and bias terms, as
#: vargplvm's CMU demos (dynamicKern = {rbf, white, bias}). Time is the frame index within
#: each sequence (sequences of 33-160 frames).
TIME_KERNELS = {"Dyn. VGP-LVM (Matern 3/2)": "matern32+white+bias",
                "Dyn. VGP-LVM (Exp. Quadr.)": "rbf+white+bias"}
PARTS = ("legs", "body")
#: Seeds of a full run: ctx.seed and the next ones (each: its own static fit, the dynamical
#: fits from it). Which optimum a fit reaches decides the legs, and the fits are sensitive to
#: rounding (seed 0 with multi-threaded BLAS ends at another bound), so the table of
#: ``ctx.seed`` is followed by the spread of every model row over the seeds; --quick runs
#: ``ctx.seed`` only.
SEEDS_PER_RUN = 3
#: why the dynamical rows are far from the paper's (measured 2026-11-24 on the Matern model,
#: legs missing; scripts of that session, not part of this command)
GAP_NOTE = (
    "Why the dynamical rows miss the paper's legs: the fitted model, not the test-time optimiser. "
    "With every column observed, q(X*) of the test sequence reconstructs the legs to RA 1.49 "
    "and the body to 1.56, so the mapping can represent the truth; with the legs missing, the "
    "optimiser started from that q(X*) climbs to a higher test bound than from the nearest "
    "neighbours (14,155 against 13,994) and reconstructs worse (RA 4.98 against 4.68): the model "
    "prefers latent points with wrong legs. Longer or smoother time kernels at test time did not "
    "help (lengthscale 8-16 frames, white 0.01: legs RA 3.95-4.78). Models started as the "
    "paper's code starts them (PCA, lengthscale span/sqrt(30) = 15 frames, white 0.01) end at "
    "lower bounds and reconstruct no better: Matern 3/2 288,891, 17.21 / 4.88 / 14.71 / 2.59; "
    "EQ 286,306, 17.13 / 5.13 / 16.83 / 2.69 (L SC / L RA / B SC / B RA; measured after the "
    "start's lambda calibration was mended in acb6050: earlier paper-start figures in this "
    "report's history came from a broken start). The bound is noisy at "
    "these models (parameters 1e-12 apart give bounds ~0.15 apart at 318k: Kuu is "
    "ill-conditioned), which ended the fits after ~550-900 iterations until the fit's L-BFGS got "
    "a noise-tolerant line search (aa66f6d); with it and the conditioned prediction the errors "
    "fell from L SC 24.3 / L RA 5.24 / B SC 21.4 / B RA 2.94 (Matern, e84b95f) to 15.14 / 4.56 / "
    "14.25 / 2.41 (646740e). "
    "Which optimum the fit reaches decides the legs, and the bound does not tell them apart: an "
    "earlier Matern fit continued for 1,500 iterations (bound 318,267) reconstructs L SC 10.63 / "
    "L RA 3.84 / B SC 12.86 / B RA 2.49 (conditioned), below nearest neighbour on all four, "
    "while the 766ed24 run's Matern fit taken on to 6,000 iterations (bound 318,003, 951 s) gave "
    "17.25 / 4.83 / 16.98 / 2.50 (training q(u)). Rounding alone moves them too: the fits of the "
    "646740e run (2026-11-24, on another machine of the same kind), redone with the same code on "
    "2026-11-25 on the machine of the later runs, end seed 0's Matern fit at bound 317,950 instead "
    "of 317,627 and reconstruct 13.24 / 4.21 / 21.35 / 3.61 instead of that run's figures above.")


@dataclass
class Row:
    """One row of the table: errors per part ({"SC", "RA"}), or ``skipped`` with the
    reason; ``info`` holds fit facts (ARD dims kept, wall times, iterations, bound);
    ``predictions`` the reconstructed test sequence per part (for figures, not JSON)."""

    name: str
    results: dict = field(default_factory=dict)
    info: dict = field(default_factory=dict)
    predictions: dict = field(default_factory=dict)
    skipped: str | None = None

    def columns(self) -> tuple:
        if self.skipped:
            return (None,) * 4
        return P.as_columns(self.results)


def fit_iters(ctx: Context) -> int:
    return QUICK_FIT_ITERS if ctx.quick else FIT_ITERS


def recon_iters(ctx: Context) -> int:
    return QUICK_RECON_ITERS if ctx.quick else RECON_ITERS


def _fit(m, ctx: Context, label: str) -> dict:
    t0 = time.perf_counter()
    m.fit(max_iters=fit_iters(ctx), progress=False, callback=progress_logger(ctx, label))
    fit_s = time.perf_counter() - t0
    fi = getattr(m, "fit_info", {}) or {}
    ctx.log(f"{label}: fit {fit_s:.0f} s, {fi.get('iterations')} iterations, bound {fi.get('bound')}")
    return {"fit_s": fit_s, "iterations": fi.get("iterations"), "evaluations": fi.get("evaluations"),
            "bound": fi.get("bound"),
            "ard_kept": ard_kept(m),
            "ard_weights": np.asarray(getattr(m, "ard_weights", [])).tolist(),
            "noise_variance": float(getattr(m, "noise_variance", np.nan))}


# ------------------------------------------------------------------ rows
def nn_rows(data: P.CMU35Data) -> list[Row]:
    """Nearest neighbour in the angle space and in the scaled (standardised) space."""
    rows = []
    for name, standardise in (("NN (angle space)", False), ("NN sc. (scaled space)", True)):
        row = Row(name)
        t0 = time.perf_counter()
        for part in PARTS:
            Y_hat = P.nn_reconstruct(data.Y, P.masked_test(data.Y_test, part), standardise)
            row.results[part] = P.errors(data.Y_test, Y_hat, part, data.scale)
            row.predictions[part] = Y_hat
        row.info = {"wall_s": time.perf_counter() - t0}
        rows.append(row)
    return rows


def static_row(data: P.CMU35Data, ctx: Context) -> tuple[Row, object]:
    """The static variational GP-LVM: one model on the 2613 training frames; the 62
    partially observed test frames reconstructed independently (vargplvm's static case:
    q(x*) per frame, initialised from the nearest training frame). Returns the row and
    the fitted model (None if not run), the start of the dynamical rows."""
    name = "VGP-LVM (static)"
    try:
        cls = require("BayesianGPLVM", "reconstruct", issue=9, modules=RECONSTRUCT_MODULES)
    except ApiMissing as e:
        return Row(name, skipped=str(e)), None
    m = cls(data.Y, latent_dim=LATENT_DIM, num_inducing=NUM_INDUCING, seed=ctx.seed)
    row = Row(name, info=_fit(m, ctx, name))
    t0 = time.perf_counter()
    s = P.FIRST_MISSING_FRAME
    for part in PARTS:
        Y_star = P.masked_test(data.Y_test, part)
        mean, _ = m.reconstruct(Y_star[s:], max_iters=recon_iters(ctx))
        Y_hat = np.vstack([data.Y_test[:s], mean])
        row.results[part] = P.errors(data.Y_test, Y_hat, part, data.scale)
        row.predictions[part] = Y_hat
    row.info["reconstruct_s"] = time.perf_counter() - t0
    return row, m


def dynamical_rows(data: P.CMU35Data, ctx: Context, name: str, static=None) -> list[Row]:
    """The dynamical model (time kernel ``TIME_KERNELS[name]``) on the 31 training
    sequences, started from the fitted ``static`` model (``DynamicalGPLVM.from_static``;
    from the PCA start when None) and fitted in both forms of its time prior from that start
    (``forms.fit_in_forms``): a row per form. The whole test sequence (frames 1..62
    observed, 63..124 partly) is reconstructed as a new sequence, so q(X*) couples its
    frames through the time prior (in the model's form)."""
    try:
        cls = require("DynamicalGPLVM", "fit", "fill_missing", "with_time_prior", issue=8,
                      modules=RECONSTRUCT_MODULES)
    except ApiMissing as e:
        return [Row(row_name(name, f), skipped=str(e)) for f in TIME_PRIOR_FORMS]
    if static is not None:
        start = cls.from_static(static, data.t, time_kernel=TIME_KERNELS[name], sequences=data.sequence,
                                time_prior="dense")
    else:
        start = cls(data.Y, data.t, latent_dim=LATENT_DIM, num_inducing=NUM_INDUCING, kernel="rbf",
                    time_kernel=TIME_KERNELS[name], sequences=data.sequence, seed=ctx.seed, time_prior="dense")
    rows = []
    for form, (m, info) in fit_in_forms(start, lambda m, label: _fit(m, ctx, label), name).items():
        row = Row(row_name(name, form), info={"start": "static fit" if static is not None else "PCA", **info,
                                               "time_kernel": repr(m.time_kernel)})
        t0 = time.perf_counter()
        row.info["training_q_u_only"] = {}
        for part in PARTS:
            Y_star = P.masked_test(data.Y_test, part)
            fit = m.infer_sequence(Y_star, data.t_test, sequence=None, max_iters=recon_iters(ctx))
            mean, _ = m.fill_missing(fit, Y_star)  # reconstruct()'s prediction
            row.results[part] = P.errors(data.Y_test, mean, part, data.scale)
            row.predictions[part] = mean
            plain, _ = m.fill_missing(fit, Y_star, condition=False)  # the training q(u) alone
            row.info["training_q_u_only"][part] = P.errors(data.Y_test, plain, part, data.scale)
        row.info["reconstruct_s"] = time.perf_counter() - t0
        rows.append(row)
    return rows


# ------------------------------------------------------------------ report
ROW_ORDER = (*(row_name(n, f) for n in TIME_KERNELS for f in TIME_PRIOR_FORMS), "VGP-LVM (static)",
             "NN (angle space)", "NN sc. (scaled space)")


def table(rows: list[Row], quick: bool, seed: int = 0) -> Table:
    cols = ["method"]
    for c in P.COLUMNS:
        cols += [c, "paper"]
    cols += ["Q kept (paper)", "fit s", "bound", "time prior"]
    out = []
    for r in sorted(rows, key=lambda r: ROW_ORDER.index(r.name)):
        cells = [r.name + (" (not run)" if r.skipped else "")]
        for ours, paper in zip(r.columns(), P.PAPER_TEXT[base_name(r.name)]):
            cells += [None if ours is None else f"{ours:.2f}", paper]
        kept = r.info.get("ard_kept")
        paper_kept = PAPER_KEPT.get(base_name(r.name))
        cells.append(("-" if kept is None else f"{kept} of {LATENT_DIM}")
                     + ("" if paper_kept is None else f" ({paper_kept})"))
        fit_s = r.info.get("fit_s")
        cells.append(None if fit_s is None else round(fit_s))
        bound = r.info.get("bound")
        cells.append(None if bound is None else f"{bound:,.1f}")
        cells.append(form_label(r.info) if "time_prior" in r.info else None)
        out.append(cells)
    note = ("L / B: legs (columns 7..13) / body (columns 20..49) missing in test frames 63..124 "
            "of trial 35_29. SC: Taylor et al.'s scaled error (sum of squared scaled errors in "
            f"degrees per missing column); RA: RMSE in degrees. Lower is better. Model rows: seed {seed}. "
            "Rows ', state space': the same model fitted from the same start with its time prior in "
            "state-space form (Kalman filter / smoother; exact for Matern 3/2 + white + bias, a "
            "Taylor series for the EQ: its order and max kernel error in the last column).")
    if quick:
        note += " --quick: the models were fitted for a few iterations only."
    return Table("CMU 35 reconstruction (motionCaptureTable)", cols, out, note)


def figure(data: P.CMU35Data, rows: list[Row], path) -> None:
    """Two missing channels over the 124 test frames: truth, NN and every model row."""
    from bgplvm.explorer.figures import Axes, PngCanvas

    colours = {"NN (angle space)": "#999999", "NN sc. (scaled space)": "#c7a04a",
               "VGP-LVM (static)": "#2a9d8f", "Dyn. VGP-LVM (Matern 3/2)": "#d62828",
               "Dyn. VGP-LVM (Exp. Quadr.)": "#1d4ed8",
               row_name("Dyn. VGP-LVM (Matern 3/2)", "state_space"): "#ea580c",
               row_name("Dyn. VGP-LVM (Exp. Quadr.)", "state_space"): "#0891b2"}
    from bgplvm.datasets.mocap.cmu35 import FEATURE_NAMES

    panels = [("legs", 7), ("legs", 10), ("body", 33), ("body", 43)]
    c = PngCanvas(1100, 760)
    frames = np.arange(P.N_TEST_FRAMES)
    for k, (part, col) in enumerate(panels):
        lines = [("truth", data.Y_test[:, col], "#000000")]
        lines += [(r.name, r.predictions[part][:, col], colours[r.name]) for r in rows
                  if not r.skipped and part in r.predictions]
        vals = np.concatenate([np.degrees(v) for _, v, _ in lines])
        lo, hi = float(vals.min()), float(vals.max())
        pad = 0.08 * (hi - lo or 1.0)
        ax = Axes(c, (80 + (k % 2) * 530, 50 + (k // 2) * 340, 450, 240), (0, P.N_TEST_FRAMES - 1),
                  (lo - pad, hi + pad))
        ax.clip()
        X = float(ax.px(P.FIRST_MISSING_FRAME - 0.5))
        c.rect(X, ax.y, ax.x + ax.w - X, ax.h, fill="#f1f1f1")
        for name, v, colour in lines:
            xs = frames if name == "truth" else frames[P.FIRST_MISSING_FRAME:]
            ys = np.degrees(v if name == "truth" else v[P.FIRST_MISSING_FRAME:])
            c.polyline(ax.pts(np.column_stack([xs, ys])), colour, width=2.2 if name == "truth" else 1.6)
        ax.unclip()
        ax.frame(title=f"{part} missing: {FEATURE_NAMES[col].replace(' (rad)', '')}",
                 xlabel="test frame (shaded: missing, reconstructed)", ylabel="degrees")
        if k == 0:
            ax.legend([(n, col_) for n, _, col_ in lines], x=ax.x + 6, y=ax.y + 6)
    with open(path, "wb") as f:
        f.write(c.to_bytes())


def make_result(name: str, title: str, rows: list[Row], data: P.CMU35Data, ctx: Context,
                extra_notes: tuple[str, ...] = ()) -> Result:
    fig = f"{name}_reconstruction.png"
    figure(data, rows, ctx.figure_path(name, fig))
    numbers = {r.name: {"results": r.results, "paper": dict(zip(P.COLUMNS, P.PAPER[base_name(r.name)])),
                        "info": r.info, "skipped": r.skipped} for r in rows}
    notes = [f"{r.name}: {r.skipped}" for r in rows if r.skipped]
    notes += [
        "Nearest-neighbour rows reproduce the paper's to its digits (NN sc. B SC 20.86 vs the "
        "printed 20.8, which looks truncated); the protocol and its check against GPmat's "
        "fgplvmTaylorAngleErrors.m are in reproduce/cmu35_protocol.py.",
        *extra_notes,
    ]
    settings = {"latent_dim": LATENT_DIM, "num_inducing": NUM_INDUCING, "fit_iters": fit_iters(ctx),
                "reconstruct_iters": recon_iters(ctx),
                "seed": ctx.seed, "time_stamps": "frame index within each sequence",
                "time_kernels": TIME_KERNELS, "kernel": "rbf (ARD)",
                "train": "31 sequences, 2613 x 59", "test": "trial 35_29, 124 x 59",
                "missing_frames": "63..124 (0-based 62..123)",
                "legs_columns": P.LEG_COLUMNS.tolist(), "body_columns": P.BODY_COLUMNS.tolist()}
    return Result(name=name, title=title, paper_section="Human Motion Capture Data (sec:experimentsMocap)",
                  tables=[table(rows, ctx.quick, ctx.seed)], numbers=numbers, settings=settings,
                  figures=[fig], notes=notes)


def model_rows(data: P.CMU35Data, ctx: Context) -> list[Row]:
    """The static row and the dynamical rows (two kernels, two forms) started from its fit,
    for ``ctx.seed``."""
    ctx.log(f"static (seed {ctx.seed}) ...")
    static, static_model = static_row(data, ctx)
    rows = []
    for name in TIME_KERNELS:
        ctx.log(f"{name} (seed {ctx.seed}, from the static fit) ...")
        rows += dynamical_rows(data, ctx, name, static_model)
    return rows + [static]


def seed_table(runs: dict[int, list[Row]], nn: list[Row]) -> tuple[Table, dict]:
    """Mean and range of every model row's four columns over the seeds of ``runs``
    ({seed: rows}), and in how many runs the row beats nearest neighbour on all four
    columns: the better of the ``nn`` rows in each column (angle space or scaled space).
    Returns the table and its numbers (per row: {seed: columns, bound})."""
    names = [n for n in ROW_ORDER if any(r.name == n and not r.skipped for rs in runs.values() for r in rs)]
    nn_cols = np.min([r.columns() for r in nn], axis=0)
    cols = ["method", "runs"] + [f"{c} mean (min-max)" for c in P.COLUMNS]
    cols += ["beats both NN rows on all four", "paper"]
    out, numbers = [], {}
    for name in names:
        per_seed = {s: r for s, rs in runs.items() for r in rs if r.name == name and not r.skipped}
        A = np.array([r.columns() for r in per_seed.values()], dtype=np.float64)  # (runs, 4)
        cells = [name, len(per_seed)]
        cells += [f"{m:.2f} ({lo:.2f}-{hi:.2f})" for m, lo, hi in zip(A.mean(0), A.min(0), A.max(0))]
        cells += [f"{int(np.sum(np.all(A < nn_cols, axis=1)))} of {len(per_seed)}",
                  " / ".join(P.PAPER_TEXT[base_name(name)])]
        out.append(cells)
        numbers[name] = {str(s): {"columns": list(map(float, r.columns())), "bound": r.info.get("bound"),
                                  "ard_kept": r.info.get("ard_kept"), "fit_s": r.info.get("fit_s")}
                         for s, r in per_seed.items()}
    note = (f"Seeds {', '.join(map(str, runs))}: every seed fits its own static model (PCA start, "
            f"inducing inputs) and the dynamical models from it. "
            + "; ".join(f"{r.name}: " + " / ".join(f"{v:.2f}" for v in r.columns()) for r in nn)
            + "; the better of the two in each column, the bar of 'beats both NN rows': "
            + " / ".join(f"{v:.2f}" for v in nn_cols) + " (L SC / L RA / B SC / B RA).")
    return Table("Spread over seeds (model rows)", cols, out, note), numbers


@one_blas_thread
def run(ctx: Context) -> Result:
    data = P.load_data(mirror=ctx.mirror)
    rows = nn_rows(data)
    runs = {ctx.seed: model_rows(data, ctx)}
    if not ctx.quick:
        for s in range(ctx.seed + 1, ctx.seed + SEEDS_PER_RUN):
            runs[s] = model_rows(data, replace(ctx, seed=s))
    rows += runs[ctx.seed]
    result = make_result("cmu35", "CMU motion capture: reconstruction of legs and body", rows, data, ctx,
                         extra_notes=("The dynamical rows start from the static row's fitted model "
                                      "(DynamicalGPLVM.from_static). From DynamicalGPLVM's own PCA "
                                      "start (PCA means, the time lengthscale from its search; the "
                                      "paper code's start is in the last note), the dynamical fits "
                                      "end at bounds below the static "
                                      "model's (Matern 3/2 288,393, EQ 285,584 against 301,437; "
                                      "L SC / L RA / B SC / B RA 17.79 / 4.83 / 15.40 / 2.97 and "
                                      "13.79 / 4.39 / 15.08 / 2.61; seed 0, measured on acb6050).",
                                      conditioning_note(rows), M100_NOTE, GAP_NOTE))
    pairs = [(f"{name}, seed {s}", {f: r.info for f in TIME_PRIOR_FORMS for r in rs
                                    if r.name == row_name(name, f) and not r.skipped})
             for s, rs in runs.items() for name in TIME_KERNELS]
    pairs = [(label, infos) for label, infos in pairs if len(infos) == len(TIME_PRIOR_FORMS)]
    if pairs:
        result.tables.insert(1, forms_table(pairs))
    if len(runs) > 1:
        t, numbers = seed_table(runs, [r for r in rows if r.name.startswith("NN")])
        result.tables.append(t)
        result.numbers["seeds"] = numbers
        result.settings["seeds"] = list(runs)
    return result


def conditioning_note(rows: list[Row]) -> str:
    """What the dynamical rows' prediction gains from conditioning q(u) on the test frames."""
    parts = []
    for r in rows:
        alone = r.info.get("training_q_u_only")
        if alone:
            cols = [alone[p][c] for p in PARTS for c in ("SC", "RA")]
            parts.append(f"{r.name} " + " / ".join(f"{v:.2f}" for v in cols))
    return ("The dynamical rows predict the missing entries with q(u) conditioned on every "
            "observed entry of the test sequence as well (DynamicalGPLVM.reconstruct's default: "
            "the joint bound's q(u); vargplvm adds the test sequence's fully observed frames 1..62 "
            "before predicting, vargplvmDynamicsUpdateModelTestVar). With the training data's q(u) "
            "alone, at the same q(X*) (L SC / L RA / B SC / B RA): " + "; ".join(parts) + ".")
