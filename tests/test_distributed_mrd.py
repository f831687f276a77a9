"""MRD on Dask (``bgplvm.distributed.DistributedMRD``): each block of rows holds its rows of
every view and its q(X); the bound, gradient and fit against the in-process ``MRD``."""

from __future__ import annotations

import numpy as np
import pytest

from bgplvm import MRD
from mrd_data import rows_in_order, three_views

distributed = pytest.importorskip("distributed", reason="needs dask[distributed] (the test extra installs it)")
da = pytest.importorskip("dask.array")

# ``client``: a LocalCluster of 2 single-threaded worker processes (conftest.py, one per session)

KERNELS = ["rbf", "linear", "rbf+bias"]


def _with_holes(N=60):
    """The toy's three views (8, 5, 12 columns), view b missing on its first 6 rows, view c
    missing 15% of its entries."""
    views = three_views(N=N)
    views["b"] = views["b"].copy()
    views["b"][:6] = np.nan
    views["c"] = views["c"].copy()
    views["c"][np.random.default_rng(2).random(views["c"].shape) < 0.15] = np.nan
    return views


def _full_gradient(dm, m):
    """(F, gradient) of the distributed model in the in-process model's layout."""
    F, gg, rows = dm._gradient()
    Q, names, sl = m.latent_dim, m.prior.row_blocks, m._layout.slices
    g = np.empty(m._layout.size)
    for j, n in enumerate(names):
        g[sl[n]] = np.concatenate([r.reshape(len(names), -1, Q)[j] for r in rows]).ravel()
    for b in dm._glayout.blocks:
        g[sl[b.name]] = gg[dm._glayout.slices[b.name]]
    return F, g


def _reorder_spread(m) -> tuple[float, float]:
    """How far the in-process bound and gradient move (relative: F; the gradient's largest
    change over its largest entry) with the rows in reverse order: the rounding floor of
    sums over rows in another order, which is what distribution does
    (``test_distributed._reorder_spread``)."""
    F0, g0 = m._bound(m._x)
    N, Q, sl = m.views[m.view_names[0]].shape[0], m.latent_dim, m._layout.slices
    m2 = rows_in_order(m, np.arange(N)[::-1])
    F2, g2 = m2._bound(m2._x)
    for n in m.prior.row_blocks:
        g2[sl[n]] = g2[sl[n]].reshape(N, Q)[::-1].ravel()
    return abs(F2 - F0) / abs(F0), float(np.max(np.abs(g2 - g0)) / np.max(np.abs(g0)))


def _check_equal(m, client, chunks_list, floor=(0.0, 0.0)) -> list:
    """The distributed bound and gradient equal the in-process ones to 1e-9 relative (the
    gradient: its largest difference over its largest entry), or to 4 times the in-process
    bound's own rounding under a reordering of its rows where that is larger (``floor``);
    returns the differences seen."""
    from bgplvm.distributed import DistributedMRD

    F0, g0 = m._bound(m._x)
    seen = []
    for chunks in chunks_list:
        with DistributedMRD.from_model(m, client=client, chunks=chunks) as dm:
            assert len(dm._blocks) == chunks
            F, g = _full_gradient(dm, m)
            dF, dg = abs(F - F0) / abs(F0), float(np.max(np.abs(g - g0)) / np.max(np.abs(g0)))
            seen.append((chunks, dF, dg))
            assert dF <= max(1e-9, 4 * floor[0]), (chunks, F, F0)
            assert dg <= max(1e-9, 4 * floor[1]), (chunks, dg)
            assert abs(dm.elbo() - F0) <= max(1e-9, 4 * floor[0]) * abs(F0)
    return seen


@pytest.mark.parametrize("inducing", ["per_view", "shared"])
def test_bound_and_gradient_equal_in_process_with_missing_entries_and_views(client, inducing):
    """Three views, one with rows missing it wholly and one with holes, each its own kernel:
    a point near the start (the rounding floor ~1e-14) to 1e-9 in 1 and 3 blocks."""
    m = MRD(_with_holes(), 3, 8, kernel=KERNELS, seed=0, inducing=inducing)
    m._set_x(m._x + 0.05 * np.random.default_rng(3).standard_normal(m._x.size))
    seen = _check_equal(m, client, (1, 3))
    assert max(s[1] for s in seen) < 1e-12 and max(s[2] for s in seen) < 1e-9


