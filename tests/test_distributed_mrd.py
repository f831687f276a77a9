"""MRD on Dask (``bgplvm.distributed.DistributedMRD``): each block of rows holds its rows of
every view and its q(X); the bound, gradient and fit against the in-process ``MRD``."""

from __future__ import annotations

import numpy as np
import pytest

from bgplvm import MRD
from mrd_data import three_views

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
    order = np.arange(N)[::-1]
    m2 = MRD({n: m.views[n].Y[order] for n in m.view_names}, Q, m.num_inducing,
             [m.kernels[n] for n in m.view_names], inducing=m.inducing)
    v = dict(m._values())
    v.update({n: v[n][order] for n in m.prior.row_blocks})
    m2._set_x(m2._layout.pack(v))
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
