"""The observe-and-infer tab: choose test frames and what to hide, infer, compare.

The figure shows the frame as observed -- hidden joints ringed in red and their bones
dashed (click joints to hide or show them) -- and after inference the reconstruction over
the truth (grey ghost): inferred bones in orange with 2-sd discs from the uncertain-input
moments at q(x*). The latent view gets q(x*): its mean (a star) and 2-sd ellipse, or the
path of a stretch. The readout gives the error of the hidden part (RA in degrees for joint
angles) beside a nearest-neighbour fill. A stretch of frames plays in the player against
its truth.
"""

from __future__ import annotations

import html

import numpy as np
import panel as pn
import param
from bokeh.events import Tap
from bokeh.models import ColumnDataSource, LogColorMapper, Range1d
from bokeh.palettes import Magma256
from bokeh.plotting import figure
from panel.io.document import unlocked

from . import masks as M
from . import sequences as seqs
from .figures import colormap
from .inference import noun as row_noun
from .latent_layers import DrawnInto
from .plots import INFERRED_COLOR
from .shared import shared
from .state import ExplorerState
from .widgets import RIGHT_W, TextBox, guarded, show_bokeh

INFER_TITLE = "Observed & inferred"
#: (width, height) of each small image figure, and of its frame (the figure less its title
#: and borders): the data ranges are padded to the frame's shape so that pixels are square
IMAGE_FIG = (121, 180)  # four in a row fill the right column (RIGHT_W - 20)
IMAGE_FRAME = (113, 154)
HIDDEN_COLOR = "#e6194b"
GHOST_COLOR = "#b8b8b8"
OBSERVED_COLOR = "#1f3b73"


def square_pixels(W: int, H: int, frame: tuple[int, int] = IMAGE_FRAME) -> tuple[float, float, float, float]:
    """(x0, x1, y0, y1) ranges that show a W x H image whole, centred, with square pixels in
    a frame of ``frame`` (width, height) screen pixels: the longer side fills the frame."""
    fw, fh = frame
    scale = max(W / fw, H / fh)  # data units per screen pixel
    pw, ph = (fw * scale - W) / 2, (fh * scale - H) / 2
    return -pw, W + pw, -ph, H + ph


