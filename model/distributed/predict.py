"""Predictions of a distributed model, on the workers.

New rows are independent given the training statistics (``TrainingStats``: M x M and
M x D sums, ``TrainingStats.from_sums``), so ``infer_latent``, ``reconstruct`` and
``log_density`` of a dask array of rows map over its blocks: the statistics are sent to
every worker once, and each block of new rows is inferred where it lives. A NumPy array
of rows is inferred in this process. Test points start from the q(x_n) of the nearest of
a sample of ``POOL_ROWS`` training rows (all of them when there are fewer).

q(X) itself stays on the workers: ``latent_arrays`` gives its means and variances as dask
arrays, one block per block of rows (``.compute()`` gathers them).
"""

from __future__ import annotations

import numpy as np

#: training rows gathered as starting points for test-time inference
POOL_ROWS = 5000


def block_sums(dm, totals: bool, seed: int = 0) -> tuple:
    """At ``dm``'s current parameters, (its global values, the blocks' ``forward`` sums, their
    ``totals`` (when ``totals``, else None: only data with missing values need them), the
    pool (mu, S, Yc, observed) of up to ``POOL_ROWS`` training rows, in block order): what
    ``TrainingStats`` needs, one round each. ``dm._kernel_args`` names what the blocks
    compute the sums with (Z and the kernel's values, or each view's)."""
    v = dm._globals()
    args, pv = dm._kernel_args(v), dm._prior_values(v)
    dm._direction(np.zeros(dm.memory), np.zeros(dm.memory), 0.0)
    ops, dm._ops = tuple(dm._ops), []
    fw = dm._all("forward", 0.0, *args, pv, ops)
    tot = dm._all("totals", *args, pv) if totals else None
    rng = np.random.default_rng(seed)
    take = np.sort(rng.choice(dm.N, size=min(POOL_ROWS, dm.N), replace=False))
    st = dm._blocks.starts
    pool = dm._all("pool", per_block=[(take[(take >= a) & (take < b)] - a, pv) for a, b in zip(st[:-1], st[1:])])
    return v, fw, tot, tuple(np.concatenate([p[j] for p in pool]) for j in range(4))


def output_stats(kernel, Z: np.ndarray, noise: float, out, fw: list, tot: list | None, pool: tuple):
    """``TrainingStats`` of one set of outputs (``outputs.OutputSums`` ``out``: Y, or a view)
    from the blocks' sums ``fw`` and ``tot`` (``block_sums``, these outputs' share) and the
    pool's rows (mu, S, Yc, observed: these outputs' columns)."""
    from ..training_stats import TrainingStats

    mu, S, Yc, observed = pool
    if out.groups is None:
        return TrainingStats.from_sums(kernel, Z, noise, out.N, sum(r["psi0_sum"] for r in fw),
                                       sum(r["E"] for r in fw), sum(r["Psi2"] for r in fw), out.colsq,
                                       out.mean, mu, S, Yc)
    return TrainingStats.from_group_sums(kernel, Z, noise, sum(t[0] for t in tot), sum(t[1] for t in tot),
                                         out.sums(fw), out.groups["perm"], out.colsq, out.mean, mu, S, Yc, observed)


def training_stats(dm, seed: int = 0):
    """``TrainingStats`` of the distributed model ``dm`` at its current parameters."""
    v, fw, tot, pool = block_sums(dm, dm._out.groups is not None, seed)
    return output_stats(dm.kernel, v["Z"], float(v["noise_variance"]), dm._out, fw, tot, pool)


