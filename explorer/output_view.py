"""The output view: what the model generates at the chosen latent point (a pose, an
image or a vector, with its uncertainty) beside the training point clicked, and the
readout and caption under them."""

from __future__ import annotations

import html

import numpy as np
import holoviews as hv
import panel as pn
from bokeh.models import Div
from holoviews.streams import Params
from panel.io.document import unlocked

from . import plots
from . import sequences as seqs
from .shared import shared
from .widgets import OUT_H, OUT_W, RIGHT_W, Rebuilding, guarded, image_frame

class OutputView(Rebuilding):
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
            self._zc, R = shared(ds, "pose_extent", lambda: seqs.pose_extent(ds.renderer, Y))
            self._limits = (-R, -R, R, R)
        elif self.kind == "vector":
            lo, hi = float(np.nanmin(Y)), float(np.nanmax(Y))
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
            d = plots.pose_data(self._centre(r.positions(mean)), r.connections, s.azimuth, s.elevation)
            f32 = lambda a: np.asarray(a, dtype=np.float32)  # noqa: E731 - half the bytes per move
            uv = d["joints"]
            return {"discs": {"x": f32(uv[:, 0]), "y": f32(uv[:, 1]), "r": f32(2 * seqs.pose_spread(r, mean, var))},
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
            holes = n >= 0 and bool(np.isnan(img).any())  # (how many: the readout says)
            return plots.image_plot(img, title, vmin, vmax, missing_color=plots.MISSING_COLOR if holes else None)
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
