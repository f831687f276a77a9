"""The model on Dask (bgplvm.distributed): the vector-free L-BFGS, and the bound, gradient
and fit on a LocalCluster of worker processes against the in-process model."""

from __future__ import annotations

import time

import numpy as np
import pytest

from bgplvm import BayesianGPLVM
from bgplvm._lbfgs import minimize_lbfgs
from bgplvm.distributed.vlbfgs import Part, SingleParts, minimize_vlbfgs
from clusters import close_cluster
from mirror import needs_data

distributed = pytest.importorskip("distributed", reason="needs dask[distributed] (the test extra installs it)")
da = pytest.importorskip("dask.array")


# --- the optimiser, without Dask -------------------------------------------------------------
def _rosen(H):
    def fun(x):
        r = x[1:] - x[:-1] ** 2
        g = H @ x
        g[1:] += 2 * r
        g[:-1] += -4 * x[:-1] * r
        return 0.5 * x @ H @ x + np.sum(r * r), g
    return fun


class _SplitParts:
    """x split into several ``Part``s, their dot products summed: what the driver does
    with its part and the workers' blocks."""

    def __init__(self, fun, x0, memory, cuts):
        self.fun, self.cuts = fun, cuts
        self.parts = [Part(p, memory) for p in np.split(x0, cuts)]

    def direction(self, a, b, c):
        for p in self.parts:
            p.direction(a, b, c)

    def trial(self, stp):
        x = np.concatenate([p.trial_x(stp) for p in self.parts])
        f, g = self.fun(x)
        got = [p.set_trial(xp, gp) for p, xp, gp in zip(self.parts, np.split(x, self.cuts), np.split(g, self.cuts))]
        return f, sum(r[0] for r in got), max(r[1] for r in got)

    def accept(self):
        return sum(p.accept() for p in self.parts)

    def commit(self, slot):
        for p in self.parts:
            p.commit(slot)


@pytest.mark.parametrize("memory", [3, 10])
def test_vector_free_lbfgs_takes_the_steps_of_the_fits_lbfgs(memory):
    """Same iterates as ``_lbfgs.minimize_lbfgs`` (L-BFGS-B's steps), with x in one part or
    split in three, and the memory wrapping around (memory 3 < iterations)."""
    rng = np.random.default_rng(0)
    A = rng.standard_normal((40, 40))
    fun = _rosen(A @ A.T / 40 + 0.1 * np.eye(40))
    x0 = rng.standard_normal(40)
    ref = []
    r0 = minimize_lbfgs(fun, x0, 80, 1000, memory=memory, callback=lambda z: ref.append(z.fun))
    for parts in (SingleParts(fun, x0, memory), _SplitParts(fun, x0, memory, [5, 23])):
        got = []
        r = minimize_vlbfgs(parts, 80, 1000, memory=memory, callback=got.append)
        assert (r.nit, r.nfev, r.status) == (r0.nit, r0.nfev, r0.status)
        assert r.nit > memory
        k = min(len(ref), 30)  # a chaotic path: rounding grows; the first 30 agree closely
        np.testing.assert_allclose(got[:k], ref[:k], rtol=1e-9, atol=1e-12)
        x = parts.part.x if hasattr(parts, "part") else np.concatenate([p.x for p in parts.parts])
        np.testing.assert_allclose(x, r0.x, atol=1e-6)


# --- on a LocalCluster ------------------------------------------------------------------------
def _noisy_quadratic(seed=0, n=40, noise=1e-2):
    """An ill-conditioned quadratic plus rounding-like noise (deterministic in x) and its
    exact gradient: a Moré-Thuente search fails long before the minimum."""
    rng = np.random.default_rng(seed)
    Qm, _ = np.linalg.qr(rng.standard_normal((n, n)))
    H = (Qm * np.logspace(-6, 2, n)) @ Qm.T
    w = np.arange(1, n + 1)

    def fun(x):
        return 0.5 * x @ H @ x + noise * np.sin(1e12 * np.sum(x * w)), H @ x
    return fun, 100 * rng.standard_normal(n)


def test_vector_free_lbfgs_estimates_the_noise_as_the_fits_lbfgs_and_goes_on_past_failed_searches(monkeypatch):
    """The noise-tolerant mode of ``_lbfgs`` (eps_f from probes, relaxed Armijo search):
    with x in one part the probes are ``_lbfgs.noise_level``'s; on a noisy function the run
    goes on where it ended ("ABNORMAL") without the relaxed search."""
    from bgplvm._lbfgs import noise_level
    from bgplvm.distributed import vlbfgs

    fun, x0 = _noisy_quadratic()
    f0 = fun(x0)[0]
    parts = SingleParts(fun, x0, 10)
    assert vlbfgs._noise_level(parts, f0) == noise_level(fun, x0, f0)
    r = minimize_vlbfgs(SingleParts(fun, x0, 10), 2000, 20000, memory=10)
    monkeypatch.setattr(vlbfgs, "_relaxed_line_search", lambda *a: (None, None, 0))
    r_off = minimize_vlbfgs(SingleParts(fun, x0, 10), 2000, 20000, memory=10)
    assert r_off.status == 2 and r.status != 2
    assert r.nit > r_off.nit and r.fun < 0.2 * r_off.fun


# ``client``: a LocalCluster of 2 single-threaded worker processes (conftest.py)