class InferView(pn.viewable.Viewer):
    state = param.ClassSelector(class_=ExplorerState)

    def __init__(self, **params):
        super().__init__(**params)
        s = self.state
        self.ghost = ColumnDataSource(dict(x0=[], y0=[], x1=[], y1=[]))
        self.bones = ColumnDataSource(dict(x0=[], y0=[], x1=[], y1=[], color=[], dash=[]))
        self.joints = ColumnDataSource(dict(x=[], y=[], color=[], hidden=[]))
        self.discs = ColumnDataSource(dict(x=[], y=[], r=[]))
        # the observed image is RGBA (uint32: a float placeholder broke the page while the
        # image figures are built but hidden, "offset is out of bounds")
        self.images = {k: ColumnDataSource(dict(image=[np.zeros((1, 1), np.uint32 if k == "observed" else float)],
                                                x=[0], y=[0], dw=[1], dh=[1]))
                       for k in ("observed", "inferred", "truth", "sd")}
        self.vec = ColumnDataSource(dict(d=[], truth=[], mean=[], lo=[], hi=[]))
        self.vec_hidden = ColumnDataSource(dict(d=[]))
        # latent view layers
        self.lat_ell = ColumnDataSource(dict(xs=[], ys=[]))
        self.lat_path = ColumnDataSource(dict(x=[], y=[]))
        self.lat_star = ColumnDataSource(dict(x=[], y=[]))
        self._drawn = DrawnInto()
        self._fig_pane = pn.pane.Bokeh(None)
        self._fig_pane.object = self._build()  # once, before the page exists (``_build``)
        self._use_kind("pose")
        self._kind = None
        self._uv = None
        self._extent = None

        self._source = pn.widgets.Select(label="test frames", width=235, css_classes=["infer-source"])
        self._frame = pn.widgets.IntSlider(label="first frame", start=0, end=1, value=0, width=250,
                                           css_classes=["infer-frame"])
        self._length = pn.widgets.IntInput(label="frames (a stretch)", start=1, end=200, value=1, width=170,
                                           css_classes=["infer-length"])
        self._mask = pn.widgets.Select(label="hide", width=235, css_classes=["infer-mask"])
        self._fraction = pn.widgets.FloatSlider(label="share of pixels", start=0.05, end=0.95, step=0.05,
                                                value=s.mask_fraction, width=200)
        self._clear = pn.widgets.Button(label="Show all joints", width=120)
        self._infer = pn.widgets.Button(label="Infer", color="primary", width=120, css_classes=["infer-button"])
        # as training's Stop: an inference of a long stretch takes a while, and nothing ended it
        self._stop = pn.widgets.Button(label="Stop", color="danger", width=80, disabled=True,
                                       css_classes=["infer-stop"])
        # it loads the stretch into the player (Play is there): the label said "Play", and
        # users clicked it expecting playback
        self._play = pn.widgets.Toggle(label="Stretch in the player (Play & forecast tab)", width=300,
                                       disabled=True)
        self._status = TextBox(font_size="13px", css_classes=["infer-status"])
        self._method = TextBox(color="#555")
        self._source.param.watch(self._on_source, "value")
        self._frame.param.watch(lambda e: self._set("infer_frame", e.new), "value_throttled")
        self._length.param.watch(lambda e: self._set("infer_length", e.new), "value")
        self._mask.param.watch(self._on_mask, "value")
        self._fraction.param.watch(lambda e: self._set("mask_fraction", e.new), "value_throttled")
        self._clear.on_click(lambda e: self._set("mask_joints", []))
        self._infer.on_click(self._start)
        self._stop.on_click(self._stop_inference)
        self._play.param.watch(lambda e: self._set("play_mode", "inferred" if e.new else "sequence"), "value")
        self._cb = None
        s.param.watch(self._sync_widgets, ["model_version", "dataset", "infer_source", "infer_frame",
                                           "infer_length", "mask_part", "play_mode", "inference", "infer_running"])
        s.param.watch(self._redraw, ["model_version", "infer_source", "infer_frame", "infer_length", "mask_part",
                                     "mask_joints", "mask_fraction", "inference", "azimuth", "elevation", "x_dim",
                                     "y_dim"])
        # one writer of the readout, from the state as it is (whatever order the watchers of
        # one change run in): progress here, and at the end of every _redraw
        s.param.watch(self._update_status, ["infer_status", "infer_running"])
        self._intro = TextBox(html.escape(self._intro_text()))
        s.param.watch(lambda *e: setattr(self._intro, "object", html.escape(self._intro_text())),
                      ["model_version", "dataset"])
        self._sync_widgets()
        self._redraw()

    # ------------------------------------------------------------------ widgets -> state
    @guarded
    def _set(self, name, value):
        setattr(self.state, name, value)

    @guarded
    def _on_source(self, event):
        if event.new and event.new != self.state.infer_source:
            self.state.infer_source = event.new

    @guarded
    def _on_mask(self, event):
        if event.new and event.new != self.state.mask_part:
            self.state.mask_part = event.new

    @guarded
    def _start(self, event=None):
        self.state.start_inference()
        if self._cb is None:
            self._cb = pn.state.add_periodic_callback(self._poll, period=200)

    @guarded
    def _stop_inference(self, event=None):
        self.state.stop_inference()

    @guarded
    def _poll(self):
        if not self.state.poll_inference() and self._cb is not None:
            self._cb.stop()
            self._cb = None

    def _sync_widgets(self, *events):
        s = self.state
        srcs = s.infer_sources()
        self._source.options = {src.label: name for name, src in srcs.items()}
        word = row_noun(s.dataset)
        self._source.name, self._frame.name = f"test {word}s", f"first {word}"
        if s.infer_source in srcs:
            self._source.value = s.infer_source
            src = srcs[s.infer_source]
            n = src.Y.shape[0]
            self._frame.end = max(1, n - 1)
            self._frame.value = min(s.infer_frame, n - 1)
            # the box says how long a stretch may be from this frame (a longer one is cut
            # there: infer_frames); the value typed is kept for the next frame chosen
            room = min(s.stretch_room(src, min(s.infer_frame, n - 1)), s.param.infer_length.bounds[1])
            self._length.name = (f"frames (a stretch; up to {room})" if word == "frame"
                                 else f"points (several at once; up to {room})")
        opts = s.mask_options()
        self._mask.options = opts
        if s.mask_part in opts:
            self._mask.value = s.mask_part
        kind = self._data_kind()
        self._fraction.visible = kind == "image" and s.mask_part == "random pixels"
        self._clear.visible = kind == "pose"
        self._infer.disabled = s.infer_running or s.model is None
        self._stop.disabled = not s.infer_running
        inf = s.inference
        self._play.disabled = inf is None or inf.n < 2
        self._play.visible = word == "frame"  # points in no time order do not play
        self._play.value = s.play_mode == "inferred"
        shown = (f" The figure shows {inf.noun} {inf.first + inf.start}, the first of the {inf.n}; the error is "
                 f"over all of them." if inf is not None and inf.n > 1 else "")
        self._method.object = (html.escape(f"Method: {inf.method}; {inf.iterations} optimiser iterations.{shown}")
                               if inf is not None else "")

    def _data_kind(self) -> str:
        ds = self.state.dataset
        return getattr(getattr(ds, "renderer", None), "kind", "vector") if ds is not None else "vector"

    # ------------------------------------------------------------------ figures
    def _build(self):
        """Every kind's figures (pose; observed / inferred / truth / sd images; vector),
        built once per session: a change of data kind only shows other ones (``_use_kind``;
        replacing them, with the sources they share, left references the page no longer
        knew, and the player then drew the previous model's data). Returns the layout."""
        from bokeh.layouts import column, row
        from bokeh.models import DataRange1d

        common = dict(toolbar_location=None, tools="", min_border=4)
        p = figure(width=270, height=270, title=INFER_TITLE, match_aspect=True, **common)
        p.axis.visible = False
        p.grid.visible = False
        p.segment(x0="x0", y0="y0", x1="x1", y1="y1", source=self.ghost, line_width=5, line_color=GHOST_COLOR,
                  line_alpha=0.7)
        p.circle(x="x", y="y", radius="r", source=self.discs, fill_color=INFERRED_COLOR, fill_alpha=0.22,
                 line_color=INFERRED_COLOR, line_alpha=0.6)
        p.segment(x0="x0", y0="y0", x1="x1", y1="y1", source=self.bones, line_width=4, line_color="color",
                  line_dash="dash")
        p.scatter(x="x", y="y", source=self.joints, size=9, fill_color="color", line_color="white")
        p.on_event(Tap, self._on_tap)
        figs = {}
        for name, title, pal in (("observed", "Observed", "Greys256"),
                                 ("inferred", INFER_TITLE, "Greys256"), ("truth", "Truth", "Greys256"),
                                 ("sd", "Inferred sd", "Magma256")):
            f = figure(width=IMAGE_FIG[0], height=IMAGE_FIG[1], title=title, x_range=Range1d(0, 1),
                       y_range=Range1d(0, 1), **common)
            f.axis.visible = False
            f.grid.visible = False
            f.title.text_font_size = "11px"
            if name == "observed":
                f.image_rgba(image="image", x="x", y="y", dw="dw", dh="dh", source=self.images[name])
            elif name == "sd":  # a log scale, as every sd image (seqs.sd_range)
                f.image(image="image", x="x", y="y", dw="dw", dh="dh", source=self.images[name],
                        color_mapper=LogColorMapper(palette=Magma256, low=0.01, high=1.0))
            else:
                f.image(image="image", x="x", y="y", dw="dw", dh="dh", source=self.images[name], palette=pal)
            figs[name] = f
        v = figure(width=RIGHT_W - 20, height=240, title=INFER_TITLE, x_axis_label="output dimension",
                   y_axis_label="value", **common)
        v.axis.axis_label_text_font_size = "11px"
        v.vbar(x="d", top=1e9, bottom=-1e9, width=1.0, source=self.vec_hidden, fill_color=HIDDEN_COLOR,
               fill_alpha=0.08, line_alpha=0)
        data = [v.varea(x="d", y1="lo", y2="hi", source=self.vec, fill_color=INFERRED_COLOR, fill_alpha=0.25),
                v.line(x="d", y="truth", source=self.vec, line_color="#555555", line_width=2, legend_label="truth"),
                v.line(x="d", y="mean", source=self.vec, line_color=INFERRED_COLOR, line_width=2,
                       legend_label="reconstruction")]
        # the hidden dims' shading reaches +-1e9: the y range follows the data only (it took
        # the shading in too, an axis of +-1.1e9 with the lines flat on it)
        v.y_range = DataRange1d(renderers=data)
        # one row above the plot: inside it, the legend sat on the lines
        legend = v.legend[0]
        v.right = [r for r in v.right if r is not legend]
        v.center = [r for r in v.center if r is not legend]
        legend.update(orientation="horizontal", border_line_alpha=0, padding=2, margin=0,
                      label_text_font_size="8pt", glyph_height=12)
        v.add_layout(legend, "above")
        self._by_kind = {"pose": {"out": p}, "image": figs, "vector": {"out": v}}
        return column(p, row(*figs.values()), v)

    def _use_kind(self, kind: str) -> None:
        """Show the figures of data of this kind ("pose", "image" or "vector")."""
        with unlocked():  # may run outside the document's lock (a model loaded in a thread)
            for k, figs in self._by_kind.items():
                for f in figs.values():
                    f.visible = k == kind
        self._figs = self._by_kind[kind]
        self._kind = kind

    @guarded
    def _on_tap(self, event):
        uv = self._uv
        if uv is None or not len(uv):
            return
        d2 = (uv[:, 0] - event.x) ** 2 + (uv[:, 1] - event.y) ** 2
        j = int(np.argmin(d2))
        R = self._radius()
        if d2[j] <= (0.06 * R) ** 2:
            self.state.toggle_joint(j)

    def _pose_extent(self):
        """(centre, radius) of the current data set's poses (recomputed when it changes)."""
        ds = self.state.dataset
        if self._extent is None or self._extent[0] is not ds:
            self._extent = (ds, shared(ds, "pose_extent", lambda: seqs.pose_extent(ds.renderer, ds.Y)))
        return self._extent[1]

    def _radius(self) -> float:
        return self._pose_extent()[1]

    @guarded
    def _redraw(self, *events):
        s = self.state
        got = s.infer_frames() if s.model is not None else None
        kind = self._data_kind()
        show_bokeh(self._fig_pane, got is not None)
        if got is None:
            return
        if kind != self._kind:
            self._use_kind(kind)
        src, a, n = got
        cols = s.hidden_columns()
        inf = s.inference
        show = self._current(inf, got, cols)
        truth = src.Y[a]
        with unlocked():
            if kind == "pose":
                self._draw_pose(truth, cols, inf if show else None)
            elif kind == "image":
                self._draw_image(truth, cols, inf if show else None)
            else:
                self._draw_vector(truth, cols, inf if show else None)
            self._draw_latent(inf if show else None)
        self._update_status(current=show)

    def _current(self, inf, got=None, cols=None) -> bool:
        """Whether result ``inf`` is for the frames and the mask now chosen: after a change
        of either it must not be drawn or read out as if it were the current one. ``got``
        and ``cols``: ``infer_frames()`` and ``hidden_columns()`` when the caller has them."""
        s = self.state
        if got is None:
            got = s.infer_frames() if s.model is not None else None
        if inf is None or got is None:
            return False
        _, a, n = got
        cols = s.hidden_columns() if cols is None else cols
        return (inf.source == s.infer_source and inf.start == a and inf.n == n
                and np.array_equal(np.sort(inf.cols), np.sort(cols)))

    def _update_status(self, *events, current: bool | None = None):
        s = self.state
        inf = s.inference
        if current is None:
            current = self._current(inf)
        stale = inf is not None and not s.infer_running and not current
        self._status.object = ("<i>Frames or mask changed since the last inference: press Infer.</i>" if stale
                               else html.escape(s.infer_status))

    def _project(self, Y, var=None):
        s = self.state
        r = s.dataset.renderer
        Y = np.atleast_2d(Y)
        var = np.zeros_like(Y) if var is None else np.atleast_2d(var)
        return seqs.pose_frames(r, Y, var, s.azimuth, s.elevation, self._pose_extent()[0])

    def _draw_pose(self, truth, cols, inf):
        s = self.state
        ds = s.dataset
        conns = np.asarray(ds.renderer.connections, dtype=int).reshape(-1, 2)
        hidden = M.hidden_joints(ds, cols) if len(cols) else np.zeros(len(ds.renderer.names), dtype=bool)
        R = self._pose_extent()[1]
        f = self._figs["out"]
        f.x_range = Range1d(-R, R)
        f.y_range = Range1d(-R, R)
        if inf is None:
            uv = self._project(truth)["uv"][0]
            self.ghost.data = dict(x0=[], y0=[], x1=[], y1=[])
            self.discs.data = dict(x=[], y=[], r=[])
            f.title.text = f"{INFER_TITLE}: hidden red"  # "the frame, hidden joints ringed" was cut
            colors = [HIDDEN_COLOR if hidden[b] else OBSERVED_COLOR for _, b in conns]
            dash = ["dashed" if hidden[b] else "solid" for _, b in conns]
        else:
            d = self._project(inf.mean[0], inf.var[0])
            uv, spread = d["uv"][0], d["spread"][0]
            g = self._project(inf.truth[0])["uv"][0]
            self.ghost.data = dict(x0=g[conns[:, 0], 0], y0=g[conns[:, 0], 1], x1=g[conns[:, 1], 0],
                                   y1=g[conns[:, 1], 1])
            self.discs.data = dict(x=uv[hidden, 0], y=uv[hidden, 1], r=2 * spread[hidden])
            e = inf.error
            unit = "\u00b0" if e["unit"] == "deg" else ""
            f.title.text = f"{INFER_TITLE}: error {e['value']:.2f}{unit}"
            colors = [INFERRED_COLOR if hidden[b] else OBSERVED_COLOR for _, b in conns]
            dash = ["solid"] * len(conns)
        self._uv = uv
        self.bones.data = dict(x0=uv[conns[:, 0], 0], y0=uv[conns[:, 0], 1], x1=uv[conns[:, 1], 0],
                               y1=uv[conns[:, 1], 1], color=colors, dash=dash)
        jc = [(INFERRED_COLOR if inf is not None else HIDDEN_COLOR) if h else OBSERVED_COLOR for h in hidden]
        self.joints.data = dict(x=uv[:, 0], y=uv[:, 1], color=jc, hidden=hidden.astype(int))

    def _draw_image(self, truth, cols, inf):
        r = self.state.dataset.renderer
        vmin, vmax = seqs.image_range(self.state.dataset)
        img = r.image(truth)
        H, W = img.shape
        hide = np.zeros(truth.size, dtype=bool)
        hide[np.asarray(cols, dtype=int)] = True
        hmask = r.image(hide.astype(float)) > 0.5
        rgb = colormap(img, "gray", vmin, vmax)
        rgb[hmask] = (0.5 * rgb[hmask] + 0.5 * np.array([230, 25, 75])).astype(np.uint8)
        rgba = np.dstack([rgb, np.full((H, W), 255, np.uint8)]).view(np.uint32)[..., 0][::-1]
        self.images["observed"].data = dict(image=[np.ascontiguousarray(rgba)], x=[0], y=[0], dw=[W], dh=[H])
        self.images["truth"].data = dict(image=[img[::-1].astype(np.float32)], x=[0], y=[0], dw=[W], dh=[H])
        if inf is None:
            blank = np.full((H, W), np.nan, dtype=np.float32)
            self.images["inferred"].data = dict(image=[blank], x=[0], y=[0], dw=[W], dh=[H])
            self.images["sd"].data = dict(image=[blank], x=[0], y=[0], dw=[W], dh=[H])
            self._figs["inferred"].title.text = INFER_TITLE
            self._figs["sd"].title.text = "Inferred sd"
        else:
            self.images["inferred"].data = dict(image=[r.image(inf.mean[0])[::-1].astype(np.float32)], x=[0], y=[0],
                                                dw=[W], dh=[H])
            sd = r.image(np.sqrt(np.maximum(inf.var[0], 0.0)))
            self.images["sd"].data = dict(image=[sd[::-1].astype(np.float32)], x=[0], y=[0], dw=[W], dh=[H])
            # the error is over every inferred row; the figure shows the first of them
            # short: the titles of these ~140-px figures ran into each other ("Inferred (RMSE 0.00711")
            self._figs["inferred"].title.text = (f"Inferred: RMSE {inf.error['value']:.2g}" if inf.n == 1
                                                 else f"All {inf.n}: RMSE {inf.error['value']:.2g}")
            self._figs["sd"].title.text = f"Inferred sd \u2264 {sd.max():.2g}"
        x0, x1, y0, y1 = square_pixels(W, H)
        for name, f in self._figs.items():
            f.x_range.start, f.x_range.end, f.y_range.start, f.y_range.end = x0, x1, y0, y1
            glyph = f.renderers[0].glyph
            if name in ("inferred", "truth"):
                glyph.color_mapper.low, glyph.color_mapper.high = vmin, vmax
            elif name == "sd" and self.state.model is not None:  # the scale of every sd image: black = sure
                glyph.color_mapper.low, glyph.color_mapper.high = seqs.sd_range(self.state.model)

    def _draw_vector(self, truth, cols, inf):
        d = np.arange(truth.size)
        mean = inf.mean[0] if inf is not None else np.full(truth.size, np.nan)
        sd = np.sqrt(inf.var[0]) if inf is not None else np.zeros(truth.size)
        self.vec.data = dict(d=d, truth=truth, mean=mean, lo=mean - 2 * sd, hi=mean + 2 * sd)
        self.vec_hidden.data = dict(d=np.asarray(cols, dtype=int))

    def _latent_columns(self, inf) -> tuple[dict, dict, dict]:
        """q(x*) on the latent view's axes: (2-sd ellipses, path, stars) columns."""
        if inf is None:
            return dict(xs=[], ys=[]), dict(x=[], y=[]), dict(x=[], y=[])
        xd, yd = self.state.dims
        th = np.linspace(0, 2 * np.pi, 41)
        idx = np.unique(np.r_[np.arange(0, inf.n, max(1, inf.n // 12)), inf.n - 1])
        ell = dict(xs=[inf.mu[i, xd] + 2 * np.sqrt(inf.S[i, xd]) * np.cos(th) for i in idx],
                   ys=[inf.mu[i, yd] + 2 * np.sqrt(inf.S[i, yd]) * np.sin(th) for i in idx])
        if inf.noun == "frame":  # a stretch in time: its path, the star on the frame shown
            return ell, dict(x=inf.mu[:, xd], y=inf.mu[:, yd]), dict(x=[inf.mu[0, xd]], y=[inf.mu[0, yd]])
        # independent points are no path (200 of them drew a tangle): a star each
        return ell, dict(x=[], y=[]), dict(x=inf.mu[:, xd], y=inf.mu[:, yd])

    def _draw_latent(self, inf):
        """Into the latent figure of the model and axes shown (``DrawnInto.is_current``)."""
        if self._drawn.is_current(self.state):
            self.lat_ell.data, self.lat_path.data, self.lat_star.data = self._latent_columns(inf)

    def attach_latent(self, plot, element):
        """HoloViews hook of the latent view: q(x*)'s 2-sd ellipses, path and mean, drawn
        into a new latent figure with sources of its own (``latent_layers``)."""
        fig = plot.state
        if not self._drawn.is_new(fig):
            return
        s = self.state
        inf = s.inference if s.model is not None and self._current(s.inference) else None
        ell, path, star = self._latent_columns(inf)
        self.lat_ell, self.lat_path, self.lat_star = (ColumnDataSource(ell), ColumnDataSource(path),
                                                      ColumnDataSource(star))
        self._drawn.take(fig, s)
        fig.patches(xs="xs", ys="ys", source=self.lat_ell, fill_color=INFERRED_COLOR, fill_alpha=0.15,
                    line_color=INFERRED_COLOR, line_width=2)
        # a dark casing under the path: orange on the orange points of a 'walk' label was lost
        fig.line(x="x", y="y", source=self.lat_path, line_color="black", line_width=4.5, line_alpha=0.8)
        fig.line(x="x", y="y", source=self.lat_path, line_color=INFERRED_COLOR, line_width=2)
        r = fig.scatter(x="x", y="y", source=self.lat_star, marker="star", size=22, fill_color=INFERRED_COLOR,
                        line_color="black", line_width=1.2)
        r.level = "overlay"

    def _intro_text(self) -> str:
        word = row_noun(self.state.dataset)
        head = (f"Hide part of test {word}s the model has not seen and let it infer them from "
                "the rest: q(x*) appears on the latent view (star and 2-sd ellipse, orange), ")
        return head + {
            "pose": "the reconstruction over the truth (grey ghost) here, inferred parts in orange with 2-sd "
                    "discs. Click joints on the figure to hide them.",
            "image": f"and here the {word} as observed (hidden pixels tinted red), the reconstruction, the truth "
                     "and the sd of the inferred pixels.",
        }.get(self._data_kind(), "and here the reconstruction (orange, with a 2-sd band) over the truth (grey); "
                                 "the hidden columns are shaded red.")

    def __panel__(self):
        return pn.Column(self._intro, pn.Row(self._source, self._mask), pn.Row(self._frame, self._length),
                         pn.Row(self._infer, self._stop, self._clear, self._fraction), self._status, self._method,
                         self._fig_pane, self._play)
