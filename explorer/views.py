"""Views: ``pn.viewable.Viewer`` subclasses that render an ``ExplorerState``.

Views own their widgets (created per instance, never as class attributes) and only
translate user actions into calls on the state; plots come from ``plots.py``.
Structural changes (new model, new axes, colouring) rebuild a plot; frequent ones
(mouse position, fixed-dimension sliders, view angle) stream into DynamicMaps so only
the changed glyphs are sent to the browser.
"""

from __future__ import annotations

import functools
import html
import logging
import traceback

import numpy as np
import holoviews as hv
import panel as pn
import param
from bokeh.models import Div
from holoviews.streams import Params, PointerXY, Tap
from panel.io.document import unlocked

from . import plots
from . import sequences as seqs
from .state import MAX_UPLOAD_MB, ExplorerState, UserError, ard_off_mask, variance_grid
from .userdata import one_per_name

log = logging.getLogger("explorer")

# Sizes chosen so that the page fits a 1280 px wide window (a scroll bar included): sidebar
# 290 + latent view 420 (its toolbar above the plot, not beside it) + right column 505, with
# margins 1265 (it was 1360, and the played figure was cut off on a 1280 px laptop screen).
PLOT_W, PLOT_H = 420, 460
OUT_W, OUT_H = 245, 270
RIGHT_W = 505
#: image outputs stand four in a row in the right column (generated mean and sd, played
#: frame and sd): what that row needs beside the four frames (borders, the sd colour bar,
#: gaps; measured on Frey faces)
IMAGE_ROW_EXTRA = 150


def image_frame(W: int, H: int, height: int = 135) -> tuple[int, int]:
    """(frame_width, frame_height) in px of one W x H image output: ``height`` tall, or
    less when four frames of this aspect would not fit the right column (square digits
    at 135 px overflowed it)."""
    aspect = W / H
    fh = min(float(height), (RIGHT_W - IMAGE_ROW_EXTRA) / (4.0 * aspect))
    return max(20, int(round(fh * aspect))), max(20, int(round(fh)))
#: a drop of several motion-capture files is read this long after its last file arrived
#: (FileDropper reports them one at a time: each report had re-read the whole set)
UPLOAD_SETTLE_MS = 1200
#: bytes per upload chunk (FileDropper's default, 10 MB, sends most files in one piece)
UPLOAD_CHUNK = 512 * 1024


#: A drop area lists a file once: a file dropped again (or from a folder, "dir/walk.amc")
#: replaces the item of that name in the area's list (FilePond listed both, while the server
#: keeps one: ``userdata.one_per_name``). FilePond announces each added file on its element
#: ("FilePond:addfile", bubbling out of Panel's shadow roots); the older item leaves the list
#: without telling the server (``revert: false``), whose copy the new upload replaces.
ONE_PER_NAME_JS = """
if (!window._bgplvm_one_per_name) {
  window._bgplvm_one_per_name = true;
  const own = (item) => String((item.file && item.file._relativePath) || item.filename).split(/[\\\\/]/).pop();
  document.addEventListener("FilePond:addfile", (e) => {
    const {pond, file, error} = e.detail || {};
    if (error || !pond || !file) return;
    for (const other of pond.getFiles())
      if (other.id !== file.id && own(other) === own(file)) pond.removeFile(other.id, {revert: false});
  });
}
"""


def one_listing_per_name(doc) -> None:
    """Install ONE_PER_NAME_JS in the page of ``doc`` (a Bokeh document) once it is ready."""
    from bokeh.events import DocumentReady
    from bokeh.models import CustomJS

    doc.js_on_event(DocumentReady, CustomJS(code=ONE_PER_NAME_JS))


def guarded(method):
    """Run a UI callback; user errors and unexpected ones end up in ``state.error``
    (shown in the page) instead of breaking the session."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except UserError as e:
            self.state.error = str(e)
        except Exception as e:  # noqa: BLE001 - the session must survive any bug
            log.error("explorer callback failed:\n%s", traceback.format_exc())
            self.state.error = f"Something went wrong ({type(e).__name__}: {e}). The session continues."
    return wrapper


def show_bokeh(pane, visible: bool) -> None:
    """Show or hide a ``pn.pane.Bokeh`` by its Bokeh object, inside ``unlocked()`` (callbacks
    run outside the document lock, where Bokeh raised "_pending_writes"). The pane copies
    its object's layout properties back into its own: a value set on the pane alone was
    reset from the object, so a player hidden once stayed hidden server-side while the
    browser kept showing the last model's figures."""
    with unlocked():
        pane.object.visible = visible
        pane.visible = visible


def checkbox(obj: param.Parameterized, name: str, label: str, **kw) -> pn.widgets.CheckBoxGroup:
    """A checkbox for boolean parameter ``name`` of ``obj`` (both ways) whose label is
    clickable: a one-item CheckBoxGroup, drawn as an HTML <label> around the box and its
    text. Bokeh's Checkbox draws its text beside the box, where clicks did nothing."""
    w = pn.widgets.CheckBoxGroup(options=[label], value=[label] if getattr(obj, name) else [], inline=True, **kw)

    def to_param(event):
        if (label in event.new) != getattr(obj, name):
            setattr(obj, name, label in event.new)

    def to_widget(event):
        want = [label] if event.new else []
        if w.value != want:
            w.value = want

    w.param.watch(to_param, "value")
    obj.param.watch(to_widget, name)
    return w


