#!/usr/bin/env python
"""The dynamical model's cost against the static model's at the same size (issues 8, 32).

No reference implementation of VGPDS runs here (vargplvm is MATLAB), so the yardstick is
our own static ``BayesianGPLVM`` on the same data, measured in the same run:

    .venv/bin/python bench/bench_dynamical.py              # CMU + video, both forms
    .venv/bin/python bench/bench_dynamical.py --long       # + one long sequence, 1e3..1e5
    .venv/bin/python bench/bench_dynamical.py --fit 2000   # + wall time of cmu35 fits
    .venv/bin/python bench/bench_dynamical.py --fit-long 300  # + a fit of 1e5 frames

Cases: the CMU 35 training set (N=2613, D=59, 31 sequences, Q=9, M=50) and one 300-frame
Frey-faces sequence (D=560, Q=10, M=50). For each: one bound + gradient of the static and
of the dynamical model in both forms of its time prior (``time_prior="dense"``: Kt
factorised per sequence; ``"state_space"``: Kalman filter and smoother) at their initial
points (minimum over repeats after a warm-up), the temporal prior alone (moments, KL and
chain rule), and the ratios to the static model. Wall times use the default threads; the
CPU-time table runs the same with NUMBA_NUM_THREADS=1 and one BLAS thread and counts
process CPU time (robust to other load on a shared machine).

``--long``: one synthetic sequence of n = 1e3, 1e4, 1e5 frames (Q=5, M=50, D=20, Matern
3/2), each size and form in a fresh process: seconds per bound + gradient, the ratio to
the static model at the same n, and the process's peak resident memory (the dense form
only up to ``DENSE_MAX`` frames: it needs Q n^2 doubles).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("BGPLVM_DATA_MIRROR", str(ROOT.parent / "shared" / "datasets"))


def _cases():
    from bgplvm.datasets import load

    cmu = load("cmu35")
    frey = load("frey_faces")
    return {"cmu35 (N=2613, 31 seq, Q=9, M=50)": (cmu.Y, cmu.times, cmu.sequence, 9),
            "video (Frey, 300 frames, Q=10, M=50)": (frey.Y[:300], np.arange(300.0), None, 10)}


def _time(fn, repeats: int, clock) -> float:
    fn()
    ts = []
    for _ in range(repeats):
        t0 = clock()
        fn()
        ts.append(clock() - t0)
    return min(ts)


FORMS = ("dense", "state_space")


def _evaluations(s, d, repeats: int, clock) -> tuple[float, float, float]:
    """(static bound+grad, dynamical bound+grad, prior alone) seconds, as a fit evaluates
    them (gradients of frozen parameters skipped)."""
    from bgplvm._threads import single_threaded_blas

    v = d._values()
    rng = np.random.default_rng(0)
    g1, g2 = rng.standard_normal((2, *d.latent_mean.shape))
    d.prior.skip_gradients = frozenset(d._layout.frozen)

    def prior():
        with single_threaded_blas():
            d.prior.q(v).chain(g1, g2)

    return (_time(lambda: s._bound(s._x, free_only=True), repeats, clock),
            _time(lambda: d._bound(d._x, free_only=True), repeats, clock),
            _time(prior, repeats, clock))


def measure(repeats: int, clock) -> list[tuple]:
    from bgplvm import BayesianGPLVM, DynamicalGPLVM

    rows = []
    for name, (Y, t, seq, Q) in _cases().items():
        s = BayesianGPLVM(Y, latent_dim=Q, num_inducing=50, seed=0)
        d = DynamicalGPLVM(Y, t, latent_dim=Q, num_inducing=50, sequences=seq, seed=0,
                           time_prior="state_space")
        for form in FORMS:
            rows.append((name, form, *_evaluations(s, d.with_time_prior(form), repeats, clock)))
    return rows


def _print(rows, title):
    print(f"\n{title}   (load average {open('/proc/loadavg').read().split()[0]})")
    print("| case | time prior | static bound+grad | dynamical bound+grad | prior alone | ratio dyn/static |")
    print("|---|---|---|---|---|---|")
    for name, form, ts, td, tp in rows:
        print(f"| {name} | {form} | {ts * 1e3:.1f} ms | {td * 1e3:.1f} ms | {tp * 1e3:.1f} ms | "
              f"**{td / ts:.2f}x** |")


# --- one long sequence -----------------------------------------------------------------------
LONG_SIZES = (1_000, 10_000, 100_000)
DENSE_MAX = 4_000


def long_sequence(n: int, D: int = 20, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(Y (n, D), t (n,)): a smooth 3-D latent path (sums of slow sines, 100 frames per unit
    of time) through a random tanh map, plus noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(n) / 100.0
    freqs = rng.uniform(0.05, 0.5, (3, 4))
    X = np.stack([np.sin(2 * np.pi * t[:, None] * f[None, :] + rng.uniform(0, 6, 4)).sum(1)
                  for f in freqs], 1)
    W = rng.standard_normal((3, D))
    return np.tanh(X @ W / 2) + 0.05 * rng.standard_normal((n, D)), t


def _long_case(n: int, form: str, repeats: int) -> None:
    """In a fresh process: one size and form; prints a JSON line."""
    import json
    import resource

    from bgplvm import BayesianGPLVM, DynamicalGPLVM

    Y, t = long_sequence(n)
    out = {"n": n, "form": form}
    if form == "static":
        m = BayesianGPLVM(Y, latent_dim=5, num_inducing=50, seed=0)
    else:
        t0 = time.perf_counter()
        m = DynamicalGPLVM(Y, t, latent_dim=5, num_inducing=50, time_kernel="matern32",
                           time_prior=form, seed=0)
        out["build_s"] = time.perf_counter() - t0
    out["eval_s"] = _time(lambda: m._bound(m._x, free_only=True), repeats, time.perf_counter)
    out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(out))


def long_table(repeats: int) -> None:
    import json

    print(f"\nOne sequence, Q=5, M=50, D=20, Matern 3/2 (each cell a fresh process; peak = its "
          f"maximum resident memory)   (load average {open('/proc/loadavg').read().split()[0]})")
    print("| frames | static | dense: s / ratio / peak | state space: s / ratio / peak | state space: build |")
    print("|---|---|---|---|---|")
    for n in LONG_SIZES:
        res = {}
        for form in ("static", *FORMS):
            if form == "dense" and n > DENSE_MAX:
                continue
            r = subprocess.run([sys.executable, __file__, "--long-case", str(n), form,
                                "--repeats", str(repeats if n < 100_000 else 2)],
                               capture_output=True, text=True, check=True)
            res[form] = json.loads(r.stdout.strip().splitlines()[-1])
        st = res["static"]["eval_s"]

        def cell(form):
            if form not in res:
                return f"(needs {5 * n * n * 8 / 1e9:.0f} GB for Q n^2)"
            r = res[form]
            return f"{r['eval_s']:.3g} s / **{r['eval_s'] / st:.2f}x** / {r['peak_mb']:.0f} MB"

        print(f"| {n:,} | {st:.3g} s ({res['static']['peak_mb']:.0f} MB) | {cell('dense')} | "
              f"{cell('state_space')} | {res['state_space']['build_s']:.1f} s |")


def fit_long(iters: int, n: int = 100_000) -> None:
    from bgplvm import DynamicalGPLVM

    Y, t = long_sequence(n)
    t0 = time.perf_counter()
    m = DynamicalGPLVM(Y, t, latent_dim=5, num_inducing=50, time_kernel="matern32", seed=0)
    build = time.perf_counter() - t0
    t0 = time.perf_counter()
    m.fit(max_iters=iters)
    dt = time.perf_counter() - t0
    print(f"fit of one {n:,}-frame sequence ({m.time_prior}, Q=5, M=50, D=20): build {build:.1f} s, "
          f"{m.fit_info['iterations']} iterations ({m.fit_info['evaluations']} evaluations) in "
          f"{dt:.0f} s ({dt / max(m.fit_info['evaluations'], 1):.2f} s per evaluation), bound "
          f"{m.elbo():.1f}, ended: {m.fit_info['reason']}, time lengthscale {m.time_kernel}")


def fit_time(iters: int) -> None:
    from bgplvm.datasets import load
    from bgplvm import DynamicalGPLVM

    ds = load("cmu35")
    for tk in ("matern32", "rbf"):
        for form in FORMS:
            m = DynamicalGPLVM(ds.Y, ds.times, latent_dim=9, num_inducing=50, sequences=ds.sequence,
                               time_kernel=tk, seed=0, time_prior=form)
            t0 = time.perf_counter()
            m.fit(max_iters=iters)
            dt = time.perf_counter() - t0
            on = int(np.sum(m.ard_weights / m.ard_weights.max() > 0.05))
            print(f"cmu35 fit, time kernel {tk}, {form}: {iters} iterations "
                  f"({m.fit_info['evaluations']} evaluations) in {dt:.0f} s, bound {m.elbo():.1f}, "
                  f"{on} ARD dims on")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--fit", type=int, default=0, help="also time a cmu35 fit of this many iterations")
    p.add_argument("--long", action="store_true", help="also one long sequence, 1e3..1e5 frames")
    p.add_argument("--fit-long", type=int, default=0, help="also fit a 1e5-frame sequence this many iterations")
    p.add_argument("--cpu-only", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--long-case", nargs=2, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.long_case:
        _long_case(int(args.long_case[0]), args.long_case[1], args.repeats)
        return 0
    if args.cpu_only:
        _print(measure(args.repeats, time.process_time), "CPU time, one thread (NUMBA_NUM_THREADS=1, one BLAS thread)")
        return 0
    _print(measure(args.repeats, time.perf_counter), "Wall time, default threads")
    env = dict(os.environ, NUMBA_NUM_THREADS="1")
    subprocess.run([sys.executable, __file__, "--cpu-only", "--repeats", str(args.repeats)], env=env, check=True)
    if args.long:
        long_table(args.repeats)
    if args.fit:
        fit_time(args.fit)
    if args.fit_long:
        fit_long(args.fit_long)
    return 0


if __name__ == "__main__":
    sys.exit(main())