def test_bound_and_gradient_equal_in_process_after_a_fit(client):
    """After 20 iterations the in-process bound itself moves by 1e-10 (F) and 1e-8 (the
    linear view's kernel gradient) when its rows are reversed: to 1e-9 or 4 times that."""
    m = MRD(_with_holes(), 3, 8, kernel=KERNELS, seed=0, inducing="shared")
    m.fit(20, progress=False)
    _check_equal(m, client, (2,), floor=_reorder_spread(m))


@pytest.mark.parametrize("inducing", ["per_view", "shared"])
def test_a_short_fit_takes_the_in_process_fits_steps(client, inducing):
    """From the same start, 10 iterations (2 with the views' noise held) in 3 blocks end at
    the in-process fit's parameters (seen: 4e-14 apart)."""
    from bgplvm.distributed import DistributedMRD

    m = MRD(three_views(N=60), 3, 8, seed=0, inducing=inducing)
    with DistributedMRD.from_model(m, client=client, chunks=3) as dm:
        m.fit(10, progress=False)
        dm.fit(10, progress=False)
        h0, h1 = np.asarray(m.fit_info["history"]), np.asarray(dm.fit_info["history"])
        np.testing.assert_allclose(h1, h0, rtol=1e-10)
        assert dm.fit_info["held_iterations"] == m.fit_info["held_iterations"] == 2
        back = dm.to_model()
        np.testing.assert_allclose(back._x, m._x, rtol=0, atol=1e-9 * np.abs(m._x).max())
        assert abs(dm.elbo() - m.elbo()) <= 1e-9 * abs(m.elbo())
        for n, w in m.ard_weights.items():
            np.testing.assert_allclose(dm.ard_weights[n], w, rtol=1e-8)
        assert dm.segmentation().on == m.segmentation().on
        np.testing.assert_allclose(dm.noise_variance["c"], m.noise_variance["c"], rtol=1e-9)


def test_mrd_with_client_on_dask_views_starts_from_the_scaled_pca(client):
    """``MRD(views, client=...)`` with views as dask arrays (and one NumPy array): a
    ``DistributedMRD`` whose blocks are the first dask view's row chunks; its start is the
    in-process scaled PCA start (up to each column's sign), its kernels and noises too."""
    from bgplvm.distributed import DistributedMRD

    views = three_views(N=90)
    m = MRD(views, 3, 8, seed=0)
    lazy = {"a": da.from_array(views["a"], chunks=(40, -1)), "b": da.from_array(views["b"], chunks=(30, -1)),
            "c": views["c"]}
    with MRD(lazy, 3, 8, seed=0, client=client) as dm:
        assert isinstance(dm, DistributedMRD) and dm.block_rows == [40, 40, 10]
        mu0, mu1 = m.latent_mean, dm.latent_mean.compute()
        sign = np.sign(np.sum(mu0 * mu1, 0))
        np.testing.assert_allclose(mu1 * sign, mu0, atol=1e-8)
        for n in m.view_names:
            np.testing.assert_allclose(dm.noise_variance[n], m.noise_variance[n], rtol=1e-12)
            np.testing.assert_allclose(dm.ard_weights[n], m.ard_weights[n], rtol=1e-8)
        assert np.isfinite(dm.elbo())


