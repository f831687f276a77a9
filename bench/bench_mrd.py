#!/usr/bin/env python
"""MRD's bound + gradient against the sum of its views' single-view evaluations (issue 45).

    .venv/bin/python bench/bench_mrd.py [--quick]
    .bench-venv/bin/python bench/bench_mrd.py     # with GPy 1.15 installed: its MRD too

One evaluation of ``MRD.elbo_and_gradient`` (V views sharing q(X)) is timed against the V
single-view models of the same views at the same parameters (``m.view(name)``, each with the
KL of q(X) again): the target is a ratio <= 1.1 (the KL and q(X) work shared, nothing else
added). Where GPy is importable, its ``MRD`` (one sub-model per view in a Python loop, shared
inducing inputs) at the same sizes: one ``_objective_grads`` evaluation, the ratio against ours.
Every figure is the median of ``REPEATS`` evaluations after a warm-up, x perturbed by 1e-9 each
time so that no cache is hit. Sizes: the pose / silhouette set's (N = 1927, views of 100 and
63 columns, Q = 10, M = 50), synthetic data of those shapes.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

REPEATS = 7


def median_time(fn, repeats: int = REPEATS) -> float:
    fn()  # warm-up (Numba compiled already, caches filled)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def perturbed(m):
    x = m.get_param_vector()
    rng = np.random.default_rng(0)

    def step():
        m.set_param_vector(x + 1e-9 * rng.standard_normal(x.size))
        m.elbo_and_gradient()
    return step


def gpy_mrd(views: dict, Q: int, M: int):
    """GPy's MRD of the same views, or None without GPy."""
    try:
        import GPy
    except ImportError:
        return None
    m = GPy.models.MRD(list(views.values()), input_dim=Q, num_inducing=M)
    x = m.optimizer_array.copy()
    rng = np.random.default_rng(0)
    return lambda: m._objective_grads(x + 1e-9 * rng.standard_normal(x.size))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="N = 500")
    args = ap.parse_args()
    import bgplvm
    from bgplvm import MRD

    bgplvm.warmup()
    N, Q, M = (500 if args.quick else 1927), 10, 50
    rng = np.random.default_rng(0)
    X = rng.standard_normal((N, 3))
    views = {"silhouette": np.tanh(X @ rng.standard_normal((3, 100))) + 0.1 * rng.standard_normal((N, 100)),
             "pose": np.sin(X[:, :2] @ rng.standard_normal((2, 63))) + 0.1 * rng.standard_normal((N, 63))}
    m = MRD(views, latent_dim=Q, num_inducing=M, seed=0)
    t_mrd = median_time(perturbed(m))
    singles = [m.view(n) for n in m.view_names]
    t_sum = sum(median_time(perturbed(s)) for s in singles)
    print(f"N={N}, views {[v.shape[1] for v in views.values()]}, Q={Q}, M={M}")
    print(f"MRD bound + gradient            {1e3 * t_mrd:8.1f} ms")
    print(f"sum of the single-view ones     {1e3 * t_sum:8.1f} ms   ratio MRD / sum = {t_mrd / t_sum:.2f} "
          "(target <= 1.1)")
    gpy = gpy_mrd(views, Q, M)
    if gpy is None:
        print("GPy not importable: bash bench/setup_gpy.sh, then run this with .bench-venv/bin/python")
    else:
        t_gpy = median_time(gpy)
        print(f"GPy MRD bound + gradient        {1e3 * t_gpy:8.1f} ms   GPy / ours = {t_gpy / t_mrd:.1f}x "
              "(target >= 10x)")


if __name__ == "__main__":
    main()
