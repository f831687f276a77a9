"""``bgplvm.anndata``: the model on an AnnData (cells x genes; sparse, backed, on Dask).

The adapter needs only AnnData's interface (X, layers, obs, obsm, uns, shape), so most of
these tests run on a small container of that interface (``Cells``) and need no anndata;
the last ones use a real ``anndata.AnnData`` (and a backed .h5ad file) where anndata is
installed (``pip install bgplvm[anndata]``; it is not in the offline index CI installs from)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from bgplvm import BayesianGPLVM, DynamicalGPLVM
from bgplvm import anndata as bad


class Cells:
    """What ``bgplvm.anndata`` reads and writes of an AnnData."""

    def __init__(self, X, obs=None, layers=None):
        self.X = X
        self.shape = X.shape
        self.obs = pd.DataFrame(index=[f"cell{i}" for i in range(X.shape[0])]) if obs is None else obs
        self.layers = dict(layers or {})
        self.obsm, self.uns = {}, {}


def counts(N=60, D=12, seed=0):
    """Poisson counts of D genes driven by a 1-D latent time course (a sparse CSR matrix
    with many zeros), log1p-normalised, and the cells' times."""
    rng = np.random.default_rng(seed)
    t = np.sort(rng.uniform(0, 1, N))
    rate = np.exp(2.0 * np.sin(2 * np.pi * t[:, None] + rng.uniform(0, 2 * np.pi, D)) - 0.5)
    return sp.csr_matrix(np.log1p(rng.poisson(rate)).astype(np.float64)), t


def test_sparse_rows_are_densified_one_block_at_a_time(monkeypatch):
    X, _ = counts(N=25)
    seen = []
    block = bad.dense_block
    monkeypatch.setattr(bad, "dense_block", lambda X, a, b: seen.append(b - a) or block(X, a, b))
    np.testing.assert_array_equal(bad.dense_rows(X, block_rows=10), X.toarray())
    assert seen == [10, 10, 5]
    assert 0.3 < (X.toarray() == 0).mean() < 0.9  # counts: many zeros


def test_fit_writes_the_latent_space_and_ard_weights_and_equals_the_model_on_dense_rows():
    X, _ = counts()
    cells = Cells(X)
    m = bad.fit(cells, latent_dim=3, num_inducing=10, max_iters=40, block_rows=16, progress=False)
    ref = BayesianGPLVM(X.toarray(), latent_dim=3, num_inducing=10, seed=0).fit(max_iters=40, progress=False)
    assert m.elbo() == ref.elbo()
    np.testing.assert_array_equal(cells.obsm["X_bgplvm"], ref.latent_mean)
    np.testing.assert_array_equal(cells.obsm["X_bgplvm_var"], ref.latent_variance)
    u = cells.uns["X_bgplvm"]
    assert u["model"] == "BayesianGPLVM" and u["latent_dim"] == 3 and u["iterations"] > 0
    np.testing.assert_array_equal(u["ard_weights"], ref.ard_weights)
    assert u["relative_ard_weights"].max() == 1.0 and u["bound"] == ref.elbo()
    # new cells placed in the fitted latent space
    new = Cells(counts(N=15, seed=1)[0])
    bad.transform(m, new, block_rows=4)
    mu, S = ref.infer_latent(new.X.toarray())
    np.testing.assert_allclose(new.obsm["X_bgplvm"], mu, atol=1e-8)
    assert new.obsm["X_bgplvm_var"].shape == (15, 3) and np.all(new.obsm["X_bgplvm_var"] > 0)


def test_a_time_course_in_obs_gives_the_dynamical_model_and_layers_are_read():
    X, t = counts(N=40)
    obs = pd.DataFrame({"pseudotime": t, "donor": np.where(np.arange(40) < 20, "d1", "d2")})
    cells = Cells(sp.csr_matrix(X.shape), obs=obs, layers={"logcounts": X})
    m = bad.fit(cells, layer="logcounts", latent_dim=2, num_inducing=8, time_key="pseudotime",
                sequence_key="donor", max_iters=20, key="X_gp", progress=False)
    assert isinstance(m, DynamicalGPLVM) and m.sequences.tolist() == [0] * 20 + [1] * 20
    assert cells.obsm["X_gp"].shape == (40, 2)
    assert cells.uns["X_gp"]["layer"] == "logcounts" and cells.uns["X_gp"]["time_key"] == "pseudotime"


