"""Dask faults as users meet them (bgplvm.distributed.faults): real worker processes killed
with SIGKILL (or stopped with SIGSTOP) under a fit, for every source of rows and every way
of losing them; the fit returns within a bound, recovers where it can, and otherwise stops
saying what to do, its last checkpoint whole. One ``fit`` contract in process and on Dask."""

from __future__ import annotations

import contextlib
import copy
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from bgplvm import BayesianGPLVM, FitProgress
from bgplvm.optimize import FIT_INFO_KEYS
from clusters import close_cluster

distributed = pytest.importorskip("distributed", reason="needs dask[distributed] (the test extra installs it)")
da = pytest.importorskip("dask.array")

#: seconds a fit may take to return after a kill (recovery takes ~0.1-1 s; the bound is
#: there to fail a hang, not to time anything)
RETURNS_WITHIN = 120.0


def _rows(N=1200, D=8, seed=1):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, 2))
    return np.sin(X @ rng.standard_normal((2, D))) + 0.05 * rng.standard_normal((N, D))


def _chunk_rows(block, block_info=None):
    """A chunk of ``_rows``-like data made on the worker (a dask array from a computed graph)."""
    a = block_info[None]["array-location"][0][0]
    n, D = block.shape
    rng = np.random.default_rng(a)
    X = rng.standard_normal((n, 2))
    return np.sin(X @ np.random.default_rng(0).standard_normal((2, D))) + 0.05 * rng.standard_normal((n, D))


def _graph_rows(N, D, chunk):
    return da.zeros((N, D), chunks=(chunk, D)).map_blocks(_chunk_rows, dtype=np.float64)


def _pids(client) -> dict:
    return client.run(os.getpid, callback_timeout=30)


def _kill(client, *workers) -> None:
    pids = _pids(client)
    for w in workers:
        os.kill(pids[w], signal.SIGKILL)


def _at(iteration: int, action):
    """A user's callback: ``action(progress)`` once, after ``iteration``."""
    done = []

    def callback(p: FitProgress):
        assert isinstance(p, FitProgress)
        if p.iteration == iteration and not done:
            done.append(time.monotonic())
            action(p)
    callback.done = done
    return callback


def _in_process_bound(dm, Y) -> float:
    """The in-process bound at the distributed model's parameters (gathered): equal when
    every block holds its own rows, rebuilt ones included."""
    from bgplvm.distributed.persist import file_layout, file_prior, gather_x

    prior = file_prior(dm)
    x = gather_x(dm, prior, file_layout(dm, prior))
    m = BayesianGPLVM(Y, dm.latent_dim, dm.num_inducing, kernel=copy.deepcopy(dm.kernel), seed=0)
    m._set_x(x)
    return m.elbo()


def _check_recovered(dm, info, Y, source: str, k_before: int) -> None:
    """One recovery from ``source``; the fit went on to its end (all its iterations: these
    small fits do not converge so soon), rising from the restored point and beyond the
    bound it was restored to; every block holds its rows."""
    assert len(info["recoveries"]) >= 1 and info["recoveries"][0]["source"] == source, info["recoveries"]
    assert info["reason"] == "max_iters" and info["iterations"] == len(info["history"])
    at = info["recoveries"][-1]["iteration"]
    after = np.asarray(info["history"][at:])
    assert np.all(np.diff(after) >= -1e-9 * np.abs(after[1:])), after
    assert info["bound"] > info["history"][k_before - 1]
    F = dm.elbo()
    assert abs(F - info["bound"]) <= 1e-9 * abs(F)
    if Y is not None:
        assert abs(_in_process_bound(dm, Y) - F) <= 1e-8 * abs(F)


@pytest.fixture
def two():
    """A LocalCluster as Dask makes it by default: 2 worker processes under nannies (a killed
    worker comes back under a new address). One per test: a nanny does not always restart a
    worker killed just after it started (seen once in three runs of this file), and a test
    must not depend on what the one before it killed."""
    from bgplvm.distributed import local_cluster

    c = local_cluster(2)
    yield c
    close_cluster(c)