def test_save_and_load_round_trip(client, tmp_path):
    """``save`` writes an MRD model file (the views in it) that ``bgplvm.io.load_model`` /
    ``BayesianGPLVM.load`` open in process and ``MRD.load(path, client=...)`` on Dask again,
    at the same parameters."""
    from bgplvm import BayesianGPLVM
    from bgplvm.distributed import DistributedMRD
    from bgplvm.io import load_model

    m = MRD(_with_holes(), 3, 8, kernel=KERNELS, seed=0)
    m._set_x(m._x + 0.05 * np.random.default_rng(4).standard_normal(m._x.size))
    m.freeze("c.noise_variance")
    path = tmp_path / "mrd.npz"
    with DistributedMRD.from_model(m, client=client, chunks=2) as dm:
        F = dm.elbo()
        dm.metadata["note"] = "round trip"
        dm.save(path)
        assert dm.frozen == {"c.noise_variance"}
    back = load_model(path)
    assert type(BayesianGPLVM.load(path)) is MRD
    assert type(back) is MRD and back.view_names == m.view_names and back.metadata["note"] == "round trip"
    np.testing.assert_array_equal(back._x, m._x)
    for n in m.view_names:
        np.testing.assert_array_equal(back.views[n].Y, m.views[n].Y)
    assert "c.noise_variance" in back._layout.frozen
    assert abs(back.elbo() - F) <= 1e-9 * abs(F)
    with MRD.load(path, client=client, chunks=3) as dm2:
        assert isinstance(dm2, DistributedMRD) and len(dm2._blocks) == 3
        assert abs(dm2.elbo() - F) <= 1e-9 * abs(F)


def test_what_a_distributed_mrd_refuses(client):
    from bgplvm import DynamicalMRD
    from bgplvm.distributed import DistributedMRD

    views = three_views(N=40)
    views["a"], views["b"], views["c"] = views["a"].copy(), views["b"].copy(), views["c"].copy()
    for v in views.values():
        v[7] = np.nan
    with pytest.raises(ValueError, match=r"1 row\(s\) of Y have nothing observed \(e\.g\. row 7"):
        MRD(views, 2, 5, client=client)
    views = three_views(N=40)
    views["b"] = views["b"].copy()
    views["b"][1:, 3] = np.nan
    with pytest.raises(ValueError, match=r"column\(s\) of view 'b' are observed on fewer than 2 rows \(columns \[3\]"):
        MRD(views, 2, 5, client=client)
    with pytest.raises(NotImplementedError, match="DynamicalMRD does not run on Dask"):
        DynamicalMRD(three_views(N=40), np.arange(40.0), 2, 5, client=client)
    with pytest.raises(NotImplementedError, match="only an MRD with the static prior"):
        DistributedMRD.from_model(DynamicalMRD(three_views(N=40), np.arange(40.0), 2, 5), client=client)
    with MRD(three_views(N=40), 2, 5, client=client) as dm:  # f's variance is each view's, as in process
        with pytest.raises(TypeError, match=r"each view's: dm.view\(name\).predictive_variance"):
            dm.predictive_variance(np.zeros((3, 2)))
        with pytest.raises(KeyError, match="'mu' is not a parameter this model on Dask can hold"):
            dm.freeze("mu")


