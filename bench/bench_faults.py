#!/usr/bin/env python
"""Faults under a fit on Dask (issue 43): what a killed worker costs, and what a worker that
joins gains, in ONE run.

    .venv/bin/python bench/bench_faults.py                      # 1e5 rows, 2 workers (~10 min)
    .venv/bin/python bench/bench_faults.py --workers 3 --kill-every 10
    .venv/bin/python bench/bench_faults.py --rows 20000 --iters 40   # a quick look

Data: 1e5 rows (``--rows``) of a known GP-LVM (``bench_distributed.rows``: Q = 5, D = 50,
an RBF GP through random Fourier features, noise sd 0.1) written to a .zarr store in
chunks of N / 8 rows, opened with ``bgplvm.distributed.open_rows``: the blocks read their
rows on the workers, the driver never holds Y. Model: Q = 5, M = 30, RBF ARD, static
prior; ``--iters`` iterations (default 60), a checkpoint every ``--checkpoint-every`` (5).
Cluster: a ``LocalCluster`` of ``--workers`` (2) single-threaded worker processes under
nannies (Dask's default: a killed worker comes back under a new address).

Runs, each from the same start (the same seed and blocks give the same PCA start):
  clean   the fault-free fit: seconds, final bound;
  faults  the same fit with a random worker SIGKILLed once in every ``--kill-every``
          iterations (15), at a random one of them (seeded): each recovery listed (iteration, blocks, rows, where from, the
          checkpoint used, seconds); the blocks moved back to the restarted worker at the
          next checkpoint listed too. Time lost per fault = (faults' seconds - clean's) /
          kills; the final bound against clean's, and clean's bound at the iteration the
          faulty fit's bound first reaches (iterations lost);
  join    the fit started on ``--workers`` - 1 workers, one more added at iteration
          ``--join-at`` (20): the blocks moved at the next checkpoint, seconds per iteration
          before and after, against the clean run on all the workers.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_distributed import D, rows  # noqa: E402

Q, M = 5, 30


def write_zarr(path: str, N: int, chunks: int) -> None:
    import dask.array as da
    import zarr  # noqa: F401

    step = -(-N // chunks)
    parts = [da.from_array(rows(a, min(step, N - a)), chunks=(step, D)) for a in range(0, N, step)]
    da.concatenate(parts).rechunk((step, D)).to_zarr(path, overwrite=True)


def fit(client, path: str, iters: int, every: int, folder: str, callback=None) -> dict:
    from bgplvm import BayesianGPLVM
    from bgplvm.distributed import open_rows

    Y = open_rows(path)
    shutil.rmtree(folder, ignore_errors=True)
    t0 = time.perf_counter()
    with BayesianGPLVM(Y, Q, M, seed=0, client=client) as dm:
        build = time.perf_counter() - t0
        t1 = time.perf_counter()
        dm.fit(iters, checkpoint=folder, checkpoint_every=every, callback=callback, progress=False)
        secs = time.perf_counter() - t1
        info = dict(dm.fit_info)
        times = getattr(callback, "times", None)
    return dict(build=build, seconds=secs, bound=info["bound"], iterations=info["iterations"],
                history=[float(h) for h in info["history"]],
                recoveries=info["recoveries"], rebalances=info["rebalances"], reason=info["reason"], times=times)


class Killer:
    """Callback: SIGKILL a random worker once in every ``k`` iterations, at a random one of
    them (seeded; never the last, after which nothing is left to lose): most kills fall
    between two checkpoints, so work is lost."""

    def __init__(self, client, k: int, iters: int, seed: int = 0):
        self.client, self.k, self.rng = client, k, random.Random(seed)
        self.at = {min(j + self.rng.randint(1, k), iters - 1) for j in range(0, iters - k + 1, k)}
        self.kills: list[dict] = []
        self.times: list[float] = []

    def __call__(self, p) -> None:
        self.times.append(time.perf_counter())
        if p.iteration in self.at:
            pids = self.client.run(os.getpid)
            w = self.rng.choice(sorted(pids))
            os.kill(pids[w], signal.SIGKILL)
            self.kills.append(dict(iteration=p.iteration, worker=w))


class Joiner:
    """Callback: one more worker at iteration ``at``; the seconds of each iteration."""

    def __init__(self, client, at: int, n: int):
        self.client, self.at, self.n = client, at, n
        self.times: list[float] = []

    def __call__(self, p) -> None:
        self.times.append(time.perf_counter())
        if p.iteration == self.at:
            self.client.cluster.scale(self.n)
            self.client.wait_for_workers(self.n, timeout=120)


def first_reaching(history: list[float], value: float) -> int | None:
    """The first iteration (1-based) whose bound reaches ``value``."""
    for i, h in enumerate(history):
        if h >= value:
            return i + 1
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--iters", type=int, default=60)
    ap.add_argument("--kill-every", type=int, default=15)
    ap.add_argument("--checkpoint-every", type=int, default=5)
    ap.add_argument("--join-at", type=int, default=20)
    ap.add_argument("--json", help="write the figures here too")
    args = ap.parse_args()
    from bgplvm.distributed import local_cluster

    tmp = tempfile.mkdtemp(prefix="bench-faults-")
    path = os.path.join(tmp, "Y.zarr")
    t = time.perf_counter()
    write_zarr(path, args.rows, 8)
    print(f"[data] {args.rows} x {D} rows in {path} (8 chunks) in {time.perf_counter() - t:.1f} s", flush=True)
    out = dict(rows=args.rows, workers=args.workers, iters=args.iters, kill_every=args.kill_every,
               checkpoint_every=args.checkpoint_every)
    c = local_cluster(args.workers)
    try:
        clean = fit(c, path, args.iters, args.checkpoint_every, os.path.join(tmp, "ck-clean"))
        print(f"[clean] {clean['iterations']} iterations ({clean['reason']}) in {clean['seconds']:.1f} s "
              f"({clean['seconds'] / args.iters:.2f} s per iteration), bound {clean['bound']:.6g}", flush=True)
        c.wait_for_workers(args.workers, timeout=120)
        killer = Killer(c, args.kill_every, args.iters)
        faults = fit(c, path, args.iters, args.checkpoint_every, os.path.join(tmp, "ck-faults"), killer)
        n = max(len(faults["recoveries"]), 1)
        lost = (faults["seconds"] - clean["seconds"]) / n
        reach = first_reaching(clean["history"], faults["bound"])
        print(f"[faults] {len(killer.kills)} workers killed ({', '.join(str(k['iteration']) for k in killer.kills)}); "
              f"{len(faults['recoveries'])} recoveries; {faults['iterations']} iterations ({faults['reason']}) in "
              f"{faults['seconds']:.1f} s: {lost:+.1f} s "
              "per fault against clean; "
              f"bound {faults['bound']:.6g} against clean's {clean['bound']:.6g} (relative gap "
              f"{(clean['bound'] - faults['bound']) / abs(clean['bound']):.2e}); clean reached it at iteration "
              f"{reach} of {args.iters}", flush=True)
        for r in faults["recoveries"]:
            print(f"  recovery at iteration {r['iteration']}: blocks {r['blocks']} ({r['rows']} rows) from "
                  f"{', '.join(r['workers'])} to {', '.join(sorted(set(r['to'])))}, q(X) from the {r['source']}, "
                  f"{r['seconds']:.2f} s", flush=True)
        for r in faults["rebalances"]:
            print(f"  moved at iteration {r['iteration']}: blocks {r['blocks']} to {', '.join(sorted(set(r['to'])))}, "
                  f"{r['seconds']:.2f} s", flush=True)
        out.update(clean=clean, faults=faults, kills=killer.kills, seconds_lost_per_fault=lost,
                   clean_iteration_reaching_faulty_bound=reach)
    finally:
        cl = c.cluster
        c.close()
        cl.close()
    if args.workers >= 2:
        c = local_cluster(args.workers - 1)
        try:
            joiner = Joiner(c, args.join_at, args.workers)
            join = fit(c, path, args.iters, args.checkpoint_every, os.path.join(tmp, "ck-join"), joiner)
            dt = np.diff(joiner.times)
            at = join["rebalances"][0]["iteration"] if join["rebalances"] else None
            before = float(np.median(dt[:args.join_at - 1]))
            after = float(np.median(dt[at:])) if at else float("nan")
            print(f"[join] {args.workers - 1} worker(s), one more at iteration {args.join_at}: "
                  + (f"blocks {join['rebalances'][0]['blocks']} moved at iteration {at} in "
                     f"{join['rebalances'][0]['seconds']:.2f} s; " if at else "no blocks moved; ")
                  + f"median {before:.2f} s per iteration before, {after:.2f} s after (clean on {args.workers}: "
                  f"{clean['seconds'] / args.iters:.2f} s); bound {join['bound']:.6g}", flush=True)
            out.update(join=join, join_seconds_per_iteration=dict(before=before, after=after))
        finally:
            cl = c.cluster
            c.close()
            cl.close()
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1, default=float))
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