def number_input(obj: param.Parameterized, name: str, label: str, on_error, **kw) -> pn.widgets.Widget:
    """A number box for bounded parameter ``name`` of ``obj`` (both ways). A typed number
    outside the bounds is refused with a message (``on_error(text)``) and the box shows the
    parameter's value again: a box made with ``from_param`` kept showing the refused number
    (0 iterations, Q = 31) while the previous value was used, without a word."""
    p = obj.param[name]
    lo, hi = p.bounds
    cls = pn.widgets.IntInput if isinstance(p, param.Integer) else pn.widgets.FloatInput
    if p.doc:
        kw.setdefault("description", p.doc)  # the "?" tooltip, as from_param gives it
    w = cls(label=label, value=getattr(obj, name), **kw)

    def to_param(event):
        v, now = event.new, getattr(obj, name)
        if v is None or (lo is not None and v < lo) or (hi is not None and v > hi):
            on_error(f"{label}: {v} is not allowed; choose from {lo:g} to {hi:g} (it stays {now:g})")
            w.value = now
        elif v != now:
            setattr(obj, name, v)

    def to_widget(event):
        if w.value != event.new:
            w.value = event.new

    w.param.watch(to_param, "value")
    obj.param.watch(to_widget, name)
    return w


class TextBox(pn.viewable.Viewer):
    """A few lines of HTML text as a plain Bokeh Div, for text that changes while its tab
    may be hidden. Panel's Markdown pane, updated with its model outside the document (a
    hidden tab of the page's dynamic Tabs), was given Panel's stylesheets at cdn.holoviz.org,
    which the browser fetched when the tab came back (and failed to, offline); a Div has no
    Panel stylesheets. ``object`` is its HTML, written inside ``unlocked()`` (callbacks run
    outside the document lock)."""

    def __init__(self, text: str = "", width: int = RIGHT_W - 20, font_size: str = "12px",
                 color: str | None = None, css_classes: list[str] | None = None, margin=(0, 10)):
        super().__init__()
        styles = {"font-size": font_size, **({"color": color} if color else {})}
        self._div = Div(text=text, width=width, styles=styles, css_classes=css_classes or [])
        self._pane = pn.pane.Bokeh(self._div, margin=margin)

    @property
    def object(self) -> str:
        return self._div.text

    @object.setter
    def object(self, text: str) -> None:
        if text != self._div.text:
            with unlocked():
                self._div.text = text

    def __panel__(self):
        return self._pane


class _Rebuilding(pn.viewable.Viewer):
    """A view whose HoloViews pane is rebuilt when some state parameters change."""

    state = param.ClassSelector(class_=ExplorerState)
    _rebuild_on: tuple[str, ...] = ()

    def __init__(self, **params):
        super().__init__(**params)
        self._pane = pn.pane.HoloViews(None, linked_axes=False)
        self._placeholder = pn.pane.Markdown("", styles={"color": "#666"})
        self.state.param.watch(self._rebuild, list(self._rebuild_on))
        self._rebuild()

    @guarded
    def _rebuild(self, *events):
        obj = self._build() if self.state.model is not None else None
        self._pane.object = obj
        self._pane.visible = obj is not None
        self._placeholder.visible = obj is None
        self._placeholder.object = self._empty_text()

    def _empty_text(self) -> str:
        ds = self.state.dataset
        if ds is not None:
            return f"*No model of {html.escape(ds.name)} yet: press **Train** (section 2), or open a saved model.*"
        return "*No model yet: train one or open a saved model.*"

    def _build(self):  # pragma: no cover - abstract
        raise NotImplementedError


# --------------------------------------------------------------------------- ARD
class ArdView(_Rebuilding):
    """Bar chart of the ARD weights; clicking a bar puts that dimension on an axis."""

    _rebuild_on = ("model_version", "sort_ard")

    def __init__(self, **params):
        self._assign = pn.widgets.RadioButtonGroup(options={"x axis": "x", "y axis": "y"}, value="x",
                                                   color="default", width=150)
        super().__init__(**params)
        s = self.state
        self._xsel = pn.widgets.Select(label="x axis", width=210)
        self._ysel = pn.widgets.Select(label="y axis", width=210)
        self._sort = checkbox(s, "sort_ard", "sort by weight")
        self._xsel.param.watch(lambda e: self._select("x", e.new), "value")
        self._ysel.param.watch(lambda e: self._select("y", e.new), "value")
        s.param.watch(self._sync_selects, ["model_version", "x_dim", "y_dim"])
        self._sync_selects()

    def _build(self):
        s = self.state
        dmap = hv.DynamicMap(self._bars, streams=[Params(s, ["x_dim", "y_dim"])]).opts(
            width=PLOT_W - 60, height=230, toolbar="right", default_tools=["save"])
        # streams go on the final object: .opts() on a DynamicMap returns a new one
        self._tap = Tap(source=dmap)
        self._tap.add_subscriber(self._on_tap)
        return dmap

    def _bars(self, x_dim, y_dim):
        s = self.state
        if s.model is None:
            return plots.ard_bars(np.zeros(0), 0, 0)
        return plots.ard_bars(s.model.ard_weights, x_dim, y_dim, sort=s.sort_ard)

    @guarded
    def _on_tap(self, x=None, y=None, **kw):
        if x is None:
            return
        try:
            q = int(str(x).split()[0])  # category "3" or "3 off"
        except (TypeError, ValueError, IndexError):
            return
        self.state.assign_axis(q, self._assign.value)

    @guarded
    def _select(self, axis, q):
        if q is not None and self.state.model is not None:
            cur = self.state.x_dim if axis == "x" else self.state.y_dim
            if q != cur:
                self.state.assign_axis(q, axis)

    def _sync_selects(self, *events):
        m = self.state.model
        if m is None:
            return
        alpha = np.asarray(m.ard_weights)
        off = ard_off_mask(alpha)
        opts = {f"dim {q}  (alpha {alpha[q]:.3g}{', off' if off[q] else ''})": q for q in range(m.latent_dim)}
        for w, v in ((self._xsel, self.state.x_dim), (self._ysel, self.state.y_dim)):
            w.options = opts
            w.value = v

    def __panel__(self):
        help_ = pn.pane.Markdown(
            "One bar per latent dimension: the ARD weight alpha_q = 1/lengthscale_q^2. "
            "<span style='color:#b0b0b0'>Light grey</span>: switched off. "
            "<span style='color:#d62728'>Red</span>: x axis, <span style='color:#1f77b4'>blue</span>: y axis. "
            "Click a bar to show it on the chosen axis.",
            styles={"font-size": "12px"}, width=PLOT_W - 60, margin=(0, 10))
        has_model = pn.bind(lambda v: self.state.model is not None, self.state.param.model_version)
        return pn.Column(
            self._pane, self._placeholder,
            pn.Column(help_,
                      pn.Row(pn.pane.Markdown("Click assigns to", margin=(0, 5, 0, 10)), self._assign, self._sort),
                      pn.Row(self._xsel, self._ysel), visible=has_model),
        )