def predict_from_stats(stats, mu: np.ndarray, S: np.ndarray | None = None, include_noise: bool = True):
    """Predictive mean and variance (n, D) of y* at latent points mu (n, Q) (``S`` None)
    or at q(x*) = N(mu, diag S), from the ``TrainingStats`` ``stats``, as
    ``BayesianGPLVM.predict`` (``bound.predictive_moments``; one q(u) per group of outputs
    when fitted with missing values)."""
    from ..bound import posterior_from_stats, predictive_moments

    Kuu = stats.kernel.K(stats.Z)
    if stats.Psi2g is None:
        posts = [(slice(None), posterior_from_stats(Kuu, stats.Psi2, stats.beta, stats.E))]
    else:  # ``BayesianGPLVM._posteriors``
        posts = [(cols, posterior_from_stats(Kuu, stats.Psi2g[g], stats.beta, stats.E[:, cols]))
                 for g in range(stats.n_groups) for cols in [np.flatnonzero(stats.col_group == g)]]
    mean, var = predictive_moments(stats.kernel, stats.Z, posts, stats.D, mu, S)
    return mean + stats.Y_mean, var + (1.0 / stats.beta if include_noise else 0.0)


def _rows_out(Ys, stats, n_init, max_iters, what, active=None):
    """One block of new rows: [mu | S | log density] (``what`` "infer") or [mean | var]
    of the outputs ("reconstruct"; the variance scaled by the calibration ``active`` as
    ``BayesianGPLVM.reconstruct`` does, each row's factor from its observed entries:
    ``calibration.apply_calibration``)."""
    from ..calibration import apply_calibration
    from ..testbound import check_test_outputs, infer_latent

    Ys, observed = check_test_outputs(np.asarray(Ys, dtype=np.float64), stats.D)
    fit = infer_latent(stats, Ys, observed, n_init=n_init, max_iters=max_iters)
    if what == "infer":
        return np.c_[fit.mu, fit.S, fit.log_density]
    mean, var = predict_from_stats(stats, fit.mu, fit.S)
    var = apply_calibration(var, active, rows=(mean, Ys, observed))
    return np.c_[np.where(observed, Ys, mean), np.where(observed, 0.0, var)]


def map_rows(dm, Y_star, what: str, n_init: int = 1, max_iters: int = 200, active=None):
    """``_rows_out`` over Y_star (n*, D): lazily over a dask array's blocks (the
    statistics broadcast to the workers once, and the calibration ``active``: (scale,
    ``Calibration``) or None), at once for a NumPy array."""
    from .blocks import is_dask_array

    stats = training_stats(dm)
    width = 2 * dm.latent_dim + 1 if what == "infer" else 2 * dm.D
    if not is_dask_array(Y_star):
        return _rows_out(Y_star, stats, n_init, max_iters, what, active)
    if Y_star.ndim != 2 or Y_star.shape[1] != dm.D:
        raise ValueError(f"Y_star must have shape (n*, {dm.D}), got {Y_star.shape}")
    if Y_star.numblocks[1] != 1:
        raise ValueError("Y_star is chunked along its columns: rechunk it first: Y_star.rechunk({1: -1})")
    shared = dm.client.scatter(stats, broadcast=True)
    return Y_star.map_blocks(_rows_out, shared, n_init, max_iters, what, active=active, dtype=np.float64,
                             chunks=(Y_star.chunks[0], (width,)))


def _read_latent(actor, pvals, j):
    from .faults import CALL_TIMEOUT

    return actor.latent(pvals).result(timeout=CALL_TIMEOUT)[j]


def latent_arrays(dm, j: int):
    """q(X)'s means (j = 0) or variances (j = 1) as a dask array (N, Q) in Y's row order."""
    import dask
    import dask.array as da

    pv = dm._prior_values(dm._globals())
    parts = [da.from_delayed(dask.delayed(_read_latent)(a, pv, j), shape=(n, dm.latent_dim), dtype=np.float64)
             for a, n in zip(dm._blocks.actors, dm.block_rows)]
    out = da.concatenate(parts, axis=0)
    order = getattr(dm, "_order", None)
    if order is None:
        return out
    inv = np.empty_like(order)
    inv[order] = np.arange(order.size)
    return out[inv]