# --- the headline: the fit, rows from a dask graph -----------------------------------
def test_a_killed_worker_under_rows_of_a_dask_array_never_hangs_the_fit(two, tmp_path):
    """The README's use, as the report found it: 4 chunks of 5,000 rows from a graph, a
    worker SIGKILLed at iteration 15, a checkpoint of iteration 10 on disk: the fit returns,
    its lost blocks rebuilt from their chunks computed again."""
    Y = _graph_rows(20000, 12, 5000)
    cb = _at(15, lambda p: _kill(two, sorted(_pids(two))[1]))
    with BayesianGPLVM(Y, latent_dim=5, num_inducing=30, client=two) as dm:
        dm.fit(max_iters=40, checkpoint=str(tmp_path / "ck"), callback=cb, progress=False)
        assert cb.done and time.monotonic() - cb.done[0] < RETURNS_WITHIN
        info = dm.fit_info
        assert info["iterations"] == 40
        _check_recovered(dm, info, Y.compute(), "checkpoint of iteration 10", 10)


# --- every source of rows, a worker restarted by its nanny ------------------------------------
def _source(kind: str, tmp_path):
    """(Y as the model is given it, the rows as NumPy) for each source a user has."""
    from bgplvm.distributed import open_rows

    Y = _rows()
    if kind == "numpy":
        return Y, Y
    if kind == "graph":
        G = _graph_rows(1200, 8, 300)
        return G, G.compute()
    path = tmp_path / f"Y.{kind}"
    if kind == "npy":
        np.save(path, Y)
    elif kind == "npz":
        np.savez(path, Y=Y)
    elif kind == "h5":
        import h5py

        with h5py.File(path, "w") as f:
            f["Y"] = Y
    elif kind == "zarr":
        pytest.importorskip("zarr", reason="reading .zarr needs zarr (the test extra installs it)")
        da.from_array(Y, chunks=(300, 8)).to_zarr(str(path))
    return open_rows(str(path), block_rows=300), Y


@pytest.mark.parametrize("kind", ["numpy", "npy", "npz", "h5", "zarr", "graph"])
def test_every_source_recovers_from_a_worker_restarted_by_its_nanny(two, tmp_path, kind):
    """NumPy rows (scattered again), files read by ``open_rows`` (read again on a live
    worker) and a computed graph (computed again): the rebuilt blocks hold their own rows
    (the bound equals the in-process one at the same parameters)."""
    Y, rows = _source(kind, tmp_path)
    with BayesianGPLVM(Y, 2, 10, seed=0, client=two, chunks=4 if kind == "numpy" else None) as dm:
        assert len(dm._blocks) == 4
        victim = dm._blocks.where[1]
        cb = _at(8, lambda p: _kill(two, victim))
        dm.fit(25, checkpoint=str(tmp_path / "ck"), checkpoint_every=5, callback=cb, progress=False)
        rec = dm.fit_info["recoveries"][0]
        assert rec["workers"] == [victim] and victim not in rec["to"] and 1 in rec["blocks"]
        _check_recovered(dm, dm.fit_info, rows, "checkpoint of iteration 5", 5)


