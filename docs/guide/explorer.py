# %% [markdown]
# # The explorer
#
# A fitted GP-LVM is easiest to understand by moving through its latent space and watching
# what it generates. The explorer is a Panel + HoloViews + Bokeh web app that does that:
#
# - **Latent space**: q(X)'s means over the predictive variance, each sequence's
#   trajectory; move the mouse or click to generate the pose, frame or vector there, with
#   its uncertainty.
# - **ARD weights**: which latent dimensions the model keeps; pick the two shown.
# - **Play & forecast** (dynamical models): a sequence played by the browser, and past its
#   last frame the forecast, in purple, with growing uncertainty.
# - **Observe & infer**: hide part of a test frame (a body part, pixels) and infer the rest.
# - **Your own data** and **Train**: upload arrays or motion capture, fit static or
#   dynamical models in a background process, with progress and Stop.
# - **Export**: figures as PNG/SVG, the played sequence as an animated GIF, the latent
#   coordinates as CSV/NPZ.
#
# ## As a server
#
# From a shell:
#
# ```bash
# bgplvm serve                       # CMU motion capture with a pre-trained dynamical model
# bgplvm serve --model my_model.npz  # a model you saved with m.save("my_model.npz")
# bgplvm serve --port 5007 --no-show
# bash scripts/run.sh                # from a clone: set up the venv, then serve
# ```
#
# The first start with an empty Numba cache compiles the kernels (about a minute on two
# cores, once); the console says so.
#
# ## In a notebook: `m.explore()`
#
# `m.explore()` returns the same page as a Panel object (`Explorer`, a Panel `Viewer`) for
# the model you just fitted. Left as the last expression of a cell it renders inline in
# JupyterLab, Jupyter Notebook and VS Code; `.show()` opens it in a browser tab and
# `.servable()` serves it with `panel serve`. Panel's notebook extension is loaded by
# `explore` itself.
#
# Here a small dynamical model of the synthetic walk that ships with the package (no
# download).

# %%
import numpy as np
from IPython.display import Image, display

from bgplvm import DynamicalGPLVM
from bgplvm.datasets import load
from bgplvm.docs_utils import reduce_in_tests

ds = load("synth_walk")
print(ds.meta["title"], ds.Y.shape, "| sequences:", np.unique(ds.sequence).size)
m = DynamicalGPLVM(ds.Y, ds.times, latent_dim=3, num_inducing=20, sequences=ds.sequence, seed=0)
m.fit(reduce_in_tests(500, test_n=40), progress=False)
m.metadata = {"dataset": "synth_walk"}   # a saved model names its data set: the page draws poses

# %%
ex = m.explore(dataset=ds)
print(type(ex).__name__, "| the page's state:", type(ex.state).__name__)
# `ex` as the last line of a cell shows the page inline; ex.show() opens a browser tab

# %% [markdown]
# `dataset=` says how to draw the outputs (poses here; `image_shape=(h, w)` for rows that
# are images; vectors otherwise). A model loaded from a file finds its data set by the
# name in its metadata.
#
# ## Driving it from Python
#
# `ex.state` is the page's state: what the widgets change, you can set, and what the page
# computes, you can ask for. Moving the cursor and generating there is what the mouse
# does:

# %%
s = ex.state
print("latent dimensions shown:", s.dims)
x, y = s.dims
s.cursor = (float(m.latent_mean[40, x]), float(m.latent_mean[40, y]))   # at training frame 40
mean, var = s.generate()
print(f"generated output: {mean.shape}, its mean sd {np.sqrt(var).mean():.4f}; "
      f"distance to training frame 40: {np.sqrt(np.mean((mean - ds.Y[40]) ** 2)):.4f}")
print("the same as the model's predict at that latent point:",
      np.allclose(mean, m.predict(s.latent_vector()[None, :])[0][0]))

# %% [markdown]
# ## Export
#
# What the Export buttons download can be made from Python too,
# `bgplvm.explorer.export.export_bytes(state, what, fmt)` with `what` one of
# `"latent"`, `"ard"`, `"output"`, `"trajectory"` (figures, `"png"` or `"svg"`),
# `"sequence"` (the played sequence as a GIF) and `"coords"` (`"csv"` or `"npz"`).
# These are the latent view, the generated pose at the cursor and the played sequence's
# trajectory with its forecast:

# %%
from bgplvm.explorer.export import export_bytes

display(Image(data=export_bytes(s, "latent", "png")))

# %%
display(Image(data=export_bytes(s, "output", "png")))

# %%
s.forecast_steps = 60
display(Image(data=export_bytes(s, "trajectory", "png")))

# %%
csv = export_bytes(s, "coords", "csv").decode()
print("\n".join(csv.splitlines()[:4]))

# %% [markdown]
# ## Notes
#
# - Without Panel's extension loaded a notebook shows nothing for a Panel object; `explore`
#   loads it, and if you build the page otherwise, run `import panel as pn;
#   pn.extension()` first.
# - Multi-view models (`MRD`) open with one view drawn at a time and the others generated
#   beside it ("observe a view, infer the others").
# - Above 20,000 points the latent view draws a density image (Datashader) instead of
#   points, so models of 1e5-1e6 rows open too.
