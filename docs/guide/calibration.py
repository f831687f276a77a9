# %% [markdown]
# # Reading the uncertainty: scores and calibration
#
# Every prediction of a GP-LVM comes with a variance. A variance is a claim: a nominal
# 95 % interval, mean +- 1.96 sd, should hold 95 % of values the model has not seen. This
# page shows how to check that claim (`bgplvm.metrics`), what to compare it with
# (`bgplvm.baselines`), and how to repair it when it fails (`m.calibrate()`).
#
# The example: oil-flow test rows with half of every row hidden, filled in by
# `reconstruct` (see [new data](new_data.html)).

# %%
import warnings

import numpy as np
from IPython.display import Image, display

from bgplvm import BayesianGPLVM
from bgplvm.baselines import KNNBaseline
from bgplvm.datasets import load
from bgplvm.docs_utils import reduce_in_tests
from bgplvm.explorer.figures import Axes, PngCanvas
from bgplvm.metrics import gaussian_scores, table


# %%
ds, test = load("oil"), load("oil", split="test")
m = BayesianGPLVM(ds.Y, latent_dim=10, num_inducing=50, seed=0)
m.fit(reduce_in_tests(3000, test_n=100), progress=False)
Y_star = test.Y.copy()
Y_star[:, :6] = np.nan          # the first six readings of every test row hidden
hidden = np.isnan(Y_star)

# %% [markdown]
# ## Scoring a prediction
#
# `gaussian_scores(mean, var, truth, mask=...)` scores any Gaussian prediction against the
# truth on the entries marked by `mask` (here: the hidden ones):
#
# - **coverage** of the central 50, 80, 90, 95 and 99 % intervals: each should be close
#   to its nominal level; below it, the intervals are too narrow (over-confident);
# - **NLPD**, the mean negative log predictive density: lower is better, and it punishes
#   both a wrong mean and a wrong variance;
# - **CRPS** (in the units of the data) and **RMSE**;
# - the **PIT** histogram, the fraction of truths at each decile of their predictive
#   distribution: flat when calibrated, U-shaped when the intervals are too narrow,
#   a hump when too wide.
#
# The baseline to beat is `KNNBaseline`: k nearest training rows, k chosen by
# cross-validation, with the cross-validated residual variance of each column as its
# variance, so that its intervals can be scored too.

# %%
mean0, var0 = m.reconstruct(Y_star, calibrated=False)
knn_mean, knn_var = KNNBaseline(ds.Y, hide=0.5).predict(Y_star)
before = gaussian_scores(mean0, var0, test.Y, mask=hidden)
knn = gaussian_scores(knn_mean, knn_var, test.Y, mask=hidden)
print(table({"reconstruct, as fitted": before, "k-NN": knn}))

# %% [markdown]
# The model's 95 % intervals hold far fewer than 95 % of the hidden values: as fitted, its
# predictive variance for a new, half-observed row is too small. The variance of
# `reconstruct` assumes q(x*) is right; with half a row to go on it often is not, and the
# GP's noise variance, fitted to complete training rows, does not know that.
#
# ## Calibrating: `m.calibrate()`
#
# `calibrate` learns a per-output scale of the predictive sd from the training data alone.
# It hides half the entries of (up to) 1000 training rows, predicts them exactly as
# `reconstruct` would predict a new row's, with q(u) recomputed without the rows of their
# fold (5 folds), and picks each output's scale so that a nominal 95 % interval holds 95 %
# of the held-out entries (split-conformal quantiles). A row that fits its *observed*
# entries worse than the training rows do also gets wider intervals, in proportion.

# %%
cal = m.calibrate()
print(cal.describe())
print("scale of the sd per output:", np.round(cal.scale, 2))
print(f"cross-fitted coverage of the 95 % intervals: {cal.before['coverage']['0.95']:.1%} -> "
      f"{cal.after['coverage']['0.95']:.1%}")

# %% [markdown]
# `before` and `after` are scores on held-out training entries whose scales were learnt
# without them (cross-fitted), so they are honest estimates. From now on `predict`,
# `impute` and `reconstruct` use the calibration (pass `calibrated=False` for the raw
# variance; `m.calibration = None` drops it; `m.save` keeps it in the model file).
#
# Calibration also measured k-NN on the same held-out entries, and where k-NN predicts
# the *means* better, the predictions say so with a warning:

# %%
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    mean1, var1 = m.reconstruct(Y_star)
for w in caught:
    print("UserWarning:", w.message)
after = gaussian_scores(mean1, var1, test.Y, mask=hidden)
print(table({"reconstruct, as fitted": before, "reconstruct, calibrated": after, "k-NN": knn}))