# --- checkpoints: an interrupted fit resumes ------------------------------------------------------
def test_an_interrupted_fit_resumes_and_ends_where_one_that_was_not_interrupted_ends(client, tmp_path):
    """A fit stopped at iteration 7 (its callback) leaves the checkpoint of iteration 5;
    ``resume`` (with the same views, dealt in the checkpoint's blocks) continues it and ends
    where a fit of 5 iterations and then 10 that nothing interrupted ends (each fit's L-BFGS
    memory starts empty, as a resumed one's does): seen 0 apart. The in-process MRD's
    5 + 10 iterations: 2.4e-8 of the largest parameter apart (the sums' order over the rows,
    1e-9 after the first 5 iterations, in which the bound rises from -3e4 to -3e3)."""
    from bgplvm.distributed import DistributedGPLVM, DistributedMRD
    from bgplvm.distributed.checkpoint import read_meta

    views = _with_holes()
    m = MRD(views, 3, 8, kernel=KERNELS, seed=0)
    folder = str(tmp_path / "ck")
    with DistributedMRD.from_model(m, client=client, chunks=3) as dm:
        dm.fit(20, init_iters=2, checkpoint=folder, checkpoint_every=5, callback=lambda p: p.iteration == 7,
               progress=False)
        assert dm.fit_info["stopped"] and dm.iterations == 7
        at5 = dm.fit_info["history"][4]
    meta = read_meta(folder)
    assert meta["iteration"] == 5 and meta["model"] == "mrd" and meta["views"] == ["a", "b", "c"]
    with pytest.raises(ValueError, match=r"Pass the same views: DistributedMRD.resume\('.*ck', views=\.\.\."):
        DistributedMRD.resume(folder, client=client)
    with DistributedGPLVM.resume(folder, Y=views, client=client) as dm:  # any distributed class resumes it
        assert isinstance(dm, DistributedMRD) and dm.iterations == 5 and dm.block_rows == [20, 20, 20]
        assert dm.elbo() == at5
        dm.fit(10, init_iters=0, checkpoint=folder, checkpoint_every=5, progress=False)
        assert dm.iterations == 15 and read_meta(folder)["iteration"] == 15
        resumed, h1 = dm.to_model()._x, dm.fit_info["history"]
    with DistributedMRD.from_model(m, client=client, chunks=3) as dm:  # not interrupted
        dm.fit(5, init_iters=2, progress=False)
        dm.fit(10, init_iters=0, progress=False)
        x, h0 = dm.to_model()._x, dm.fit_info["history"]
    np.testing.assert_allclose(resumed, x, rtol=0, atol=1e-12 * np.abs(x).max())
    np.testing.assert_allclose(h1, h0, rtol=1e-13)
    m.fit(5, init_iters=2, progress=False)
    m.fit(10, init_iters=0, progress=False)
    np.testing.assert_allclose(resumed, m._x, rtol=0, atol=1e-7 * np.abs(m._x).max())
    views["a"] = views["a"] + 1.0
    with pytest.raises(ValueError, match="column means differ"):
        DistributedMRD.resume(folder, views=views, client=client)


def test_a_checkpoint_of_views_opened_from_files_resumes_by_itself(client, tmp_path):
    """Views opened with ``open_rows`` are named in the checkpoint: ``resume(folder)`` reopens them."""
    from bgplvm.distributed import DistributedMRD, open_rows

    views = three_views(N=60)
    for n, Y in views.items():
        np.save(tmp_path / f"{n}.npy", Y)
    folder = str(tmp_path / "ck")
    with MRD({n: open_rows(tmp_path / f"{n}.npy", block_rows=30) for n in views}, 2, 6, client=client) as dm:
        dm.fit(4, checkpoint=folder, checkpoint_every=4, progress=False)
        F = dm.fit_info["bound"]
    with DistributedMRD.resume(folder, client=client) as dm:
        assert dm.iterations == 4 and abs(dm.elbo() - F) <= 1e-12 * abs(F)
        assert dm.view_sources == {n: str(tmp_path / f"{n}.npy") for n in views}


# --- predictions on Dask: the views' statistics, no training rows gathered --------------------------
@pytest.fixture(scope="module")
def fitted():
    """An MRD fitted 30 iterations on the views with holes (kernels rbf / linear / rbf+bias)
    and 20 new rows of the same three views."""
    views = _with_holes(N=80)
    train = {n: Y[:60] for n, Y in views.items()}
    test = three_views(N=80)
    m = MRD(train, 3, 8, kernel=["rbf", "linear", "rbf"], seed=0)
    m.fit(30, progress=False)
    return m, {n: Y[60:] for n, Y in test.items()}


def _close(a, b, tol, seen, what):
    d = float(np.max(np.abs(np.asarray(a) - np.asarray(b))) / max(1.0, float(np.max(np.abs(b)))))
    seen[what] = max(seen.get(what, 0.0), d)
    assert d <= tol, (what, d)