def _full_gradient(dm, model):
    """(F, gradient) of the distributed model in the in-process model's layout: each block's
    row blocks (mu, S or mu_bar, lambda) back in Y's row order, the driver's globals."""
    F, gg, rows = dm._gradient()
    Q, names, sl = model.latent_dim, model.prior.row_blocks, model._layout.slices
    g = np.empty(model._layout.size)
    k = len(names)
    for j, n in enumerate(names):
        part = np.concatenate([r.reshape(k, -1, Q)[j] for r in rows])  # block order
        g[sl[n]] = dm._to_y_order(part).ravel()
    for blk in dm._glayout.blocks:
        g[sl[blk.name]] = gg[dm._glayout.slices[blk.name]]
    return F, g


def _check_equal(model, client, chunks_list=(1, 2, 3), floor=(1e-9, 1e-9)):
    """The distributed bound and gradient equal the in-process ones to 1e-9 relative (the
    gradient: its largest difference over its largest entry), or, where the in-process
    bound's own rounding under a reordering of its rows is larger (``floor``, from
    ``_reorder_spread``), to a few times that."""
    from bgplvm import DynamicalGPLVM
    from bgplvm.distributed import DistributedDynamicalGPLVM, DistributedGPLVM

    F0, g0 = model._bound(model._x)
    cls = DistributedDynamicalGPLVM if isinstance(model, DynamicalGPLVM) else DistributedGPLVM
    for chunks in chunks_list:
        with cls.from_model(model, client=client, chunks=chunks) as dm:
            assert len(dm._blocks) == chunks and sum(dm.block_rows) == model.Y.shape[0]
            F, g = _full_gradient(dm, model)
            assert abs(F - F0) <= max(1e-9, 4 * floor[0]) * abs(F0), (chunks, F, F0)
            np.testing.assert_allclose(g, g0, rtol=0, atol=max(1e-9, 4 * floor[1]) * np.max(np.abs(g0)))
            assert abs(dm.elbo() - F0) <= max(1e-9, 4 * floor[0]) * abs(F0)


def _synthetic(N=300, D=12, seed=1):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, 2))
    W = rng.standard_normal((2, D))
    return np.sin(X @ W) + 0.05 * rng.standard_normal((N, D))


def test_distributed_bound_and_gradient_equal_in_process_synthetic(client):
    m = BayesianGPLVM(_synthetic(), 3, 15, kernel="rbf+bias+white", seed=0)
    m.fit(30, progress=False)
    _check_equal(m, client)


@needs_data("oil")
def test_distributed_bound_and_gradient_equal_in_process_oil(client):
    from bgplvm.datasets import load

    m = BayesianGPLVM(load("oil").Y, 10, 50, seed=0)
    m.fit(50, progress=False)
    _check_equal(m, client)


@needs_data("usps")
def test_distributed_bound_and_gradient_equal_in_process_usps(client):
    from bgplvm.datasets import load

    Y = load("usps").Y[:1500]
    m = BayesianGPLVM(Y, 5, 30, kernel="linear+bias+white", seed=0)
    _check_equal(m, client)


def test_distributed_fit_follows_the_in_process_fit(client):
    """From the same start the distributed fit takes the in-process fit's steps (the first
    iterations to rounding; a fit's path is chaotic) and ends at a bound as high."""
    from bgplvm.distributed import DistributedGPLVM

    m = BayesianGPLVM(_synthetic(), 3, 15, seed=0)
    dm = DistributedGPLVM.from_model(m, client=client, chunks=3)
    with dm:
        m.fit(150, progress=False)
        dm.fit(150, progress=False)
        h0, h1 = np.asarray(m.fit_info["history"]), np.asarray(dm.fit_info["history"])
        np.testing.assert_allclose(h1[:5], h0[:5], rtol=1e-8)  # then rounding grows along the path
        assert dm.fit_info["iterations"] == 150
        rise = m.fit_info["bound"] - h0[0]  # ~72,000 here; the two ends ~2 apart
        assert dm.fit_info["bound"] >= m.fit_info["bound"] - 1e-3 * rise
        assert np.all(np.diff(h1) >= -1e-9 * np.abs(h1[1:]))  # the bound never falls
        assert abs(dm.elbo() - dm.fit_info["bound"]) <= 1e-9 * abs(dm.fit_info["bound"])


def test_a_fit_whose_last_step_fell_ends_at_its_best_iterate(client, monkeypatch):
    """As in process (``optimize.Optimisation``): where the last accepted step lowered the
    bound (a relaxed step on a noisy bound can), the fit goes back to its best iterate,
    every block's q(X) with the globals, and reports that bound."""
    from bgplvm.distributed import DistributedGPLVM
    from bgplvm.distributed import training

    real = training.minimize_vlbfgs

    def then_a_step_down(parts, maxiter, maxfun, memory, callback):
        res = real(parts, maxiter - 1, maxfun, memory=memory, callback=callback)
        parts.direction(np.zeros(memory), np.zeros(memory), 1e-3)  # d = +g: f = -F goes up
        f, _, _ = parts.trial(1.0)
        parts.accept()
        callback(f)
        return res

    monkeypatch.setattr(training, "minimize_vlbfgs", then_a_step_down)
    m = BayesianGPLVM(_synthetic(N=120), 2, 8, seed=0)
    with DistributedGPLVM.from_model(m, client=client, chunks=2) as dm:
        dm.fit(20, init_iters=0, progress=False)
        h = np.asarray(dm.fit_info["history"])
        assert h[-1] < h.max() - 1e-6 * abs(h.max())  # the last step did fall
        assert dm.fit_info["bound"] == h.max()
        assert abs(dm.elbo() - h.max()) <= 1e-9 * abs(h.max())


