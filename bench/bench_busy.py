#!/usr/bin/env python
"""One bound + gradient on a busy machine: 0 and 1 competing busy processes, and two
models evaluating in two threads of one process (as the explorer does).

    .venv/bin/python bench/bench_busy.py                       # this checkout
    .venv/bin/python bench/bench_busy.py --baseline ../main    # and another one beside it

Sizes: "oil" (the oil data, N=1000, D=12, Q=10, M=50) and "small" (synthetic, N=300, D=30,
Q=8, M=30). Every measurement runs in its own process (so that environment variables such
as NUMBA_NUM_THREADS apply) and times ``m.set_param_vector(x); m.elbo_and_gradient()`` with
x perturbed by 1e-12 at each repeat, after a warm-up; the figure is the median over
``--seconds`` of repeats. Scenarios:

  idle 1 thread   NUMBA_NUM_THREADS=1: the reference ("idle single-threaded time")
  idle            the defaults
  1 busy          the defaults, beside one other process spinning on one core
  2 threads       two models of the same size in two threads of one process, each
                  evaluating in a loop; the time of one evaluation in either thread

Ratios are against "idle 1 thread" of the same checkout in the same round. Rounds
(``--rounds``) repeat every scenario so that a change of the machine's load shows up as
spread; the table gives the median over rounds. The machine is shared: the load average is
printed with every round.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from _worker import loadavg_text as loadavg  # bench/ is on sys.path when a bench script runs
from _worker import run_worker

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_MIRROR = ROOT.parent / "shared" / "datasets"
SIZES = {"oil": dict(Q=10, M=50), "small": dict(Q=8, M=30)}
SCENARIOS = ("idle 1 thread", "idle", "1 busy", "2 threads")


def make_data(size: str) -> np.ndarray:
    if size == "oil":
        mirror = Path(os.environ.get("BGPLVM_DATA_MIRROR", DEFAULT_MIRROR))
        return np.loadtxt(mirror / "oil" / "DataTrn.txt")
    # issue 12's small set: a smooth GP draw of 3-D Gaussian inputs (bgplvm.datasets.synthetic)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 3))
    K = np.exp(-0.5 * np.sum((X[:, None] - X[None]) ** 2, -1) / 1.5**2)
    w, V = np.linalg.eigh(K)
    F = (V * np.sqrt(np.clip(w, 0, None))) @ rng.standard_normal((300, 30))
    return F + 0.05 * rng.standard_normal((300, 30))


# --------------------------------------------------------------------------------- worker
def _time_model(m, seconds: float, out: list, stop: threading.Event | None = None) -> None:
    x = m.get_param_vector()
    m.elbo_and_gradient()
    t_end = time.perf_counter() + seconds
    k = 0
    while time.perf_counter() < t_end and (stop is None or not stop.is_set()):
        k += 1
        m.set_param_vector(x * (1.0 + 1e-12 * k))
        t = time.perf_counter()
        m.elbo_and_gradient()
        out.append(time.perf_counter() - t)


def worker(spec: dict) -> dict:
    sys.path.insert(0, spec["repo"])
    import bgplvm
    from bgplvm import BayesianGPLVM

    bgplvm.warmup()
    Y = np.load(spec["data"])
    Q, M = SIZES[spec["size"]]["Q"], SIZES[spec["size"]]["M"]
    m = BayesianGPLVM(Y, latent_dim=Q, num_inducing=M, seed=0)
    m.elbo_and_gradient()
    times: list[float] = []
    if spec["scenario"] == "2 threads":
        m2 = BayesianGPLVM(Y, latent_dim=Q, num_inducing=M, seed=1)
        m2.elbo_and_gradient()
        t2: list[float] = []
        th = threading.Thread(target=_time_model, args=(m2, spec["seconds"], t2))
        th.start()
        _time_model(m, spec["seconds"], times)
        th.join()
        times += t2
    else:
        _time_model(m, spec["seconds"], times)
    return {"median_s": float(np.median(times)), "n": len(times),
            "model_file": bgplvm.__file__, "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY")}


def spinner() -> subprocess.Popen:
    """One competing busy process (a pure-Python loop on one core)."""
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


# --------------------------------------------------------------------------------- driver
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--baseline", default=None, help="another checkout to measure beside this one")
    ap.add_argument("--sizes", default="small,oil")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=3.0, help="timed seconds per measurement")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    if args.worker:
        print("RESULT " + json.dumps(worker(json.loads(Path(args.worker).read_text()))), flush=True)
        return 0

    repos = {"this": str(ROOT)}
    if args.baseline:
        repos["baseline"] = str(Path(args.baseline).resolve())
    res: dict = {}
    loads = []
    with tempfile.TemporaryDirectory() as d:
        data = {}
        for size in args.sizes.split(","):
            data[size] = str(Path(d) / f"{size}.npy")
            np.save(data[size], make_data(size))
        for r in range(args.rounds):
            loads.append(loadavg())
            print(f"round {r + 1}/{args.rounds}, load {loads[-1]}", flush=True)
            for size in args.sizes.split(","):
                for name, repo in repos.items():
                    for sc in SCENARIOS:
                        env = {"NUMBA_NUM_THREADS": "1"} if sc == "idle 1 thread" else {}
                        spec = dict(repo=repo, size=size, scenario=sc, seconds=args.seconds, data=data[size])
                        sp = spinner() if sc == "1 busy" else None
                        try:
                            if sp is not None:
                                time.sleep(0.3)  # let it reach its core
                            out = run_worker(__file__, spec, sys.executable, env, timeout=900)
                        finally:
                            if sp is not None:
                                sp.kill()
                                sp.wait()
                        res.setdefault(size, {}).setdefault(name, {}).setdefault(sc, []).append(out)
                        t = out.get("median_s")
                        print(f"  {size:5} {name:8} {sc:14} "
                              + (f"{t * 1e3:7.2f} ms (n={out['n']})" if t else str(out.get("error"))), flush=True)

    lines = ["| size | checkout | " + " | ".join(SCENARIOS) + " | 1 busy / idle 1 thread | "
             "2 threads / idle 1 thread |", "|---|---|" + "---|" * (len(SCENARIOS) + 2)]
    for size, by_repo in res.items():
        for name, by_sc in by_repo.items():
            med = {sc: float(np.median([o["median_s"] for o in v if "median_s" in o] or [np.nan]))
                   for sc, v in by_sc.items()}
            ratios = []
            for sc in ("1 busy", "2 threads"):
                rs = [b["median_s"] / a["median_s"] for a, b in zip(by_sc["idle 1 thread"], by_sc[sc])
                      if "median_s" in a and "median_s" in b]
                ratios.append(f"{np.median(rs):.2f}x [{min(rs):.2f}, {max(rs):.2f}]" if rs else "-")
            lines.append(f"| {size} | {name} | " + " | ".join(f"{med[sc] * 1e3:.2f} ms" for sc in SCENARIOS)
                         + " | " + " | ".join(ratios) + " |")
    print()
    print("\n".join(lines))
    print(f"\nload average at the start of each round: {'; '.join(loads)}; at the end: {loadavg()}")
    print("ratios: median over rounds of (scenario / idle 1 thread of the same round) [min, max]")
    if args.json:
        Path(args.json).write_text(json.dumps({"results": res, "loads": loads}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
