"""The latent view: the latent means in the two dimensions shown, over the predictive-
variance background, with the generated point (mouse or click) and sliders for the
values of the dimensions not shown."""

from __future__ import annotations

import functools

import numpy as np
import holoviews as hv
import panel as pn
import param
from holoviews.streams import Params, PointerXY, Tap
from panel.io.document import unlocked

from . import plots
from .density import categories, class_key, is_large, latent_density
from . import sequences as seqs
from .latent import ard_off_mask, variance_grid
from .shared import shared
from .widgets import PLOT_W, PLOT_H, Rebuilding, checkbox, guarded

class LatentView(Rebuilding):
    """Latent means in the two chosen dims over the predictive-variance background;
    mouse moves (follow mode) and clicks choose the point to generate from."""

    _rebuild_on = ("model_version", "x_dim", "y_dim", "color_by", "show_uncertainty",
                   "show_trajectories", "dataset")

    decorators = param.List(default=[], doc="HoloViews hooks that add layers to the latent figure "
                                            "(e.g. the player's sequence path and marker)")

    def __init__(self, **params):
        self._sliders = pn.Column(sizing_mode="stretch_width")
        super().__init__(**params)
        s = self.state
        self._color = pn.widgets.Select.from_param(s.param.color_by, label="colour points by", width=140)
        self._unc = checkbox(s, "show_uncertainty", "q(x) ellipses (2 sd)")
        self._traj = checkbox(s, "show_trajectories", "trajectories")
        self._var = checkbox(s, "show_variance", "variance background")
        self._follow = pn.widgets.Toggle.from_param(s.param.follow, label="Follow mouse", width=130,
                                                    color="primary")
        self._reset = pn.widgets.Button(label="Reset sliders to mean of q(X)", width=220)
        self._reset.on_click(lambda e: self._reset_fixed())
        self._large_note = pn.pane.Markdown("", styles={"font-size": "12px", "color": "#555"}, visible=False,
                                            margin=(0, 10))
        s.param.watch(self._build_sliders, ["model_version"])
        s.param.watch(self._move_marker, ["cursor"])
        s.param.watch(self._move_selected, ["selected_index"])
        s.param.watch(self._slider_visibility, ["x_dim", "y_dim"])
        s.param.watch(self._sync_slider_values, ["fixed"])
        s.param.watch(self._sync_enabled, ["model_version", "dataset"])
        self._build_sliders()
        self._sync_enabled()

    def _sync_enabled(self, *events):
        """Controls that cannot work now are off: no model, nothing to reset; no sequence
        ids or time stamps, no trajectories to draw."""
        s = self.state
        self._reset.disabled = s.model is None
        n = s.latent()[0].shape[0] if s.model is not None else 0
        large = is_large(n)
        self._traj.disabled = large or s.dataset is None or (s.dataset.sequence is None and s.dataset.times is None)
        self._unc.disabled = large
        self._large_note.object = (f"{n:,} points: drawn as a density image "
                                   "(Datashader; re-drawn at each zoom). Trajectories and ellipses are off."
                                   if large else "")
        self._large_note.visible = large
        # only the colourings this data set has (oil offered "sequence" and "time", which
        # then coloured nothing)
        self._color.options = ["auto", *s.color_modes(), "none"]  # the state falls back to auto

    # ---- plot
    def _build(self):
        s = self.state
        dims = s.dims
        mu, S = s.latent()
        ds = s.dataset
        large = is_large(mu.shape[0])
        bounds = s.bounds()
        self._bounds = bounds
        mode = s.color_mode()
        layers = []
        bg = hv.DynamicMap(self._background, streams=[Params(s, ["fixed", "show_variance", "grid_res"])])
        layers.append(bg)
        # a large model's points are an image (density.py): lines and ellipses through
        # every one of them would hide it, and cost what the image saves
        if s.show_trajectories and ds.sequence is not None and not large:
            layers.append(plots.trajectories(mu, dims, ds.sequence, ds.times))
        if s.show_uncertainty and not large:
            layers.append(plots.latent_ellipses(mu, S, dims))
        times = seqs.seconds(ds, ds.times) if ds.times is not None else None
        draw = latent_density if large else plots.latent_points
        pts = draw(mu, dims, ds.labels, ds.label_names, ds.sequence, times, mode, seqs.time_unit(ds),
                   seqs.sequence_names(ds) if mode == "sequence" else None)
        layers.append(pts)
        if large and mode in ("label", "sequence"):  # the density image's colour key
            cats = categories(mode, ds.labels, ds.label_names, ds.sequence,
                              seqs.sequence_names(ds) if mode == "sequence" else None)
            layers.append(class_key(cats[1], dims))
        # single-element DynamicMaps (an Overlay-returning one would be collated into a new
        # object and the Tap/PointerXY sources below would no longer match)
        self._selected_source = None
        layers.append(plots.selected_marker(None, dims).opts(hooks=[self._grab_selected]))
        # the cursor cross moves on every mouse move: drawn once, then its data source is
        # updated in place (_move_marker), skipping a HoloViews re-render of the overlay
        self._marker_source = None
        layers.append(plots.cursor_marker(*s.cursor, dims).opts(hooks=[self._grab_marker]))
        overlay = layers[0]
        for layer in layers[1:]:
            overlay = overlay * layer
        x0, y0, x1, y1 = bounds
        name = s.dataset_name or "data"
        overlay = overlay.opts(
            title=f"{plots.LATENT_TITLE}: {name}", width=PLOT_W, height=PLOT_H,
            xlim=(x0, x1), ylim=(y0, y1), toolbar="below", active_tools=["wheel_zoom"],
            default_tools=["save", "pan", "wheel_zoom", "box_zoom", "reset"],
            # outside the data area: a legend inside it hid points and swallowed mouse moves
            legend_position="right", hooks=list(self.decorators))
        # the streams' source is the static points layer: the rendered overlay is a
        # transformed copy of ``overlay``, but its layers keep their identity
        pointer = PointerXY(source=pts)
        tap = Tap(source=pts)
        pointer.add_subscriber(self._on_move)
        tap.add_subscriber(self._on_tap)
        self._streams = (pointer, tap)
        return overlay

    def _background(self, fixed, show_variance, grid_res):
        s = self.state
        if not show_variance or s.model is None:
            return plots.empty_image(self._bounds, s.dims)
        fixed = np.asarray(fixed, dtype=np.float64)
        key = ("variance", fixed.tobytes(), s.dims, tuple(self._bounds), int(grid_res))
        var = shared(s.model, key, lambda: variance_grid(s.model, fixed, s.dims, self._bounds, grid_res))
        return plots.variance_image(var, self._bounds, s.dims)

    # The two markers are drawn on Bokeh's overlay layer: moving them repaints only that
    # layer, not the background image and the N points.
    def _grab_marker(self, plot, element):
        self._marker_source = plot.handles.get("source")
        plot.handles["glyph_renderer"].level = "overlay"
        self._move_marker()

    def _grab_selected(self, plot, element):
        self._selected_source = plot.handles.get("source")
        plot.handles["glyph_renderer"].level = "overlay"
        self._move_selected()

    @guarded
    def _move_selected(self, *events):
        src = self._selected_source
        s = self.state
        if src is None or s.model is None:
            return
        n = s.selected_index
        mu, _ = s.latent()
        xs, ys = ([float(mu[n, s.x_dim])], [float(mu[n, s.y_dim])]) if n >= 0 else ([], [])
        with unlocked():
            src.data = {"lx": xs, "ly": ys}

    @guarded
    def _move_marker(self, *events):
        src = self._marker_source
        if src is not None:
            x, y = self.state.cursor
            with unlocked():  # stream callbacks may run without the document lock
                src.data = {"lx": [x], "ly": [y]}


    @guarded
    def _on_move(self, x=None, y=None, **kw):
        with unlocked():  # everything a move changes (marker, output, readout) leaves as one message
            self.state.hover(x, y)

    @guarded
    def _on_tap(self, x=None, y=None, **kw):
        with unlocked():
            self.state.click(x, y)

    # ---- sliders for the other dims
    def _build_sliders(self, *events):
        m = self.state.model
        self._slider_widgets = {}
        if m is None:
            self._sliders.objects = []
            return
        mu, _ = self.state.latent()
        alpha = np.asarray(m.ard_weights)
        off = ard_off_mask(alpha)
        fixed = np.asarray(self.state.fixed)
        rows = []
        for q in range(m.latent_dim):
            lo, hi = float(mu[:, q].min()), float(mu[:, q].max())
            span = max(hi - lo, 1e-6)
            sl = pn.widgets.FloatSlider(
                label=f"dim {q}" + (" (off)" if off[q] else ""), start=lo - 0.25 * span, end=hi + 0.25 * span,
                step=span / 200, value=float(fixed[q]), width=250, format="0.000")
            sl.param.watch(functools.partial(self._on_slider, q), "value_throttled")
            self._slider_widgets[q] = sl
            rows.append(sl)
        self._sliders.objects = rows
        self._slider_visibility()

    def _slider_visibility(self, *events):
        for q, sl in self._slider_widgets.items():
            sl.visible = q not in self.state.dims

    def _sync_slider_values(self, *events):
        fixed = np.asarray(self.state.fixed)
        for q, sl in self._slider_widgets.items():
            if q < fixed.size and abs(sl.value - fixed[q]) > 1e-12:
                sl.value = float(np.clip(fixed[q], sl.start, sl.end))

    @guarded
    def _on_slider(self, q, event):
        self.state.set_fixed(q, event.new)

    @guarded
    def _reset_fixed(self):
        self.state.reset_fixed()

    def __panel__(self):
        explain = pn.pane.Markdown(
            "Points: the variational means of q(x_n) in the two chosen dimensions. "
            "Background: the predictive variance of f at each latent point (other dimensions at "
            "the slider values) -- **light where the model is confident, dark where it is "
            "extrapolating** (log colour scale). Move the mouse to generate (follow mode) or click to pin a point; "
            "clicking a training point also shows its data.",
            styles={"font-size": "12px"}, width=PLOT_W, margin=(0, 10))
        controls = pn.Row(self._follow, self._color, pn.Column(self._var, self._traj, self._unc))
        return pn.Column(self._pane, self._placeholder,
                         pn.Column(controls, self._large_note, explain, visible=self._has_model()))

    def _has_model(self):
        return pn.bind(lambda v: self.state.model is not None, self.state.param.model_version)

    def sliders_card(self):
        """The other dimensions' sliders (shown with a model: without one there are none)."""
        return pn.Card(self._reset, self._sliders, title="Other latent dimensions (held fixed)",
                       collapsed=False, width=300, visible=self._has_model())