def test_model_with_client_is_distributed_and_starts_from_the_pca(client):
    """``BayesianGPLVM(Y, client=...)`` on a dask array chunked by rows: the start's means
    are the in-process PCA start's (up to each column's sign)."""
    from bgplvm.distributed import DistributedGPLVM

    Y = _synthetic(N=240)
    m = BayesianGPLVM(Y, 3, 10, seed=0)
    dm = BayesianGPLVM(da.from_array(Y, chunks=(70, -1)), 3, 10, seed=0, client=client)
    with dm:
        assert isinstance(dm, DistributedGPLVM) and dm.block_rows == [70, 70, 70, 30]
        assert isinstance(dm.latent_mean, da.Array) and dm.latent_mean.shape == (240, 3)
        mu0, mu1 = m.latent_mean, dm.latent_mean.compute()
        sign = np.sign(np.sum(mu0 * mu1, 0))
        np.testing.assert_allclose(mu1 * sign, mu0, atol=1e-8)
        S = dm.latent_variance.compute()
        assert S.min() >= 0.45 and S.max() <= 0.55
        np.testing.assert_allclose(dm.noise_variance, m.noise_variance, rtol=1e-12)
        np.testing.assert_allclose(dm.ard_weights, m.ard_weights, rtol=1e-8)
        assert np.isfinite(dm.elbo())


def test_bad_dask_arrays_are_refused_with_what_to_do(client):
    Y = _synthetic(N=60)
    with pytest.raises(ValueError, match=r"chunked along its columns.*rechunk\(\{1: -1\}\)"):
        BayesianGPLVM(da.from_array(Y, chunks=(30, 6)), 2, 5, client=client)
    Y[7, :] = np.nan
    with pytest.raises(ValueError, match=r"1 row\(s\) of Y have nothing observed \(e\.g\. row 7.*drop them"):
        BayesianGPLVM(da.from_array(Y, chunks=(30, -1)), 2, 5, client=client)
    Y[7, :] = 1.0
    Y[40, 2] = np.inf
    with pytest.raises(ValueError, match=r"1 row\(s\) of Y have an infinite value \(e\.g\. row 40.*NaN"):
        BayesianGPLVM(da.from_array(Y, chunks=(30, -1)), 2, 5, client=client)
    Y[40, 2] = 0.0
    Y[1:, 5] = np.nan
    with pytest.raises(ValueError, match=r"column\(s\) of Y are observed on fewer than 2 rows \(columns \[5\]"):
        BayesianGPLVM(da.from_array(Y, chunks=(30, -1)), 2, 5, client=client)


def test_unreachable_scheduler_fails_within_ten_seconds_naming_it():
    t = time.perf_counter()
    with pytest.raises(ConnectionError, match=r"tcp://127\.0\.0\.1:9.*client='local'"):
        BayesianGPLVM(_synthetic(N=30), 2, 5, client="tcp://127.0.0.1:9")
    assert time.perf_counter() - t < 20


def test_workers_with_another_version_are_refused_naming_both(client, monkeypatch):
    import bgplvm

    theirs = bgplvm.__version__
    monkeypatch.setattr(bgplvm, "__version__", "0.0.1")
    with pytest.raises(RuntimeError, match=rf"has bgplvm {theirs}, this process has bgplvm 0\.0\.1"):
        BayesianGPLVM(_synthetic(N=30), 2, 5, client=client)


