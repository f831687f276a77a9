# %% [markdown]
# # Long sequences: the state-space form of the time prior
#
# The dynamical model's prior p(X | t) is a Gaussian process over time, one block per
# sequence. Written densely, a sequence of T frames needs its T x T covariance Kt
# factorised: cubic time and quadratic memory in T (a single sequence of 100,000 frames
# would need about 400 GB). Where the time kernel is **Markov** (Matern 1/2, 3/2, 5/2 and
# their sums with white and bias parts), the same prior is a linear state-space model, and
# everything the bound needs comes from a Kalman filter and an RTS smoother over each
# sequence: linear in T, with the same parameters, the same q(X) and the same bound.
#
# `DynamicalGPLVM(..., time_prior="auto")`, the default, picks the state-space form
# whenever the kernel has one. This page checks that the two forms agree, measures what
# each costs, and fits one long sequence.

# %%
import time

import numpy as np
from IPython.display import Image, display

from bgplvm import DynamicalGPLVM
from bgplvm.docs_utils import reduce_in_tests
from bgplvm.explorer.figures import Axes, PngCanvas


def sequence(T, D=10, seed=0):
    """T frames (time step 0.05) of D outputs driven by two slow oscillations, with noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(T) * 0.05
    X = np.c_[np.sin(t), np.cos(0.7 * t)]
    return np.tanh(X @ rng.standard_normal((2, D))) + 0.05 * rng.standard_normal((T, D)), t


# %% [markdown]
# ## The same model in two forms
#
# `with_time_prior("dense")` returns the same model (parameters, q(X), frozen set) with
# its prior in the other form. On a small sequence both can be evaluated: the bound and its
# gradient agree up to rounding.

# %%
Y, t = sequence(300)
ss = DynamicalGPLVM(Y, t, latent_dim=2, num_inducing=20, time_kernel="matern32", seed=0)
dense = ss.with_time_prior("dense")
print(repr(ss))
print(repr(dense))
f_ss, g_ss = ss.elbo_and_gradient()
f_de, g_de = dense.elbo_and_gradient()
print(f"bound: state space {f_ss:.6f}, dense {f_de:.6f}, relative difference {abs(f_ss - f_de) / abs(f_de):.1e}")
print(f"gradient: largest difference {np.max(np.abs(g_ss - g_de)) / np.max(np.abs(g_de)):.1e} of its largest entry")

# %% [markdown]
# Predictions agree as well: `latent_at` (q(X*) at new times of a training sequence, the
# GP conditional) runs the smoother in the state-space form.

# %%
t_new = t[-1] + 0.05 * np.arange(1, 41)
mu_a, S_a = ss.latent_at(t_new)
mu_b, S_b = dense.latent_at(t_new)
print(f"forecast q(X*): largest difference of the means {np.max(np.abs(mu_a - mu_b)):.1e}, "
      f"of the variances {np.max(np.abs(S_a - S_b)):.1e}")

# %% [markdown]
# ## What each form costs
#
# One evaluation of the bound and its gradient, for one sequence of T frames (Q = 2, M =
# 20, D = 10). The dense form is timed only up to a few thousand frames.

# %%
def seconds_per_evaluation(T, form, repeats=2):
    Y, t = sequence(T)
    m = DynamicalGPLVM(Y, t, latent_dim=2, num_inducing=20, time_kernel="matern32", time_prior=form, seed=0)
    m.elbo_and_gradient()  # the first call builds caches
    t0 = time.perf_counter()
    for _ in range(repeats):
        m.elbo_and_gradient()
    return (time.perf_counter() - t0) / repeats


dense_T = [250, 500, 1000] + ([2000] if reduce_in_tests(1, test_n=0) else [])
ss_T = [250, 500, 1000, 4000, 20_000] + ([100_000] if reduce_in_tests(1, test_n=0) else [])
timing = {"dense": [seconds_per_evaluation(T, "dense") for T in dense_T],
          "state_space": [seconds_per_evaluation(T, "state_space") for T in ss_T]}
for form, Ts in [("dense", dense_T), ("state_space", ss_T)]:
    print(f"{form:>12}: " + ", ".join(f"T={T}: {s * 1e3:.0f} ms" for T, s in zip(Ts, timing[form])))

# %%
c = PngCanvas(560, 360)
lx = np.log10([min(dense_T + ss_T), max(dense_T + ss_T)])
ly = np.log10([min(min(v) for v in timing.values()), max(max(v) for v in timing.values())])
ax = Axes(c, (80, 40, 440, 240), (lx[0] - 0.1, lx[1] + 0.1), (ly[0] - 0.2, ly[1] + 0.2))
for (form, Ts), col in zip([("dense", dense_T), ("state_space", ss_T)], ["#d62728", "#1f77b4"]):
    pts = np.c_[np.log10(Ts), np.log10(timing[form])]
    c.polyline(ax.pts(pts), col, width=2)
    for x, y in pts:
        c.circle(float(ax.px(x)), float(ax.py(y)), 3.5, fill=col)
ax.frame(title="one bound + gradient evaluation", xlabel="log10 frames in the sequence", ylabel="log10 seconds")
ax.legend([("dense (cubic)", "#d62728"), ("state space (linear)", "#1f77b4")])
display(Image(data=c.to_bytes()))

# %% [markdown]
# Read the slopes: the state-space line is flat at first (the fixed costs of the psi
# statistics dominate) and then grows in proportion to T; the dense line steepens towards
# T^3. On CMU motion capture's short sequences (33-160 frames) the two cost about the same.
#
# ## Fitting a long sequence
#
# 20,000 frames in one sequence, fitted as any other model; `repr` and `summary()` say
# which form is in use. Then the forecast past its end.

# %%
T_long = reduce_in_tests(20_000, test_n=2_000)
Y, t = sequence(T_long, seed=1)
m = DynamicalGPLVM(Y, t, latent_dim=2, num_inducing=30, time_kernel="matern32", seed=0)
t0 = time.perf_counter()
m.fit(reduce_in_tests(300, test_n=20), progress=False)
print(repr(m))
print(f"{m.fit_info['iterations']} iterations in {time.perf_counter() - t0:.0f} s; bound {m.elbo():.1f}")

t_future = t[-1] + 0.05 * np.arange(1, 201)
mean, var = m.forecast(t_future)
seen = slice(T_long - 300, T_long)
c = PngCanvas(680, 300)
col = 0
x_all = np.r_[t[seen], t_future]
lo = min(Y[seen, col].min(), (mean[:, col] - 2 * np.sqrt(var[:, col])).min())
hi = max(Y[seen, col].max(), (mean[:, col] + 2 * np.sqrt(var[:, col])).max())
ax = Axes(c, (70, 40, 580, 200), (x_all.min(), x_all.max()), (lo, hi))
sd = np.sqrt(var[:, col])
c.polygon(ax.pts(np.r_[np.c_[t_future, mean[:, col] + 2 * sd], np.c_[t_future[::-1], (mean[:, col] - 2 * sd)[::-1]]]),
          "#9467bd", opacity=0.2)
c.polyline(ax.pts(np.c_[t_future, mean[:, col]]), "#9467bd", width=1.8)
c.polyline(ax.pts(np.c_[t[seen], Y[seen, col]]), "#222222", width=1.0)
ax.frame(title=f"output {col}: the last 300 of {T_long} frames and a 200-frame forecast (2 sd)", xlabel="time")
display(Image(data=c.to_bytes()))

# %% [markdown]
# As on the [sequences](sequences.html) page, a Matern forecast returns to the prior's mean
# within about the time kernel's lengthscale, and its band widens to say so.
#
# ## Kernels without an exact state-space form
#
# The EQ (`"rbf"`) and `"periodic"` kernels are not Markov. They have approximate
# state-space forms, used only on request: the EQ by a Taylor series of its spectral
# density (order 6 by default: largest kernel error 4.3e-3 of the variance; order 8:
# 9.1e-4), the periodic kernel by a sum of resonators. The bound then differs from the
# dense one by the approximation, not by rounding. How much, on this small sequence:

# %%
Y, t = sequence(300)
for order in (6, 8):
    approx = DynamicalGPLVM(Y, t, latent_dim=2, num_inducing=20, time_kernel="rbf", time_prior="state_space",
                            state_space_options={"order": order}, seed=0)
    exact = approx.with_time_prior("dense")
    print(f"rbf, Taylor order {order}: bound state space {approx.elbo():.3f}, dense {exact.elbo():.3f}")

# %% [markdown]
# A small error in the kernel can move the bound by many nats over thousands of
# frame pairs: compare the forms on a piece of your data before relying on the
# approximation, and raise `order` when they differ (each order adds states, and cost).

# %% [markdown]
# ## Notes
#
# - `time_prior="dense"` forces the dense form (`"state_space"` the state-space one, and
#   refuses a kernel without one unless it has an approximate form).
# - Several sequences (`sequences=ids`) are independent blocks in either form; on Dask each
#   block of rows holds whole sequences.
# - Both forms have the same parameters: `with_time_prior` switches a fitted model
#   between them.
