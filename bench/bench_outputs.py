#!/usr/bin/env python
"""The single-view bound after the outputs refactor (37ba7eb: ``BayesianGPLVM`` holds its
training outputs as one ``bgplvm.outputs.Outputs`` and the bound goes through
``Outputs.bound``) against the code just before it, both measured in ONE run.

    .venv/bin/python bench/bench_outputs.py                  # ~3 min on 2 cores (the first run
                                                             # compiles Numba twice: +2 min)
    .venv/bin/python bench/bench_outputs.py --rounds 10 --repeats 31
    .venv/bin/python bench/bench_outputs.py --new 37ba7eb    # the refactor commit itself
    .venv/bin/python bench/bench_outputs.py --env BGPLVM_NUMBA_PARALLEL=0   # one thread

Versions: ``--old`` (default ``37ba7eb^``, the parent of the refactor) and ``--new`` (default
``HEAD``; ``WORKTREE`` for the checkout's own ``model/``, uncommitted edits included). Each
committed version's ``model/`` is extracted with ``git archive REV model | tar -x`` into
``.cache/bench_outputs/<git tree hash of model/>/`` (gitignored; kept, so that its Numba
cache stays valid between runs: Numba keys its cache on the source's path and mtime; a new
tree compiles once, ~1 min idle, ~3 min on a loaded machine) beside a directory
``pp/`` holding a symlink ``bgplvm -> ../model``. A worker process of a version runs with
that ``pp/`` first on PYTHONPATH (the editable install's finder comes after it on
sys.meta_path; every worker checks that ``bgplvm.__file__`` is the version's own) and with
``NUMBA_CACHE_DIR`` set to that version's ``numba/`` directory. The bound needs nothing of
the package but ``model/`` (``bgplvm.datasets`` is imported only by the CLI).

Cases (synthetic data, seed 0; numpy only, made by the parent):
  (a) complete, oil's size: N=1000, D=12, Q=10, M=50;
  (b) complete, the pose / silhouette set's size: N=1927, D=100, Q=10, M=50;
  (c) (a) with 20% of the entries missing at random (NaN; a row left with nothing observed
      would get one entry back).
Y is a smooth random map (tanh of a random layer) of 3-D Gaussian latents plus noise of sd
0.1. Parameters: one worker of the OLD version builds ``BayesianGPLVM(Y, Q, M, seed=0)`` of
each complete Y and stores its initial values (mu, S, Z, the RBF variance and ARD
lengthscales, the noise); every worker of either version builds its models with ``seed=0``
and then sets exactly those values (``m._set_x(m._layout.pack(v))``), case (c) those of (a).

What is timed (wall clock): ``m.set_param_vector(x); m.elbo_and_gradient()``, the public
bound + gradient evaluation of both versions (its ``_bound`` reads no cache), x perturbed by
~1e-12 relative at every repeat. In each worker: ``bgplvm.warmup()`` (Numba compiled or
loaded from the cache), two untimed evaluations per model, then ``--repeats`` rounds over
the three models interleaved (order alternating). The parent runs ``--rounds`` rounds of one
old and one new worker, the order alternating (old, new, new, old, ...), so that both see
the same machine load. Reported per case: the median over all of a version's evaluations,
the ratio new / old of those medians (target <= 1.05; the ratio of the minima beside it),
and the paired figures: the ratio of each round's two worker medians, their median and
their range (min - max over the rounds). On a shared machine the paired median and the
minima are the steadier figures; the range shows how much the load moved within a round.

Equality: before timing, every worker evaluates each model at the stored x (unperturbed);
the bound and the full gradient of the two versions must agree to 1e-10 relative (the
gradient: max abs difference / max abs entry), otherwise the timings compare different
computations and the run says so (exit status 1).

Threads: each worker at the package's defaults (Numba's threads per call chosen from the
idle cores, ``model/_numba_config.py``; BLAS single-threaded inside the bound); ``--env K=V``
sets a variable for every worker, e.g. ``BGPLVM_NUMBA_PARALLEL=0`` for one thread.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import _worker  # bench/ is on sys.path when a bench script runs
from _worker import loadavg, loadavg_text

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = str(Path(__file__).resolve())
PY = sys.executable
CACHE = ROOT / ".cache" / "bench_outputs"
Q, M = 10, 50
TARGET = 1.05  # new / old, median time of one bound + gradient evaluation
EQUAL = 1e-10  # relative difference of the bound (and the gradient) between the versions
CASES = {  # name: (N, D, missing fraction, parameters of)
    "(a) complete N=1000 D=12": (1000, 12, 0.0, "a"),
    "(b) complete N=1927 D=100": (1927, 100, 0.0, "b"),
    "(c) (a) with 20% missing": (1000, 12, 0.2, "a"),
}


def log(*a):
    print(*a, flush=True)


def fmt_ms(s: float) -> str:
    return f"{s * 1e3:.2f} ms"


# =========================================================================================
# versions (parent)
# =========================================================================================
def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def prepare_version(rev: str) -> dict:
    """{"label", "sha", "pp" (PYTHONPATH entry), "model" (the package dir), "numba" (cache)}."""
    if rev.upper() == "WORKTREE":
        d = CACHE / "worktree"
        pp = d / "pp"
        pp.mkdir(parents=True, exist_ok=True)
        link = pp / "bgplvm"
        if not link.is_symlink():
            link.symlink_to(ROOT / "model")
        dirty = bool(_git("status", "--porcelain", "--", "model"))
        return {"label": "worktree" + (" (uncommitted edits)" if dirty else ""),
                "sha": _git("rev-parse", "HEAD") + ("+dirty" if dirty else ""),
                "pp": str(pp), "model": str(ROOT / "model"), "numba": str(d / "numba")}
    sha = _git("rev-parse", "--verify", rev + "^{commit}")
    d = CACHE / _git("rev-parse", f"{sha}:model")  # keyed by model/'s tree: commits elsewhere share it
    if not (d / ".complete").exists():
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", sha, "model"], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(d)], input=archive, check=True)
        (d / "pp").mkdir()
        (d / "pp" / "bgplvm").symlink_to(Path("..") / "model")
        (d / ".complete").write_text(rev + "\n")
    return {"label": f"{rev} ({sha[:7]})", "sha": sha, "pp": str(d / "pp"), "model": str(d / "model"),
            "numba": str(d / "numba")}


def version_env(ver: dict, extra: dict) -> dict:
    env = {"PYTHONPATH": ver["pp"] + (os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else ""),
           "NUMBA_CACHE_DIR": ver["numba"]}
    env.update(extra)
    return env


# =========================================================================================
# data (parent, numpy only)
# =========================================================================================
def make_data(path: Path) -> None:
    arrays = {}
    for key, (N, D, frac, _) in CASES.items():
        if frac:
            continue
        rng = np.random.default_rng(0)
        X = rng.standard_normal((N, 3))
        Y = np.tanh(X @ rng.standard_normal((3, 40))) @ rng.standard_normal((40, D)) / np.sqrt(40)
        arrays["Y__" + CASES[key][3]] = Y + 0.1 * rng.standard_normal((N, D))
    for key, (N, D, frac, src) in CASES.items():
        if not frac:
            continue
        rng = np.random.default_rng(0)
        obs = rng.random((N, D)) >= frac
        for i in np.flatnonzero(~obs.any(1)):
            obs[i, rng.integers(D)] = True
        arrays["obs__" + src] = obs
    np.savez(path, **arrays)


# =========================================================================================
# workers
# =========================================================================================
def _perturbations(x: np.ndarray, n: int, seed: int):
    rng = np.random.default_rng(seed)
    return [x * (1.0 + 1e-12 * (k + 1) * rng.uniform(0.5, 1.0, x.shape)) for k in range(n)]


def _case_Y(data: dict, key: str) -> np.ndarray:
    N, D, frac, src = CASES[key]
    Y = data["Y__" + src].copy()
    if frac:
        Y[~data["obs__" + src]] = np.nan
    return Y


def worker_params(spec: dict) -> dict:
    """The seed-0 initial values of each complete case (the old version's init)."""
    from bgplvm import BayesianGPLVM

    with np.load(spec["data"]) as f:
        data = {k: f[k] for k in f.files}
    out = {}
    for key, (N, D, frac, src) in CASES.items():
        if frac:
            continue
        m = BayesianGPLVM(data["Y__" + src], latent_dim=Q, num_inducing=M, kernel="rbf", seed=0)
        v = m._values()
        for name in ("mu", "S", "Z", "kernel.variance", "kernel.lengthscale", "noise_variance"):
            out[f"{src}__{name}"] = np.asarray(v[name], dtype=np.float64)
    np.savez(spec["params"], **out)
    return {"bgplvm": __import__("bgplvm").__file__}


def worker_time(spec: dict) -> dict:
    import bgplvm

    t0 = time.perf_counter()
    bgplvm.warmup()
    import numba

    out = {"bgplvm": bgplvm.__file__, "warmup_s": time.perf_counter() - t0,
           "numba_threads": numba.get_num_threads(), "loadavg_start": loadavg()}
    from bgplvm import BayesianGPLVM

    with np.load(spec["data"]) as f:
        data = {k: f[k] for k in f.files}
    with np.load(spec["params"]) as f:
        params = {k: f[k] for k in f.files}
    models, xs, res, grads = {}, {}, {}, {}
    for key, (N, D, frac, src) in CASES.items():
        m = BayesianGPLVM(_case_Y(data, key), latent_dim=Q, num_inducing=M, kernel="rbf", seed=0)
        v = dict(m._values())
        for name in ("mu", "S", "Z", "kernel.variance", "kernel.lengthscale", "noise_variance"):
            v[name] = params[f"{src}__{name}"]
        m._set_x(m._layout.pack(v))
        x0 = m.get_param_vector()
        F, g = m.elbo_and_gradient()
        m.set_param_vector(x0)
        m.elbo_and_gradient()  # second untimed evaluation
        models[key] = m
        xs[key] = _perturbations(x0, int(spec["repeats"]), seed=int(spec["seed"]))
        mo = m._missing
        res[key] = {"bound": float(F), "missing_fraction": float(mo.fraction) if mo else 0.0,
                    "groups": len(mo.groups) if mo else 1, "times": []}
        grads[key] = g
    np.savez(spec["grads"], **{k: g for k, g in grads.items()})
    keys = list(models)
    for r in range(int(spec["repeats"])):
        for key in (keys if r % 2 == 0 else keys[::-1]):
            m = models[key]
            t = time.perf_counter()
            m.set_param_vector(xs[key][r])
            m.elbo_and_gradient()
            res[key]["times"].append(time.perf_counter() - t)
    out["cases"] = res
    out["loadavg_end"] = loadavg()
    return out


def worker(spec: dict) -> dict:
    out = worker_params(spec) if spec["kind"] == "params" else worker_time(spec)
    want = Path(spec["model"]).resolve()
    got = Path(out["bgplvm"]).resolve().parent
    if got != want:
        return {"error": f"imported bgplvm from {got}, not the version's {want}"}
    return out


# =========================================================================================
# parent
# =========================================================================================
def rel_grad_diff(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1e-300))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--old", default="37ba7eb^", help="reference revision (default 37ba7eb^)")
    ap.add_argument("--new", default="HEAD", help="revision to check, or WORKTREE (default HEAD)")
    ap.add_argument("--rounds", type=int, default=16, help="pairs of old/new worker processes (default 16)")
    ap.add_argument("--repeats", type=int, default=15, help="timed evaluations per model per worker (default 15)")
    ap.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                    help="extra environment variable for every worker (repeatable)")
    ap.add_argument("--json", default=None, help="write the raw results (every time) to this JSON file")
    args = ap.parse_args(argv)

    if args.worker:
        with open(args.worker) as f:
            spec = json.load(f)
        print("RESULT " + json.dumps(worker(spec), default=float), flush=True)
        return 0

    extra = dict(kv.partition("=")[::2] for kv in args.env)
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    log(f"bench_outputs: {now}, checkout {_git('rev-parse', '--short', 'HEAD')}, load average "
        f"{loadavg_text()}, {os.cpu_count()} cores, Python {sys.version.split()[0]}"
        + (f", env {extra}" if extra else ""))
    versions = {"old": prepare_version(args.old), "new": prepare_version(args.new)}
    for k, v in versions.items():
        log(f"  {k}: {v['label']} -> {v['model']}")
    t_all = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="bench_outputs_"))
    try:
        data = tmp / "data.npz"
        params = tmp / "params.npz"
        make_data(data)
        p = _worker.run_worker(SCRIPT, {"kind": "params", "data": str(data), "params": str(params),
                                        "model": versions["old"]["model"]},
                               PY, version_env(versions["old"], extra), timeout=1800)
        if "error" in p:
            log(f"!! parameters (old version): {p['error']}")
            return 2
        runs = {"old": [], "new": []}
        grads = {}
        for r in range(args.rounds):
            order = ("old", "new") if r % 2 == 0 else ("new", "old")
            for k in order:
                gpath = tmp / f"grads_{k}_{r}.npz"
                o = _worker.run_worker(SCRIPT, {"kind": "time", "data": str(data), "params": str(params),
                                                "grads": str(gpath), "model": versions[k]["model"],
                                                "repeats": args.repeats, "seed": r},
                                       PY, version_env(versions[k], extra), timeout=1800)
                if "error" in o:
                    log(f"!! round {r + 1}, {k}: {o['error']}")
                    return 2
                if k not in grads:
                    with np.load(gpath) as f:
                        grads[k] = {key: f[key] for key in f.files}
                runs[k].append(o)
                med = ", ".join(f"{fmt_ms(float(np.median(c['times'])))}" for c in o["cases"].values())
                log(f"  round {r + 1} {k}: warm-up {o['warmup_s']:.1f} s, numba {o['numba_threads']} threads, "
                    f"load {o['loadavg_start']:.2f} -> {o['loadavg_end']:.2f}; medians (a, b, c) {med}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    rows, checks = [], []
    for key in CASES:
        o0, n0 = runs["old"][0]["cases"][key], runs["new"][0]["cases"][key]
        bound_rel = abs(n0["bound"] - o0["bound"]) / abs(o0["bound"])
        grad_rel = rel_grad_diff(grads["new"][key], grads["old"][key])
        t_old = np.concatenate([run["cases"][key]["times"] for run in runs["old"]])
        t_new = np.concatenate([run["cases"][key]["times"] for run in runs["new"]])
        per_round = [np.median(b["cases"][key]["times"]) / np.median(a["cases"][key]["times"])
                     for a, b in zip(runs["old"], runs["new"])]
        row = {"case": key, "missing_fraction": o0["missing_fraction"], "groups": o0["groups"],
               "bound_old": o0["bound"], "bound_new": n0["bound"], "bound_rel": bound_rel, "grad_rel": grad_rel,
               "old_median_s": float(np.median(t_old)), "new_median_s": float(np.median(t_new)),
               "old_min_s": float(t_old.min()), "new_min_s": float(t_new.min()),
               "per_round": [float(x) for x in per_round], "n": [len(t_old), len(t_new)]}
        row["ratio"] = row["new_median_s"] / row["old_median_s"]
        row["ratio_min"] = row["new_min_s"] / row["old_min_s"]
        rows.append(row)
        checks.append((f"{key}: same bound and gradient to {EQUAL:g}", bound_rel <= EQUAL and grad_rel <= EQUAL,
                       f"bound {bound_rel:.1e}, gradient {grad_rel:.1e}"))
        checks.append((f"{key}: new / old <= {TARGET:g}", row["ratio"] <= TARGET,
                       f"{row['ratio']:.3f}; minima {row['ratio_min']:.3f}; per round median {np.median(per_round):.3f}, "
                       f"{min(per_round):.3f}-{max(per_round):.3f}"))

    la = [x for k in runs for o in runs[k] for x in (o["loadavg_start"], o["loadavg_end"])]
    lines = ["| case | old median (min) | new median (min) | new / old median (min) | per-round new / old "
             "median (min-max) | bound old | bound new | rel. diff (gradient) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['case']} | {fmt_ms(r['old_median_s'])} ({fmt_ms(r['old_min_s'])}) | "
                     f"{fmt_ms(r['new_median_s'])} ({fmt_ms(r['new_min_s'])}) | **{r['ratio']:.3f}** "
                     f"({r['ratio_min']:.3f}) | {np.median(r['per_round']):.3f} ({min(r['per_round']):.3f}-"
                     f"{max(r['per_round']):.3f}) | "
                     f"{r['bound_old']:.6f} | {r['bound_new']:.6f} | {r['bound_rel']:.1e} ({r['grad_rel']:.1e}) |")
    wall = time.perf_counter() - t_all
    notes = [f"old {versions['old']['label']}, new {versions['new']['label']}; {args.rounds} rounds of one "
             f"worker each (alternating order), {args.repeats} evaluations per model per worker "
             f"({rows[0]['n'][0]} per version and case); case (c): {100 * rows[2]['missing_fraction']:.1f}% "
             f"missing, {rows[2]['groups']} column groups; load average {min(la):.2f}-{max(la):.2f}"
             + (f"; env {extra}" if extra else "") + f"; wall time {wall:.0f} s."]
    report = ["", "=" * 100, f"bench_outputs: {now}", "", *lines, "", *notes, "",
              *[f"- {'PASS' if ok else 'MISS'}: {n} ({d})" for n, ok, d in checks],
              "", "Timed: m.set_param_vector(x); m.elbo_and_gradient(). Medians over all evaluations of a "
              "version; per round: the ratio of the two workers' medians."]
    log("\n".join(report))
    if args.json:
        Path(args.json).write_text(json.dumps({"date": now, "versions": versions, "env": extra, "rows": rows,
                                               "runs": runs, "wall_s": wall}, indent=1, default=float))
        log(f"raw results -> {args.json}")
    return 0 if all(ok for n, ok, _ in checks if "same bound" in n) else 1


if __name__ == "__main__":
    sys.exit(main())
