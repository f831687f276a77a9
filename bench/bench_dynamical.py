#!/usr/bin/env python
"""The dynamical model's cost against the static model's at the same size (issue 8).

No reference implementation of VGPDS runs here (vargplvm is MATLAB), so the yardstick is
our own static ``BayesianGPLVM`` on the same data, measured in the same run:

    .venv/bin/python bench/bench_dynamical.py            # CMU + video, wall and CPU time
    .venv/bin/python bench/bench_dynamical.py --fit 2000 # + wall time of a cmu35 fit

Cases: the CMU 35 training set (N=2613, D=59, 31 sequences, Q=9, M=50) and one 300-frame
Frey-faces sequence (D=560, Q=10, M=50). For each: one bound + gradient of the static and
of the dynamical model at their initial points (minimum over repeats after a warm-up),
the temporal prior alone (moments, KL and chain rule), and their ratio. Wall times use
the default threads; the CPU-time line runs the same with NUMBA_NUM_THREADS=1 and one
BLAS thread and counts process CPU time (robust to other load on a shared machine).
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


def measure(repeats: int, clock) -> list[tuple[str, float, float, float]]:
    from bgplvm import BayesianGPLVM, DynamicalGPLVM
    from bgplvm._threads import single_threaded_blas

    rows = []
    for name, (Y, t, seq, Q) in _cases().items():
        s = BayesianGPLVM(Y, latent_dim=Q, num_inducing=50, seed=0)
        d = DynamicalGPLVM(Y, t, latent_dim=Q, num_inducing=50, sequences=seq, seed=0)
        v = d._values()
        rng = np.random.default_rng(0)
        g1, g2 = rng.standard_normal((2, *Y.shape[:1], Q))

        def prior():
            with single_threaded_blas():
                d.prior.q(v).chain(g1, g2)

        t_s = _time(lambda: s._bound(s._x), repeats, clock)
        t_d = _time(lambda: d._bound(d._x), repeats, clock)
        t_p = _time(prior, repeats, clock)
        rows.append((name, t_s, t_d, t_p))
    return rows


def _print(rows, title):
    print(f"\n{title}   (load average {open('/proc/loadavg').read().split()[0]})")
    print(f"| case | static bound+grad | dynamical bound+grad | prior alone | ratio dyn/static |")
    print("|---|---|---|---|---|")
    for name, ts, td, tp in rows:
        print(f"| {name} | {ts * 1e3:.1f} ms | {td * 1e3:.1f} ms | {tp * 1e3:.1f} ms | {td / ts:.2f}x |")


def fit_time(iters: int) -> None:
    from bgplvm.datasets import load
    from bgplvm import DynamicalGPLVM

    ds = load("cmu35")
    for tk in ("matern32", "rbf"):
        m = DynamicalGPLVM(ds.Y, ds.times, latent_dim=9, num_inducing=50, sequences=ds.sequence,
                           time_kernel=tk, seed=0)
        t0 = time.perf_counter()
        m.fit(max_iters=iters)
        dt = time.perf_counter() - t0
        on = int(np.sum(m.ard_weights / m.ard_weights.max() > 0.05))
        print(f"cmu35 fit, time kernel {tk}: {iters} iterations ({m.fit_info['evaluations']} evaluations) "
              f"in {dt:.0f} s, bound {m.elbo():.1f}, {on} ARD dims on")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--fit", type=int, default=0, help="also time a cmu35 fit of this many iterations")
    p.add_argument("--cpu-only", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.cpu_only:
        _print(measure(args.repeats, time.process_time), "CPU time, one thread (NUMBA_NUM_THREADS=1, one BLAS thread)")
        return 0
    _print(measure(args.repeats, time.perf_counter), "Wall time, default threads")
    env = dict(os.environ, NUMBA_NUM_THREADS="1")
    subprocess.run([sys.executable, __file__, "--cpu-only", "--repeats", str(args.repeats)], env=env, check=True)
    if args.fit:
        fit_time(args.fit)
    return 0


if __name__ == "__main__":
    sys.exit(main())