def test_predict_and_cross_view_inference_equal_the_in_process_models(client, fitted):
    """``predict`` at points and at Gaussian inputs, ``infer_latent`` / ``log_density`` from one
    view and from two with holes, ``predict_views`` (prior and nearest), ``reconstruct`` of a
    partly observed view and ``infer_candidates``: the in-process MRD's to 1e-8 (relative to
    the values' size; seen: 1e-10 and below), the training rows staying on the workers."""
    from bgplvm.distributed import DistributedMRD

    m, test = fitted
    X = np.random.default_rng(5).standard_normal((7, 3))
    Xv = np.full((7, 3), 0.3)
    seen: dict = {}
    b = test["b"].copy()
    b[::3, 1:] = np.nan
    c = test["c"].copy()
    c[:, :6] = np.nan
    with DistributedMRD.from_model(m, client=client, chunks=3) as dm:
        dm._blocks.call = _no_rows(dm._blocks.call)
        for kw in ({}, {"Xnew_var": Xv}, {"include_noise": False}):
            got, want = dm.predict(X, **kw), m.predict(X, **kw)
            for n in m.view_names:
                for j in range(2):
                    _close(got[n][j], want[n][j], 1e-8, seen, "predict")
        _close(dm.predict(X, view="b")[1], m.predict(X, view="b")[1], 1e-8, seen, "predict")
        for obs in ({"a": test["a"]}, {"b": b, "c": c}):
            f1, f0 = dm.infer_latent(obs, return_fit=True), m.infer_latent(obs, return_fit=True)
            np.testing.assert_array_equal(f1.init_rows, f0.init_rows)
            _close(f1.mu, f0.mu, 1e-8, seen, "infer_latent")
            _close(f1.S, f0.S, 1e-8, seen, "infer_latent")
            _close(dm.log_density(obs), f0.log_density, 1e-8, seen, "log_density")
        for und in ("prior", "nearest"):
            got, want = dm.predict_views({"b": b}, undetermined=und), m.predict_views({"b": b}, undetermined=und)
            assert list(got) == ["a", "c"]
            for n in got:
                for j in range(2):
                    _close(got[n][j], want[n][j], 1e-8, seen, f"predict_views {und}")
        for j, (g, w) in enumerate(zip(dm.reconstruct({"a": test["a"], "c": c}, "c"),
                                       m.reconstruct({"a": test["a"], "c": c}, "c"))):
            _close(g, w, 1e-8, seen, "reconstruct")
        k1, k0 = dm.infer_candidates({"b": b}, n_starts=3), m.infer_candidates({"b": b}, n_starts=3)
        np.testing.assert_array_equal(k1.count, k0.count)
        _close(np.nan_to_num(k1.mu), np.nan_to_num(k0.mu), 1e-8, seen, "infer_candidates")
        with pytest.raises(KeyError, match="no view 'd'"):
            dm.predict(X, view="d")
        with pytest.raises(KeyError, match="no view 'd'"):
            dm.view("d")
        with pytest.raises(ValueError, match="unknown view"):
            dm.infer_latent({"d": test["a"]})
    print("max relative differences:", {k: f"{v:.1e}" for k, v in seen.items()})


def _no_rows(call):
    """``Blocks.call`` refusing the calls that gather rows or q(X) of every row."""
    def guarded(method, *args, **kw):
        assert method not in ("rows", "latent", "get_x"), method
        return call(method, *args, **kw)
    return guarded


def test_cli_fits_views_on_dask_and_resumes_from_the_checkpoint(client, tmp_path, capsys):
    """``bgplvm fit --view NAME=FILE ... --scheduler ADDRESS --checkpoint DIR`` fits an MRD whose
    workers read the views' files; ``bgplvm fit --resume DIR`` goes on from its checkpoint and
    ``--out`` writes the MRD model file."""
    from bgplvm.cli import main
    from bgplvm.distributed.checkpoint import read_meta

    views = three_views(N=60)
    for n, Y in views.items():
        np.save(tmp_path / f"{n}.npy", Y)
    folder, addr = str(tmp_path / "ck"), client.scheduler.address
    spec = [a for n in views for a in ("--view", f"{n}={tmp_path / f'{n}.npy'}")]
    assert main(["fit", *spec, "--scheduler", addr, "--checkpoint", folder, "-q", "2", "-m", "6", "--iters", "3",
                 "--quiet"]) == 0
    assert read_meta(folder)["iteration"] == 3 and "noise variances a " in capsys.readouterr().out
    assert main(["fit", "--resume", folder, "--scheduler", addr, "--iters", "2", "--quiet",
                 "--out", str(tmp_path / "m.npz")]) == 0
    out = capsys.readouterr().out
    assert "after 5 iterations" in out and read_meta(folder)["iteration"] == 5
    back = MRD.load(tmp_path / "m.npz")
    bound = float(out.split("bound ")[1].split()[0])
    assert back.view_names == ["a", "b", "c"] and abs(back.elbo() - bound) <= 1e-5 * abs(bound)


