# %% [markdown]
# # Single-cell data: AnnData
#
# Single-cell biologists keep their cells x genes matrices in an `AnnData`: the (often
# sparse) matrix in `X` or a layer, per-cell annotations in `obs`, per-cell embeddings in
# `obsm`, anything else in `uns`. `bgplvm.anndata.fit(adata, ...)` fits the Bayesian GP-LVM
# to it and writes back what a PCA or UMAP step would, plus what they cannot give:
#
# - `adata.obsm["X_bgplvm"]`: each cell's latent coordinates, the means of q(x_n);
# - `adata.obsm["X_bgplvm_var"]`: how sure the model is of each cell's place, q(x_n)'s
#   variances;
# - `adata.uns["X_bgplvm"]`: the ARD weights (how many latent dimensions the data use), the
#   noise, the bound and what it was fitted from.
#
# With `time_key=` (a column of `obs`: a per-cell pseudotime) the model is the
# dynamical one, whose latent path is smooth in that time. Sparse matrices are densified a
# block of rows at a time, and with `client=` (a Dask cluster) the blocks are densified on
# the workers, so a large or backed `.h5ad` never lands whole in the driver.
#
# **The data here are synthetic counts**: no public single-cell set is stored with this
# project for offline use. 400 cells of 60 genes follow a branching differentiation path
# (a progenitor state splitting into two fates), with Poisson counts whose rates depend on
# the cells' position, normalised as usual (per-cell totals, `log1p`). `pip install
# bgplvm[anndata]` installs `anndata`; where it is not installed (the offline
# documentation build) the page uses a small container of AnnData's interface instead,
# which is all `bgplvm.anndata` needs.

# %%
import numpy as np
import pandas as pd
import scipy.sparse as sp
from IPython.display import Image, display

from bgplvm import anndata as bad
from bgplvm.docs_utils import reduce_in_tests
from bgplvm.explorer.notebook_figures import ard_bars, latent_scatter

# %% [markdown]
# ## Synthetic counts along a branching path

# %%
rng = np.random.default_rng(0)
n_cells, n_genes = 400, 60
time = rng.uniform(0, 1, n_cells)                      # the true differentiation time
fate = np.where(time < 0.4, 0, rng.integers(1, 3, n_cells))  # 0: progenitor, 1 / 2: the two fates
branch = np.where(fate == 2, -1.0, 1.0) * np.clip(time - 0.4, 0, None)
state = np.c_[time, branch]                            # the cells' true 2-D state
W = rng.normal(0, 2.0, (2, n_genes))
rate = np.exp(state @ W + rng.normal(0, 0.5, n_genes) - 1.0)
counts = sp.csr_matrix(rng.poisson(rate).astype(np.float64))
size = np.asarray(counts.sum(axis=1)).ravel()
logcounts = sp.csr_matrix(np.log1p(counts.multiply(np.median(size) / size[:, None]).toarray()))
print(f"{n_cells} cells x {n_genes} genes, {100 * (counts.toarray() == 0).mean():.0f} % zeros")

obs = pd.DataFrame({"pseudotime": time, "fate": pd.Categorical(np.array(["progenitor", "fate A", "fate B"])[fate])},
                   index=[f"cell{i}" for i in range(n_cells)])


class Cells:
    """AnnData's interface, no more: the offline documentation build has no anndata."""

    def __init__(self, X, obs, layers=None):
        self.X, self.obs, self.layers, self.shape = X, obs, dict(layers or {}), X.shape
        self.obsm, self.uns = {}, {}


def cells(X, obs, layers=None):
    """An AnnData where anndata is installed, else a ``Cells``."""
    try:
        import anndata as ad
    except ImportError:
        return Cells(X, obs, layers)
    return ad.AnnData(X=X, obs=obs, layers=layers)


adata = cells(counts, obs, {"logcounts": logcounts})
print(type(adata).__name__, adata.shape)

# %% [markdown]
# ## Fit
#
# The normalised layer, five latent dimensions (more than the two the data have: the ARD
# weights switch the rest off), 30 inducing inputs.

# %%
m = bad.fit(adata, layer="logcounts", latent_dim=5, num_inducing=30,
            max_iters=reduce_in_tests(1000, test_n=80), progress=False)
info = adata.uns["X_bgplvm"]
print({k: info[k] for k in ("model", "latent_dim", "noise_variance", "bound", "iterations", "layer")})
print("relative ARD weights:", np.round(info["relative_ard_weights"], 3))
display(Image(data=ard_bars(info["ard_weights"], title="ARD weights of the cells' latent space")))

# %% [markdown]
# ## The cells' latent space
#
# The two strongest dimensions, the cells coloured by their (hidden from the model) fate:
# the progenitors, then the two branches. Each cell's `X_bgplvm_var` says how sure its
# place is; cells near the branch point are the least certain.

# %%
X, V = adata.obsm["X_bgplvm"], adata.obsm["X_bgplvm_var"]
top = np.argsort(info["ard_weights"])[::-1][:2]
display(Image(data=latent_scatter(X, labels=fate, label_names=["progenitor", "fate A", "fate B"], dims=top,
                                  variance=V, title="q(x_n) of every cell (means, 2 sd ellipses)")))
near = np.abs(time - 0.4) < 0.05
print(f"mean latent variance (top 2 dims): near the branch point {V[near][:, top].mean():.4f}, "
      f"elsewhere {V[~near][:, top].mean():.4f}")

# %% [markdown]
# ## A time course, and new cells
#
# With `time_key="pseudotime"` the same call fits the dynamical model (its time prior on
# the latent path, a Matern 3/2 in pseudotime; the model's rows are the cells in time order,
# the results are written back in the cells' order). Cells of one sequence need distinct
# times: with a few sampling times shared by many cells, give each replicate its own
# `sequence_key` or use a pseudotime. Cells measured later are placed in
# the fitted space with `bad.transform(m, new_adata)`: q(x*) of each, the model fixed, the
# same `obsm` keys written.

# %%
dyn = bad.fit(adata, layer="logcounts", latent_dim=3, num_inducing=20, time_key="pseudotime",
              key="X_bgplvm_time", max_iters=reduce_in_tests(300, test_n=40), progress=False)
print(type(dyn).__name__, adata.uns["X_bgplvm_time"]["time_key"], adata.obsm["X_bgplvm_time"].shape)

new = cells(logcounts[:20], obs.iloc[:20])  # here: the first 20 cells again, to compare
bad.transform(m, new)
print("new cells placed:", new.obsm["X_bgplvm"].shape, "| the same cells as fitted, largest difference:",
      float(np.abs(new.obsm["X_bgplvm"][:, top] - X[:20][:, top]).max().round(3)))

# %% [markdown]
# ## Large data
#
# `bad.fit(adata, client=client)` hands the rows to a Dask cluster (`bgplvm.distributed`,
# the [many rows page](many_rows.html)): the matrix goes block by block (`block_rows=`, 10,000 rows by
# default), each densified on the worker that holds it; `read_h5ad(path, backed="r")` keeps
# the matrix on disk until then. The results are written to the same keys.
