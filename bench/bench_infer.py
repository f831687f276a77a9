#!/usr/bin/env python
"""Inference of q(x*) for new oil outputs: ours (``BayesianGPLVM.infer_latent``) against
GPy 1.15's ``infer_newX``, side by side in one run (issue 9).

    bash bench/setup_gpy.sh                                # .bench-venv with GPy (once)
    .bench-venv/bin/python bench/bench_infer.py            # full run
    .bench-venv/bin/python bench/bench_infer.py --gpy-max-n 100   # GPy only up to 100 points

What is measured:
  * one fitted oil model (N=1000, D=12, Q=10, M=50, RBF ARD, seed 0, 2000 iterations of our
    fit; cached in .cache/bench_infer/), copied into a GPy BayesianGPLVM with identical
    q(X), Z, kernel, noise and jitter (centred data for both, as in bench_gplvm.py);
  * test rows: the first n = 1, 100, 1000 rows of the oil test set, (a) complete and
    (b) with 6 of the 12 dims missing (NaN), a random pattern per row (seed 0);
  * ours: ``m.infer_latent(Y_star)`` on all n rows at once (wall time, median of repeats
    after one warm-up call on other rows);
  * GPy: ``infer_newX(m, Y_new)`` (1) all n rows in one call -- GPy optimises them jointly
    with one L-BFGS-B, possible only without missing entries (with NaN it asserts one row
    at a time); (2) one row per call, the loop a user must write with missing entries.
    Each implementation and case runs in its own subprocess; the timed region is the call.
  * per-point times and GPy/ours ratios, iterations, and how close the two answers are
    (GPy's objective is the bound with q(u) fixed at the training posterior, i.e. the test
    point does not enter the factorisation; ours is the collapsed bound of the test point
    jointly with the training data, eq:predictive1; the optima differ slightly).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

import _worker  # bench/ is on sys.path when a bench script runs
from _worker import loadavg

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".cache" / "bench_infer"
DEFAULT_MIRROR = ROOT.parent / "shared" / "datasets"
SIZES = (1, 100, 1000)


def log(*a):
    print(*a, flush=True)


def _data_env():
    if "BGPLVM_DATA_MIRROR" not in os.environ and DEFAULT_MIRROR.is_dir():
        os.environ["BGPLVM_DATA_MIRROR"] = str(DEFAULT_MIRROR)
    os.environ.setdefault("BGPLVM_CACHE_DIR", str(ROOT / ".cache" / "datasets"))


# =========================================================================================
# the fitted model and the test rows (parent process)
# =========================================================================================
def prepare(refit: bool, iters: int) -> dict:
    """Fit (or reuse) the oil model; write the case file both workers read."""
    _data_env()
    from bgplvm.datasets import load

    from bgplvm import BayesianGPLVM

    CACHE.mkdir(parents=True, exist_ok=True)
    model_path = CACHE / f"oil_Q10_M50_seed0_{iters}.npz"
    Y = load("oil").Y
    Yt = load("oil", split="test").Y
    if refit or not model_path.exists():
        log(f"fitting the oil model ({iters} iterations) ...")
        t = time.perf_counter()
        m = BayesianGPLVM(Y, latent_dim=10, num_inducing=50, kernel="rbf", seed=0)
        m.fit(max_iters=iters, progress=False)
        m.save(model_path)
        log(f"   fitted in {time.perf_counter() - t:.1f} s, bound {m.elbo():.1f}")
    m = BayesianGPLVM.load(model_path)
    st = m._test_stats()  # a copy of the kernel with the model's parameters
    rng = np.random.default_rng(0)
    missing = np.zeros(Yt.shape, dtype=bool)
    for i in range(Yt.shape[0]):
        missing[i, rng.permutation(Yt.shape[1])[:Yt.shape[1] // 2]] = True
    case = CACHE / "case.npz"
    np.savez(case, Yc=m.Y - m.Y_mean, Y_mean=m.Y_mean, Yt=Yt, missing=missing,
             mu=m.latent_mean, S=m.latent_variance, Z=m.inducing_inputs,
             variance=st.kernel.params["variance"], lengthscale=st.kernel.params["lengthscale"],
             noise=m.noise_variance, model=str(model_path), bound=m.elbo())
    return {"model": str(model_path), "case": str(case), "bound": float(m.elbo())}


# =========================================================================================
# workers
# =========================================================================================
def _test_rows(c: dict, n: int, missing: bool, offset: int = 0) -> np.ndarray:
    Y = c["Yt"][offset:offset + n].copy()
    if missing:
        Y[c["missing"][offset:offset + n]] = np.nan
    return Y


def worker_ours(spec: dict) -> dict:
    import bgplvm
    from bgplvm import BayesianGPLVM

    t0 = time.perf_counter()
    bgplvm.warmup()
    c = dict(np.load(spec["case"]))
    m = BayesianGPLVM.load(str(c["model"]))
    n, miss = int(spec["n"]), bool(spec["missing"])
    # warm-up: compile / load every kernel on other rows (both the serial and the parallel path)
    m.infer_latent(_test_rows(c, 2, miss, offset=900))
    m.infer_latent(_test_rows(c, 100, miss, offset=800))
    out = {"warmup_s": time.perf_counter() - t0, "loadavg_start": loadavg()}
    Ys = _test_rows(c, n, miss)
    times, cpu, fit = [], [], None
    reps = int(spec["repeats"])
    for _ in range(reps):
        t, c = time.perf_counter(), time.process_time()
        fit = m.infer_latent(Ys, return_fit=True)
        times.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    out.update(times=times, median_s=float(np.median(times)), min_s=float(np.min(times)),
               cpu_s=float(np.median(cpu)),
               iterations_mean=float(fit.iterations.mean()), iterations_max=int(fit.iterations.max()),
               evals_per_point=fit.n_evals / n, converged=int(fit.converged.sum()),
               mu=fit.mu.tolist(), S=fit.S.tolist(), loadavg_end=loadavg())
    return out


def _gpy_model(c: dict):
    import GPy
    from GPy.inference.latent_function_inference.var_dtc import VarDTC

    from bgplvm.linalg import JITTER

    Q = c["mu"].shape[1]
    kern = GPy.kern.RBF(Q, variance=float(c["variance"]), lengthscale=np.array(c["lengthscale"]), ARD=True)
    lik = GPy.likelihoods.Gaussian(variance=float(c["noise"]))
    inf = VarDTC(limit=3)
    inf.const_jitter = JITTER * max(1.0, float(c["variance"]))  # our jitter (bound.kuu_jitter), as in bench_gplvm.py
    return GPy.models.BayesianGPLVM(c["Yc"], Q, X=c["mu"].copy(), X_variance=c["S"].copy(),
                                    Z=c["Z"].copy(), kernel=kern, likelihood=lik,
                                    num_inducing=c["Z"].shape[0], inference_method=inf)


def worker_gpy(spec: dict) -> dict:
    import warnings

    warnings.filterwarnings("ignore")
    from GPy.inference.latent_function_inference.inferenceX import infer_newX

    c = dict(np.load(spec["case"]))
    g = _gpy_model(c)
    n, miss, mode = int(spec["n"]), bool(spec["missing"]), spec["mode"]
    Ys = _test_rows(c, n, miss) - c["Y_mean"]
    infer_newX(g, _test_rows(c, 1, miss, offset=900) - c["Y_mean"])  # warm-up
    out = {"loadavg_start": loadavg(), "bound": float(np.ravel(g.log_likelihood())[0])}
    budget = float(spec.get("max_seconds", 1e9))
    t, c = time.perf_counter(), time.process_time()
    if mode == "joint":
        X, im = infer_newX(g, Ys)
        mu, S = np.asarray(X.mean), np.asarray(X.variance)
        done = n
    else:
        mu, S = [], []
        for i in range(n):
            X, _ = infer_newX(g, Ys[i:i + 1])
            mu.append(np.asarray(X.mean)[0])
            S.append(np.asarray(X.variance)[0])
            if time.perf_counter() - t > budget:
                break
        done = len(mu)
        mu, S = np.array(mu), np.array(S)
    dt = time.perf_counter() - t
    out.update(total_s=dt, points_done=done, per_point_s=dt / done,
               cpu_per_point_s=(time.process_time() - c) / done, mu=mu.tolist(), S=S.tolist(),
               loadavg_end=loadavg())
    return out


# =========================================================================================
# driver
# =========================================================================================
def run_worker(spec: dict, python: str, timeout: float = 7200) -> dict:
    return _worker.run_worker(str(Path(__file__).resolve()), spec, python, timeout=timeout)


def fmt_ms(s):
    if s is None:
        return "-"
    return f"{s * 1e3:.2f} ms" if s < 0.1 else (f"{s * 1e3:.0f} ms" if s < 1 else f"{s:.2f} s")


def agreement(o: dict, g: dict) -> str:
    """Median and max |mu_ours - mu_GPy| / sqrt(S_ours) over the points GPy did."""
    if "mu" not in o or "mu" not in g or not g["mu"]:
        return "-"
    k = len(g["mu"])
    mo, so, mg = np.array(o["mu"])[:k], np.array(o["S"])[:k], np.array(g["mu"])
    r = np.abs(mo - mg) / np.sqrt(so)
    return f"{np.median(r):.2g} / {np.max(r):.2g}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--refit", action="store_true", help="fit the oil model again")
    ap.add_argument("--fit-iters", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=3, help="repeats of our timed call (median)")
    ap.add_argument("--gpy-max-n", type=int, default=1000, help="largest n for GPy")
    ap.add_argument("--gpy-max-seconds", type=float, default=600.0,
                    help="stop GPy's one-row loop after this long (per point time from the rows done)")
    ap.add_argument("--no-gpy", action="store_true")
    ap.add_argument("--json", help="write all results here")
    ap.add_argument("--table", help="print the table of an earlier run's --json file and exit")
    args = ap.parse_args(argv)
    if args.table:
        rows = json.loads(Path(args.table).read_text())["rows"]
        for r in rows:
            o = r["ours"]
            if "median_s" in o:
                o["per_point_s"] = o["median_s"] / r["n"]
                for key in ("gpy_joint", "gpy_loop"):
                    if "per_point_s" in r.get(key, {}):
                        r[key]["ratio"] = r[key]["per_point_s"] / o["per_point_s"]
        print(table(rows))
        return 0
    if args.worker:
        spec = json.loads(Path(args.worker).read_text())
        res = worker_ours(spec) if spec["impl"] == "ours" else worker_gpy(spec)
        print("RESULT " + json.dumps(res), flush=True)
        return 0

    py = sys.executable
    try:
        import GPy  # noqa: F401

        have_gpy = not args.no_gpy
    except ImportError:
        have_gpy = False
        log("GPy not importable in this interpreter: ours only (bash bench/setup_gpy.sh)")
    info = prepare(args.refit, args.fit_iters)
    log(f"model {info['model']} (bound {info['bound']:.1f}); load average {loadavg():.1f}")
    rows = []
    for miss in (False, True):
        for n in SIZES:
            label = f"{'half missing' if miss else 'complete'}, n={n}"
            base = dict(case=info["case"], n=n, missing=miss)
            r = {"label": label, "n": n, "missing": miss}
            r["ours"] = run_worker(dict(base, impl="ours", repeats=args.repeats if n < 1000 else 1 + (args.repeats > 1)), py)
            if have_gpy and n <= args.gpy_max_n:
                if not miss:
                    r["gpy_joint"] = run_worker(dict(base, impl="gpy", mode="joint"), py)
                r["gpy_loop"] = run_worker(dict(base, impl="gpy", mode="loop",
                                                max_seconds=args.gpy_max_seconds), py)
            o = r["ours"]
            if "error" in o:
                log(f"  !! ours {label}: {o['error']}")
                rows.append(r)
                continue
            o["per_point_s"] = o["median_s"] / n
            msg = (f"  {label:<22} ours {fmt_ms(o['median_s'])} total, {fmt_ms(o['per_point_s'])}/pt "
                   f"({o['iterations_mean']:.1f} it, {o['evals_per_point']:.1f} evals/pt, "
                   f"{o['converged']}/{n} converged)")
            for key in ("gpy_joint", "gpy_loop"):
                g = r.get(key)
                if g is None:
                    continue
                if "error" in g:
                    log(f"  !! {key} {label}: {g['error']}")
                    continue
                g["ratio"] = g["per_point_s"] / o["per_point_s"]
                msg += (f" | GPy {key[4:]} {fmt_ms(g['per_point_s'])}/pt ({g['points_done']} pts) "
                        f"x{g['ratio']:.0f}")
            log(msg + f" | load {o['loadavg_start']:.1f}")
            rows.append(r)

    log("")
    log(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps({"info": info, "rows": rows}, indent=1))
    return 0


def table(rows: list[dict]) -> str:
    """The markdown table of bench/README.md from the rows of a run (also ``--table JSON``)."""
    lines = ["| test rows | n | ours total | ours per point | ours iterations (mean/max) | "
             "GPy joint per point | GPy one row per call, per point | GPy/ours per point (wall) | "
             "CPU time per point, ours / GPy one row per call (ratio) | "
             "mu agreement (median/max, in posterior sd) | load avg |", "|" + "---|" * 11]
    for r in rows:
        o = r["ours"]
        if "error" in o:
            continue
        gj, gl = r.get("gpy_joint", {}), r.get("gpy_loop", {})
        ratios = " / ".join(f"{g['ratio']:.0f}x" for g in (gj, gl) if "ratio" in g) or "-"
        lines.append(
            f"| {'half missing' if r['missing'] else 'complete'} | {r['n']} | {fmt_ms(o['median_s'])} | "
            f"{fmt_ms(o['per_point_s'])} | {o['iterations_mean']:.1f} / {o['iterations_max']} | "
            f"{fmt_ms(gj.get('per_point_s')) if 'per_point_s' in gj else ('n/a (GPy: one row at a time with NaN)' if r['missing'] else '-')} | "
            f"{fmt_ms(gl.get('per_point_s')) if 'per_point_s' in gl else '-'}"
            f"{' (' + str(gl['points_done']) + ' rows)' if 'points_done' in gl and gl['points_done'] < r['n'] else ''} | "
            f"{ratios} | {cpu_ratio(o, gl, r['n'])} | {agreement(o, gl or gj)} | {o['loadavg_start']:.1f} |")
    return "\n".join(lines)


def cpu_ratio(o: dict, g: dict, n: int) -> str:
    """Process CPU time per point (all threads): less sensitive to the machine's load than
    wall time, since a busy machine mostly adds waiting."""
    if "cpu_s" not in o or "cpu_per_point_s" not in g:
        return "-"
    ours = o["cpu_s"] / n
    return f"{fmt_ms(ours)} / {fmt_ms(g['cpu_per_point_s'])} ({g['cpu_per_point_s'] / ours:.0f}x)"


if __name__ == "__main__":
    sys.exit(main())