# --------------------------------------------------------------------------- latent view
class LatentView(_Rebuilding):
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
        self._traj.disabled = s.dataset is None or (s.dataset.sequence is None and s.dataset.times is None)
        # only the colourings this data set has (oil offered "sequence" and "time", which
        # then coloured nothing)
        self._color.options = ["auto", *s.color_modes(), "none"]  # the state falls back to auto

    # ---- plot
    def _build(self):
        s = self.state
        m = s.model
        dims = s.dims
        mu = np.asarray(m.latent_mean)
        S = np.asarray(m.latent_variance)
        ds = s.dataset
        bounds = s.bounds()
        self._bounds = bounds
        mode = s.color_mode()
        layers = []
        bg = hv.DynamicMap(self._background, streams=[Params(s, ["fixed", "show_variance", "grid_res"])])
        layers.append(bg)
        if s.show_trajectories and ds.sequence is not None:
            layers.append(plots.trajectories(mu, dims, ds.sequence, ds.times))
        if s.show_uncertainty:
            layers.append(plots.latent_ellipses(mu, S, dims))
        times = seqs.seconds(ds, ds.times) if ds.times is not None else None
        pts = plots.latent_points(mu, dims, ds.labels, ds.label_names, ds.sequence, times, mode,
                                  seqs.time_unit(ds),
                                  seqs.sequence_names(ds) if mode == "sequence" else None)
        layers.append(pts)
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
        from .shared import shared

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
        mu = np.asarray(s.model.latent_mean)
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
        mu = np.asarray(m.latent_mean)
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
        return pn.Column(self._pane, self._placeholder, pn.Column(controls, explain, visible=self._has_model()))

    def _has_model(self):
        return pn.bind(lambda v: self.state.model is not None, self.state.param.model_version)

    def sliders_card(self):
        """The other dimensions' sliders (shown with a model: without one there are none)."""
        return pn.Card(self._reset, self._sliders, title="Other latent dimensions (held fixed)",
                       collapsed=False, width=300, visible=self._has_model())