def test_long_widths_start_as_in_process(client):
    """``widths="long"`` (nearly linear starting kernels) is the in-process start on Dask too."""
    from bgplvm import MRD

    views = three_views(N=40)
    local = MRD(views, latent_dim=3, num_inducing=8, seed=0, widths="long")
    with MRD(views, latent_dim=3, num_inducing=8, seed=0, widths="long", client=client, chunks=20) as dm:
        assert dm.widths == "long"
        for n in local.view_names:
            np.testing.assert_allclose(dm.ard_weights[n], local.ard_weights[n], rtol=1e-8)
        assert dm.to_model().widths == "long"


def test_a_calibration_made_in_process_is_used_on_dask(client, tmp_path):
    """One contract in process and on Dask: ``DistributedMRD.calibrate`` says to calibrate
    the in-process model; the calibration it makes is taken by the distributed model (from
    ``from_model`` or assigned), its cross-view variances then equal the in-process model's
    calibrated ones, ``calibrated=False`` gives the uncalibrated ones, ``to_model`` and
    ``save`` keep it, and a calibration of other views is refused."""
    from bgplvm.distributed import DistributedMRD
    from bgplvm.io import load_model

    views = three_views(N=90, seed=3)
    train = {n: Y[:70] for n, Y in views.items()}
    test = {n: Y[70:] for n, Y in views.items()}
    m = MRD(train, 3, 8, seed=0).fit(40, progress=False)
    cal = m.calibrate(rows=70)
    obs = {"a": test["a"], "b": test["b"]}
    want = m.reconstruct(obs, target="c")
    want0 = m.reconstruct(obs, target="c", calibrated=False)
    assert not np.allclose(want[1], want0[1])
    with DistributedMRD.from_model(m, client=client, chunks=3) as dm:
        assert dm.calibration is cal
        got = dm.reconstruct(obs, target="c")
        np.testing.assert_allclose(got[1], want[1], rtol=1e-8)
        np.testing.assert_allclose(dm.reconstruct(obs, target="c", calibrated=False)[1], want0[1], rtol=1e-8)
        with pytest.raises(NotImplementedError, match=r"dm.calibration = m.calibrate"):
            dm.calibrate()
        assert dm.to_model().calibration is cal
        dm.save(tmp_path / "m.npz")
        dm.calibration = None
        np.testing.assert_allclose(dm.reconstruct(obs, target="c")[1], want0[1], rtol=1e-8)
        dm.calibration = cal
        other = MRD({n: Y[:69] for n, Y in train.items()}, 3, 8, seed=0).calibrate(rows=69)
        with pytest.raises(ValueError, match="other views than this model's"):
            dm.calibration = other
    np.testing.assert_allclose(load_model(tmp_path / "m.npz").reconstruct(obs, target="c")[1], want[1], rtol=1e-8)


def test_a_view_of_a_model_on_dask_is_the_in_process_views(client, fitted):
    """``view(name)``: the single-view model at the shared q(X), as in process."""
    from bgplvm.distributed import DistributedMRD

    m, _ = fitted
    X = np.random.default_rng(1).standard_normal((5, 3))
    with DistributedMRD.from_model(m, client=client, chunks=3) as dm:
        for n in m.view_names:
            for g, w in zip(dm.view(n).predict(X), m.view(n).predict(X)):
                np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)