def test_predictions_of_new_rows_run_on_the_workers_and_equal_in_process(client):
    """infer_latent / log_density / reconstruct of a dask array of new rows: lazy, mapped
    over its blocks on the workers, equal to the in-process model's (the same parameters;
    fewer training rows than the starting pool, so the same starting points)."""
    from bgplvm.distributed import DistributedGPLVM

    Y = _synthetic(N=400)
    m = BayesianGPLVM(Y[:300], 3, 15, seed=0)
    m.fit(100, progress=False)
    new = Y[300:].copy()
    new[::3, :4] = np.nan
    with DistributedGPLVM.from_model(m, client=client, chunks=2) as dm:
        mu, S = dm.infer_latent(da.from_array(new, chunks=(40, -1)))
        assert isinstance(mu, da.Array) and mu.shape == (100, 3)
        mu0, S0 = m.infer_latent(new)
        # each block's rows are optimised together, all rows at once in process: the two
        # ends agree to the optimiser's tolerance, not to rounding (seen: 2e-6 relative)
        tol = dict(rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(mu.compute(), mu0, **tol)
        np.testing.assert_allclose(S.compute(), S0, **tol)
        np.testing.assert_allclose(dm.log_density(da.from_array(new, chunks=(40, -1))).compute(),
                                   m.log_density(new), **tol)
        mean, var = dm.reconstruct(da.from_array(new, chunks=(40, -1)))
        mean0, var0 = m.reconstruct(new)
        np.testing.assert_allclose(mean.compute(), mean0, **tol)
        np.testing.assert_allclose(var.compute(), var0, **tol)
        mu1, _ = dm.infer_latent(new)  # NumPy rows: here, all together, as in process
        np.testing.assert_allclose(mu1, mu0, **tol)


def test_a_local_cluster_stops_with_its_model_even_unclosed():
    """client="local" starts a cluster for the model: close() stops it, and so does the
    model's collection when it was never closed (no worker processes left behind)."""
    import gc

    m = BayesianGPLVM(_synthetic(N=60), 2, 5, client="local")
    cluster = m.client.cluster
    assert cluster.status.name == "running"
    del m
    gc.collect()
    _join_closing_threads()  # the finalizer closes from a thread where an event loop runs
    assert cluster.status.name == "closed"


def _join_closing_threads():
    import threading

    for t in threading.enumerate():
        if t.name.startswith("bgplvm: close"):
            t.join(60)


def test_a_finalizer_in_an_event_loop_thread_closes_from_another_thread():
    """The collector may run the model's finalizer in any thread, a Dask client's event-loop
    thread included: the close (which blocks on another loop) must not run there."""
    import asyncio
    import threading

    from bgplvm.distributed.client import close_anywhere

    closed = []

    class Conn:
        def close(self):
            closed.append(threading.current_thread())

    # a thread without an event loop (not pytest's main thread: Playwright's sync API keeps
    # a loop running there once the browser tests have run): at once, in that thread
    plain = threading.Thread(target=close_anywhere, args=(Conn(),))
    plain.start()
    plain.join(10)
    assert closed == [plain]

    def in_a_loop():
        async def main():
            close_anywhere(Conn())

        asyncio.run(main())

    looping = threading.Thread(target=in_a_loop)
    looping.start()
    looping.join(10)
    _join_closing_threads()
    assert len(closed) == 2 and closed[1] not in (plain, looping)


# --- missing values: the grouped bound over the blocks --------------------------------------------
def _with_holes(Y, frac=0.3, seed=0):
    rng = np.random.default_rng(seed)
    Y = Y.copy()
    hole = rng.random(Y.shape) < frac
    hole[np.arange(Y.shape[0]), rng.integers(0, Y.shape[1], Y.shape[0])] = False  # no empty row
    Y[hole] = np.nan
    return Y


def test_predictions_of_a_model_fitted_with_missing_values_equal_in_process(client):
    """Fitted with missing values, each group of outputs has its own q(u): the test-time
    statistics come from the blocks' group sums (``TrainingStats.from_group_sums``) and
    agree with the in-process model's."""
    from bgplvm.distributed import DistributedGPLVM
    from bgplvm.distributed.predict import training_stats

    Y = _with_holes(_synthetic(N=400), frac=0.2)
    m = BayesianGPLVM(Y[:300], 3, 15, seed=0)
    m.fit(60, progress=False)
    new = Y[300:]
    with DistributedGPLVM.from_model(m, client=client, chunks=2) as dm:
        st, st0 = training_stats(dm), m._test_stats()
        assert st.n_groups == st0.n_groups > 1
        assert abs(st.F_hat - st0.F_hat) <= 1e-8 * abs(st0.F_hat)  # sums in another order: 1.8e-9 seen
        np.testing.assert_allclose(st.C, st0.C, rtol=0, atol=1e-8 * np.abs(st0.C).max())  # sums in another order
        tol = dict(rtol=1e-4, atol=1e-5)  # as for complete data (the test above)
        rows = da.from_array(new, chunks=(40, -1))
        mu, S = dm.infer_latent(rows)
        mu0, S0 = m.infer_latent(new)
        np.testing.assert_allclose(mu.compute(), mu0, **tol)
        np.testing.assert_allclose(S.compute(), S0, **tol)
        np.testing.assert_allclose(dm.log_density(rows).compute(), m.log_density(new), **tol)
        mean, var = dm.reconstruct(rows)
        mean0, var0 = m.reconstruct(new)
        np.testing.assert_allclose(mean.compute(), mean0, **tol)
        np.testing.assert_allclose(var.compute(), var0, **tol)
        X = m.latent_mean[:9] + 0.3  # each group's variance of f, averaged over the outputs
        np.testing.assert_allclose(dm.predictive_variance(X), m.predictive_variance(X), rtol=1e-8, atol=1e-12)


def test_freeze_and_predictive_variance_as_in_process(client):
    """freeze / unfreeze hold the driver's parameters through a fit, as in process, and
    to_model keeps them held; q(X)'s rows (on the workers) or a misspelt name are refused
    naming what can be held; predictive_variance equals the in-process model's."""
    from bgplvm.distributed import DistributedGPLVM

    m = BayesianGPLVM(_synthetic(N=120), 3, 10, seed=0)
    m.fit(30, progress=False)
    with DistributedGPLVM.from_model(m, client=client, chunks=2) as dm:
        X = np.random.default_rng(0).standard_normal((7, 3))
        np.testing.assert_allclose(dm.predictive_variance(X), m.predictive_variance(X), rtol=1e-8)
        assert dm.predictive_variance(X).shape == (7,)
        noise, Z = dm.noise_variance, dm.inducing_inputs
        dm.freeze("noise_variance", "Z")
        dm.fit(5, progress=False)
        assert dm.noise_variance == noise and np.array_equal(dm.inducing_inputs, Z)
        assert {"noise_variance", "Z"} <= set(dm.to_model()._layout.frozen)
        dm.unfreeze("Z")
        dm.fit(3, progress=False)
        assert dm.noise_variance == noise and not np.array_equal(dm.inducing_inputs, Z)
        with pytest.raises(KeyError, match=r"'mu' is not a parameter .*to_model"):
            dm.freeze("mu")
        with pytest.raises(KeyError, match="noise_varance"):
            dm.unfreeze("noise_varance")
        with pytest.raises(ValueError, match=r"Xnew must have shape \(n, 3\)"):
            dm.predictive_variance(X[:, :2])


def test_distributed_bound_with_missing_values_equals_in_process(client):
    Y = _with_holes(_synthetic())
    Y[40:80, 2:5] = np.nan  # and a block of readings gone
    m = BayesianGPLVM(Y, 3, 15, seed=0)
    m.fit(20, progress=False)
    assert 0.3 < m.missing_fraction < 0.35
    _check_equal(m, client, floor=_reorder_spread(m))


@needs_data("oil")
def test_distributed_bound_with_missing_values_equals_in_process_oil(client):
    from bgplvm.datasets import load

    m = BayesianGPLVM(_with_holes(load("oil").Y), 10, 50, seed=0)
    m.fit(20, progress=False)
    _check_equal(m, client, floor=_reorder_spread(m))


def test_distributed_dynamical_bound_with_missing_values_equals_in_process(client):
    from bgplvm import DynamicalGPLVM

    Y, t, seqs = _sequences()
    m = DynamicalGPLVM(_with_holes(Y, 0.2), t, 3, 12, sequences=seqs, time_kernel="matern32+white")
    m.fit(20, progress=False)
    _check_equal(m, client, chunks_list=(2, 3), floor=_reorder_spread(m))


# --- checkpoints, resume, faults ----------------------------------------------------------------
def test_checkpoint_resume_continues_where_it_was(client, tmp_path):
    from bgplvm.distributed import DistributedGPLVM
    from bgplvm.distributed.checkpoint import read_meta

    Y = _synthetic(N=200)
    folder = str(tmp_path / "ck")
    with BayesianGPLVM(Y, 2, 10, seed=0, client=client, chunks=3) as dm:
        dm.fit(23, checkpoint=folder, checkpoint_every=5, progress=False)
        at20 = dm.fit_info["history"][19]
    meta = read_meta(folder)
    assert meta["iteration"] == 20 and meta["rows"] == [66, 67, 67] and abs(meta["bound"] - at20) < 1e-9 * abs(at20)
    assert sorted(p.name for p in (tmp_path / "ck").iterdir()) == (
        ["block-00000-00000020.npz", "block-00001-00000020.npz", "block-00002-00000020.npz",
         "global-00000020.npz", "meta.json"])  # older iterations removed, no temporary file left
    with BayesianGPLVM.resume(folder, Y=Y, client=client) as dm:
        assert isinstance(dm, DistributedGPLVM) and dm.iterations == 20
        assert abs(dm.elbo() - at20) <= 1e-9 * abs(at20)
        dm.fit(10, checkpoint=folder, checkpoint_every=5, progress=False)
        assert dm.iterations == 30 and read_meta(folder)["iteration"] == 30
        assert dm.fit_info["bound"] > at20
    with pytest.raises(ValueError, match="column means differ"):
        DistributedGPLVM.resume(folder, Y=Y + 1.0, client=client)
    with pytest.raises(ValueError, match=r"Pass the same rows: BayesianGPLVM.resume\('.*ck', Y=\.\.\., client=\.\.\.\)"):
        DistributedGPLVM.resume(folder, client=client)


def test_dynamical_checkpoint_resumes_with_its_times_and_sequences(client, tmp_path):
    from bgplvm import DynamicalGPLVM
    from bgplvm.distributed import DistributedDynamicalGPLVM, DistributedGPLVM

    Y, t, seqs = _sequences()
    folder = str(tmp_path / "ck")
    with DynamicalGPLVM(Y, t, 3, 12, sequences=seqs.astype(str), client=client, chunks=2,
                        time_kernel="matern32+white") as dm:
        dm.fit(10, checkpoint=folder, checkpoint_every=5, progress=False)
        at10, frozen = dm.fit_info["history"][9], dm.frozen
        mu = dm.latent()[0]
    with DistributedGPLVM.resume(folder, Y=Y, client=client) as dm:
        assert isinstance(dm, DistributedDynamicalGPLVM) and dm.iterations == 10 and dm.frozen == frozen
        assert abs(dm.elbo() - at10) <= 1e-9 * abs(at10)
        np.testing.assert_allclose(dm.latent()[0], mu, rtol=1e-12)
        dm.fit(5, checkpoint=folder, progress=False)
        assert dm.iterations == 15 and dm.fit_info["bound"] > at10


def test_checkpoint_of_another_model_is_refused_naming_the_difference(client, tmp_path):
    Y = _synthetic(N=120)
    folder = str(tmp_path / "ck")
    with BayesianGPLVM(Y, 2, 10, seed=0, client=client, chunks=2) as dm:
        dm.fit(5, checkpoint=folder, checkpoint_every=5, progress=False)
    with BayesianGPLVM(Y, 3, 10, seed=0, client=client, chunks=2) as dm:
        with pytest.raises(ValueError, match="another model: Q 2 there, 3 here"):
            dm.fit(5, checkpoint=folder, progress=False)
    with BayesianGPLVM(Y[:100], 2, 8, seed=0, client=client, chunks=2) as dm:
        with pytest.raises(ValueError, match="N 120 there, 100 here; M 10 there, 8 here"):
            dm.fit(5, checkpoint=folder, progress=False)
    with BayesianGPLVM(Y, 2, 10, seed=1, client=client, chunks=2) as dm:  # the same model, a new fit
        with pytest.raises(ValueError, match="checkpoint of iteration 5 of a model like this one"):
            dm.fit(5, checkpoint=folder, progress=False)


@pytest.mark.parametrize("holes", [False, True], ids=["complete", "missing-values"])
def test_a_killed_worker_loses_nothing(tmp_path, holes):
    """SIGKILL one worker process mid-fit: its blocks come back on the worker left (and the
    one its nanny restarts) from the last checkpoint, and the fit goes on, rising. With
    missing values the rebuilt blocks take the model's column groups again."""
    import os
    import signal

    from bgplvm.distributed import local_cluster

    c = local_cluster(2)
    try:
        Y = _with_holes(_synthetic(N=300), 0.2) if holes else _synthetic(N=300)
        folder = str(tmp_path / "ck")
        killed = {}

        def kill_at_13(p):
            it, bound = p.iteration, p.bound
            if it == 13:
                pids = c.run(os.getpid)
                w = sorted(pids)[1]
                killed.update(worker=w, bound=bound)
                os.kill(pids[w], signal.SIGKILL)

        with BayesianGPLVM(Y, 2, 10, seed=0, client=c, chunks=4) as dm:
            dm.fit(40, checkpoint=folder, checkpoint_every=5, callback=kill_at_13, progress=False)
            info = dm.fit_info
            assert killed and len(info["recoveries"]) == 1, info["recoveries"]
            rec = info["recoveries"][0]
            assert rec["source"] == "checkpoint of iteration 10" and rec["rows"] == 150 and rec["blocks"] == [1, 3]
            assert info["iterations"] == 40
            after = np.asarray(info["history"][13:])
            assert np.all(np.diff(after) >= -1e-9 * np.abs(after[1:]))  # rising again from the restored point
            assert info["bound"] > info["history"][9]  # beyond the checkpoint's bound
            assert abs(dm.elbo() - info["bound"]) <= 1e-9 * abs(info["bound"])
    finally:
        close_cluster(c)


def test_a_killed_driver_resumes_from_its_checkpoint(tmp_path):
    """SIGKILL the process running ``bgplvm fit --scheduler local`` (and its cluster) while
    it checkpoints; ``bgplvm fit --resume`` goes on from the last whole checkpoint."""
    import json
    import os
    import signal
    import subprocess
    import sys

    from bgplvm.distributed.checkpoint import read_block, read_global, read_meta

    Y = _synthetic(N=400)
    np.save(tmp_path / "Y.npy", Y)
    folder = tmp_path / "ck"
    cmd = [sys.executable, "-m", "bgplvm.cli", "fit", "--data", str(tmp_path / "Y.npy"), "--scheduler", "local",
           "--checkpoint", str(folder), "--checkpoint-every", "1", "-q", "2", "-m", "10", "--iters", "100000",
           "--quiet"]
    proc = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        t = time.time()
        while time.time() - t < 240:
            try:
                if read_meta(str(folder))["iteration"] >= 15:
                    break
            except (FileNotFoundError, json.JSONDecodeError):
                pass
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.2)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    meta = read_meta(str(folder))  # never half written: meta names files that are whole
    k = meta["iteration"]
    assert k >= 15 and meta["data"] == str(tmp_path / "Y.npy")
    assert read_global(str(folder), k)["x"].size > 0
    for i, n in enumerate(meta["rows"]):
        assert read_block(str(folder), i, k, 2 * 2 * n).shape == (4 * n,)
    out = subprocess.run([sys.executable, "-m", "bgplvm.cli", "fit", "--resume", str(folder), "--scheduler", "local",
                          "--iters", "5", "--quiet", "--out", str(tmp_path / "model.npz")],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert f"after {k + 5} iterations" in out.stdout
    bound = float(out.stdout.split("bound ")[1].split()[0])
    assert bound >= meta["bound"] - 1e-6 * abs(meta["bound"])
    assert read_meta(str(folder))["iteration"] == k + 5
    # --out: a model file referring to the rows, opened in process
    m = BayesianGPLVM.load(tmp_path / "model.npz")
    assert m.data_file == str((tmp_path / "Y.npy").resolve()) and abs(m.elbo() - bound) <= 1e-5 * abs(bound)  # printed %.6g


# --- the dynamical model: whole sequences per block ------------------------------------------------
def _reorder_spread(m) -> tuple[float, float]:
    """How far the in-process bound and gradient move (relative: F; the gradient's largest
    change over its largest entry) when the same model is built with its rows in reverse
    order (whole sequences reversed for a dynamical model): the rounding floor of sums over
    rows in another order, which is what distribution does."""
    from bgplvm import DynamicalGPLVM

    F0, g0 = m._bound(m._x)
    N, Q, sl = m.Y.shape[0], m.latent_dim, m._layout.slices
    rows = m.prior.row_blocks
    if isinstance(m, DynamicalGPLVM):
        ids = list(dict.fromkeys(m.sequences.tolist()))
        order = np.concatenate([np.flatnonzero(m.sequences == s) for s in ids[::-1]])
        m2 = DynamicalGPLVM(m.Y[order], m.t[order], Q, m.num_inducing, kernel=m.kernel,
                            time_kernel=m.prior.time_kernel, sequences=m.sequences[order], time_prior=m.time_prior)
    else:
        order = np.arange(N)[::-1]
        m2 = BayesianGPLVM(m.Y[order], Q, m.num_inducing, kernel=m.kernel)
    v = dict(m._values())
    v.update({n: v[n][order] for n in rows})
    m2._set_x(m2._layout.pack(v))
    F2, g2 = m2._bound(m2._x)
    inv = np.empty(N, dtype=int)
    inv[order] = np.arange(N)
    for n in rows:
        g2[sl[n]] = g2[sl[n]].reshape(N, Q)[inv].ravel()
    return abs(F2 - F0) / abs(F0), float(np.max(np.abs(g2 - g0)) / np.max(np.abs(g0)))


def _sequences(seed=0):
    rng = np.random.default_rng(seed)
    seqs = np.repeat(np.arange(5), [30, 50, 20, 40, 60])
    rng.shuffle(seqs)  # the rows of the sequences interleaved
    t = np.zeros(seqs.size)
    for s in range(5):
        t[seqs == s] = 0.1 * np.arange(np.sum(seqs == s))
    Y = np.sin(np.c_[t, 2 * t, 3 * t] @ rng.standard_normal((3, 8))) + 0.05 * rng.standard_normal((seqs.size, 8))
    return Y, t, seqs


@pytest.mark.parametrize("time_kernel,form", [("matern32+white+bias", "dense"), ("matern32+white+bias", "state_space"),
                                              ("rbf+white", "dense")])
def test_distributed_dynamical_bound_equals_in_process(client, time_kernel, form):
    from bgplvm import DynamicalGPLVM

    Y, t, seqs = _sequences()
    m = DynamicalGPLVM(Y, t, 3, 12, sequences=seqs, time_kernel=time_kernel, time_prior=form)
    m.fit(20, progress=False)
    _check_equal(m, client)


@needs_data("cmu35")
def test_distributed_dynamical_bound_equals_in_process_cmu35(client):
    """CMU's 35 training sequences (2,613 frames), the paper's model, both forms of p(X | t)."""
    from bgplvm import DynamicalGPLVM
    from bgplvm.datasets import load

    d = load("cmu35")
    m = DynamicalGPLVM(d.Y, d.times, 9, 40, kernel="rbf+white+bias", time_kernel="matern32+white+bias",
                       sequences=d.sequence, time_prior="dense")
    m.fit(10, progress=False)
    spread = _reorder_spread(m)  # the in-process rounding floor of a reordering (~1e-10, ~1e-9)
    assert spread[1] < 1e-8
    _check_equal(m, client, floor=spread)
    ss = m.with_time_prior("state_space")
    _check_equal(ss, client, chunks_list=(3,), floor=_reorder_spread(ss))


def test_dynamical_model_with_client_keeps_whole_sequences_per_block(client):
    from bgplvm import DynamicalGPLVM
    from bgplvm.distributed import DistributedDynamicalGPLVM

    Y, t, seqs = _sequences()
    with DynamicalGPLVM(Y, t, 3, 12, sequences=seqs, client=client, chunks=3) as dm:
        assert isinstance(dm, DistributedDynamicalGPLVM)
        assert dm.block_rows == [70, 80, 50]  # sequences of 30 + 50 | 20 + 60 ... in id order
        assert dm.frozen == {"time_kernel.variance"}  # as DynamicalGPLVM: the smooth variance is held
        F0 = dm.elbo()
        dm.fit(30, progress=False)
        assert dm.fit_info["bound"] > F0
        mu, S = dm.latent()
        assert mu.shape == (200, 3) and np.all(S > 0)
    with pytest.raises(ValueError, match="must be consecutive"):
        DynamicalGPLVM(da.from_array(Y, chunks=(50, -1)), t, 2, 5, sequences=seqs, client=client)


@pytest.mark.parametrize("form", ["dense", "state_space"])
def test_new_sequences_of_a_distributed_dynamical_model_equal_in_process(client, form):
    """A new sequence depends on the training data through the M x M and M x D statistics
    only: its objective from the distributed model's statistics equals the in-process one
    (value and gradient, at the same start); its fits on the driver (``infer_sequence``,
    ``reconstruct``) and on the workers (``infer_sequences``) end where the in-process fit
    does, up to the rounding that a long optimisation path amplifies."""
    from bgplvm import DynamicalGPLVM
    from bgplvm.distributed import DistributedDynamicalGPLVM
    from bgplvm.distributed.sequences import sequence_view
    from bgplvm.sequence_inference import SequenceObjective

    Y, t, seqs = _sequences()
    m = DynamicalGPLVM(Y, t, 3, 12, sequences=seqs, time_kernel="matern32+white", time_prior=form)
    m.fit(30, progress=False)
    rng = np.random.default_rng(5)
    new = []
    for n in (25, 40):
        ts = 0.1 * np.arange(n)
        Ys = np.sin(np.c_[ts, 2 * ts, 3 * ts] @ rng.standard_normal((3, 8)))
        new.append((_with_holes(Ys, 0.3, seed=n), ts))
    with DistributedDynamicalGPLVM.from_model(m, client=client, chunks=2) as dm:
        view = sequence_view(dm)
        Ys, ts = new[1]
        o0, o1 = (SequenceObjective(mod, np.nan_to_num(Ys), ~np.isnan(Ys), ts) for mod in (m, view))
        np.testing.assert_allclose(o1.x0, o0.x0, rtol=1e-9, atol=1e-12)
        for x in (o0.x0, o0.x0 + 0.1 * rng.standard_normal(o0.x0.size)):
            (F0, g0), (F1, g1) = o0(x), o1(x)
            assert F1 == pytest.approx(F0, rel=1e-9)
            assert np.max(np.abs(g1 - g0)) <= 1e-9 * np.max(np.abs(g0))
        its = 30
        fits = dm.infer_sequences(new, max_iters=its)  # one task per sequence
        for (Ys, ts), fit in zip(new, fits):
            assert fit.bound == pytest.approx(m.infer_sequence(Ys, ts, max_iters=its).bound, rel=1e-5)
        Ys, ts = new[0]
        ref = m.infer_sequence(Ys, ts, max_iters=its)
        here = dm.infer_sequence(Ys, ts, max_iters=its)
        assert here.bound == pytest.approx(ref.bound, rel=1e-5)
        np.testing.assert_allclose(here.mu, ref.mu, atol=1e-3)
        mean, var = dm.reconstruct(Ys, ts, max_iters=its)
        mean0, var0 = m.reconstruct(Ys, ts, max_iters=its)
        np.testing.assert_allclose(mean, mean0, atol=1e-3)
        np.testing.assert_allclose(var, var0, rtol=1e-3)
        assert np.array_equal(np.isnan(Ys), var > 0)
        [(mean2, _)] = dm.reconstruct_sequences(new[:1], max_iters=its)
        np.testing.assert_allclose(mean2, mean0, atol=1e-3)
        for kw in ({}, dict(condition=False), dict(include_noise=False)):  # at one q(X*): equal
            (f_mean, f_var), (f_mean0, f_var0) = dm.fill_missing(ref, Ys, **kw), m.fill_missing(ref, Ys, **kw)
            np.testing.assert_allclose(f_mean, f_mean0, rtol=1e-7, atol=1e-9)
            np.testing.assert_allclose(f_var, f_var0, rtol=1e-7, atol=1e-12)
        holes = np.isnan(Ys)  # without the noise, each missing entry's variance is the noise less
        np.testing.assert_allclose(dm.fill_missing(ref, Ys)[1][holes] - f_var[holes], dm.noise_variance, rtol=1e-6)
        with pytest.raises(ValueError, match=r"fit holds q\(X\*\) of 25 frames but Y_star has 10 rows"):
            dm.fill_missing(ref, Ys[:10])
        with pytest.raises(ValueError, match="pair"):
            dm.infer_sequences([new[0][0]])
        with pytest.raises(TypeError, match="infer_sequence"):
            dm.infer_latent(new[0][0])


@pytest.mark.parametrize("form", ["dense", "state_space"])
def test_training_sequences_of_a_distributed_dynamical_model_equal_in_process(client, form):
    """A training sequence's q(X*) at new times (``latent_at``, ``forecast``) and the fits of
    new frames conditioned on its path (``infer_sequence`` / ``reconstruct`` with
    ``sequence=``) come from the worker that holds it: equal to the in-process ones at the
    same parameters (the objective to 1e-9; the fits up to what a path amplifies)."""
    from bgplvm import DynamicalGPLVM
    from bgplvm.distributed import DistributedDynamicalGPLVM
    from bgplvm.distributed.sequences import sequence_view
    from bgplvm.sequence_inference import SequenceObjective

    Y, t, seqs = _sequences()
    m = DynamicalGPLVM(Y, t, 3, 12, sequences=seqs, time_kernel="matern32+white", time_prior=form)
    m.fit(30, progress=False)
    with DistributedDynamicalGPLVM.from_model(m, client=client, chunks=2) as dm:
        s = dm.sequences[dm._order[-1]]  # a sequence of the second block
        assert dm._sequence_block(s) == 1
        n_s = int(np.sum(seqs == s))
        t_new = np.r_[0.1 * np.arange(0, n_s, 7), 0.1 * n_s + 0.05 * np.arange(1, 9)]  # training times, then beyond
        for seq in (s, dm.sequences[dm._order[0]], None):
            mu1, S1 = dm.latent_at(t_new, seq)
            mu0, S0 = m.latent_at(t_new, seq)
            np.testing.assert_allclose(mu1, mu0, rtol=1e-9, atol=1e-12)
            np.testing.assert_allclose(S1, S0, rtol=1e-9, atol=1e-12)
        for got, ref in zip(dm.forecast(t_new, s), m.forecast(t_new, s)):
            np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-12)
        X = np.random.default_rng(1).standard_normal((7, 3))
        for args in ((X,), (X, np.full_like(X, 0.2))):
            for got, ref in zip(dm.predict(*args, include_noise=False), m.predict(*args, include_noise=False)):
                np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-12)

        ts = 0.1 * n_s + 0.1 * np.arange(1, 13)  # 12 new frames continuing sequence s
        Ys = _with_holes(np.sin(np.c_[ts, 2 * ts, 3 * ts] @ np.random.default_rng(2).standard_normal((3, 8))), 0.3)
        obs = ~np.isnan(Ys)
        prior = dm._on_sequence("conditional_prior", s, ts)
        o0 = SequenceObjective(m, np.nan_to_num(Ys), obs, ts, s)
        o1 = SequenceObjective(sequence_view(dm), np.nan_to_num(Ys), obs, ts, s, prior)
        np.testing.assert_allclose(o1.x0, o0.x0, rtol=1e-9, atol=1e-12)
        (F0, g0), (F1, g1) = o0(o0.x0), o1(o0.x0)
        assert F1 == pytest.approx(F0, rel=1e-9)
        assert np.max(np.abs(g1 - g0)) <= 1e-9 * np.max(np.abs(g0))
        its = 30
        here, ref = dm.infer_sequence(Ys, ts, sequence=s, max_iters=its), m.infer_sequence(Ys, ts, sequence=s, max_iters=its)
        assert here.bound == pytest.approx(ref.bound, rel=1e-5)
        np.testing.assert_allclose(here.mu, ref.mu, atol=1e-3)
        (mean, var), (mean0, var0) = dm.reconstruct(Ys, ts, sequence=s, max_iters=its), m.reconstruct(Ys, ts, sequence=s, max_iters=its)
        np.testing.assert_allclose(mean, mean0, atol=1e-3)
        np.testing.assert_allclose(var, var0, rtol=1e-3)
        # the path matters: the same frames as a new sequence fit otherwise
        assert not np.allclose(dm.infer_sequence(Ys, ts, max_iters=its).mu, here.mu, atol=1e-3)
        with pytest.raises(ValueError, match="unknown sequence 99"):
            dm.infer_sequence(Ys, ts, sequence=99)
        with pytest.raises(ValueError, match="unknown sequence 99"):
            dm.latent_at(ts, 99)
        with pytest.raises(ValueError, match="training frames of sequence"):
            dm.infer_sequence(Ys[:2], np.array([0.0, 0.1]), sequence=s)