def test_bad_requests_say_what_to_do():
    X, t = counts(N=20)
    cells = Cells(X, obs=pd.DataFrame({"t": t}))
    with pytest.raises(KeyError, match=r"no layer 'raw'; its layers are \[\]"):
        bad.fit(cells, layer="raw")
    with pytest.raises(KeyError, match=r"no column 'time'; its columns are \['t'\]"):
        bad.fit(cells, time_key="time")
    with pytest.raises(ValueError, match="pass time_key as well"):
        bad.fit(cells, sequence_key="t", max_iters=1)
    cells.obs["t"] = np.where(np.arange(20) == 3, np.nan, t)
    with pytest.raises(ValueError, match="a time is needed for every cell"):
        bad.fit(cells, time_key="t")
    m = BayesianGPLVM(X.toarray(), latent_dim=2, num_inducing=5)
    with pytest.raises(ValueError, match="has 5 genes .* fitted on 12"):
        bad.transform(m, Cells(X[:, :5]))


@pytest.mark.parametrize("backing", ["sparse", "dask"])
def test_on_dask_the_blocks_are_densified_on_the_workers_and_the_model_is_the_same(client, backing):
    """With ``client=`` the rows reach the workers as blocks densified there, from a SciPy
    sparse matrix or from a dask array of sparse chunks (as anndata reads large ``.h5ad``
    lazily: rechunked by rows); the fit is that of the distributed model of the dense rows
    in the same blocks (bound to 1e-10 relative after the same iterations)."""
    import dask.array as da

    X, _ = counts(N=48)
    M = X if backing == "sparse" else da.from_array(X, chunks=(10, 12), asarray=False)  # chunks stay sparse
    Y = bad.dask_rows(M, block_rows=16)
    assert Y.chunks[0] == (16, 16, 16)
    np.testing.assert_array_equal(Y.compute(), X.toarray())
    np.testing.assert_array_equal(bad.dense_rows(M, block_rows=20), X.toarray())
    cells = Cells(M)
    with bad.fit(cells, latent_dim=2, num_inducing=6, max_iters=15, client=client, block_rows=16,
                 progress=False) as dm:
        dense = da.from_array(X.toarray(), chunks=(16, X.shape[1]))
        with BayesianGPLVM(dense, latent_dim=2, num_inducing=6, seed=0, client=client) as ref:
            ref.fit(max_iters=15, progress=False)
            assert abs(dm.elbo() - ref.elbo()) <= 1e-10 * abs(ref.elbo())
            np.testing.assert_allclose(cells.obsm["X_bgplvm"], ref.latent_mean, atol=1e-8)


# --- a real AnnData -------------------------------------------------------------------------------
def test_a_real_anndata_in_memory_and_backed(tmp_path):
    ad = pytest.importorskip("anndata", reason="needs anndata (pip install bgplvm[anndata]); it is not in the "
                                               "offline package index CI installs from")
    X, t = counts(N=50)
    adata = ad.AnnData(X=X, obs=pd.DataFrame({"pseudotime": t}, index=[f"c{i}" for i in range(50)]))
    m = bad.fit(adata, latent_dim=2, num_inducing=8, max_iters=20, progress=False)
    assert adata.obsm["X_bgplvm"].shape == (50, 2) and adata.uns["X_bgplvm"]["model"] == "BayesianGPLVM"
    path = tmp_path / "cells.h5ad"
    adata.write_h5ad(path)
    backed = ad.read_h5ad(path, backed="r")
    assert backed.isbacked
    np.testing.assert_array_equal(bad.dense_rows(backed.X, block_rows=7), X.toarray())
    back = ad.read_h5ad(path)
    np.testing.assert_array_equal(back.obsm["X_bgplvm"], m.latent_mean)  # the results survive .h5ad


def test_cells_out_of_time_order_are_fitted_in_it_and_written_back_in_theirs():
    """The dynamical model's rows are the cells in time order within each sequence: a
    shuffled AnnData gives the same latent coordinates, in its own order; cells of one
    sequence sharing a time are refused with what to do."""
    X, t = counts(N=40)
    seq = np.where(np.arange(40) % 2 == 0, "a", "b")
    kw = dict(latent_dim=2, num_inducing=8, time_key="t", sequence_key="s", max_iters=15, progress=False)
    ordered = Cells(X, obs=pd.DataFrame({"t": t, "s": seq}))
    bad.fit(ordered, **kw)
    perm = np.random.default_rng(0).permutation(40)
    shuffled = Cells(X[perm], obs=pd.DataFrame({"t": t[perm], "s": seq[perm]}))
    bad.fit(shuffled, **kw)
    np.testing.assert_allclose(shuffled.obsm["X_bgplvm"], ordered.obsm["X_bgplvm"][perm], atol=1e-8)
    np.testing.assert_allclose(shuffled.obsm["X_bgplvm_var"], ordered.obsm["X_bgplvm_var"][perm], atol=1e-8)
    tied = Cells(X, obs=pd.DataFrame({"t": np.round(t, 1), "s": seq}))
    with pytest.raises(ValueError, match="share a time .* give each replicate its own sequence_key"):
        bad.fit(tied, **kw)
