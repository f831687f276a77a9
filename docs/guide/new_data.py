# %% [markdown]
# # New data: infer, reconstruct, score, classify
#
# A fitted GP-LVM is a generative model of its rows, so it can say three things about a row
# it has never seen:
#
# - **where it lies** in the latent space: q(x*), found by maximising the joint bound of the
#   training data and the new row with the model held fixed (`infer_latent`; the paper's
#   `eq:predictive1`);
# - **what its missing entries are**: the predictive moments at q(x*) (`reconstruct`;
#   `meanFstar` / `covFstar`);
# - **how likely it is**: log p(y*_O | Y) over its observed entries O (`log_density`),
#   which, with one model per class, makes a classifier (`GPLVMClassifier`).
#
# All three take many rows at once, each with its own pattern of missing entries (NaN).

# %%
import numpy as np
from IPython.display import Image, display

from bgplvm import BayesianGPLVM, GPLVMClassifier
from bgplvm.baselines import KNNBaseline
from bgplvm.datasets import load
from bgplvm.docs_utils import reduce_in_tests
from bgplvm.explorer.figures import Axes, PngCanvas
from bgplvm.metrics import gaussian_scores, table


# %% [markdown]
# ## A model of the training rows
#
# Oil flow's training split (1000 rows, 12 outputs) and its separate test split.

# %%
ds, test = load("oil"), load("oil", split="test")
m = BayesianGPLVM(ds.Y, latent_dim=10, num_inducing=50, seed=0)
m.fit(reduce_in_tests(3000, test_n=100), progress=False)
print(m.fit_info["reason"], f"bound {m.elbo():.1f}; test rows: {test.Y.shape}")

# %% [markdown]
# ## Where do new rows lie?
#
# `infer_latent(Y_star)` returns q(x*) = N(mu_s, diag S_s) for every row. Each row's
# optimisation starts from the q(x_n) of the nearest training row in its observed entries
# (`n_init=` tries several). Below, the test rows (outlined) land among the training rows
# of their own flow regime.

# %%
mu_s, S_s = m.infer_latent(test.Y)
print("mu_s", mu_s.shape, "S_s", S_s.shape)

COLOURS = ["#1f77b4", "#d62728", "#2ca02c"]
a, b = np.argsort(m.ard_weights)[::-1][:2]
X, Xs = m.latent_mean[:, [a, b]], mu_s[:, [a, b]]
allx = np.r_[X, Xs]
lo, hi = allx.min(axis=0), allx.max(axis=0)
c = PngCanvas(460, 420)
ax = Axes(c, (70, 40, 360, 320), (lo[0], hi[0]), (lo[1], hi[1]))
ax.clip()
for (x, y), k in zip(X, ds.labels):
    c.circle(float(ax.px(x)), float(ax.py(y)), 2.2, fill=COLOURS[k], opacity=0.35)
for (x, y), k in zip(Xs, test.labels):
    c.circle(float(ax.px(x)), float(ax.py(y)), 3.0, fill=COLOURS[k], stroke="#000000", width=0.6)
ax.unclip()
ax.frame(title="training q(X) (faint) and test q(x*) (outlined)",
         xlabel=f"latent dimension {a}", ylabel=f"latent dimension {b}")
ax.legend(list(zip(test.label_names, COLOURS)))
display(Image(data=c.to_bytes()))

# %% [markdown]
# ## Fill in what is missing: `reconstruct`
#
# Hide half of every test row (its first six readings) and ask for them back. `reconstruct`
# infers q(x*) from the observed half, then predicts the rest with its uncertainty (the
# predictive variance plus the noise); the observed half is passed through with variance 0.
# We score only the hidden entries, beside the k-NN baseline and the column means.

# %%
Y_star = test.Y.copy()
Y_star[:, :6] = np.nan
hidden = np.isnan(Y_star)
mean, var = m.reconstruct(Y_star, calibrated=False)
knn_mean, knn_var = KNNBaseline(ds.Y, hide=0.5).predict(Y_star)
col_mean = np.where(hidden, ds.Y.mean(axis=0), Y_star)
col_var = np.where(hidden, ds.Y.var(axis=0), 0.0)
print(table({"reconstruct": gaussian_scores(mean, var, test.Y, mask=hidden),
             "k-NN": gaussian_scores(knn_mean, knn_var, test.Y, mask=hidden),
             "column mean": gaussian_scores(col_mean, col_var, test.Y, mask=hidden)}))

# %% [markdown]
# Read the RMSE first: both are far better than the column means, and on oil flow k-NN's
# nearest rows are a little better still (the repository's `reproduction/calibration`
# finds the same). Then the coverage columns: as fitted, the model's intervals for
# half-observed new rows are much too narrow (a nominal 95 % interval holds far less than
# 95 % of the hidden values): the predictive variance takes q(x*) as right, and from half
# a row it is less certain than that. `m.calibrate()` repairs the intervals from the
# training rows alone; see [calibration](calibration.html).
#
# ## How likely is a row?
#
# `log_density(Y_star)` is log p(y*_O | Y), approximated by the difference of the joint
# and the training bounds, over each row's observed entries. Real test rows score high;
# the same rows with their columns scrambled, which no oil-flow regime produces, score far
# lower: a density for spotting outliers.

# %%
n = reduce_in_tests(1000, test_n=300)   # test rows scored (all 1000 when you run the page)
logp = m.log_density(test.Y[:n])
scrambled = test.Y[:n, np.random.default_rng(0).permutation(12)]
logp_bad = m.log_density(scrambled)
logp_half = m.log_density(Y_star[:n])
for name, v in [("test rows", logp), ("half observed", logp_half), ("columns scrambled", logp_bad)]:
    q = np.percentile(v, [5, 50, 95])
    print(f"{name:>18}: median {q[1]:8.1f}  (5-95 %: {q[0]:8.1f} .. {q[2]:8.1f})")

# %% [markdown]
# A row with fewer observed entries has a density over fewer dimensions: compare rows by
# `log_density` only when they observe the same entries (or divide by the count).
#
# ## A classifier from densities: `GPLVMClassifier`
#
# One `BayesianGPLVM` per class; a new row goes to the class whose model gives it the
# highest density (the paper's section on class-conditional density estimation). It
# follows scikit-learn's conventions (`fit(Y, labels)`, `predict`, `predict_proba`,
# `score`); labels must be numbers.

# %%
clf = GPLVMClassifier(latent_dim=10, num_inducing=50, max_iters=reduce_in_tests(2000, test_n=60))
clf.fit(ds.Y, ds.labels)
print(f"accuracy on {n} test rows: {clf.score(test.Y[:n], test.labels[:n]):.3f}")
print(f"accuracy with half of each row missing: {clf.score(Y_star[:n], test.labels[:n]):.3f}")
proba = clf.predict_proba(test.Y[:5])
for p, lab in zip(proba, test.labels[:5]):
    print("  p(class | y*) =", np.round(p, 3), "true:", test.label_names[lab])

# %% [markdown]
# ## Notes
#
# - Missing entries can be anywhere: every row has its own pattern. A row must observe at
#   least one entry.
# - `infer_latent(..., return_fit=True)` gives the whole fit (log densities, iterations).
# - A dynamical model infers a whole new *sequence* jointly (its frames are coupled by the
#   time prior): `DynamicalGPLVM.reconstruct(Y_star, t_star)`, see
#   [sequences](sequences.html).
# - The scikit-learn adapter `bgplvm.sklearn.GPLVMTransformer` exposes the same calls as
#   `transform` / `inverse_transform` / `score`.
