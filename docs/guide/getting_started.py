# %% [markdown]
# # Getting started: the oil flow data
#
# This page fits the Bayesian GP-LVM of Titsias & Lawrence (2010) to the three-phase oil
# flow data (1000 rows of 12 measurements, three flow regimes), looks at which latent
# dimensions the ARD weights keep and at the latent space those dimensions span, and then
# uses the fitted model on held-out rows: their latent points, and the readings missing from
# them reconstructed with their uncertainty.
#
# Every page of this guide is a notebook kept as a Python script; the documentation build
# runs it. `reduce_in_tests(n)` is `n` when you run the page, and a few iterations when the
# documentation is built by the tests (`BGPLVM_DOCS_QUICK=1`), so the numbers printed
# below may come from a short fit.

# %%
import numpy as np

from bgplvm import BayesianGPLVM
from bgplvm.datasets import load
from bgplvm.docs_utils import reduce_in_tests
from bgplvm.explorer.notebook_figures import ard_bars, latent_scatter

# %% [markdown]
# ## The data
#
# `load("oil")` downloads the data set on first use (checked against its sha256) into
# `~/.cache/bgplvm/datasets`, or reads it from an offline mirror when
# `BGPLVM_DATA_MIRROR` names one. A `Dataset` holds the rows `Y` (N, D), and here the class
# of every row.

# %%
ds = load("oil")
test = load("oil", split="test")
print(ds.Y.shape, test.Y.shape, ds.label_names)

# %% [markdown]
# ## Fitting the model
#
# Ten latent dimensions, 50 inducing points and an ARD RBF kernel: the model switches
# off the dimensions it does not need. `fit()` maximises the variational bound
# $F(q(X)) \le \log p(Y)$ with L-BFGS (3000 iterations by default; about 30 s on two
# cores once Numba has compiled its kernels, which it does once and caches).

# %%
m = BayesianGPLVM(ds.Y, latent_dim=10, num_inducing=50, kernel="rbf", seed=0)
m.fit(max_iters=reduce_in_tests(3000, test_n=60), progress=False)
print(f"bound {m.elbo():.1f}, stopped: {m.fit_info['reason']}")

# %% [markdown]
# ## Which dimensions it keeps
#
# The ARD weights $\alpha_q = 1 / \ell_q^2$ of the kernel: a dimension with a weight near
# zero has no effect on the mapping, so the model has switched it off. On oil a full fit
# keeps one or two dimensions (`summary()` below lists them, numbered from 0 as here).

# %%
ard_bars(m.ard_weights)

# %% [markdown]
# ## The latent space
#
# The means of $q(X)$ in the two dimensions of largest ARD weight, coloured by flow regime
# (the model never saw the classes), each with a faint circle of two standard deviations of
# $q(x_n)$.

# %%
latent_scatter(m.latent_mean, ds.labels, ds.label_names, ard=m.ard_weights,
               variance=m.latent_variance, title="oil: q(X) means")

# %% [markdown]
# ## New rows: infer, reconstruct, predict
#
# For a held-out row, `infer_latent` finds $q(x_*)$ jointly with the training data held
# fixed (the paper's test-time bound); missing entries (NaN) are simply left out of it.
# `reconstruct` fills them in from $q(x_*)$ with a predictive variance, and `predict`
# maps latent points to outputs.

# %%
y_star = test.Y[:3].copy()
y_star[:, :6] = np.nan                  # the first six readings unseen
mu_s, S_s = m.infer_latent(y_star)      # q(x*): (3, Q) means and variances
mean, var = m.reconstruct(y_star)       # (3, D): the missing ones filled
top2 = np.argsort(m.ard_weights)[::-1][:2]
print("inferred latent means (top two dimensions):")
print(np.round(mu_s[:, top2], 3))
err = np.abs(mean[:, :6] - test.Y[:3, :6]).mean(axis=1)
sd = np.sqrt(var[:, :6]).mean(axis=1)
print("mean error of the hidden readings:", np.round(err, 3))
print("their mean predictive sd:         ", np.round(sd, 3))

# %%
# at Gaussian latent points: q(x_n) of the first two training rows
mean, var = m.predict(m.latent_mean[:2], m.latent_variance[:2])
mean.shape, var.shape

# %% [markdown]
# ## The model in one look
#
# `summary()` gives the bound, the noise, the signal-to-noise ratio and the ARD weights in
# order. `m.save("oil.npz")` writes the model to a file (`BayesianGPLVM.load` reads it, and
# `bgplvm serve --model oil.npz` opens it in the explorer; in a notebook `m.explore()` shows
# the explorer inline: see the explorer page).

# %%
print(m.summary())