# --- the ways of losing workers ----------------------------------------------------------------
@contextlib.contextmanager
def _processes(n_workers: int, nanny: bool = True, scheduler: bool = False):
    """A cluster of separate processes: ``dask worker`` (``--no-nanny``: gone for good when
    killed) against a LocalCluster's scheduler in this process, or with ``scheduler`` a
    ``dask scheduler`` process too (so that it can be killed). Yields (client, {name: proc})."""
    import tempfile

    procs, cluster, client = {}, None, None
    folder = tempfile.mkdtemp()
    try:
        if scheduler:
            sf = os.path.join(folder, "scheduler.json")
            procs["scheduler"] = subprocess.Popen(
                [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0",
                 "--no-dashboard", "--scheduler-file", sf], start_new_session=True,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            t = time.monotonic()
            while not os.path.exists(sf) and time.monotonic() - t < 60:
                time.sleep(0.1)
            target = ["--scheduler-file", sf]
        else:
            cluster = distributed.LocalCluster(n_workers=0, dashboard_address=None, silence_logs=50,
                                               scheduler_kwargs={"dashboard_address": ":0"})
            target = [cluster.scheduler_address]
        for k in range(n_workers):
            procs[f"w{k}"] = subprocess.Popen(
                [sys.executable, "-m", "distributed.cli.dask_worker", *target, "--nthreads", "1", "--no-dashboard",
                 "--name", f"w{k}", "--nanny" if nanny else "--no-nanny", "--local-directory", folder],
                start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = distributed.Client(cluster if cluster is not None else None,
                                    scheduler_file=None if cluster is not None else target[1], timeout=60)
        client.wait_for_workers(n_workers, timeout=120)
        yield client, procs
    finally:
        for p in procs.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        if client is not None:
            with contextlib.suppress(Exception):
                client.close(timeout=5)
        if cluster is not None:
            cluster.close(timeout=10)


def test_a_worker_gone_for_good_and_two_lost_at_once(tmp_path):
    """Workers without nannies: one killed (its blocks dealt to the three left), then two at
    once (their blocks all on the one left); the fit goes on and ends."""
    with _processes(4, nanny=False) as (client, procs):
        Y = _rows(800)
        with BayesianGPLVM(Y, 2, 10, seed=0, client=client, chunks=8) as dm:
            one = dm._blocks.where[0]
            killed = {}

            def losses(p):
                if p.iteration == 7:
                    _kill(client, one)
                if p.iteration == 16:
                    two = sorted(set(dm._blocks.where))[:2]
                    killed.update(blocks={i for i, w in enumerate(dm._blocks.where) if w in two})
                    _kill(client, *two)
            dm.fit(30, checkpoint=str(tmp_path / "ck"), checkpoint_every=5, callback=losses, progress=False)
            info = dm.fit_info
            recs = info["recoveries"]
            assert recs[0]["iteration"] == 7 and recs[0]["workers"] == [one] and recs[0]["blocks"] == [0, 4]
            assert set().union(*[r["blocks"] for r in recs[1:]]) == killed["blocks"]
            assert all(r["source"] == "checkpoint of iteration 15" for r in recs[1:])
            assert len(set(dm._blocks.where)) == 1 and info["iterations"] == 30
            _check_recovered(dm, info, Y, "checkpoint of iteration 5", 15)


def test_losing_the_worker_that_held_a_source_chunk(two, tmp_path):
    """The rows a persisted dask array; the worker holding its first chunk killed: its
    blocks are rebuilt on the other from their chunks, which Dask computes again from the
    graph (the persisted copies went with the worker)."""
    G = _graph_rows(1200, 8, 300)
    rows = G.compute()
    P = two.persist(G)
    distributed.wait(P, timeout=60)
    first = P.__dask_keys__()[0][0]
    A = two.who_has(P)[first][0]
    with BayesianGPLVM(P, 2, 10, seed=0, client=two) as dm:
        held = [i for i, w in enumerate(dm._blocks.where) if w == A]
        assert held
        dm.fit(20, checkpoint=str(tmp_path / "ck"), checkpoint_every=5, callback=_at(7, lambda p: _kill(two, A)),
               progress=False)
        rec = dm.fit_info["recoveries"][0]
        assert rec["blocks"] == held and rec["workers"] == [A]
        _check_recovered(dm, dm.fit_info, rows, "checkpoint of iteration 5", 5)
    assert np.array_equal(P.compute(), rows)  # the user's array: its lost chunk computed again


def test_a_loss_before_the_first_checkpoint_goes_back_to_the_fits_start(two, tmp_path):
    """With a checkpoint folder the fit's start is written first: a loss at iteration 3
    (checkpoints every 10) restores the lost blocks from it, and says so."""
    Y = _rows(600)
    with BayesianGPLVM(Y, 2, 10, seed=0, client=two, chunks=4) as dm:
        victim = dm._blocks.where[1]
        dm.fit(15, checkpoint=str(tmp_path / "ck"), checkpoint_every=10,
               callback=_at(3, lambda p: _kill(two, victim)), progress=False)
        _check_recovered(dm, dm.fit_info, Y, "checkpoint of iteration 0 (the start of this fit: no later checkpoint "
                                             "yet)", 1)


def test_a_loss_without_a_checkpoint_goes_back_to_the_pca_start(two):
    """Without a checkpoint folder a new model's lost blocks start again from the PCA
    start, said so."""
    Y = _rows(600)
    with BayesianGPLVM(Y, 2, 10, seed=0, client=two, chunks=4) as dm:
        victim = dm._blocks.where[1]
        dm.fit(15, callback=_at(3, lambda p: _kill(two, victim)), progress=False)
        _check_recovered(dm, dm.fit_info, Y, "the PCA start (no checkpoint)", 1)


def test_a_run_that_stalls_right_after_a_recovery_does_not_end_the_fit(two, monkeypatch):
    """After a recovery the fit starts below the bound it had: a first L-BFGS run that stalls
    there (one iteration, then a failed line search) gained on the recovered point, and the
    fit goes on to its iterations (it was ended, comparing with the bound before the loss)."""
    import dataclasses

    from bgplvm.distributed import training

    real, stalled = training.minimize_vlbfgs, []

    def stall_once_after_a_recovery(parts, maxiter, maxfun, memory, callback):
        if parts.run.recoveries and not stalled:
            stalled.append(1)
            return dataclasses.replace(real(parts, 1, maxfun, memory=memory, callback=callback), status=2)
        return real(parts, maxiter, maxfun, memory=memory, callback=callback)

    monkeypatch.setattr(training, "minimize_vlbfgs", stall_once_after_a_recovery)
    Y = _rows(600)
    with BayesianGPLVM(Y, 2, 10, seed=0, client=two, chunks=4) as dm:
        victim = dm._blocks.where[1]
        dm.fit(25, callback=_at(12, lambda p: _kill(two, victim)), progress=False)
        assert stalled and dm.fit_info["iterations"] == 25 and len(dm.fit_info["recoveries"]) == 1


def test_a_loss_while_a_checkpoint_is_written_uses_the_previous_one(two, tmp_path, monkeypatch):
    """A worker killed as the blocks write the checkpoint of iteration 10 (the others' files
    are written, its are not): meta.json still names iteration 5, whole; the lost blocks
    come back from it, and the next checkpoint replaces the half-written files."""
    from bgplvm.distributed import blocks
    from bgplvm.distributed.checkpoint import read_meta

    folder = tmp_path / "ck"
    real = blocks.Blocks.call
    seen, model = {}, {}

    def call(self, method, *args, **kw):
        if method == "checkpoint" and not seen and model["dm"].iterations == 10:
            seen["meta"] = read_meta(str(folder))["iteration"]
            _kill(two, self.where[-1])  # the others write theirs; the killed worker's never come
        return real(self, method, *args, **kw)

    monkeypatch.setattr(blocks.Blocks, "call", call)
    Y = _rows(600)
    with BayesianGPLVM(Y, 2, 10, seed=0, client=two, chunks=4) as dm:
        model["dm"] = dm
        dm.fit(22, checkpoint=str(folder), checkpoint_every=5, progress=False)
        assert seen["meta"] == 5
        _check_recovered(dm, dm.fit_info, Y, "checkpoint of iteration 5", 5)
        assert dm.fit_info["recoveries"][0]["iteration"] == 10
    meta = read_meta(str(folder))
    assert meta["iteration"] == 20
    assert sorted(p.name for p in folder.iterdir()) == [f"block-{i:05d}-00000020.npz" for i in range(4)] + [
        "global-00000020.npz", "meta.json"]


def test_a_lost_scheduler_stops_the_fit_saying_how_to_resume(tmp_path, monkeypatch):
    """The scheduler process killed mid-fit: the fit stops within the bound with a
    SchedulerLost that names the whole checkpoint and the call; on a new cluster ``resume``
    goes on from it."""
    from bgplvm.distributed import faults
    from bgplvm.distributed.checkpoint import read_meta

    monkeypatch.setattr(faults, "SCHEDULER_TIMEOUT", 5.0)
    Y = _rows(600)
    folder = str(tmp_path / "ck")
    with _processes(2, scheduler=True) as (client, procs):
        dm = BayesianGPLVM(Y, 2, 10, seed=0, client=client, chunks=2)
        cb = _at(12, lambda p: os.killpg(procs["scheduler"].pid, signal.SIGKILL))
        with pytest.raises(faults.SchedulerLost, match=r"(?s)stopped at iteration 12.*checkpoint of iteration 10 in "
                                                        r".*BayesianGPLVM.resume\('.*ck', Y=<the same rows>, "
                                                        r"client=\.\.\.\)"):
            dm.fit(40, checkpoint=folder, checkpoint_every=5, callback=cb, progress=False)
        assert time.monotonic() - cb.done[0] < RETURNS_WITHIN
        assert dm.fit_info["reason"] == "error" and dm.fit_info["iterations"] == 12
        dm.close()
    meta = read_meta(folder)
    assert meta["iteration"] == 10
    with _processes(2) as (client, _):
        with BayesianGPLVM.resume(folder, Y=Y, client=client) as dm:
            assert dm.iterations == 10 and abs(dm.elbo() - meta["bound"]) <= 1e-9 * abs(meta["bound"])
            dm.fit(10, progress=False)
            assert dm.iterations == 20 and dm.fit_info["bound"] > meta["bound"]


def test_a_stuck_worker_stops_the_fit_at_its_deadline(two, tmp_path):
    """A worker stopped with SIGSTOP (alive to the scheduler, answering nothing): the fit
    stops at the model's timeout with a ClusterTimeout naming the worker and its blocks and
    what to do; the checkpoint stays whole."""
    from bgplvm.distributed.checkpoint import read_meta
    from bgplvm.distributed.faults import ClusterTimeout

    Y = _rows(600)
    folder = str(tmp_path / "ck")
    with BayesianGPLVM(Y, 2, 10, seed=0, client=two, chunks=2, timeout=5) as dm:
        victim = dm._blocks.where[1]
        pid = _pids(two)[victim]
        cb = _at(7, lambda p: os.kill(pid, signal.SIGSTOP))
        try:
            with pytest.raises(ClusterTimeout, match=rf"(?s)on block\(s\) \[1\] on {victim} did not finish within 5 s"
                                                     r".*checkpoint of iteration 5 in .*resume"):
                dm.fit(30, checkpoint=folder, checkpoint_every=5, callback=cb, progress=False)
            assert time.monotonic() - cb.done[0] < 30
        finally:
            os.kill(pid, signal.SIGCONT)
        assert read_meta(folder)["iteration"] == 5


def test_the_gathered_predictions_never_hang_on_a_lost_worker(two):
    """After the fit, predict / predictive_variance gather the blocks' sums: a killed worker
    raises WorkerLost naming its block at once, and a stopped one a ClusterTimeout at the
    model's deadline, instead of waiting."""
    from bgplvm.distributed.faults import ClusterTimeout, WorkerLost

    with BayesianGPLVM(_rows(600), 2, 10, seed=0, client=two, chunks=2, timeout=5) as dm:
        dm.fit(3, progress=False)
        X = np.zeros((4, 2))
        assert dm.predictive_variance(X).shape == (4,)
        pid = _pids(two)[dm._blocks.where[1]]
        os.kill(pid, signal.SIGSTOP)
        try:
            t = time.monotonic()
            with pytest.raises(ClusterTimeout, match=r"block\(s\) \[1\]"):
                dm.predictive_variance(X)
            assert time.monotonic() - t < 30
        finally:
            os.kill(pid, signal.SIGCONT)
        _kill(two, dm._blocks.where[0])
        t = time.monotonic()
        for call in (lambda: dm.predictive_variance(X), lambda: dm.predict(X)):
            with pytest.raises(WorkerLost, match=r"block\(s\) \[0\]"):
                call()
        assert time.monotonic() - t < RETURNS_WITHIN


# --- workers that join --------------------------------------------------------------------------
def test_a_worker_that_joins_takes_blocks_at_the_next_checkpoint(tmp_path):
    """One worker holds 4 blocks; a second joins at iteration 6: at the checkpoint of
    iteration 10 two blocks move to it with their optimiser's state, and the fit is the one
    the single worker would have made (the same bound at every iteration)."""
    from bgplvm.distributed import local_cluster

    c = local_cluster(1)
    try:
        Y = _rows(800)
        with BayesianGPLVM(Y, 2, 10, seed=0, client=c, chunks=4) as dm:
            dm.fit(20, checkpoint=str(tmp_path / "alone"), checkpoint_every=5, progress=False)
            alone = np.asarray(dm.fit_info["history"])
        with BayesianGPLVM(Y, 2, 10, seed=0, client=c, chunks=4) as dm:
            first = dm._blocks.where[0]

            def grow(p):
                c.cluster.scale(2)
                c.wait_for_workers(2, timeout=60)
            dm.fit(20, checkpoint=str(tmp_path / "ck"), checkpoint_every=5, callback=_at(6, grow), progress=False)
            info = dm.fit_info
            assert not info["recoveries"] and len(info["rebalances"]) == 1
            reb = info["rebalances"][0]
            assert reb["iteration"] == 10 and len(reb["blocks"]) == 2 and reb["workers"] == [first]
            assert sorted(dm._blocks.where.count(w) for w in set(dm._blocks.where)) == [2, 2]
            np.testing.assert_allclose(info["history"], alone, rtol=1e-12, atol=0)
            assert abs(_in_process_bound(dm, Y) - dm.elbo()) <= 1e-8 * abs(dm.elbo())
    finally:
        close_cluster(c)


# --- one contract for fit -------------------------------------------------------------------------
def test_one_user_callback_runs_in_process_and_on_dask(two, sigint_raises):
    """The same callback(FitProgress) through both fits; returning True stops both after the
    same iteration; Ctrl-C stops both after the iteration with a warning; the same fit_info
    keys."""
    Y = _rows(300)
    for client in (None, two):
        seen = []

        def callback(p: FitProgress):
            seen.append(p)
            return p.iteration == 4
        m = BayesianGPLVM(Y, 2, 10, seed=0, client=client, chunks=2 if client else None)
        try:
            m.fit(20, callback=callback, progress=False)
            assert set(m.fit_info) == set(FIT_INFO_KEYS), (client, sorted(m.fit_info))
            assert m.fit_info["reason"] == "callback" and m.fit_info["stopped"] and m.fit_info["iterations"] == 4
            assert [p.iteration for p in seen] == [1, 2, 3, 4] and all(p.max_iters == 20 for p in seen)
            assert all(p.phase == "init" for p in seen) and seen[-1].n_evals >= 4 and seen[-1].elapsed > 0
            assert np.isclose(seen[-1].bound, m.fit_info["history"][-1])
            with pytest.warns(UserWarning, match="fit interrupted"):
                m.fit(20, callback=_at(3, lambda p: os.kill(os.getpid(), signal.SIGINT)), progress=False)
            assert m.fit_info["reason"] == "interrupted" and m.fit_info["iterations"] == 3
            assert m.fit_info["recoveries"] == [] and m.fit_info["rebalances"] == []
            with pytest.raises(TypeError, match="callback must be a function of a FitProgress"):
                m.fit(5, callback=3)
        finally:
            if client is not None:
                m.close()


# --- several views (DistributedMRD) ----------------------------------------------------------
def test_a_killed_worker_under_a_multi_view_fit_never_hangs_it(two, tmp_path):
    """``MRD`` on Dask, its views' rows from a dask graph: a worker SIGKILLed at iteration 12
    with a checkpoint of iteration 10 on disk; the fit returns within the deadline, its lost
    blocks rebuilt, every view's rows in place (the bound equals the in-process MRD's)."""
    from bgplvm import MRD

    G = _graph_rows(2400, 12, 600)
    views = {"a": G[:, :5], "b": G[:, 5:]}
    cb = _at(12, lambda p: _kill(two, sorted(_pids(two))[1]))
    with MRD(views, latent_dim=3, num_inducing=15, seed=0, client=two) as dm:
        dm.fit(max_iters=25, checkpoint=str(tmp_path / "ck"), callback=cb, progress=False)
        assert cb.done and time.monotonic() - cb.done[0] < RETURNS_WITHIN
        info = dm.fit_info
        assert info["iterations"] == 25 and info["recoveries"], info.get("recoveries")
        assert info["recoveries"][0]["source"] == "checkpoint of iteration 10"
        local = dm.to_model()
        Y = G.compute()
        np.testing.assert_array_equal(local.views["a"].Y, Y[:, :5])
        # to 1e-8, or 4 times what the in-process bound itself moves when its rows come in
        # another order: at this fitted point that is up to 1.7e-8 (5 orders), and the
        # distributed bound's 4 blocks are one more order (seen 1.3e-8)
        tol = max(1e-8, 4 * _permuted_rows_spread(local))
        assert abs(local.elbo() - dm.elbo()) <= tol * abs(dm.elbo())


def _permuted_rows_spread(m, orders: int = 3) -> float:
    """The largest relative change of in-process MRD ``m``'s bound with its rows (outputs
    and q(X) alike) in ``orders`` random orders: the rounding floor of its sums over rows,
    which a fit can leave ill-conditioned enough to reach 1e-8."""
    from mrd_data import rows_in_order

    F0, N = m.elbo(), m.views[m.view_names[0]].shape[0]
    orders = [np.random.default_rng(seed).permutation(N) for seed in range(orders)]
    return max(abs(rows_in_order(m, order).elbo() - F0) / abs(F0) for order in orders)
