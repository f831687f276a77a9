# %% [markdown]
# # Uncertain inputs and autoregressive forecasting
#
# The GP-LVM's machinery integrates over Gaussian *inputs* (the psi statistics). The same
# machinery serves regression problems whose inputs are not known exactly (the paper's
# "Extensions for Different Kinds of Inputs"): the prior N(0, I) on the latent inputs is
# replaced by p(X | Z) = prod N(x_n | z_n, Sigma_z), where Z are the inputs as observed and
# the diagonal Sigma_z, how noisy they are, is learned.
#
# This page shows two uses:
#
# 1. `UncertainInputGPR`: regression where the inputs are measured with noise;
# 2. `AutoregressiveGP`: forecasting a time series many steps ahead, where each prediction
#    is fed back as an uncertain input of the next (the paper's Mackey-Glass experiment).

# %%
import numpy as np
from IPython.display import Image, display

from bgplvm import AutoregressiveGP, UncertainInputGPR
from bgplvm.docs_utils import reduce_in_tests
from bgplvm.explorer.figures import Axes, PngCanvas
from bgplvm.metrics import gaussian_scores


def curves_png(x, series, title, truth=None, marker=None, xlabel="", width=680, height=300):
    """series: [(label, mean, sd or None, colour)] against x; truth: (x_pts, y_pts) dots."""
    c = PngCanvas(width, height + 40)
    lo = min(float(np.min(m - 2 * (0 if s is None else s))) for _, m, s, _ in series)
    hi = max(float(np.max(m + 2 * (0 if s is None else s))) for _, m, s, _ in series)
    if truth is not None:
        lo, hi = min(lo, float(np.min(truth[1]))), max(hi, float(np.max(truth[1])))
    pad = 0.05 * (hi - lo)
    ax = Axes(c, (70, 40, width - 100, height - 90), (float(np.min(x)), float(np.max(x))), (lo - pad, hi + pad))
    ax.clip()
    for _, m, s, col in series:
        if s is not None:
            c.polygon(ax.pts(np.r_[np.c_[x, m + 2 * s], np.c_[x[::-1], (m - 2 * s)[::-1]]]), col, opacity=0.18)
    if truth is not None:
        for a, b in zip(*truth):
            c.circle(float(ax.px(a)), float(ax.py(b)), 1.8, fill="#222222", opacity=0.6)
    for _, m, s, col in series:
        c.polyline(ax.pts(np.c_[x, m]), col, width=1.8)
    ax.unclip()
    if marker is not None:
        X = float(ax.px(marker))
        c.polyline([(X, ax.y), (X, ax.y + ax.h)], "#888888")
    ax.frame(title=title, xlabel=xlabel)
    items = ([("data", "#222222")] if truth is not None else []) + [(lab, col) for lab, _, _, col in series]
    x0 = ax.x
    for lab, col in items:  # one legend line under the axes
        c.circle(x0 + 6, ax.y + ax.h + 62, 5, fill=col)
        c.text(x0 + 16, ax.y + ax.h + 62, lab, size=11, valign="middle")
        x0 += 30 + 7 * len(lab)
    return c.to_bytes()


# %% [markdown]
# ## 1. Regression with noisy inputs
#
# 300 points of y = sin(2x) + noise, where x is observed only as z = x + e with e of sd
# 0.3. A standard GP (here `UncertainInputGPR(..., fixed_inputs=True)`, sparse variational
# GP regression on (Z, Y)) takes z as exact and explains the scatter by a larger output
# noise. The uncertain-input model learns Sigma_z and a q(x_n) for every point.
#
# Its fit starts with q(X)'s and Sigma_z's variances at a hundredth of each input's
# variance (`input_variance=` sets another start): the first iterations hold them there
# while the mapping fits, as a GP regression would, then they move where the bound wants
# them. Compare the two bounds: the uncertain-input model contains the standard GP (Sigma_z
# -> 0), so its bound should be at least as high.

# %%
rng = np.random.default_rng(0)
x = rng.uniform(-3, 3, 300)
z = x + 0.3 * rng.standard_normal(300)
y = np.sin(2 * x) + 0.05 * rng.standard_normal(300)
Z, Y = z[:, None], y[:, None]