# %% [markdown]
# Calibration changes only the variances: the RMSE is the same, the 95 % intervals now
# hold close to 95 % of the hidden values, and the NLPD improves. The warning is worth
# taking seriously: on oil flow, k-NN's point predictions of half-hidden test rows are
# better than the model's (the repository's `reproduction/calibration` table has the
# same finding). The model's value here is a density, a latent space and intervals that
# hold; if only the point predictions matter, use the baseline.
#
# ## Other levels: coverage curve and PIT
#
# `calibrate` matches the interval level it is asked for (`level=0.95`, the default, with
# `method="quantile"`). Other levels follow only as far as the errors are Gaussian in
# shape. `method="variance"` instead scales each output so that its squared normalised
# residuals average 1: the whole distribution on average rather than one tail. We fit that
# one too, to compare:

# %%
cal_v = m.calibrate(method="variance")
print(cal_v.describe())
with warnings.catch_warnings():
    warnings.simplefilter("ignore")   # the same k-NN warning as above
    mean2, var2 = m.reconstruct(Y_star)
after_v = gaussian_scores(mean2, var2, test.Y, mask=hidden)
print(table({"calibrated, quantile": after, "calibrated, variance": after_v}))

# %% [markdown]
# The coverage at many nominal levels (a reliability diagram: the diagonal is perfect
# calibration) and the PIT histograms.

# %%
levels = np.round(np.linspace(0.05, 0.99, 24), 3)
curves = {"as fitted": (mean0, var0, "#d62728"), "quantile": (mean1, var1, "#1f77b4"),
          "variance": (mean2, var2, "#2ca02c"), "k-NN": (knn_mean, knn_var, "#ff7f0e")}
c = PngCanvas(1000, 380)
ax = Axes(c, (70, 40, 300, 280), (0, 1), (0, 1))
c.polyline(ax.pts(np.array([[0, 0], [1, 1]])), "#999999")
for name, (mu, v, col) in curves.items():
    cov = gaussian_scores(mu, v, test.Y, mask=hidden, levels=levels).coverage
    c.polyline(ax.pts(np.c_[levels, [cov[float(p)] for p in levels]]), col, width=2)
ax.frame(title="coverage of central intervals", xlabel="nominal level", ylabel="fraction of hidden values inside")
ax.legend([(k, v[2]) for k, v in curves.items()], x=ax.x + 170, y=ax.y + ax.h - 88)
pits = [("PIT as fitted", before, "#d62728"), ("PIT quantile", after, "#1f77b4"), ("PIT variance", after_v, "#2ca02c")]
top = max(0.3, 1.05 * max(float(s.pit.max()) for _, s, _ in pits))
for i, (name, s, col) in enumerate(pits):
    bx = Axes(c, (430 + i * 190, 40, 170, 280), (0, 1), (0, top))
    for k, f in enumerate(s.pit):
        x0, x1 = bx.px(k / len(s.pit)), bx.px((k + 1) / len(s.pit))
        c.rect(float(x0) + 1, float(bx.py(f)), float(x1 - x0) - 2, float(bx.py(0) - bx.py(f)), fill=col)
    c.polyline(bx.pts(np.array([[0, 0.1], [1, 0.1]])), "#444444", width=1)
    bx.frame(title=name, xlabel="PIT decile", yticks=(i == 0))
display(Image(data=c.to_bytes()))

# %% [markdown]
# How to read them: a curve below the diagonal and a U-shaped PIT (too many truths in the
# outer deciles; the line marks 10 %) are intervals too narrow; a curve above it and a
# hump, intervals too wide. When the errors have heavier tails than a Gaussian, no single
# scale of the sd is right at every level: the quantile method gets the 95 % interval
# right and may be too wide in the middle; the variance method is closer in the middle and
# may fall short in the tails. Calibrate for the level you will report, and let the NLPD,
# which weighs all levels, decide between them. The model keeps the last calibration
# (here: `variance`); `m.calibration = cal` puts the other back.
#
# ## Calibrating for what you will predict
#
# The calibration is only as good as the match between its held-out entries and your
# predictions:
#
# - `m.calibrate(hide=cols)`: when the predictions will miss particular columns (a body
#   part), hide those; `groups=labels` makes folds of whole groups (whole trials);
# - `m.calibrate(path="impute")`: for the training rows' own missing entries (`impute`);
# - a `DynamicalGPLVM`: `calibrate(hide=cols)` holds out whole sequences, and
#   `calibrate(path="forecast", horizon=100)` the frames after origins in each sequence;
# - an `MRD`: `m.calibrate(target="c", observed=["a"])` for views predicted from other
#   views (`predict_views`, `reconstruct`; see [MRD](mrd.html));
# - the regression models (`UncertainInputGPR`, `SemiSupervisedGPR`) refuse, saying why.
#
# `bgplvm fit` calibrates by default (`--no-calibrate`); the explorer's model panel says
# whether a model is calibrated.
