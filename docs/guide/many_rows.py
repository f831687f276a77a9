# %% [markdown]
# # Many rows, on Dask
#
# The GP-LVM's bound is a sum over rows: the statistics psi0, Psi1^T Y (M x D) and Psi2
# (M x M), and the KL of q(X), each add up over the rows. So the rows, and their q(x_n),
# can live on the workers of a Dask cluster: each block of rows sends its sums, the driver
# runs the bound's algebra on them (the same code as in process) and sends back the
# M x M and M x D quantities the rows' gradients need. Nothing of size N crosses the
# network or sits on the driver. The optimiser is a vector-free L-BFGS that takes the
# in-process fit's steps, so the distributed model equals the in-process one.
#
# This page runs a small cluster inside this process to show the calls; on a real
# cluster only the `client` changes. It needs `pip install bgplvm[distributed]`.

# %%
import shutil
import tempfile

import dask.array as da
import numpy as np
from dask.distributed import Client, LocalCluster

from bgplvm import BayesianGPLVM
from bgplvm.docs_utils import reduce_in_tests
from bgplvm.explorer.notebook_figures import latent_scatter

# %% [markdown]
# ## A cluster
#
# Two single-threaded workers. `processes=False` runs them as threads of this process,
# which keeps the page runnable as a plain script. For real work use worker processes:
# `client="local"` (bgplvm's own `LocalCluster`, one process per core), a `Client` of
# your own, or a scheduler's address such as `"tcp://host:8786"`. In a *script*, worker
# processes need the model built under `if __name__ == "__main__":` (they import the
# script again); in a notebook they do not.

# %%
cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None)
client = Client(cluster)
print(client)

# %% [markdown]
# ## Rows as a Dask array
#
# 20,000 rows (5,000 when the docs are built quickly) of 20 outputs, smooth functions of a 2-D latent ring with noise. Any Dask
# array chunked **by rows** works (from Zarr, HDF5, NumPy, ...); each row chunk becomes a
# block that lives on one worker. `bgplvm.distributed.open_rows("rows.npy")` reads a file
# on the workers instead, so the driver never holds the rows at all.

# %%
rng = np.random.default_rng(0)
N, D = reduce_in_tests(20_000, test_n=5_000), 20
angle = rng.uniform(0, 2 * np.pi, N)
X_true = np.c_[np.cos(angle), np.sin(angle)] * (1 + 0.3 * rng.standard_normal((N, 1)))
Y = np.tanh(X_true @ rng.standard_normal((2, D))) + 0.05 * rng.standard_normal((N, D))
Y_dask = da.from_array(Y, chunks=(N // 4, D))   # 4 blocks of rows
Y_dask

# %% [markdown]
# ## Fit on the cluster
#
# The same class and the same calls as in process; `client=` makes it a
# `DistributedGPLVM`. `checkpoint=` writes the fit's state every `checkpoint_every`
# iterations (first the workers their blocks, then the driver the rest), so that a fit
# whose driver died can `resume`, and a fit that lost a worker rebuilds its blocks from
# the last checkpoint and goes on by itself.

# %%
ckpt = tempfile.mkdtemp(prefix="bgplvm-ckpt-")
m = BayesianGPLVM(Y_dask, latent_dim=5, num_inducing=50, seed=0, client=client)
print(type(m).__name__)
m.fit(reduce_in_tests(300, test_n=20), checkpoint=ckpt, checkpoint_every=reduce_in_tests(50, test_n=10),
      progress=False)
info = m.fit_info
print(f"{info['reason']} after {info['iterations']} iterations in {info['seconds']:.0f} s; "
      f"bound {m.elbo():.1f}; recoveries {len(info['recoveries'])}")
print("ARD weights:", np.round(m.ard_weights, 3))

# %% [markdown]
# ## What comes back
#
# `latent_mean` and `latent_variance` are Dask arrays (their blocks stay on the workers
# until you `.compute()` them). The data were made from a 2-D latent ring: the two
# dimensions with the largest ARD weights should show it, and a linear map from q(X)'s
# means should recover the true latent coordinates (R^2 near 1 after a full fit).

# %%
mu = m.latent_mean.compute()
A, *_ = np.linalg.lstsq(np.c_[mu, np.ones(N)], X_true, rcond=None)
resid = X_true - np.c_[mu, np.ones(N)] @ A
print(f"R^2 of the true latent points from q(X): {1 - resid.var() / X_true.var():.3f}")
sector = (angle // (np.pi / 3)).astype(int)
latent_scatter(mu, sector, [f"{60 * k}-{60 * (k + 1)} deg" for k in range(6)], ard=m.ard_weights,
               title="q(X) means, coloured by the true angle")

# %% [markdown]
# **The same numbers as in process.** `to_model()` gathers the model into an ordinary
# `BayesianGPLVM` (q(X) and all); its bound at the same parameters is the distributed
# bound up to rounding:

# %%
local = m.to_model()
print(f"distributed {m.elbo():.6f}\nin process   {local.elbo():.6f}")

# %% [markdown]
# **New rows** given as a Dask array are inferred on the workers, block by block
# (`infer_latent`, `reconstruct`, `log_density` as in process; NaN = missing):

# %%
Y_new = Y[:200].copy()
Y_new[:, :10] = np.nan
mu_s, S_s = m.infer_latent(da.from_array(Y_new, chunks=(100, D)))
mean, var = m.reconstruct(Y_new)
print(type(mu_s).__name__, mu_s.shape, "| reconstruct RMSE of the hidden half:",
      round(float(np.sqrt(np.mean((np.asarray(mean)[:, :10] - Y[:200, :10]) ** 2))), 4))

# %% [markdown]
# **Resume** from the last checkpoint: the model as it was at that iteration, ready to fit
# on (`Y=` is needed here because the rows came from an array, not from a file):

# %%
resumed = BayesianGPLVM.resume(ckpt, Y=Y_dask, client=client)
print(f"resumed at the checkpoint: bound {resumed.elbo():.1f}")

# %% [markdown]
# ## Shut down
#
# Close the client, then the cluster (a `client="local"` model closes the cluster it
# started itself when it is closed or collected).

# %%
client.close()
cluster.close()
shutil.rmtree(ckpt, ignore_errors=True)

# %% [markdown]
# ## Notes
#
# - `m.save("model.npz")` writes the same model file as in process, with q(X) gathered;
#   rows opened with `open_rows` are referenced (path, shape, hash of sampled rows), not
#   copied, and `BayesianGPLVM.load("model.npz", client=...)` opens it on a cluster again.
# - `DynamicalGPLVM(Y, t, sequences=ids, client=...)` keeps whole sequences per block;
#   `MRD(views, client=...)` every view's rows of a block together.
# - Calibrate in process (`m.calibration = m.to_model().calibrate()`); predictions on Dask
#   then use it.
# - The command line: `bgplvm fit --data rows.npy --scheduler local --checkpoint ckpt/`,
#   `bgplvm fit --resume ckpt/ --scheduler tcp://host:8786`.