# --------------------------------------------------------------------------- output
class OutputView(_Rebuilding):
    """What the model generates at the cursor (mean and uncertainty), and the data of
    the selected training point beside it."""

    _rebuild_on = ("model_version", "dataset")

    def _empty_text(self) -> str:
        # with data loaded the latent view's message says it (and the player shows the data)
        return "" if self.state.dataset is not None else super()._empty_text()

    def __init__(self, **params):
        self._train_pane = pn.pane.HoloViews(None, linked_axes=False)
        # vectors: the training point is drawn in the Generated plot, and the tab was empty
        self._train_note = pn.pane.Markdown(
            "For data drawn as vectors the selected training point is drawn in the **Generated** plot above "
            "(black diamonds), beside what the model generates. Click a point in the latent view.",
            styles={"font-size": "13px"}, width=RIGHT_W - 20, visible=False)
        self._sd_pane = pn.pane.HoloViews(None, linked_axes=False)
        super().__init__(**params)
        s = self.state
        self._az = pn.widgets.FloatSlider(label="view azimuth (deg)", start=-180, end=180, step=5,
                                          value=s.azimuth, width=200)
        self._el = pn.widgets.FloatSlider(label="view elevation (deg)", start=-30, end=90, step=5,
                                          value=s.elevation, width=200)
        self._az.param.watch(lambda e: setattr(s, "azimuth", e.new), "value")
        self._el.param.watch(lambda e: setattr(s, "elevation", e.new), "value")
        # fixed size: a changing text must not make the browser re-layout the page
        # a plain Bokeh Div: its text changes on every mouse move, and a Markdown pane
        # re-rendered its HTML and style sheets each time (~15 ms per move on the server)
        self._readout_div = Div(text="", width=RIGHT_W, height=22, css_classes=["readout"],
                                # one line: a long one (a selected point's label) wrapped onto
                                # the figures' titles below
                                styles={"font-family": "monospace", "font-size": "12px", "white-space": "nowrap",
                                        "overflow": "hidden", "text-overflow": "ellipsis"})
        self._readout = pn.pane.Bokeh(self._readout_div, sizing_mode="fixed", margin=(0, 5))
        # the output first, the readout last: the readout's text (with the coordinates) then
        # closes the update a mouse move causes (the load test's probe times that message)
        s.param.watch(self._push, ["cursor", "azimuth", "elevation", "selected_index", "fixed"])
        s.param.watch(self._update_readout, ["cursor", "selected_index", "pinned", "follow",
                                             "x_dim", "y_dim", "model_version"])
        self._update_readout()

    @property
    def kind(self) -> str:
        ds = self.state.dataset
        return getattr(getattr(ds, "renderer", None), "kind", "vector") if ds is not None else "vector"

    def _build(self):
        s = self.state
        ds = s.dataset
        Y = ds.Y
        self._ylim = None
        self._limits = None
        if self.kind == "pose":
            from .sequences import pose_extent
            from .shared import shared

            self._zc, R = shared(ds, "pose_extent", lambda: pose_extent(ds.renderer, Y))
            self._limits = (-R, -R, R, R)
        elif self.kind == "vector":
            lo, hi = float(Y.min()), float(Y.max())
            pad = 0.1 * (hi - lo or 1.0)
            self._ylim = (lo - pad, hi + pad)
        # The generated output is drawn once per rebuild; after that every cursor move
        # writes new columns straight into the Bokeh data sources (see _push): ~1 ms
        # instead of a HoloViews re-render (~20-50 ms) per mouse move.
        self._sources, self._figures = {}, {}
        # the data set and its kind as they are now: this DynamicMap outlives a change of data
        # set until the rebuild replaces it, and one returning Curves for oil must not be
        # asked for an Image of the digits (HoloViews raised, and the tab stayed empty)
        kind = self.kind

        def training(selected_index, azimuth, elevation):
            return self._training(ds, kind, selected_index, azimuth, elevation)

        train = hv.DynamicMap(training, streams=[Params(s, ["selected_index", "azimuth", "elevation"])])
        # the title at the player's size: at HoloViews' default "Generated at (0.17, -0.43)"
        # was cut in a 245 px figure
        size = dict(width=OUT_W, height=OUT_H, toolbar=None, default_tools=[], fontsize={"title": "10pt"})
        self._sd_pane.object = None
        gen = self._generated_element()
        if self.kind == "image":
            h, w = ds.renderer.image(Y[0]).shape
            fw, fh = image_frame(w, h)
            size = dict(frame_height=fh, frame_width=max(60, fw), toolbar=None,
                        default_tools=[], fontsize={"title": "10pt"})
            self._train_pane.object = train.opts(**size, colorbar=False)
            sd = self._sd_element()  # a narrower bar, keeping the element's own bar options (its ticks)
            sd.opts(**size, colorbar_opts={**(sd.opts.get().kwargs.get("colorbar_opts") or {}), "width": 8})
            self._sd_pane.object = sd
            return gen.opts(**size, colorbar=False)
        if self.kind == "vector":
            size.update(width=OUT_W, height=OUT_H)
        self._train_pane.object = train.opts(**size)
        return gen.opts(**size)

    def _rebuild(self, *events):
        super()._rebuild(*events)
        has = self.state.model is not None
        self._train_pane.visible = has and self.kind != "vector"
        self._train_note.visible = has and self.kind == "vector"
        self._sd_pane.visible = has and self.kind == "image"

    # ---- pose helpers
    def _centre(self, P):
        return P - np.array([P[:, 0].mean(), P[:, 1].mean(), self._zc])

    # ---- generated output: built once, then updated in place
    def _grab(self, name):
        """HoloViews hook: remember the Bokeh data source and figure of layer ``name`` and
        fill it with the output at the current cursor."""
        def hook(plot, element):
            self._sources[name] = plot.handles.get("source")
            self._figures[name] = plot.state
            self._push(only=name)
        return hook

    def _add_discs(self, plot, element):
        from bokeh.models import ColumnDataSource

        src = ColumnDataSource(dict(x=[], y=[], r=[]))
        plot.state.circle(x="x", y="y", radius="r", source=src, fill_color=plots.CURSOR_COLOR, fill_alpha=0.2,
                          line_color=plots.CURSOR_COLOR, line_alpha=0.6, line_width=1.2)
        self._sources["discs"] = src
        self._push(only="discs")

    def _title(self):
        """Short enough for the figure: an image's is ~110 px wide, so its title leaves the
        coordinates to the readout above ("Generated (-0.39" was all that showed)."""
        if self.kind == "image":
            return "Generated"
        # the coordinates alone: "Generated at x1=0.17, x2=-0.43" was cut; the readout above
        # names the dimensions
        x, y = (round(float(v), 2) + 0.0 for v in self.state.cursor)  # + 0.0: no "-0.00"
        return f"Generated at ({x:.2f}, {y:.2f})"

    def _columns(self) -> dict:
        """{layer name: Bokeh columns} of the output at the cursor."""
        s = self.state
        mean, var = s.generate(*s.cursor)
        r = s.dataset.renderer
        if self.kind == "pose":
            from .state import pose_spread

            d = plots.pose_data(self._centre(r.positions(mean)), r.connections, s.azimuth, s.elevation)
            f32 = lambda a: np.asarray(a, dtype=np.float32)  # noqa: E731 - half the bytes per move
            uv = d["joints"]
            return {"discs": {"x": f32(uv[:, 0]), "y": f32(uv[:, 1]), "r": f32(2 * pose_spread(r, mean, var))},
                    "bones": {k: f32(v) for k, v in plots.segments_columns(d["bones"]).items()},
                    "joints": {"u": f32(uv[:, 0]), "v": f32(uv[:, 1])}}
        std = np.sqrt(np.maximum(var, 0))
        if self.kind == "image":
            return {"mean": {"image": [r.image(mean)[::-1]]}, "sd": {"image": [r.image(seqs.f_sd(s.model, var))[::-1]]}}
        d = np.arange(mean.size)
        train = s.dataset.Y[s.selected_index] if s.selected_index >= 0 else np.full_like(mean, np.nan)
        return {"band": plots.spread_columns(d, mean, 2 * std), "mean": {"d": d, "y": mean},
                "train": {"d": d, "y": train}}

    @guarded
    def _push(self, *events, only=None):
        if self.state.model is None or not self._sources:
            return
        cols = self._columns()
        with unlocked():  # stream callbacks may run without the document lock
            for name, src in list(self._sources.items()):
                if src is not None and name in cols and (only is None or name == only):
                    src.data.update(cols[name])  # only these columns (an image keeps x, y, dw, dh)
            for name, fig in self._figures.items():
                if only is not None and name != only:
                    continue
                if name == "sd":
                    sd = cols["sd"]["image"][0]
                    fig.title.text = f"Per-pixel sd (max {sd.max():.3g})"
                else:
                    fig.title.text = self._title()

    def _generated_element(self):
        s = self.state
        mean, var = s.generate(*s.cursor)
        r = s.dataset.renderer
        if self.kind == "pose":
            el = plots.pose_plot(np.zeros((0, 3)), (), s.azimuth, s.elevation, spread=None,
                                 limits=self._limits, title=self._title())
            # the 2-sd spread of each joint as one disc per joint (J x 3 numbers per move,
            # where 20 circle segments per joint were J x 80), drawn under the bones
            list(el)[0].opts(hooks=[self._add_discs])
            for layer, name in zip(list(el)[1:], ("bones", "joints")):
                layer.opts(hooks=[self._grab(name)])
            return el
        if self.kind == "image":
            vmin, vmax = seqs.image_range(self.state.dataset)
            return plots.image_plot(r.image(mean), self._title(), vmin, vmax).opts(hooks=[self._grab("mean")])
        el = plots.vector_plot(mean, np.sqrt(np.maximum(var, 0)), None, title=self._title(), ylim=self._ylim)
        for layer, name in zip(el, ("band", "mean", "train")):
            layer.opts(hooks=[self._grab(name)])
        return el

    def _sd_element(self):
        mean, var = self.state.generate(*self.state.cursor)
        sd = self.state.dataset.renderer.image(seqs.f_sd(self.state.model, var))
        return plots.image_plot(sd, f"Per-pixel sd (max {sd.max():.3g})", *seqs.sd_range(self.state.model),
                                cmap="magma", label="sd of f", log=True).opts(hooks=[self._grab("sd")])

    def _training(self, ds, kind, selected_index, azimuth, elevation):
        """The training point's figure for data set ``ds`` of kind ``kind`` (those of the
        build: the state may already hold the next data set)."""
        r = ds.renderer
        n = selected_index if selected_index < ds.N else -1
        if n >= 0:  # an image's figure is narrow: "Training point #146" showed as "#1"
            title = f"Training #{n}" if kind == "image" else f"{plots.TRAIN_TITLE} #{n}"
        else:
            title = ("Click a point" if kind == "image"  # narrow: "Training point: click one" was cut
                     else f"{plots.TRAIN_TITLE}: click one" + (" in the latent view" if kind == "pose" else ""))
        if kind == "pose":
            if n < 0:
                return plots.pose_plot(np.zeros((0, 3)), (), azimuth, elevation, limits=self._limits, title=title)
            P = self._centre(r.positions(ds.Y[n]))
            return plots.pose_plot(P, r.connections, azimuth, elevation, limits=self._limits, title=title,
                                   color="#333333")
        if kind == "image":
            vmin, vmax = seqs.image_range(ds)
            # no point yet: a blank (white) frame; NaN made HoloViews warn "All-NaN slice"
            img = r.image(ds.Y[n]) if n >= 0 else np.full(r.image(ds.Y[0]).shape, vmax)
            return plots.image_plot(img, title, vmin, vmax)
        return hv.Curve([])

    def _update_readout(self, *events):
        text = self.state.readout() if self.state.model is not None else ""
        with unlocked():  # stream callbacks may run without the document lock
            self._readout_div.text = html.escape(text)

    def _caption(self):
        if self.state.model is None:  # nothing is drawn: no caption for it
            return ""
        forecast = ", purple = forecast" if self.state.is_dynamical else ""  # only a dynamical model forecasts
        return {"pose": "Left: the pose generated at the cursor; red discs: 2 sd of each joint's position. "
                        "Right: the played sequence; discs: 2 sd per joint from the uncertain-input moments "
                        f"(covFstar){forecast}. Drag the angle sliders to turn both figures.",
                "image": "Generated at the cursor: mean image and per-pixel sd of f (noise excluded, log colour "
                         "scale: black = sure; at a fixed latent point the model's variance is the same for every "
                         "pixel)." + (
                             " Played: the sequence's frame and its sd image, which varies per pixel where q(x*) "
                             "is uncertain (covFstar); it grows in the forecast."
                             if self.state.dataset is not None and self.state.dataset.times is not None else ""),
                "vector": "Red line: predicted mean; band: +-2 sd; black diamonds: the selected "
                          "training point."}.get(self.kind, "")

    def caption_panel(self):
        caption = pn.pane.Markdown(pn.bind(lambda v: self._caption(), self.state.param.model_version),
                                   styles={"font-size": "12px"}, margin=(0, 10), width=RIGHT_W)
        angle = pn.Row(self._az, self._el, visible=pn.bind(lambda v: self.kind == "pose",
                                                           self.state.param.model_version))
        return pn.Column(caption, angle)

    @property
    def readout_pane(self):
        return self._readout

    def generated_panel(self):
        """The output at the cursor (and its sd image for images)."""
        return pn.Row(self._pane, self._sd_pane, self._placeholder)

    def training_panel(self):
        """The data of the clicked training point (for vectors: where to find it)."""
        return pn.Column(self._train_pane, self._train_note)

    def __panel__(self):
        return pn.Column(self._readout, pn.Row(self.generated_panel(), self._train_pane), self.caption_panel())


