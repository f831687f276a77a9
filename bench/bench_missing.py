#!/usr/bin/env python
"""Missing values in the training outputs (issue 33): one bound + gradient evaluation with
NaN in Y, against our own complete-data evaluation and against GPy 1.15's
``BayesianGPLVMMiniBatch(..., missing_data=True)``, all measured in ONE run.

    bash bench/setup_gpy.sh                                  # .bench-venv with GPy (once)
    .bench-venv/bin/python bench/bench_missing.py            # full run (~5 min on 2 cores)
    .bench-venv/bin/python bench/bench_missing.py --no-gpy   # ours only
    .bench-venv/bin/python bench/bench_missing.py --skip frey --gpy-repeats 3

Cases (the data through ``bgplvm.datasets``, mirror ``../shared/datasets`` by default):
  * oil (N=1000, D=12), Q=10, M=50, RBF ARD:
      - "random 30%": every entry missing independently with probability 0.3 (seed 0);
        a row left with nothing observed gets one random entry back (the count is printed);
      - "20 blocks": 20 disjoint runs of 25 consecutive rows (20 of the 40 aligned 25-row
        slots, seed 0), each missing its own run of 2-4 adjacent columns (20 distinct runs):
        whole readings gone for a while; 21 row patterns;
  * Frey faces (N=1965 frames, D=560 = 28 x 20 pixels, row-major), Q=10, M=50:
      - "3 blocks 4x4 per frame": the image is cut into the 7 x 5 = 35 blocks of 4 x 4
        pixels; every frame misses 3 distinct blocks drawn at random (seed 0): 48 of its
        560 pixels.
What is timed (wall clock, median of repeats after one untimed warm-up evaluation; x is
perturbed by ~1e-12 relative at every repeat so that nothing is cached):
  * ours: ``m.set_param_vector(x); m.elbo_and_gradient()`` for the complete model and the
    models with missing values, built with the SAME parameters (q(X) means and variances,
    Z, kernel variance and lengthscales, noise: our seed-0 initialisation on the complete
    data). They run in one process, the repeats interleaved (complete, missing, missing,
    complete, ...), so that the missing/complete ratio sees the same machine load;
  * GPy 1.15: ``BayesianGPLVMMiniBatch(Yc, Q, X=mu, X_variance=S, Z=Z, kernel=RBF(Q,
    ARD=True), likelihood=Gaussian(noise), num_inducing=M, missing_data=True)`` with
    Yc = Y - (each column's observed mean) and NaN at the missing entries (our centring),
    VarDTC with our jitter (1e-6, as bench_gplvm.py); timed ``m._objective_grads(x)`` (one
    parameters_changed(): bound + all gradients), each case in its own process. GPy's
    complete-data ``BayesianGPLVM`` at the same parameters is timed too, for its own
    missing/complete ratio. Before timing, the bound of each GPy model at those parameters
    is printed beside ours, and the gradients w.r.t. the latent means and Z are compared.
Threads: ours at its defaults (Numba's threads, BLAS on one thread inside the bound), GPy
at its defaults (OpenBLAS on all cores) and again with "tuned threads"
(OPENBLAS_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE, GPy's faster setting: bench_gplvm.py's
row of that name; ``--no-gpy-tuned`` leaves it out); each worker prints what it had.
``--env K=V`` sets a variable for every worker (ours and GPy).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import _worker  # bench/ is on sys.path when a bench script runs
from _worker import loadavg, loadavg_text

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_MIRROR = ROOT.parent / "shared" / "datasets"
SCRIPT = str(Path(__file__).resolve())
PY = sys.executable
Q, M = 10, 50
GOALS = {"oil random 30%": 5.0, "oil 20 blocks": 3.0}  # ours missing / ours complete
GPY_GOAL = 20.0  # GPy missing / ours missing, oil
TUNED = {"OPENBLAS_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE"}  # GPy's faster thread setting


def log(*a):
    print(*a, flush=True)


def fmt_s(s):
    if s is None or not np.isfinite(s):
        return "-"
    return f"{s * 1e3:.1f} ms" if s < 1 else f"{s:.2f} s"


# =========================================================================================
# data and patterns (parent process)
# =========================================================================================
def _data_env():
    if "BGPLVM_DATA_MIRROR" not in os.environ and DEFAULT_MIRROR.is_dir():
        os.environ["BGPLVM_DATA_MIRROR"] = str(DEFAULT_MIRROR)
    os.environ.setdefault("BGPLVM_CACHE_DIR", str(ROOT / ".cache" / "datasets"))


def oil_random(N: int, D: int, frac: float = 0.3, seed: int = 0) -> tuple[np.ndarray, str]:
    """(observed (N, D) bool, note): each entry missing with probability ``frac``."""
    rng = np.random.default_rng(seed)
    obs = rng.random((N, D)) >= frac
    empty = np.flatnonzero(~obs.any(1))
    for i in empty:
        obs[i, rng.integers(D)] = True
    return obs, f"{len(empty)} empty row(s) given one entry back"


def oil_blocks(N: int, D: int, n_blocks: int = 20, rows: int = 25, seed: int = 0) -> tuple[np.ndarray, str]:
    """20 disjoint runs of ``rows`` consecutive rows, each missing a distinct run of 2-4
    adjacent columns."""
    rng = np.random.default_rng(seed)
    slots = np.sort(rng.choice(N // rows, n_blocks, replace=False))
    runs = [(c, w) for w in (2, 3, 4) for c in range(D - w + 1)]
    pick = rng.choice(len(runs), n_blocks, replace=False)
    obs = np.ones((N, D), dtype=bool)
    desc = []
    for s, p in zip(slots, pick):
        c, w = runs[p]
        obs[s * rows:(s + 1) * rows, c:c + w] = False
        desc.append(f"rows {s * rows}-{(s + 1) * rows - 1} cols {c}-{c + w - 1}")
    return obs, "; ".join(desc)


def frey_blocks(N: int, per_frame: int = 3, seed: int = 0, H: int = 28, W: int = 20,
                b: int = 4) -> tuple[np.ndarray, str]:
    """Every frame misses ``per_frame`` distinct random b x b blocks of its H x W image
    (row-major pixels, as ``load("frey_faces")``)."""
    rng = np.random.default_rng(seed)
    nby, nbx = H // b, W // b
    obs = np.ones((N, H, W), dtype=bool)
    for n in range(N):
        for k in rng.choice(nby * nbx, per_frame, replace=False):
            by, bx = divmod(int(k), nbx)
            obs[n, by * b:(by + 1) * b, bx * b:(bx + 1) * b] = False
    return obs.reshape(N, H * W), f"{per_frame} of the {nby}x{nbx} blocks of {b}x{b} pixels per frame"


def make_case(path: Path, name: str, Y: np.ndarray, patterns: dict[str, np.ndarray]) -> None:
    """Our seed-0 initialisation on the complete Y defines the parameters of every model of
    this data set; each pattern's observed mask is stored beside them."""
    from bgplvm import BayesianGPLVM
    from bgplvm.linalg import JITTER

    m = BayesianGPLVM(Y, latent_dim=Q, num_inducing=M, kernel="rbf", seed=0)
    v = m._values()
    arrays = {f"obs__{k}": o for k, o in patterns.items()}
    np.savez(path, Y=Y, mu=v["mu"], S=v["S"], Z=v["Z"], variance=v["kernel.variance"],
             lengthscale=v["kernel.lengthscale"], noise=v["noise_variance"],
             jitter=JITTER * max(1.0, float(v["kernel.variance"])),  # bgplvm.bound.kuu_jitter
             patterns=np.array(list(patterns)), **arrays)


