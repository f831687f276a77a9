"""Layers that other views draw into the latent view's figure (the played sequence's path,
ellipses and marker; q(x*) of an inference), and which figure they are drawn into.

HoloViews builds a new latent figure for a new model or new axes, and runs the views'
hooks (``attach_latent``) again at every update of the overlay. Each new figure gets data
sources of its own, filled when it is built, and later only the figure of the model and
axes shown is written to (``DrawnInto``). One set of sources was shared by every latent
figure: a new model's figure entered the page with the previous model's 35 ellipses and
had them replaced by its 33 in the same message, or the figure leaving the page was fed
the new model's. BokehJS applies a new ``data`` asynchronously (the glyph's spatial index
is rebuilt after an ``await``), and a layout change later in that message painted the
figure in between: new rows, the old rows' index, "Out of bounds: 0 <= 33 < 33" in the
page, and the update left half applied.
"""

from __future__ import annotations

import numpy as np

from .player_js import FORECAST_COLOR, TRAIN_PATH_COLOR


class DrawnInto:
    """The latent figure a view's layers are in, and the (model_version, dims) it shows."""

    def __init__(self) -> None:
        self.fig, self.shown = None, None

    def is_new(self, fig) -> bool:
        """True for a figure the layers are not in yet (a hook's repeated call is not)."""
        return fig is not self.fig

    def take(self, fig, state) -> None:
        """The layers go into ``fig``, which shows ``state``'s model and axes."""
        self.fig, self.shown = fig, (state.model_version, state.dims)

    def is_current(self, state) -> bool:
        """Whether the figure drawn into shows ``state``'s model and axes (else it is
        leaving the page: leave it as it is; its replacement gets the layers when built)."""
        return self.fig is None or self.shown == (state.model_version, state.dims)


def no_path() -> dict:
    """The player's path columns when nothing is played."""
    return dict(xs=[], ys=[], color=[], dash=[])


def no_ellipses() -> dict:
    """The player's ellipse columns when nothing is played."""
    return dict(xs=[], ys=[], color=[], fill=[])


def sequence_layers(pb, dims) -> tuple[dict | None, dict | None]:
    """(path, ellipses) columns of a played sequence ``pb`` (``Playback``) in the latent
    axes ``dims``: the training part's path and the forecast's (dashed), and 2-sd ellipses
    of q(x*) along them; (None, None) for a preview (no latent space)."""
    if pb.preview:
        # no latent space to draw in. Left as they are: the latent figure leaving the
        # page with the model repainted emptied patches in the same update and failed
        # in the browser ("Out of bounds: 0 <= 0 < 0"); a new model replaces them.
        return None, None
    xd, yd = dims
    n = pb.n_train
    xs, ys, col, dash = [pb.mu[:n, xd]], [pb.mu[:n, yd]], [TRAIN_PATH_COLOR], ["solid"]
    if pb.T > n:
        xs.append(pb.mu[n - 1:, xd])
        ys.append(pb.mu[n - 1:, yd])
        col.append(FORECAST_COLOR)
        dash.append("dashed")
    # 2-sd ellipses of q(x*) along the path: ~25 over the training frames (filled
    # faintly), ~6 over the forecast (outlines only: they grow to the prior's size and
    # filled ones would cover the data)
    idx = np.unique(np.r_[np.arange(0, n, max(1, n // 25)), n - 1])
    if pb.T > n:
        idx = np.r_[idx, np.unique(np.r_[np.arange(n, pb.T, max(1, (pb.T - n) // 6)), pb.T - 1])]
    th = np.linspace(0, 2 * np.pi, 33)
    ex, ey, ec, ef = [], [], [], []
    for i in idx:
        ax, ay = 2 * np.sqrt(pb.S[i, xd]), 2 * np.sqrt(pb.S[i, yd])
        ex.append(pb.mu[i, xd] + ax * np.cos(th))
        ey.append(pb.mu[i, yd] + ay * np.sin(th))
        ec.append(FORECAST_COLOR if i >= n else "#1f77b4")
        ef.append(0.0 if i >= n else 0.12)
    return dict(xs=xs, ys=ys, color=col, dash=dash), dict(xs=ex, ys=ey, color=ec, fill=ef)