iters = reduce_in_tests(2000, test_n=150)
gp = UncertainInputGPR(Z, Y, num_inducing=30, fixed_inputs=True).fit(iters, progress=False)
unc = UncertainInputGPR(Z, Y, num_inducing=30).fit(iters, progress=False)
for name, model in [("standard GP", gp), ("uncertain inputs", unc)]:
    sz = "" if model is gp else f", Sigma_z {model.input_noise_variance[0]:.4f} (true 0.09)"
    print(f"{name:>16}: bound {model.elbo():8.2f}, noise variance {model.noise_variance:.4f} (true 0.0025){sz}")

# %% [markdown]
# Predictions at new inputs observed with the same noise: `predict(Z_star)` takes
# x* ~ N(Z_star, Sigma_z + Z_star_var) (`Z_star_var=` adds any uncertainty you know of,
# `input_noise=False` leaves Sigma_z out) and passes it through the uncertain-input
# moments `meanFstar` / `covFstar`. The scores are on 500 fresh noisy test inputs.

# %%
x_t = rng.uniform(-3, 3, 500)
z_t = (x_t + 0.3 * rng.standard_normal(500))[:, None]
y_t = (np.sin(2 * x_t) + 0.05 * rng.standard_normal(500))[:, None]
for name, model in [("standard GP", gp), ("uncertain inputs", unc)]:
    mean, var = model.predict(z_t)
    s = gaussian_scores(mean, var, y_t)
    print(f"{name:>16}: RMSE {s.rmse:.3f}  NLPD {s.nlpd:.3f}  95 % intervals hold {s.coverage[0.95]:.1%}")

grid = np.linspace(-3, 3, 200)[:, None]
m_gp, v_gp = gp.predict(grid)
m_unc, v_unc = unc.predict(grid)
display(Image(data=curves_png(grid[:, 0], [("standard GP", m_gp[:, 0], np.sqrt(v_gp[:, 0]), "#ff7f0e"),
                                           ("uncertain inputs", m_unc[:, 0], np.sqrt(v_unc[:, 0]), "#1f77b4"),
                                           ("sin(2z)", np.sin(2 * grid[:, 0]), None, "#2ca02c")],
                              "predictions at noisy inputs z (2 sd)", truth=(z, y), xlabel="observed input z")))

# %% [markdown]
# What to read: both curves are flatter than sin(2z), because at a noisy z the expected y
# *is* flatter (it averages sin(2x) over the x that z may be). The standard GP puts all the
# scatter into the output noise; the uncertain-input model attributes most of it to the
# inputs (Sigma_z near the true 0.09, the output noise far smaller), and its predictive
# variance comes from the input uncertainty passed through the function: larger where
# the function is steep, where an input error matters more. The held-out scores tell how
# much that buys; on the repository's benchmark (`reproduction/calibration`) the two end
# close in RMSE and coverage. When you fit one, compare its bound with the plain GP's
# (`fixed_inputs=True`): equal bounds mean the fit stayed at the plain GP (from a start at
# 1e-6 of the inputs' variance, `input_variance=1e-6 * z.var()`, it does on these data).
#
# ## 2. Forecasting a chaotic series: `AutoregressiveGP`
#
# The Mackey-Glass delay equation dx/dt = 0.2 x(t - 17) / (1 + x(t - 17)^10) - 0.1 x(t)
# gives a chaotic series. We learn from 150 points and forecast the next 100 by iterating
# one-step predictions from windows of the last 12 values (`window=12`). Each prediction
# is uncertain; the uncertain-input model feeds it into the next window as a Gaussian
# input, so the uncertainty propagates, where a standard autoregressive GP
# (`propagate_uncertainty=False`) feeds back the means as if they were exact.
#
# The series is integrated as the repository's reproductions do it
# (`bgplvm.reproduce.mackey_glass.simulate`: RK4 with step 0.1, sampled every time unit
# after a transient of 1000).

# %%
from bgplvm.reproduce.mackey_glass import simulate

series = simulate(150 + 100)
train, future = series[:150], series[150:]

iters = reduce_in_tests(2000, test_n=150)
fixed = AutoregressiveGP(train, window=12, num_inducing=40, propagate_uncertainty=False).fit(iters, progress=False)
ar = AutoregressiveGP(train, window=12, num_inducing=40).fit(iters, progress=False)