# =========================================================================================
# workers
# =========================================================================================
def _threads_info() -> dict:
    info = {k: os.environ.get(k, "unset") for k in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS",
                                                    "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    try:
        from threadpoolctl import threadpool_info

        info["blas"] = ", ".join(f"{p.get('internal_api')} {p.get('num_threads')} threads"
                                 for p in threadpool_info())
    except Exception as e:  # noqa: BLE001
        info["blas"] = f"? ({type(e).__name__})"
    return info


def _load_case(path: str) -> dict:
    with np.load(path) as f:
        return {k: f[k] for k in f.files}


def _Y_with_nan(c: dict, pattern: str | None) -> np.ndarray:
    Y = c["Y"].copy()
    if pattern:
        Y[~c[f"obs__{pattern}"]] = np.nan
    return Y


def _perturbations(x: np.ndarray, n: int):
    rng = np.random.default_rng(123)
    for k in range(n):
        yield x * (1.0 + 1e-12 * (k + 1) * rng.uniform(0.5, 1.0, x.shape))


def _ours_model(c: dict, pattern: str | None):
    from bgplvm import BayesianGPLVM

    m = BayesianGPLVM(_Y_with_nan(c, pattern), latent_dim=Q, num_inducing=M, kernel="rbf", seed=0)
    v = dict(m._values())
    v["mu"], v["S"], v["Z"] = c["mu"], c["S"], c["Z"]
    v["kernel.variance"] = np.asarray(c["variance"], dtype=np.float64)
    v["kernel.lengthscale"] = np.asarray(c["lengthscale"], dtype=np.float64)
    v["noise_variance"] = np.asarray(c["noise"], dtype=np.float64)
    m._set_x(m._layout.pack(v))
    return m


def worker_ours(spec: dict) -> dict:
    import bgplvm

    t0 = time.perf_counter()
    bgplvm.warmup()
    import numba

    out = {"warmup_s": time.perf_counter() - t0, "numba_threads": numba.get_num_threads(),
           "threads": _threads_info(), "loadavg_start": loadavg()}
    c = _load_case(spec["case"])
    names = [None] + list(spec["patterns"])
    models, per = {}, {}
    for p in names:
        tb = time.perf_counter()
        m = _ours_model(c, p)
        key = p or "complete"
        models[key] = m
        x0 = m.get_param_vector()
        F, g = m.elbo_and_gradient()  # warm-up (compiles or loads anything left)
        full = m._bound(m._x)[1]
        sl = m._layout.slices
        mo = m._missing
        per[key] = {"build_s": time.perf_counter() - tb, "bound": float(F),
                    "grad_mu": full[sl["mu"]].tolist(), "grad_Z": full[sl["Z"]].tolist(),
                    "groups": len(mo.groups) if mo else 1, "patterns": mo.n_patterns if mo else 1,
                    "missing_fraction": mo.fraction if mo else 0.0, "x0": x0, "times": []}
    reps = int(spec["repeats"])
    budget = float(spec.get("max_seconds", 60.0))
    keys = list(models)
    tstart = time.perf_counter()
    xs = {k: list(_perturbations(per[k]["x0"], reps)) for k in keys}
    for r in range(reps):
        order = keys if r % 2 == 0 else keys[::-1]  # interleaved, alternating order
        for k in order:
            m = models[k]
            t = time.perf_counter()
            m.set_param_vector(xs[k][r])
            m.elbo_and_gradient()
            per[k]["times"].append(time.perf_counter() - t)
        if r >= 4 and time.perf_counter() - tstart > budget:
            break
    for k in keys:
        d = per[k]
        del d["x0"]
        d["median_s"] = float(np.median(d["times"]))
        d["min_s"] = float(np.min(d["times"]))
    out["cases"] = per
    out["loadavg_end"] = loadavg()
    return out


def _gpy_model(c: dict, pattern: str | None):
    import GPy
    from GPy.inference.latent_function_inference.var_dtc import VarDTC

    Y = _Y_with_nan(c, pattern)
    Yc = Y - np.nanmean(Y, axis=0)  # our centring: each column's observed mean
    D = Y.shape[1]
    kern = GPy.kern.RBF(Q, variance=float(c["variance"]),
                        lengthscale=np.array(c["lengthscale"], dtype=np.float64), ARD=True)
    lik = GPy.likelihoods.Gaussian(variance=float(c["noise"]))
    if pattern is None:  # complete data: GPy's usual model (as bench_gplvm.py)
        inf = VarDTC(limit=3)
        inf.const_jitter = float(c["jitter"])
        return GPy.models.BayesianGPLVM(Yc, Q, X=c["mu"].copy(), X_variance=c["S"].copy(),
                                        Z=c["Z"].copy(), kernel=kern, likelihood=lik,
                                        num_inducing=M, inference_method=inf)
    from GPy.models.bayesian_gplvm_minibatch import BayesianGPLVMMiniBatch

    inf = VarDTC(limit=D)  # GPy's own choice for missing_data=True
    inf.const_jitter = float(c["jitter"])
    return BayesianGPLVMMiniBatch(Yc, Q, X=c["mu"].copy(), X_variance=c["S"].copy(), Z=c["Z"].copy(),
                                  kernel=kern, likelihood=lik, num_inducing=M, inference_method=inf,
                                  missing_data=True)


def worker_gpy(spec: dict) -> dict:
    import warnings

    warnings.filterwarnings("ignore")
    t0 = time.perf_counter()
    import GPy

    out = {"import_s": time.perf_counter() - t0, "gpy_version": GPy.__version__,
           "threads": _threads_info(), "loadavg_start": loadavg()}
    c = _load_case(spec["case"])
    tb = time.perf_counter()
    m = _gpy_model(c, spec.get("pattern"))
    out["build_s"] = time.perf_counter() - tb
    out["bound"] = float(np.ravel(m.log_likelihood())[0])
    out["grad_mu"] = np.asarray(m.X.mean.gradient).ravel().tolist()
    out["grad_Z"] = np.asarray(m.Z.gradient).ravel().tolist()
    if spec.get("bound_only"):
        return out
    x0 = m.optimizer_array.copy()
    tf = time.perf_counter()
    m._objective_grads(x0)  # warm-up, not timed
    out["first_eval_s"] = time.perf_counter() - tf
    times = []
    reps = int(spec["repeats"])
    budget = float(spec.get("max_seconds", 60.0))
    tstart = time.perf_counter()
    for k, x in enumerate(_perturbations(x0, reps)):
        t = time.perf_counter()
        m._objective_grads(x)
        times.append(time.perf_counter() - t)
        if k >= 2 and time.perf_counter() - tstart > budget:
            break
    out.update(times=times, median_s=float(np.median(times)), min_s=float(np.min(times)),
               loadavg_end=loadavg())
    return out


def worker(spec: dict) -> dict:
    return worker_ours(spec) if spec["impl"] == "ours" else worker_gpy(spec)


# =========================================================================================
# parent
# =========================================================================================
def run_worker(spec: dict, timeout: float = 3600, env_extra: dict | None = None) -> dict:
    return _worker.run_worker(SCRIPT, spec, PY, env_extra, timeout)


def _rel_grad_diff(a, b) -> float:
    a, b = np.asarray(a), np.asarray(b)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


def run_dataset(label: str, casefile: Path, patterns: list[str], args, run_gpy: bool,
                gpy_complete: bool = True) -> list[dict]:
    log(f"   ours: complete + {', '.join(patterns)} (interleaved, {args.repeats} rounds) ...")
    o = run_worker({"impl": "ours", "case": str(casefile), "patterns": patterns,
                    "repeats": args.repeats, "max_seconds": args.max_seconds})
    if "error" in o:
        log(f"   !! ours: {o['error']}")
        return [{"name": f"{label} {p}", "error": o["error"]} for p in patterns]
    log(f"      threads: numba {o['numba_threads']}, {o['threads']}; load {o['loadavg_start']:.2f}"
        f" -> {o['loadavg_end']:.2f}")
    comp = o["cases"]["complete"]
    log(f"      complete: bound {comp['bound']:.6f}, median {fmt_s(comp['median_s'])} "
        f"(min {fmt_s(comp['min_s'])}, {len(comp['times'])} repeats)")
    gc = gct = None
    if run_gpy and gpy_complete:
        log("   GPy complete (BayesianGPLVM) ...")
        gc = run_worker({"impl": "gpy", "case": str(casefile), "pattern": None,
                         "repeats": args.gpy_repeats, "max_seconds": args.max_seconds})
        if "error" in gc:
            log(f"   !! GPy complete: {gc['error']}")
        else:
            log(f"      bound ours {comp['bound']:.6f} GPy {gc['bound']:.6f} "
                f"(rel {abs(comp['bound'] - gc['bound']) / abs(gc['bound']):.1e}); "
                f"median {fmt_s(gc['median_s'])}; threads {gc['threads']}")
        if args.gpy_tuned:
            gct = run_worker({"impl": "gpy", "case": str(casefile), "pattern": None,
                              "repeats": args.gpy_repeats, "max_seconds": args.max_seconds},
                             env_extra=TUNED)
            if "error" in gct:
                log(f"   !! GPy complete, tuned threads: {gct['error']}")
            else:
                log(f"      GPy complete, tuned threads: median {fmt_s(gct['median_s'])}; threads {gct['threads']}")
    rows = []
    for p in patterns:
        d = o["cases"][p]
        row = {"name": f"{label} {p}", "ours": d, "ours_complete": comp,
               "ratio_missing_complete": d["median_s"] / comp["median_s"],
               "ratio_missing_complete_min": d["min_s"] / comp["min_s"],
               "loadavg": [o["loadavg_start"], o["loadavg_end"]]}
        log(f"      {p}: {100 * d['missing_fraction']:.1f}% missing, G={d['groups']} groups, "
            f"R={d['patterns']} patterns; bound {d['bound']:.6f}; median {fmt_s(d['median_s'])} "
            f"(min {fmt_s(d['min_s'])}): {row['ratio_missing_complete']:.2f}x complete")
        if gc and "error" not in gc:
            row["gpy_complete"] = gc
        if gct and "error" not in gct:
            row["gpy_complete_tuned"] = gct
        if run_gpy:
            log(f"   GPy BayesianGPLVMMiniBatch(missing_data=True), {p} ...")
            g = run_worker({"impl": "gpy", "case": str(casefile), "pattern": p,
                            "repeats": args.gpy_repeats, "max_seconds": args.max_seconds},
                           timeout=args.gpy_timeout)
            row["gpy"] = g
            if "error" in g:
                log(f"   !! GPy: {g['error']}")
            else:
                row["rel_diff"] = abs(d["bound"] - g["bound"]) / abs(g["bound"])
                row["grad_mu_rel"] = _rel_grad_diff(d["grad_mu"], g["grad_mu"])
                row["grad_Z_rel"] = _rel_grad_diff(d["grad_Z"], g["grad_Z"])
                row["speedup"] = g["median_s"] / d["median_s"]
                log(f"      bound ours {d['bound']:.6f}  GPy {g['bound']:.6f}  rel diff {row['rel_diff']:.1e}; "
                    f"gradient max rel diff mu {row['grad_mu_rel']:.1e}, Z {row['grad_Z_rel']:.1e}")
                log(f"      GPy median {fmt_s(g['median_s'])} (min {fmt_s(g['min_s'])}, {len(g['times'])} "
                    f"repeats; first {fmt_s(g['first_eval_s'])}): {row['speedup']:.1f}x ours; "
                    f"load {g['loadavg_start']:.2f} -> {g['loadavg_end']:.2f}")
                if args.gpy_tuned:
                    gt = run_worker({"impl": "gpy", "case": str(casefile), "pattern": p, "bound_only": False,
                                     "repeats": args.gpy_repeats, "max_seconds": args.max_seconds},
                                    timeout=args.gpy_timeout, env_extra=TUNED)
                    if "error" in gt:
                        log(f"   !! GPy tuned threads: {gt['error']}")
                    else:
                        row["gpy_tuned"] = gt
                        row["speedup_tuned"] = gt["median_s"] / d["median_s"]
                        log(f"      GPy, tuned threads ({gt['threads']['blas']}): median {fmt_s(gt['median_s'])} "
                            f"(min {fmt_s(gt['min_s'])}): {row['speedup_tuned']:.1f}x ours; "
                            f"load {gt['loadavg_start']:.2f} -> {gt['loadavg_end']:.2f}")
        for k in ("grad_mu", "grad_Z"):
            d.pop(k, None)
            for gk in ("gpy", "gpy_tuned"):
                if gk in row:
                    row[gk].pop(k, None)
        rows.append(row)
    comp.pop("grad_mu", None)
    comp.pop("grad_Z", None)
    for x in (gc, gct):
        if x:
            x.pop("grad_mu", None)
            x.pop("grad_Z", None)
    return rows


def table(rows: list[dict]) -> str:
    head = ("| case | missing | groups G | patterns R | ours complete | ours missing | missing / complete "
            "(min) | GPy missing | GPy / ours | GPy missing, tuned threads | GPy tuned / ours | "
            "GPy complete (tuned) | GPy missing / complete | bound ours | bound GPy | rel. diff | load avg |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['name']} | error: {r['error']} |")
            continue
        d, comp = r["ours"], r["ours_complete"]
        g, gc = r.get("gpy", {}), r.get("gpy_complete", {})
        gt, gct = r.get("gpy_tuned", {}), r.get("gpy_complete_tuned", {})
        gok = "median_s" in g
        la = r["loadavg"] + ([g["loadavg_start"], g["loadavg_end"]] if gok else []) + \
            ([gt["loadavg_start"], gt["loadavg_end"]] if "median_s" in gt else [])
        lines.append(
            f"| {r['name']} | {100 * d['missing_fraction']:.1f}% | {d['groups']} | {d['patterns']} | "
            f"{fmt_s(comp['median_s'])} | {fmt_s(d['median_s'])} | "
            f"**{r['ratio_missing_complete']:.2f}x** ({r['ratio_missing_complete_min']:.2f}x) | "
            f"{fmt_s(g.get('median_s'))} | " + (f"**{r['speedup']:.1f}x**" if gok else "-") + " | "
            f"{fmt_s(gt.get('median_s'))} | " + (f"**{r['speedup_tuned']:.1f}x**" if "speedup_tuned" in r else "-")
            + f" | {fmt_s(gc.get('median_s'))} ({fmt_s(gct.get('median_s'))}) | "
            + (f"{g['median_s'] / gc['median_s']:.1f}x" if gok and 'median_s' in gc else "-") + " | "
            f"{d['bound']:.4f} | " + (f"{g['bound']:.4f} | {r['rel_diff']:.1e}" if gok else "- | -")
            + f" | {min(la):.1f}-{max(la):.1f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--repeats", type=int, default=21, help="interleaved rounds for ours (default 21)")
    ap.add_argument("--gpy-repeats", type=int, default=5, help="timed repeats for GPy (default 5)")
    ap.add_argument("--max-seconds", type=float, default=60.0,
                    help="stop repeating a worker's timings after this many seconds (>= 3 repeats)")
    ap.add_argument("--gpy-timeout", type=float, default=1800.0, help="give up on a GPy worker after this")
    ap.add_argument("--no-gpy", action="store_true", help="ours only")
    ap.add_argument("--no-gpy-frey", action="store_true", help="no GPy on Frey faces")
    ap.add_argument("--no-gpy-tuned", dest="gpy_tuned", action="store_false",
                    help="GPy at its default threads only (not also with OPENBLAS_NUM_THREADS=1)")
    ap.add_argument("--skip", default="", help="comma list: oil,frey")
    ap.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                    help="extra environment variable for every worker (repeatable)")
    ap.add_argument("--json", default=None, help="write the raw results to this JSON file")
    args = ap.parse_args(argv)

    if args.worker:
        with open(args.worker) as f:
            spec = json.load(f)
        print("RESULT " + json.dumps(worker(spec), default=float), flush=True)
        return 0

    for kv in args.env:
        k, _, v = kv.partition("=")
        os.environ[k] = v
    run_gpy = not args.no_gpy
    if run_gpy:
        try:
            import GPy  # noqa: F401
        except ImportError:
            log("GPy is not importable in this interpreter: run `bash bench/setup_gpy.sh` and use "
                ".bench-venv/bin/python, or pass --no-gpy")
            return 2
    _data_env()
    from bgplvm.datasets import load

    t_all = time.perf_counter()
    try:
        commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True).stdout.strip() or "?"
    except OSError:
        commit = "?"
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    log(f"bench_missing: {now}, commit {commit}, load average {loadavg_text()}, "
        f"{os.cpu_count()} cores, Python {sys.version.split()[0]}")
    skip = set(filter(None, args.skip.split(",")))
    tmp = Path(tempfile.mkdtemp(prefix="bench_missing_"))
    rows, notes = [], []
    if "oil" not in skip:
        Y = load("oil").Y
        N, D = Y.shape
        ro, rnote = oil_random(N, D)
        bo, bnote = oil_blocks(N, D)
        notes.append(f"oil random 30%: {rnote}. oil 20 blocks: {bnote}.")
        log(f"\n[oil] N={N}, D={D}, Q={Q}, M={M}; random: {rnote}\n   blocks: {bnote}")
        make_case(tmp / "oil.npz", "oil", Y, {"random 30%": ro, "20 blocks": bo})
        rows += run_dataset("oil", tmp / "oil.npz", ["random 30%", "20 blocks"], args, run_gpy)
    if "frey" not in skip:
        Y = load("frey_faces").Y
        N, D = Y.shape
        fo, fnote = frey_blocks(N)
        notes.append(f"frey: {fnote} (7 block rows x 5 block columns of the 28x20 image, seed 0).")
        log(f"\n[frey faces] N={N}, D={D}, Q={Q}, M={M}; {fnote}")
        make_case(tmp / "frey.npz", "frey", Y, {"3 blocks 4x4 per frame": fo})
        rows += run_dataset("frey", tmp / "frey.npz", ["3 blocks 4x4 per frame"], args,
                            run_gpy and not args.no_gpy_frey)

    checks = []
    for r in rows:
        if "error" in r:
            continue
        goal = GOALS.get(r["name"])
        if goal:
            checks.append((f"{r['name']}: missing / complete <= {goal:g}x", r["ratio_missing_complete"] <= goal,
                           f"{r['ratio_missing_complete']:.2f}x"))
        if r["name"].startswith("oil") and "speedup" in r:
            checks.append((f"{r['name']}: >= {GPY_GOAL:g}x faster than GPy at its default threads",
                           r["speedup"] >= GPY_GOAL, f"{r['speedup']:.1f}x"))
        if r["name"].startswith("oil") and "speedup_tuned" in r:
            best = min(r["speedup"], r["speedup_tuned"])
            checks.append((f"{r['name']}: >= {GPY_GOAL:g}x faster than GPy at its fastest thread setting",
                           best >= GPY_GOAL, f"{best:.1f}x"))
        if "rel_diff" in r:
            checks.append((f"{r['name']}: bound equal to GPy's to 1e-6", r["rel_diff"] < 1e-6,
                           f"{r['rel_diff']:.1e}; gradients mu {r['grad_mu_rel']:.1e}, Z {r['grad_Z_rel']:.1e}"))
    report = [f"bench_missing: {now}, commit {commit}, load average at the end {loadavg_text()}",
              "", table(rows), ""] + notes + [""] + \
             [f"- {'PASS' if ok else 'MISS'}: {n} ({d})" for n, ok, d in checks]
    wall = time.perf_counter() - t_all
    log("\n" + "=" * 100 + "\n" + "\n".join(report))
    log(f"\nours: m.set_param_vector(x); m.elbo_and_gradient(); GPy: m._objective_grads(x). "
        f"Median (min) of repeats after one warm-up evaluation. Total wall time {wall:.0f} s.")
    import shutil

    shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "notes": notes, "commit": commit, "date": now,
                                               "wall_s": wall}, indent=1, default=float))
        log(f"raw results -> {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
