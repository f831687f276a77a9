# %% [markdown]
# # Missing values
#
# Real tables have holes. The Bayesian GP-LVM can be trained on them directly: a missing
# entry is marked with NaN (or with `mask=`, True = observed), and the variational bound
# is summed over what each output column observed. There is no filling-in step before the
# fit, and afterwards `impute()` predicts every missing entry *with a variance*.
#
# This page hides 30 % of the oil-flow data at random, fits a model on what is left,
# imputes the hidden entries and scores them, mean and intervals, beside the k-nearest
# neighbours imputer that most people would otherwise reach for.

# %%
import numpy as np
from IPython.display import Image, display

from bgplvm import BayesianGPLVM
from bgplvm.baselines import KNNBaseline
from bgplvm.datasets import load
from bgplvm.docs_utils import reduce_in_tests
from bgplvm.explorer.figures import Axes, PngCanvas
from bgplvm.explorer.notebook_figures import latent_scatter
from bgplvm.metrics import gaussian_scores, table


# %% [markdown]
# ## Hide 30 % of the entries
#
# Oil flow has 1000 rows of 12 gamma-densitometry readings, in three flow regimes. We keep
# the complete table as the truth and mark a random 30 % of its entries as missing.

# %%
ds = load("oil")
truth = ds.Y
rng = np.random.default_rng(0)
hidden = rng.random(truth.shape) < 0.3
Y = truth.copy()
Y[hidden] = np.nan
print(f"{hidden.sum()} of {hidden.size} entries missing; "
      f"rows with nothing missing: {(~hidden).all(axis=1).sum()} of {len(Y)}")

# %% [markdown]
# ## Fit on the incomplete table
#
# Nothing changes in the call: `BayesianGPLVM` sees the NaN. Internally the collapsed
# bound (the paper's `FdFinal`) is taken column by column over the rows that column
# observed; columns observed on the same rows share one Psi2 statistic and one
# factorisation. q(X) starts from the PCA of the mean-filled table.

# %%
m = BayesianGPLVM(Y, latent_dim=10, num_inducing=50, seed=0)
m.fit(reduce_in_tests(3000, test_n=100), progress=False)
print(m.fit_info["reason"], f"after {m.fit_info['iterations']} iterations; bound {m.elbo():.1f}")
print("missing fraction:", round(m.missing_fraction, 3), "| Y_observed:", m.Y_observed.shape, m.Y_observed.dtype)
print("ARD weights (sorted):", np.round(np.sort(m.ard_weights)[::-1], 3))

# %% [markdown]
# The ARD weights say how many latent dimensions the model keeps; the two strongest give a
# picture of q(X). Even with 30 % of the entries gone, the three flow regimes (colours,
# which the model never saw) separate.

# %%
latent_scatter(m.latent_mean, ds.labels, ds.label_names, ard=m.ard_weights, title="q(X) of oil, 30 % missing")

# %% [markdown]
# ## Impute, with uncertainty
#
# `impute()` returns the whole table: observed entries passed through (variance 0), each
# missing one predicted from its row's q(x_n) with the uncertain-input moments of the paper
# (`meanFstar`, `covFstar`) plus the noise variance.

# %%
filled, var = m.impute()
print("first row, truth / input / imputed (sd):")
for j in range(6):
    shown = "  NaN " if np.isnan(Y[0, j]) else f"{Y[0, j]:6.3f}"
    print(f"  col {j}: {truth[0, j]:6.3f}  {shown}  {filled[0, j]:6.3f} ({np.sqrt(var[0, j]):.3f})")

# %% [markdown]
# ## Beside k-NN
#
# `KNNBaseline` is the simple alternative: a missing entry is the mean of its k nearest
# rows (nearest in the entries both observe), k chosen by cross-validation, and its
# variance the cross-validated residual variance of each column, so that it too can be
# scored as a probabilistic prediction. `gaussian_scores` scores both on the hidden
# entries only (`mask=hidden`): the coverage of central intervals (a nominal 95 %
# interval should hold 95 % of the truth), the negative log predictive density (NLPD,
# lower is better), CRPS and RMSE.

# %%
knn = KNNBaseline(Y, hide=0.3)
knn_mean, knn_var = knn.impute()
print(f"k-NN chose k = {knn.k}")
scores = {"BayesianGPLVM.impute": gaussian_scores(filled, var, truth, mask=hidden),
          f"KNNBaseline (k={knn.k})": gaussian_scores(knn_mean, knn_var, truth, mask=hidden)}
print(table(scores))

# %% [markdown]
# How to read this: compare the RMSE for the point predictions, and the coverage columns
# against their nominal levels for the intervals. The model's intervals are a claim made
# from the fit alone; with 30 % missing they are usually a little narrow (a 95 % interval
# holds around 90 %, `reproduction/calibration` in the repository). `m.calibrate(path="impute")`
# learns a correction from the training rows themselves: see the
# [calibration](calibration.html) page. The error per column shows where each method is
# better:

# %%
err_gp = np.sqrt([np.mean((filled - truth)[hidden[:, j], j] ** 2) for j in range(truth.shape[1])])
err_knn = np.sqrt([np.mean((knn_mean - truth)[hidden[:, j], j] ** 2) for j in range(truth.shape[1])])


def bars(values, names, colours, title, ylabel):
    """Grouped bars: values is (groups, items)."""
    G, K = values.shape
    c = PngCanvas(620, 330)
    ax = Axes(c, (70, 40, 520, 220), (-0.5, G - 0.5), (0, 1.1 * values.max()))
    w = 0.8 / K
    for g in range(G):
        for k in range(K):
            x0 = g - 0.4 + k * w
            y0, y1 = float(ax.py(values[g, k])), float(ax.py(0))
            c.rect(float(ax.px(x0)), y0, float(ax.px(x0 + w) - ax.px(x0)), y1 - y0, fill=colours[k])
    ax.frame(title=title, ylabel=ylabel, xcats=[(g, str(g)) for g in range(G)])
    c.text(ax.x + ax.w / 2, ax.y + ax.h + 36, "output column", size=12, anchor="middle")
    ax.legend(list(zip(names, colours)))
    return c.to_bytes()


display(Image(data=bars(np.c_[err_gp, err_knn], ["GP-LVM", "k-NN"], ["#1f77b4", "#ff7f0e"],
                        "RMSE of the hidden entries per column", "RMSE")))

# %% [markdown]
# ## Notes
#
# - `BayesianGPLVM(Y_complete, mask=observed)` is the same as NaN in `Y`.
# - Rows with nothing observed, columns observed on fewer than two rows and `inf` are
#   refused, naming their indices; more than 95 % missing gives a warning.
# - `DynamicalGPLVM` and `UncertainInputGPR` take NaN the same way.
# - New rows with missing entries (not in the training table) go through `reconstruct`:
#   see [new data](new_data.html).