horizon = 100
forecasts = {
    "means fed back": fixed.forecast(horizon),
    "uncertain inputs, sampled paths": ar.forecast(horizon),
    "uncertain inputs, moments": ar.forecast(horizon, method="moments"),
}
for name, (mean, var) in forecasts.items():
    s = gaussian_scores(mean, var, future)
    print(f"{name:>32}: RMSE {s.rmse:.3f}  NLPD {s.nlpd:8.2f}  95 % intervals hold {s.coverage[0.95]:.0%}")
print(f"(the series' sd: {train.std():.3f})")

# %% [markdown]
# `forecast(steps)` returns a mean and a variance per step. By default they are the
# moments of 1000 sampled trajectories, each step drawn at that trajectory's own window,
# with f drawn jointly along the trajectory's path (the model's error at one window and at
# the next are correlated, as the series' are; `joint=False` draws each step on its own and
# its intervals are too narrow in the first steps). `sample_forecast` returns the
# trajectories; `method="moments"` is the paper's Gaussian
# approximation, each step's mean and variance the next input's. The standard
# autoregressive GP's forecast may be as accurate, but its variance is that of a one-step
# prediction all the way, so its intervals do not hold the truth (look at its NLPD). The
# moments method is the cheaper approximation and the worse one here: a Gaussian window
# with a diagonal covariance loses the phase of the oscillation, and its mean flattens
# towards the series' mean (an RMSE close to the series' sd) under a wide band. If that
# band grows past (max - min)^2 / 4 of the training series, more variance than any
# distribution inside the series' range can have, `forecast` says so in a
# `ForecastSpreadWarning` (above, where it shows): the forecast then puts mass where the
# series has never been.

# %%
t_future = np.arange(150, 150 + horizon)
colours = {"means fed back": "#ff7f0e", "uncertain inputs, sampled paths": "#1f77b4",
           "uncertain inputs, moments": "#9467bd"}
shown = [(name, m, np.sqrt(v), colours[name]) for name, (m, v) in forecasts.items()]
display(Image(data=curves_png(t_future, shown[:2], "Mackey-Glass: 100 steps ahead (2 sd)",
                              truth=(t_future, future), xlabel="time step", width=760)))

# %%
paths = ar.sample_forecast(horizon, n_samples=200)
print("sampled trajectories:", paths.shape)
c = PngCanvas(760, 300)
ax = Axes(c, (70, 40, 660, 210), (150, 150 + horizon - 1), (float(paths.min()), float(paths.max())))
ax.clip()
for p in paths[:40]:
    c.polyline(ax.pts(np.c_[t_future, p]), "#1f77b4", width=0.8, opacity=0.25)
c.polyline(ax.pts(np.c_[t_future, future]), "#222222", width=2)
ax.unclip()
ax.frame(title="40 of the sampled trajectories (blue) and the truth (black)", xlabel="time step")
display(Image(data=c.to_bytes()))

# %% [markdown]
# How to read them: where the trajectories fan out the forecast has lost track of the
# phase of the series, and the band widens accordingly. With fewer training points (the
# paper's own experiment learns from 96) every method loses track within a few dozen
# steps; the repository's `bgplvm reproduce mackey-glass` runs that setting, with five
# seeds. `AutoregressiveGP.from_fixed_inputs(gp)` starts the uncertain-input model from a
# fitted standard one, so that the two differ only in whether the uncertainty is
# propagated (the paper's comparison).
#
# `ar.calibrate()` learns a scale of the forecast's sd per horizon from the training series
# itself: stretches of it are held out, each forecast from the series before it with q(u)
# recomputed without the pairs that see it. It needs a series several horizons long: each
# stretch takes its pairs out of q(u), and on 150 points (a third of them out per stretch)
# the held-out forecasts are worse than the model's and the scales err (it warns). On 600
# points of the same series, 100 steps ahead from 20 origins, the 95 % intervals went from
# 100 % to 98.0 % (`bgplvm reproduce calibration` has the table).
#
# ## Notes
#
# - `UncertainInputGPR(Z, Y, tie_mean=True)` holds q(X)'s means at Z (the paper's
#   cheaper choice); `input_variance=` sets the start of the variances.
# - Inputs should be of roughly unit scale (standardise them); outputs may have NaN.
# - Missing *input* features rather than noisy ones: see
#   [semi-supervised GPs](semi_supervised.html).
# - The regression models do not calibrate (`calibrate` refuses, saying why); score them
#   on held-out data with `bgplvm.metrics.gaussian_scores` as above.
