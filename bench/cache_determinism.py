#!/usr/bin/env python
"""Do a run that compiles the Numba kernels and a run that loads them from the on-disk
cache compute the same numbers, bit for bit?

    .venv/bin/python bench/cache_determinism.py            # every case below
    .venv/bin/python bench/cache_determinism.py --keep DIR  # keep the fresh cache in DIR

The same workload runs twice, each in a fresh process with ``NUMBA_CACHE_DIR`` pointing at
one new, empty folder: the first process compiles every kernel it calls (and writes the
cache), the second loads them. Each case builds a small model on fixed random data, takes
its bound and gradient, fits it for a few iterations and takes them again; the script
prints, per case, the largest difference between the two runs (0 is what it should be)
and exits 1 if any is not 0.

Why: on 2026-12-07 the walk reproduction's state-space rows came out different in two runs
at the same commit on one machine: the first run compiled its kernels, the second loaded
them. With the fast-math flags the kernels had then (``nsz arcp contract afn reassoc``),
the code Numba runs right after compiling and the code it loads from the cache differed in
the last bits: every case below differed (the gradient at the start by up to 5e-10 in
the static cases, 2.8e-14 in one state-space pass on values of order 10), serial and
parallel kernels alike, and not without fast-math. After 2000 iterations of L-BFGS the
two walk fits had drifted apart (bound 9,328.25 against 9,329.64). Dropping ``nsz`` made the
psi-statistics kernels equal; the latent priors' kernels still differed with ``contract``
and ``reassoc``, or ``reassoc`` alone, and are equal compiled without fast-math
(``model/_numba_config.py``). The speed is the same (bench/README.md).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
FIT_ITERS = 15


def _data(N=120, D=8, seed=0):
    rng = np.random.default_rng(seed)
    t = np.arange(N, dtype=float)
    X = np.stack([np.sin(t / 9.0), np.cos(t / 13.0)], axis=1)
    return X @ rng.standard_normal((2, D)) + 0.1 * rng.standard_normal((N, D)), t


def _cases():
    """{name: a function building an unfitted model}; every kind of compiled kernel the
    bound calls: the rbf and linear psi statistics, their sum, missing values (the grouped
    bound, imputation), the test-time bound (``infer_latent``), two views (MRD), the
    dynamical prior dense and in state-space form (a specialised state dimension and the
    generic one)."""
    from bgplvm import MRD, BayesianGPLVM, DynamicalGPLVM
    from bgplvm.time_kernels import PeriodicTime, RBFTime

    Y, t = _data()
    Ym = Y.copy()
    Ym[np.random.default_rng(1).random(Y.shape) < 0.1] = np.nan
    kw = dict(latent_dim=3, num_inducing=12, seed=0)
    return {
        "MRD, two views": lambda: MRD({"a": Y[:, :5], "b": Y[:, 5:]}, **kw),
        "static, rbf": lambda: BayesianGPLVM(Y, **kw),
        "static, rbf+linear+bias+white": lambda: BayesianGPLVM(Y, kernel="rbf+linear+bias+white", **kw),
        "static, missing values": lambda: BayesianGPLVM(Ym, **kw),
        "dynamical, matern32, dense": lambda: DynamicalGPLVM(Y, t, time_prior="dense", **kw),
        "dynamical, matern32, state space (d = 2)": lambda: DynamicalGPLVM(Y, t, time_prior="state_space", **kw),
        "dynamical, rbf, state space (d = 7)": lambda: DynamicalGPLVM(
            Y, t, time_kernel=RBFTime(lengthscale=10.0), time_prior="state_space", **kw),
        "dynamical, periodic, state space (d = 11)": lambda: DynamicalGPLVM(
            Y, t, time_kernel=PeriodicTime(period=57.0), time_prior="state_space",
            state_space_options={"periodic_order": 5}, **kw),
    }


def _flat(*objs) -> np.ndarray:
    """Every number in arrays, tuples and dicts (an MRD's per-view results), in order."""
    parts = []
    for o in objs:
        if isinstance(o, dict):
            parts.append(_flat(*o.values()))
        elif isinstance(o, (tuple, list)):
            parts.append(_flat(*o))
        else:
            parts.append(np.ravel(np.asarray(o, dtype=float)))
    return np.concatenate(parts) if parts else np.zeros(0)


def workload(out: str) -> None:
    """Run every case; save {case: start: its bound and gradient, case: fitted: them after
    ``FIT_ITERS`` iterations and the predictive mean and variance at five latent points}."""
    results = {}
    for name, build in _cases().items():
        m = build()
        b0, g0 = m.elbo_and_gradient()
        m.fit(max_iters=FIT_ITERS, progress=False)
        b1, g1 = m.elbo_and_gradient()
        pred = m.predict(m.latent_mean[:5], m.latent_variance[:5])  # MRD: {view: (mean, var)}
        results[name + ": start"] = _flat(b0, g0)
        results[name + ": fitted"] = _flat(b1, g1, pred)
        if name == "static, rbf":  # the test-time bound (model/testbound.py)
            q = m.infer_latent(m.Y[:4] + 0.05, max_iters=20)
            results[name + ": infer_latent"] = _flat(q)
        if name == "static, missing values":
            results[name + ": impute"] = _flat(m.impute())
    np.savez(out, **results)


def _run(cache: str, out: str) -> None:
    env = dict(os.environ, NUMBA_CACHE_DIR=cache)
    subprocess.run([sys.executable, __file__, "--workload", out], env=env, check=True, cwd=ROOT)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workload", help=argparse.SUPPRESS)
    ap.add_argument("--keep", help="a folder for the fresh cache (kept afterwards)")
    args = ap.parse_args()
    if args.workload:
        workload(args.workload)
        return 0
    with tempfile.TemporaryDirectory(prefix="bgplvm-cache-det-") as tmp:
        cache = args.keep or os.path.join(tmp, "numba-cache")
        cold, warm = os.path.join(tmp, "cold.npz"), os.path.join(tmp, "warm.npz")
        _run(cache, cold)  # compiles, writes the cache
        _run(cache, warm)  # loads it
        a, b = np.load(cold), np.load(warm)
        width = max(len(k) for k in a.files)
        print(f"{'case':<{width}}  largest |compiled - cached|  (entries differing / all)")
        bad = 0
        for k in a.files:
            d = np.abs(a[k] - b[k])
            n = int(np.count_nonzero(d))
            bad += n > 0
            print(f"{k:<{width}}  {d.max():.3g}  ({n} / {d.size})")
    print("identical" if not bad else f"{bad} case(s) differ between the compiling and the cached run")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
