"""The latent-view part of the explorer's state: the dimensions shown on the axes, the
values of the others, the colouring and layers of the latent view, and the generated point
(the cursor: followed mouse or pinned click) with its predicted output.

``LatentState`` is one of the parts ``ExplorerState`` (state.py) is composed of; views'
stream callbacks only call its small setters (``hover``, ``click``, ``assign_axis``, ...).
"""

from __future__ import annotations

import numpy as np
import param

from .latent import latent_bounds
from .loading import label_text
from .shared import shared


class LatentState(param.Parameterized):
    """What the latent view shows and which latent point generates the output."""

    # latent view
    x_dim = param.Integer(default=0, bounds=(0, None))
    y_dim = param.Integer(default=1, bounds=(0, None))
    fixed = param.Array(default=np.zeros(0), doc="(Q,) values of the dimensions not shown")
    color_by = param.Selector(default="auto", objects=["auto", "label", "sequence", "time", "none"])
    show_uncertainty = param.Boolean(default=False, doc="Draw 2-sd ellipses of q(x_n)")
    show_trajectories = param.Boolean(default=True, doc="Join sequence points in time order")
    show_variance = param.Boolean(default=True, doc="Predictive-variance background")
    sort_ard = param.Boolean(default=False, doc="Sort the ARD bars by weight")
    grid_res = param.Integer(default=200, bounds=(20, 400))

    # generation
    follow = param.Boolean(default=True, doc="Generate under the mouse (else only on click)")
    cursor = param.NumericTuple(default=(0.0, 0.0), length=2, doc="Latent (x, y) being generated")
    pinned = param.Boolean(default=False, doc="Cursor set by a click")
    selected_index = param.Integer(default=-1, doc="Training point clicked (-1: none)")
    azimuth = param.Number(default=-60.0, bounds=(-180, 180), doc="Pose view angle around z (deg)")
    elevation = param.Number(default=10.0, bounds=(-90, 90), doc="Pose view elevation (deg)")


    def __init__(self, **params):
        super().__init__(**params)
        self._pred_cache: dict = {}
        # a watcher, not param.depends: ``dataset`` is the data part's parameter, which
        # param.depends cannot name from this class (installed here, before any view's)
        self.param.watch(self._color_choice_follows_data, ["dataset"])

    @property
    def dims(self) -> tuple[int, int]:
        return int(self.x_dim), int(self.y_dim)

    def latent(self) -> tuple[np.ndarray, np.ndarray]:
        """(mu, S) of q(X), each (N, Q), read once per model version (``latent_mean`` is a
        fresh copy at each call: tens of MB per click on a model of 1e6 rows)."""
        m = self.model
        return shared(m, ("qx", self.model_version),
                      lambda: (np.asarray(m.latent_mean), np.asarray(m.latent_variance)))

    def bounds(self) -> tuple[float, float, float, float]:
        mu, S = self.latent()
        return shared(self.model, ("bounds", self.model_version, self.dims), lambda: latent_bounds(mu, S, self.dims))

    def assign_axis(self, q: int, axis: str = "x") -> None:
        """Show latent dimension q on the given axis ("x" or "y"); swaps if needed."""
        if self.model is None:
            return
        q = int(q)
        if not 0 <= q < self.model.latent_dim:
            return
        vec = self.latent_vector()  # the point in the full latent space, before the axes change
        with param.parameterized.batch_call_watchers(self):
            if axis == "x":
                if q == self.y_dim:
                    self.y_dim = self.x_dim
                self.x_dim = q
            else:
                if q == self.x_dim:
                    self.x_dim = self.y_dim
                self.y_dim = q
            if vec is not None:
                # the generated point stays where it was: the dimension that leaves an axis
                # keeps its coordinate on its slider (it used to take the other dimension's)
                self.fixed = vec
                self.cursor = (float(vec[self.x_dim]), float(vec[self.y_dim]))

    def set_fixed(self, q: int, value: float) -> None:
        fixed = np.array(self.fixed, dtype=np.float64)
        fixed[int(q)] = float(value)
        self.fixed = fixed

    def reset_fixed(self) -> None:
        if self.model is not None:
            self.fixed = self.latent()[0].mean(axis=0)

    def color_modes(self) -> list[str]:
        """The colourings the data set can give, of "label", "sequence", "time" (in that order)."""
        ds = self.dataset
        have = {"label": ds is not None and ds.labels is not None,
                "sequence": ds is not None and ds.sequence is not None and len(np.unique(ds.sequence)) > 1,
                "time": ds is not None and ds.times is not None}
        return [mode for mode in ("label", "sequence", "time") if have[mode]]

    def _color_choice_follows_data(self, *events):
        """A colouring the new data set lacks falls back to auto (its select offers only
        what the data has)."""
        if self.color_by not in ("auto", "none", *self.color_modes()):
            self.color_by = "auto"

    def color_mode(self) -> str:
        """The colouring actually used ("auto" resolved against what the data has)."""
        modes = self.color_modes()
        if self.color_by == "none":
            return "none"
        if self.color_by != "auto":
            return self.color_by if self.color_by in modes else "none"
        return modes[0] if modes else "none"

    # ------------------------------------------------------------------ generation
    def hover(self, x, y) -> None:
        """PointerXY callback: follow the mouse when follow mode is on."""
        if x is None or y is None or not self.follow or self.model is None:
            return
        self.cursor = (float(x), float(y))

    @param.depends("follow", watch=True)
    def _unpin_when_following(self):
        """Follow mode on: the point follows the mouse again, it is no longer pinned (the
        readout said "pinned (click)" while the coordinates followed the mouse)."""
        if self.follow:
            self.pinned = False

    def click(self, x, y) -> None:
        """Tap callback: pin the generated point there (follow mode switches off) and
        select the training point under the click, if any."""
        if x is None or y is None or self.model is None:
            return
        with param.parameterized.batch_call_watchers(self):
            self.follow = False
            self.pinned = True
            self.cursor = (float(x), float(y))
            self.selected_index = self.nearest_training_point(x, y)

    def nearest_training_point(self, x, y, radius: float = 0.015) -> int:
        """Index of the training point within ``radius`` (fraction of the view's
        diagonal) of (x, y) in the shown dims, or -1."""
        mu, _ = self.latent()
        x0, y0, x1, y1 = self.bounds()
        sx, sy = (x1 - x0) or 1.0, (y1 - y0) or 1.0
        d2 = ((mu[:, self.x_dim] - x) / sx) ** 2 + ((mu[:, self.y_dim] - y) / sy) ** 2
        n = int(np.argmin(d2))
        return n if d2[n] <= radius ** 2 else -1

    def latent_vector(self, x=None, y=None) -> np.ndarray | None:
        """(Q,) latent point: the fixed values with the shown dims at (x, y) (default:
        the cursor)."""
        if self.model is None:
            return None
        if x is None:
            x, y = self.cursor
        vec = np.array(self.fixed, dtype=np.float64)
        if vec.size != self.model.latent_dim:
            vec = self.latent()[0].mean(axis=0)
        vec[self.x_dim] = x
        vec[self.y_dim] = y
        return vec

    def generate(self, x=None, y=None) -> tuple[np.ndarray, np.ndarray] | None:
        """(mean (D,), var (D,)) of the output at the latent point (noise included)."""
        vec = self.latent_vector(x, y)
        if vec is None:
            return None
        key = (self.model_version, vec.tobytes())
        hit = self._pred_cache.get(key)
        if hit is None:
            mean, var = self.model.predict(vec[None, :])
            hit = (np.asarray(mean)[0], np.asarray(var)[0])
            if len(self._pred_cache) > 256:
                self._pred_cache.clear()
            self._pred_cache[key] = hit
        return hit


    def readout(self) -> str:
        if self.model is None:
            return "No model yet."
        x, y = self.cursor
        mode = "pinned" if self.pinned else ("following the mouse" if self.follow else "fixed")
        text = f"latent point: x{self.x_dim} = {x:.3f}, x{self.y_dim} = {y:.3f} ({mode})"
        if self.selected_index >= 0:
            text += f"; training #{self.selected_index}"
            ds = self.dataset
            if ds is not None and ds.labels is not None:
                text += f" ({label_text(ds, self.selected_index)})"
            holes = int(np.isnan(ds.Y[self.selected_index]).sum()) if ds is not None else 0
            if holes:
                text += f": {holes} missing"
        return text