# --------------------------------------------------------------------------- model panel
class LiveBoundCurve(pn.viewable.Viewer):
    """The bound against iteration of a fit in progress, drawn once and then extended in
    place: each progress poll streams only the new points into the plot's data source
    and moves its axis ranges, instead of re-rendering the HoloViews element (tens of ms
    of the server's one interpreter, four times a second, which every other session's
    mouse moves waited behind)."""

    visible = param.Boolean(default=False)

    def __init__(self, **params):
        super().__init__(**params)
        self._source = self._plot = None
        self._n = 0
        self._pane = pn.pane.HoloViews(
            plots.bound_curve([]).opts(width=250, height=170, toolbar=None, hooks=[self._grab]),
            linked_axes=False, visible=self.param.visible)

    def _grab(self, plot, element):
        from bokeh.models import NumeralTickFormatter

        self._source, self._plot = plot.handles["source"], plot.state
        self._plot.yaxis.formatter = NumeralTickFormatter(format="0,0")  # not "3.000e+5"
        self._n = 0

    def update(self, history) -> None:
        src = self._source
        if src is None:
            return
        if len(history) < self._n:  # a new fit: start over
            self._n = 0
        new = history[self._n:]
        if not new:
            return
        cols = {"iteration": [it for it, _, _ in new], "bound": [b for _, b, _ in new]}
        with unlocked():
            if self._n == 0:
                src.data = cols
            else:
                src.stream(cols)
            self._n = len(history)
            self._set_ranges(history)

    def _set_ranges(self, history) -> None:
        """x: the iterations so far; y: the bounds after the first tenth of the fit, whose
        first values (millions below the final bound) would flatten everything else."""
        first, last = history[0][0], history[-1][0]
        tail = [b for _, b, _ in history[len(history) // 10:]]
        lo, hi = min(tail), max(tail)
        pad = 0.05 * (hi - lo) or 1.0
        self._plot.x_range.start, self._plot.x_range.end = first, max(last, first + 1)
        self._plot.y_range.start, self._plot.y_range.end = lo - pad, hi + pad

    def __panel__(self):
        return self._pane


class ModelPanel(pn.viewable.Viewer):
    """Data set / upload / saved model, training settings, Train/Stop with live
    progress, model summary and Save."""

    state = param.ClassSelector(class_=ExplorerState)

    def __init__(self, dataset_options: dict | None = None, **params):
        super().__init__(**params)
        s = self.state
        opts = dataset_options or {}
        self._ds_select = pn.widgets.Select(label="Data set", options=opts,
                                            value=s.dataset_name if s.dataset_name in opts.values() else None,
                                            width=250)
        self._ds_load = pn.widgets.Button(label="Load data set", width=120)
        self._ds_load.on_click(self._load_dataset)
        from bgplvm.assets import ASSETS

        self._assets = {a.title: a.name for a in ASSETS.values()}
        self._datasets = dict(opts)
        self._asset_select = pn.widgets.Select(label="Pre-trained model", width=250, css_classes=["asset-select"],
                                               options=dict(self._assets))
        self._asset_open = pn.widgets.Button(label="Open model", width=120)
        self._asset_open.on_click(self._open_asset)
        s.param.watch(self._follow_choices, ["asset_name", "dataset_name", "model_version"])
        # FileDropper checks the size in the browser (so a huge file never reaches the
        # server) and uploads in chunks; the server checks size and type again. (No
        # accepted_filetypes: browsers report no MIME type for .npy, which FilePond rejects.)
        self._renewal: dict[str, object] = {}
        self._upload_slot = pn.Column(margin=0)
        self._model_upload_slot = pn.Column(margin=0)
        self._new_droppers(array=True, model=True)
        self._kind = pn.widgets.RadioButtonGroup.from_param(s.param.upload_kind, width=250,
                                                            css_classes=["upload-kind"])
        def refuse(text):
            s.error = text

        self._H = number_input(s, "image_height", "height H", refuse, width=70)
        self._W = number_input(s, "image_width", "width W", refuse, width=70)
        self._order = pn.widgets.Select.from_param(s.param.image_order, label="pixels", width=70,
                                                   options={"rows": "C", "columns": "F"})
        self._frames = checkbox(s, "rows_are_frames", "rows are frames in time order")
        self._fps = number_input(s, "upload_fps", "frames/s", refuse, width=70)
        self._sub = number_input(s, "mocap_subsample", "AMC: every k-th", refuse, width=110)
        self._Q = number_input(s, "latent_dim", "latent dims Q", refuse, width=70)
        self._M = number_input(s, "num_inducing", "inducing M", refuse, width=70)
        self._iters = number_input(s, "max_iters", "iterations", refuse, width=70, step=50,
                                   css_classes=["iters-input"])
        self._kernel = pn.widgets.Select.from_param(s.param.kernel, label="kernel", width=250)
        self._prior = pn.widgets.RadioButtonGroup.from_param(s.param.prior, width=250, css_classes=["prior-choice"])
        self._time_kernel = pn.widgets.Select.from_param(s.param.time_kernel, label="time kernel (dynamical prior)",
                                                         width=250)
        self._train = pn.widgets.Button(label="Train", color="primary", width=120)
        self._stop = pn.widgets.Button(label="Stop", color="danger", width=120, disabled=True)
        self._train.on_click(self._start)
        self._stop.on_click(lambda e: self.state.stop_training())
        self._progress = pn.indicators.Progress(value=0, max=100, width=250, visible=False, bar_color="primary")
        self._status = pn.pane.Markdown("", width=250, styles={"font-size": "12px"}, css_classes=["train-status"])
        self._curve = LiveBoundCurve()
        self._summary = pn.pane.Markdown("", width=250, styles={"font-size": "12px"}, css_classes=["summary"])
        self._save = pn.widgets.FileDownload(callback=self._save_bytes, filename="model.npz",
                                             label="Save model (download)", width=250, color="success")
        self._cb = None
        self._prior_note = pn.pane.Markdown("", styles={"font-size": "12px"}, margin=(5, 10, 0, 10))
        s.param.watch(self._on_training, ["training"])
        s.param.watch(self._prior_choice, ["dataset"])
        self._prior_choice()
        s.param.watch(self._on_progress, ["bound_history", "train_status"])
        s.param.watch(self._on_model, ["model_version", "dataset_name"])
        self._on_model()
        self._follow_choices()

    #: what the two selects show for a model or data that are not among their choices
    OWN_MODEL = "(your own model: trained or opened)"
    NO_MODEL = "(none open: choose one)"
    OWN_DATA = "(your own data)"

    def _follow_choices(self, *events):
        """The Pre-trained model and Data set selects name what is open: a shipped asset or
        data set, else an entry saying it is the user's own (they kept naming the previous
        one after an upload or a fit)."""
        s = self.state
        own = s.model is not None and not s.asset_name
        if s.model is None:  # it named the last pre-trained model over other data, as if open
            self._asset_select.options = {self.NO_MODEL: "", **self._assets}
            self._asset_select.value = ""
        else:
            self._asset_select.options = {**self._assets, self.OWN_MODEL: ""} if own else dict(self._assets)
            self._asset_select.value = "" if own else s.asset_name
        mine = bool(s.dataset_name) and s.dataset_name not in self._datasets.values()
        self._ds_select.options = {**self._datasets, self.OWN_DATA: ""} if mine else dict(self._datasets)
        if mine:
            self._ds_select.value = ""
        elif s.dataset_name:
            self._ds_select.value = s.dataset_name

    # ---- data
    @guarded
    def _load_dataset(self, event=None):
        name = self._ds_select.value
        if not name:
            raise UserError("choose a data set first")
        self._ds_load.loading = True
        try:
            self.state.load_dataset(name)
        finally:
            self._ds_load.loading = False

    @guarded
    def _open_asset(self, event=None):
        if not self._asset_select.value:
            raise UserError("choose a pre-trained model to open")
        self._asset_open.loading = True
        try:
            self.state.open_asset(self._asset_select.value)
        finally:
            self._asset_open.loading = False

    @staticmethod
    def _one_file(value) -> tuple[str, bytes] | None:
        if not value:
            return None
        name, data = list(value.items())[-1]
        return name, data.encode() if isinstance(data, str) else data

    def _new_droppers(self, array: bool = False, model: bool = False) -> None:
        """Fresh, empty drop areas. A FileDropper's file list cannot be cleared from the
        server, so a finished upload (read, or refused with a message) gets a new widget:
        no stale 'Upload complete' on a refused file, and the next file dropped is the one
        read even when it has the name of an earlier one. The area grows with its list
        (min_height, not height) so a file in flight never covers the controls below."""
        def dropper(multiple, css, on_value, slot):
            # small chunks: a file still arriving is then in the widget's buffer between
            # chunks, which _renew checks before replacing the widget
            # no previews (data files have none): FilePond's pdf-preview plugin reads a file
            # view's item every frame, also once the item is gone (a duplicate taken off the
            # list, a replaced drop area): "Cannot read properties of null (reading 'file')"
            w = pn.widgets.FileDropper(max_file_size=f"{MAX_UPLOAD_MB}MB", multiple=multiple, width=250,
                                       min_height=90, layout="compact", css_classes=[css],
                                       chunk_size=UPLOAD_CHUNK, previews=[])
            w.param.watch(on_value, "value")
            slot.objects = [w]
            return w

        if array:
            self._upload = dropper(True, "upload-array", self._on_upload, self._upload_slot)
        if model:
            self._model_upload = dropper(False, "upload-model", self._on_model_upload, self._model_upload_slot)

    @guarded
    def _on_upload(self, event):
        # each file once, the latest of a name (a file dropped again replaces its value)
        files = {n: (d.encode() if isinstance(d, str) else d) for n, d in one_per_name(event.new or {}).items()}
        mocap = {n: d for n, d in files.items() if n.lower().endswith((".asf", ".amc"))}
        if mocap and list(files)[-1] in mocap:
            # a skeleton and its motions arrive one by one (the value grows a file at a
            # time, ~1 s apart for CMU's 300 KB motions): read them once the drop has
            # settled, not once per file
            self.state.info = f"Receiving motion capture: {', '.join(mocap)}..."
            self._settle("mocap", lambda: self._read_mocap(files, mocap))
        elif files:
            self._settle("mocap", None)  # a mocap read still waiting is overtaken
            self._read_files(files)

    @guarded
    def _read_mocap(self, files: dict, mocap: dict) -> None:
        # more motions may follow a set that loaded: the list is kept (and grows) unless
        # the files are refused
        read = self._read_upload(self.state.load_upload_files, mocap)
        if read is None:
            self._renew("array")
        self._say_unread(read, [n for n in files if n not in mocap])

    def _settle(self, key: str, fn, ms: int = UPLOAD_SETTLE_MS, widget=None) -> None:
        """Run ``fn`` ``ms`` after the last call with this key, and not while a file is still
        arriving in ``widget`` (the array drop area by default; Panel keeps a file's chunks
        in ``_file_buffer``). None: cancel the waiting one. At once without a browser session
        (tests, notebooks' static render: nothing to wait for)."""
        token = self._renewal[key] = object()
        if fn is None:
            return
        doc = pn.state.curdoc
        if doc is None or doc.session_context is None:
            fn()
            return

        def go():
            if self._renewal.get(key) is not token:
                return  # a newer call schedules its own
            if getattr(widget or self._upload, "_file_buffer", None):
                doc.add_timeout_callback(go, ms)  # a file is on its way
                return
            fn()

        doc.add_timeout_callback(go, ms)

    def _read_files(self, files: dict) -> None:
        """One array or image file: the last one dropped (the others are named)."""
        if files:
            read = self._read_upload(self.state.load_upload, *list(files.items())[-1])
            self._renew("array")
            self._say_unread(read, list(files)[:-1])

    def _say_unread(self, read, unread: list[str]) -> None:
        if read is not None and unread:  # files dropped together with others were ignored without a word
            self.state.info += (f" Not read: {', '.join(unread)} (motion capture is one .asf with its .amc "
                                "files; any other file is read when it is dropped on its own).")

    @guarded
    def _on_model_upload(self, event):
        f = self._one_file(event.new)
        if f is not None:
            self._read_upload(self.state.load_model_bytes, *f)
            self._renew("model")

    def _renew(self, which: str, ms: int = 1500) -> None:
        """A fresh drop area ``ms`` after a finished upload: FilePond animates the finished
        file for a while, and a widget replaced at once made it write to its destroyed list
        (a page error). Not while another file is arriving in the old one, and not for an
        upload that a newer one has followed (``_settle``)."""
        old = self._upload if which == "array" else self._model_upload
        self._settle(which, lambda: self._new_droppers(array=which == "array", model=which == "model"),
                     ms, widget=old)

    @guarded
    def _read_upload(self, load, *args):
        """``load``'s result (True for one that returns nothing); None when it was refused
        (the message is in ``state.error``)."""
        out = load(*args)
        return True if out is None else out

    # ---- training
    @guarded
    def _start(self, event=None):
        if self.state.training:  # a second click of a double click: the fit has started
            return
        self.state.start_training()
        if self._cb is None:
            self._cb = pn.state.add_periodic_callback(self._poll, period=250)

    @guarded
    def _poll(self):
        running = self.state.poll()
        if not running and self._cb is not None:
            self._cb.stop()
            self._cb = None

    def _on_training(self, *events):
        t = self.state.training
        self._train.disabled = t
        self._stop.disabled = not t
        self._progress.visible = t
        self._curve.visible = t or bool(self.state.bound_history)
        # the upload's own settings too: changed while training they were shown but not
        # applied (the data set cannot change under a fit)
        for w in (self._ds_load, self._upload, self._model_upload, self._Q, self._M, self._iters, self._kernel,
                  self._time_kernel, self._asset_open, self._kind, self._H, self._W, self._order,
                  self._frames, self._fps, self._sub):
            w.disabled = t
        self._prior_choice()

    def _prior_choice(self, *events):
        """The prior is a choice only for data with time stamps: without them dynamical
        could be picked and failed at Train ("a dynamical model needs time stamps")."""
        ds = self.state.dataset
        timed = ds is not None and ds.times is not None
        self._prior.disabled = self.state.training or not timed
        self._prior_note.object = ("**Latent prior** (dynamical: a GP over time, for sequences" +
                                   ("):" if timed or ds is None else "; this data set has no time stamps):"))

    def _on_progress(self, *events):
        h = self.state.bound_history
        self._curve.update(h)
        if h:
            self._progress.value = int(min(100, 100 * h[-1][0] / max(1, self.state.max_iters)))
        # a model opened or data loaded clears the history: the last fit's curve goes too
        self._curve.visible = self.state.training or bool(h)
        self._status.object = self.state.train_status

    def _on_model(self, *events):
        info = self.state.summary()
        if not info:
            self._summary.object = "*No model yet.*"
            self._save.disabled = True
            return
        self._save.disabled = False
        self._save.filename = f"bgplvm-{self.state.dataset_name or 'model'}-Q{info['Q']}.npz"
        self._summary.object = (
            f"- **data**: {self.state.dataset_name} ({info['N']} x {info['D']})\n"
            f"- **lower bound**: {info['bound']:,.2f}\n"
            f"- **noise variance**: {info['noise_variance']:.4g}\n"
            f"- **signal variance**: {info['kernel_variance']:.4g}\n"
            f"- **signal-to-noise** (sd ratio): {info['snr']:.3g}\n"
            f"- **latent dims**: {info['Q']} ({info['active']} active), **M** = {info['M']}\n"
            f"- **kernel**: {info['kernel'] or '?'}\n")

    def _save_bytes(self):
        try:
            return self.state.save_model_bytes()
        except UserError as e:
            self.state.error = str(e)
            return None

    def __panel__(self):
        data = pn.Card(
            self._asset_select, self._asset_open,
            self._ds_select, self._ds_load,
            pn.pane.Markdown(f"**Or upload your own** (at most {MAX_UPLOAD_MB} MB): an array (.npy, .npz, .csv; "
                             "N rows x D columns; an .npz may add time stamps `t` and sequence ids `sequence`), "
                             "or motion capture: one .asf skeleton with its .amc motions.",
                             styles={"font-size": "12px"}, margin=(5, 10, 0, 10)),
            self._upload_slot,
            pn.pane.Markdown("An array's rows are drawn as:", styles={"font-size": "12px"}, margin=(0, 10)),
            self._kind,
            pn.Row(self._H, self._W, self._order,
                   visible=pn.bind(lambda k: k == "image sequence", self.state.param.upload_kind)),
            self._frames, pn.Row(self._fps, self._sub),
            pn.pane.Markdown("**Or open a saved model** (.npz from *Save model*):",
                             styles={"font-size": "12px"}, margin=(5, 10, 0, 10)),
            self._model_upload_slot,
            title="1. Data", width=280)
        train = pn.Card(
            pn.Row(self._Q, self._M, self._iters), self._kernel,
            self._prior_note,
            self._prior, pn.Row(self._time_kernel, visible=pn.bind(lambda p: p == "dynamical", self.state.param.prior)),
            pn.Row(self._train, self._stop),
            self._progress, self._status, self._curve, title="2. Train", width=280)
        summary = pn.Card(self._summary, self._save, title="3. Model", width=280)
        return pn.Column(data, train, summary, width=290)
