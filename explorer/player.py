"""The sequence player: a training sequence (and its forecast) played in the browser.

The server computes all frames of the chosen sequence in one batched call
(``ExplorerState.playback``: q(X*) along time, then meanFstar / covFstar) and sends them
once, as arrays in Bokeh data sources. Playing is then done by BokehJS alone: a
``requestAnimationFrame`` loop moves the time slider, and one ``CustomJS`` copies frame i
into the drawn sources (pose or frame, the per-joint discs or sd image, the marker on the
latent view, the time cursor). The models that change on every frame are
``syncable=False``: nothing goes back to the server while a sequence plays, so playing
costs the server nothing, whatever the number of sessions.
"""

from __future__ import annotations

import html
import logging

import numpy as np
import panel as pn
import param
from bokeh.layouts import column, row
from bokeh.models import (BasicTicker, BoxAnnotation, CheckboxGroup, ColumnDataSource, CustomJS,
                          CustomJSTickFormatter, LogColorMapper, Range1d, Select, Slider, Span, Title, Toggle)
from bokeh.palettes import Greys256, Magma256
from bokeh.plotting import figure
from panel.io.document import unlocked

from . import sequences as seqs
from .latent_layers import DrawnInto, no_ellipses, no_path, sequence_layers
from .masks import hidden_bones
from .player_js import BONE_COLOR, FORECAST_COLOR, JS_PLAY, JS_RENDER, JS_SPEED, TRAIN_PATH_COLOR
from .plots import INFERRED_COLOR, X_COLOR, Y_COLOR
from .shared import shared
from .state import ExplorerState
from .widgets import OUT_H, OUT_W, RIGHT_W, TextBox, guarded, image_frame, show_bokeh

log = logging.getLogger("explorer")

PLAY_TITLE = "Playing"
SD_TITLE = "Played: sd"
#: height of the played image's drawing area (px); its width follows the frames' aspect
IMG_FRAME_H = 140
TIME_TITLE = "Latent trajectory over time"
GALLERY_TITLE = "The data"
SPEEDS = ["0.25x", "0.5x", "1x", "2x", "4x"]


def _cds(**cols) -> ColumnDataSource:
    return ColumnDataSource(data={k: v for k, v in cols.items()})


def _local(model):
    """A model the browser changes on every frame: never synchronised back to Python."""
    model.syncable = False
    return model


class PlayerView(pn.viewable.Viewer):
    """Sequence choice, forecast horizon, play/pause/speed/loop, the played output and
    the latent coordinates against time with their 2-sd bands."""

    state = param.ClassSelector(class_=ExplorerState)

    def __init__(self, **params):
        super().__init__(**params)
        s = self.state
        # ---- data sent once per sequence
        self.meta = _cds(kind=["none"], J=[0], W=[1], H=[1], fps=[30.0], n_train=[0], unit=["s"])
        self.traj = _cds(t=[], lx=[], ly=[], xlo=[], xhi=[], ylo=[], yhi=[], fc=[])
        self.frames = _cds(u=[], v=[], r=[])
        self.ghost = _cds(gu=[], gv=[])  # joints of the truth beside an inferred stretch (T * J rows)
        self.images = _cds(img=[], sd=[])
        self.gallery_src = _cds(image=[np.zeros((1, 1), np.float32)], dw=[1], dh=[1])
        self.bones = _cds(a=[], b=[], c=[])  # c: a bone's own colour ("": the frame's)
        # latent-view layers: those of the latent figure shown (each gets its own: ``attach_latent``)
        self.path_src = _cds(**no_path())
        self.ellipse_src = _cds(**no_ellipses())
        self._drawn = DrawnInto()
        # ---- drawn, changed by the browser on every frame
        self.marker = _local(_cds(lx=[], ly=[], color=[]))
        self.pose_bones = _local(_cds(x0=[], y0=[], x1=[], y1=[], color=[]))
        self.ghost_bones = _local(_cds(x0=[], y0=[], x1=[], y1=[]))  # the truth of an inferred stretch
        self.pose_joints = _local(_cds(x=[], y=[], r=[]))
        self.img_src = _local(_cds(image=[np.zeros((1, 1))], x=[0], y=[0], dw=[1], dh=[1]))
        self.sd_src = _local(_cds(image=[np.zeros((1, 1))], x=[0], y=[0], dw=[1], dh=[1]))
        self.vec_src = _local(_cds(d=[], y=[], lo=[], hi=[]))
        self.span = _local(Span(location=0, dimension="height", line_color="#333333", line_width=2, level="overlay"))
        self.forecast_box = BoxAnnotation(left=None, fill_color=FORECAST_COLOR, fill_alpha=0.08, line_alpha=0)
        # frames count from 1 in the readout; the handle's tooltip says the same
        self.slider = _local(Slider(start=0, end=1, value=0, step=1, title="frame", width=RIGHT_W - 250,
                                    show_value=False, css_classes=["play-slider"],
                                    format=CustomJSTickFormatter(code="return (tick + 1).toFixed(0)")))
        self.toggle = _local(Toggle(label="\u25B6 Play", button_type="primary", width=90, css_classes=["play-toggle"]))
        self.speed = _local(Select(options=SPEEDS, value="1x", width=70, css_classes=["play-speed"]))
        self.loop = _local(CheckboxGroup(labels=["loop"], active=[0], css_classes=["play-loop"]))
        # the frame and its time, on a line of its own above the curves (a label inside the
        # plot covered them)
        self.info = _local(Title(text="", align="right", text_font_size="12px", text_font_style="normal"))
        self._figs = {}
        self._kind = None
        self._out_pane = pn.pane.Bokeh(None)
        self._time_pane = pn.pane.Bokeh(None)
        # built once, before the page exists: later only shown, hidden and fed (_use_kind)
        self._out_pane.object, self._time_pane.object = self._build_figures()
        self._gallery_pane = pn.pane.Bokeh(self._build_gallery(), visible=False)
        self._shown = None  # (model_version, data set, playback) last pushed by ``_refresh``
        self._use_kind("pose")
        self._seq = pn.widgets.Select(label="sequence", width=220, css_classes=["play-sequence"])
        self._horizon = pn.widgets.IntSlider(label="forecast steps past the end", start=0,
                                             end=s.param.forecast_steps.bounds[1], step=10,
                                             value=s.forecast_steps, width=230)
        # shown only when there is something to play (data without time gets the note alone)
        self._controls = pn.Row(self._seq, self._horizon)
        self._seq.param.watch(self._on_seq, "value")
        self._horizon.param.watch(self._on_horizon, "value_throttled")
        self._note = TextBox(width=RIGHT_W - 20, css_classes=["player-note"])
        s.param.watch(self._sync_widgets, ["model_version", "play_sequence"])
        s.param.watch(self._refresh, ["model_version", "play_sequence", "forecast_steps", "play_mode", "inference"])
        s.param.watch(self._on_dataset, "dataset")
        s.param.watch(self._reproject, ["azimuth", "elevation"])
        s.param.watch(self._relatent, ["x_dim", "y_dim"])
        self._sync_widgets()
        self._refresh()

    # ------------------------------------------------------------------ widgets
    def _sync_widgets(self, *events):
        opts = self.state.sequence_options()
        self._seq.options = opts
        self._seq.disabled = not opts
        self._controls.visible = bool(opts)
        if self.state.play_sequence in opts.values():
            self._seq.value = self.state.play_sequence
        # only a dynamical model forecasts: for the data alone or a static model the slider
        # was shown (disabled, looking usable)
        self._horizon.visible = self.state.is_dynamical

    def _on_dataset(self, *events):
        """Before any model a new data set is played as recorded (its first sequence id may
        equal the last one's, so ``play_sequence`` need not change). With a model this is
        left to its ``model_version``: refreshing here too would, in the same update, feed
        the outgoing latent figure the new model's layers (BokehJS then failed repainting
        it: "Out of bounds: 0 <= 33 < 33")."""
        if self.state.model is None:
            self._sync_widgets()
            self._refresh()

    @guarded
    def _on_seq(self, event):
        if event.new is not None and event.new != self.state.play_sequence:
            self.state.set_play_sequence(event.new)

    @guarded
    def _on_horizon(self, event):
        self.state.forecast_steps = int(event.new)

    @property
    def kind(self) -> str:
        ds = self.state.dataset
        return getattr(getattr(ds, "renderer", None), "kind", "vector") if ds is not None else "vector"

    # ------------------------------------------------------------------ latent layers
    def attach_latent(self, plot, element):
        """HoloViews hook of the latent view: draw the played sequence's path, its 2-sd
        ellipses and the moving marker into a new latent figure, with sources of its own
        (``latent_layers``)."""
        fig = plot.state
        if not self._drawn.is_new(fig):
            return
        pb = self.state.playback()
        path, ell = self._latent_layers(pb) if pb is not None else (None, None)
        self.path_src = _cds(**(path or no_path()))
        self.ellipse_src = _cds(**(ell or no_ellipses()))
        self._drawn.take(fig, self.state)
        fig.patches(xs="xs", ys="ys", source=self.ellipse_src, fill_color="color", fill_alpha="fill",
                    line_color="color", line_alpha=0.5, line_width=1)
        fig.multi_line(xs="xs", ys="ys", source=self.path_src, line_color="color", line_width=2.5,
                       line_dash="dash", line_alpha=0.9)
        r = fig.scatter(x="lx", y="ly", source=self.marker, size=15, marker="circle", fill_color="color",
                        line_color="white", line_width=2.5)
        r.level = "overlay"  # moving it repaints only the overlay layer

    def _set_latent_layers(self, path, ell) -> None:
        """Into the latent figure of the model and axes shown (``DrawnInto.is_current``).
        Call inside ``unlocked()``."""
        if self._drawn.is_current(self.state):
            self.path_src.data, self.ellipse_src.data = path, ell

    # ------------------------------------------------------------------ figures
    def _build_figures(self):
        """Every kind's output figures (pose; image and its sd; vector) and the time figure,
        built once per session: a change of data kind only shows other ones
        (``_use_kind``). Replacing the figures instead, with the sources and widgets they
        share, left references the page no longer knew ("reference p... isn't known"): the
        player stayed blank after a video model and then showed the video on a pose model."""
        common = dict(toolbar_location=None, tools="", min_border=4)
        p = figure(width=OUT_W, height=OUT_H, title=PLAY_TITLE, match_aspect=True, **common)
        p.axis.visible = False
        p.grid.visible = False
        p.segment(x0="x0", y0="y0", x1="x1", y1="y1", source=self.ghost_bones, line_width=6,
                  line_color="#b8b8b8", line_alpha=0.7)
        p.circle(x="x", y="y", radius="r", source=self.pose_joints, fill_color="#e6194b", fill_alpha=0.22,
                 line_color="#e6194b", line_alpha=0.55)
        p.segment(x0="x0", y0="y0", x1="x1", y1="y1", source=self.pose_bones, line_width=4, line_color="color")
        p.scatter(x="x", y="y", source=self.pose_joints, size=5, color=BONE_COLOR)
        by_kind = {"pose": {"out": p}, "image": {}}
        self._img_mappers = {}
        for name, src, pal in (("out", self.img_src, "Greys256"), ("sd", self.sd_src, "Magma256")):
            # the drawing area follows the frames' aspect (``_set_ranges``)
            q = figure(frame_width=IMG_FRAME_H, frame_height=IMG_FRAME_H,
                       title=PLAY_TITLE if name == "out" else SD_TITLE,
                       x_range=Range1d(0, 1), y_range=Range1d(0, 1), **common)
            q.axis.visible = False
            q.grid.visible = False
            r = q.image(image="image", x="x", y="y", dw="dw", dh="dh", source=src, palette=pal)
            self._img_mappers[name] = r.glyph.color_mapper
            by_kind["image"][name] = q
        # the right panel shows an sd image (log scale, seqs.sd_range) or an inferred
        # stretch's truth (grey, linear): its glyph switches between the two mappers
        self._sd_glyph = r.glyph
        self._img_mappers["sd_log"] = LogColorMapper(palette=Magma256, low=0.01, high=1.0)
        v = figure(width=OUT_W, height=OUT_H, title=PLAY_TITLE, x_range=Range1d(0, 1), y_range=Range1d(0, 1), **common)
        v.xaxis.ticker = BasicTicker(min_interval=1)  # whole output dimensions
        v.varea(x="d", y1="lo", y2="hi", source=self.vec_src, fill_color="#e6194b", fill_alpha=0.2)
        v.line(x="d", y="y", source=self.vec_src, line_color="#e6194b", line_width=2)
        by_kind["vector"] = {"out": v}
        tp = figure(width=RIGHT_W - 20, height=215, title=TIME_TITLE, x_axis_label=f"time ({self._unit()})",
                    y_axis_label="latent coordinate", **common)
        tp.varea(x="t", y1="xlo", y2="xhi", source=self.traj, fill_color=X_COLOR, fill_alpha=0.18)
        tp.varea(x="t", y1="ylo", y2="yhi", source=self.traj, fill_color=Y_COLOR, fill_alpha=0.18)
        self._xline = tp.line(x="t", y="lx", source=self.traj, line_color=X_COLOR, line_width=2)
        self._yline = tp.line(x="t", y="ly", source=self.traj, line_color=Y_COLOR, line_width=2)
        tp.add_layout(self.forecast_box)
        tp.add_layout(self.span)
        tp.add_layout(self.info, "above")
        for f in [tp] + [f for figs in by_kind.values() for f in figs.values()]:
            f.title.text_font_size = "12px"
        self._by_kind, self._time_fig = by_kind, tp
        args = dict(slider=self.slider, traj=self.traj, meta=self.meta, frames=self.frames, images=self.images,
                    bones=self.bones, marker=self.marker, span=self.span, pose_bones=self.pose_bones,
                    ghost_bones=self.ghost_bones, ghost=self.ghost,
                    pose_joints=self.pose_joints, img_src=self.img_src, sd_src=self.sd_src, vec_src=self.vec_src,
                    info=self.info)
        self.slider.js_on_change("value", CustomJS(args=args, code=JS_RENDER))
        self.toggle.js_on_change("active", CustomJS(args=dict(toggle=self.toggle, slider=self.slider, traj=self.traj,
                                                              meta=self.meta, speed=self.speed, loop=self.loop),
                                                    code=JS_PLAY))
        self.speed.js_on_change("value", CustomJS(args=dict(slider=self.slider), code=JS_SPEED))
        controls = row(self.toggle, self.slider, self.speed, self.loop)
        outs = [p, by_kind["image"]["out"], by_kind["image"]["sd"], v]
        return row(*outs), column(controls, tp)

    def _build_gallery(self):
        """A sample of an image data set's rows, for data with no sequences to play (digits,
        USPS): otherwise the tab had only its note to show."""
        g = figure(frame_width=IMG_FRAME_H, frame_height=IMG_FRAME_H, title=GALLERY_TITLE, toolbar_location=None,
                   tools="", min_border=4, x_range=Range1d(0, 1), y_range=Range1d(0, 1))
        g.axis.visible = False
        g.grid.visible = False
        g.title.text_font_size = "12px"
        r = g.image(image="image", x=0, y=0, dw="dw", dh="dh", source=self.gallery_src, palette="Greys256")
        self._gallery_mapper = r.glyph.color_mapper
        self._gallery_fig = g
        return g

    def _show_gallery(self, ds) -> None:
        """Show ``ds``'s sample of rows (``seqs.gallery_rows``) or, with None, hide it."""
        if ds is None:
            show_bokeh(self._gallery_pane, False)
            return
        def make():
            rows, cols = seqs.gallery_rows(ds)
            return rows, seqs.mosaic(ds.renderer, ds.Y[rows], cols)

        rows, img = shared(ds, "gallery", make)  # once per data set, not at every refresh
        H, W = img.shape
        tile = max(ds.renderer.image(ds.Y[rows[0]]).shape)
        scale = float(np.clip(48.0 / tile, 1.0, 4.0))
        vmin, vmax = seqs.image_range(ds)
        with unlocked():
            self.gallery_src.data = dict(image=[np.ascontiguousarray(img[::-1], dtype=np.float32)], dw=[W], dh=[H])
            g = self._gallery_fig
            g.x_range.start, g.x_range.end, g.y_range.start, g.y_range.end = 0, W, 0, H
            g.frame_width = int(min(round(W * scale), RIGHT_W - 40))
            g.frame_height = int(round(g.frame_width * H / W))
            self._gallery_mapper.update(low=vmin, high=vmax)
            each = " (the first of each class)" if ds.labels is not None else " (evenly spaced)"
            g.title.text = f"{GALLERY_TITLE}: {len(rows)} of {ds.N} rows{each}"
        show_bokeh(self._gallery_pane, True)

    def _use_kind(self, kind: str) -> None:
        """Show the output figures of data of this kind ("pose", "image" or "vector")."""
        with unlocked():  # may run outside the document's lock (a model loaded in a thread)
            for k, figs in self._by_kind.items():
                for f in figs.values():
                    f.visible = k == kind
        self._figs = {**self._by_kind[kind], "time": self._time_fig}
        self._kind = kind

    def _set_note(self, text: str) -> None:
        self._note.object = text

    def _unit(self) -> str:
        return seqs.time_unit(self.state.dataset)

    def _fps(self) -> float:
        return seqs.frame_rate(self.state.dataset)

    # ------------------------------------------------------------------ data
    @guarded
    def _refresh(self, *events):
        s = self.state
        pb = s.playback()
        shown = (s.model_version, s.dataset, pb)
        if pb is not None and self._shown is not None and shown[0] == self._shown[0] \
                and all(a is b for a, b in zip(shown[1:], self._shown[1:])):
            return  # already on the page (a data set that drops its model reports both changes)
        self._shown = shown
        if pb is None:
            show_bokeh(self._out_pane, False)
            show_bokeh(self._time_pane, False)
            self._show_gallery(s.dataset if s.dataset is not None and self.kind == "image" else None)
            self._set_note("<i>No sequences to play: this data set has no sequence ids or time stamps.</i>"
                           if s.model is not None or s.dataset is not None else "<i>No model yet.</i>")
            with unlocked():
                self._set_latent_layers(no_path(), no_ellipses())
                self.marker.data = dict(lx=[], ly=[], color=[])
            return
        kind = self.kind
        if kind != self._kind:
            self._use_kind(kind)
        self._show_gallery(None)
        with unlocked():
            self._time_fig.xaxis.axis_label = f"time ({self._unit()})"
        show_bokeh(self._out_pane, True)
        show_bokeh(self._time_pane, True)
        self._push(pb)
        if pb.preview:
            self._set_note(
                f"<b>{html.escape(pb.label)}</b>: the data as recorded, {pb.T} frames (no model yet). Lines: the "
                "frames on the data's first two principal axes. Train a model to see its latent space, what it "
                "generates and how sure it is; a <i>dynamical</i> one also forecasts past the end.")
        elif pb.truth is not None:
            self._set_note(
                f"<b>{html.escape(pb.label)}</b>: the reconstruction of the hidden part, frame by frame, "
                + ("beside the truth (right)" if kind == "image" else "over the truth (grey)")
                + ". Lines and bands: q(x*) of the stretch with 2 sd. Untick <i>Stretch in the player</i> "
                "in <i>Observe &amp; infer</i> to go back to the training sequences.")
        elif pb.dynamical:
            self._set_note(
                f"<b>{html.escape(pb.label)}</b>: {pb.n_train} training frames, then {pb.T - pb.n_train} forecast "
                "from the time prior (purple). Lines and bands: the latent coordinates on the view's axes with 2 sd "
                "of q(x*); discs / sd image: 2 sd of the output from the uncertain-input moments (covFstar). "
                "Playing runs in the browser.")
        else:
            self._set_note(
                f"<b>{html.escape(pb.label)}</b>: {pb.n_train} frames of a static model (no forecast: train a "
                "<i>dynamical</i> model for that). Bands: 2 sd of q(x_n); discs / sd image: 2 sd of the output (covFstar).")

    def _frames_columns(self, pb) -> dict:
        s = self.state
        r = s.dataset.renderer
        kind = self.kind
        if kind == "pose":
            zc, _ = self._pose_extent()
            key = ("pose_frames", id(pb), id(s.dataset), float(s.azimuth), float(s.elevation))
            owner = s.model if s.model is not None else s.dataset  # the data itself before a model
            d = shared(owner, key, lambda: seqs.pose_frames(r, pb.mean, pb.var, s.azimuth, s.elevation, zc))
            uv, sp = d["uv"], d["spread"]
            cols = dict(u=uv[..., 0].ravel().astype(np.float32), v=uv[..., 1].ravel().astype(np.float32),
                        r=sp.ravel().astype(np.float32))
            return cols, uv.shape[1]
        if kind == "vector":
            return dict(u=pb.mean.ravel().astype(np.float32), v=np.zeros(pb.mean.size, np.float32),
                        r=np.sqrt(pb.var).ravel().astype(np.float32)), pb.mean.shape[1]
        return None, 0

    def _bone_colors(self, pb, n_bones: int) -> list[str]:
        """Per bone: orange for the bones an inferred stretch filled in (as the infer
        figure draws them), "" for the frame's own colour."""
        if pb.hidden is None or not len(pb.hidden):
            return [""] * n_bones
        return [INFERRED_COLOR if h else "" for h in hidden_bones(self.state.dataset, pb.hidden)]

    def _pose_extent(self):
        s = self.state
        key = (s.model_version, id(s.dataset))
        if getattr(self, "_extent_key", None) != key:
            ds = s.dataset
            self._extent = shared(ds, "pose_extent", lambda: seqs.pose_extent(ds.renderer, ds.Y))
            self._extent_key = key
        return self._extent

    def _ghost_columns(self, pb) -> dict:
        s = self.state
        if self.kind != "pose" or pb.truth is None:
            return dict(gu=[], gv=[])
        zc, _ = self._pose_extent()
        g = seqs.pose_frames(s.dataset.renderer, pb.truth, np.zeros_like(pb.truth), s.azimuth, s.elevation, zc)["uv"]
        return dict(gu=g[..., 0].ravel().astype(np.float32), gv=g[..., 1].ravel().astype(np.float32))

    def _dims(self, pb) -> tuple[int, int]:
        """The two coordinates drawn against time: the latent view's, or a preview's two
        principal axes."""
        return (0, 1) if pb.preview else self.state.dims

    def _time_title(self, pb) -> str:
        if pb.preview:
            return "Data over time: PC1 (red), PC2 (blue)"
        xd, yd = self.state.dims
        return f"{TIME_TITLE}: x{xd} (red), x{yd} (blue)"

    def _traj_columns(self, pb) -> dict:
        xd, yd = self._dims(pb)
        sx, sy = np.sqrt(pb.S[:, xd]), np.sqrt(pb.S[:, yd])
        lx, ly = pb.mu[:, xd], pb.mu[:, yd]
        return dict(t=seqs.seconds(self.state.dataset, pb.t), lx=lx, ly=ly, xlo=lx - 2 * sx, xhi=lx + 2 * sx,
                    ylo=ly - 2 * sy, yhi=ly + 2 * sy, fc=pb.is_forecast.astype(np.int8))

    def _latent_layers(self, pb):
        return sequence_layers(pb, self.state.dims)

    def _push(self, pb):
        s = self.state
        kind = self.kind
        cols, J = self._frames_columns(pb)
        if kind == "image":
            fr = seqs.image_frames(s.dataset.renderer, pb.mean, pb.var)
            H, W = fr["img"].shape[1:]
            second = fr["sd"] if pb.truth is None else np.stack([s.dataset.renderer.image(y) for y in pb.truth])
            images = dict(img=[np.ascontiguousarray(im[::-1], dtype=np.float32) for im in fr["img"]],
                          sd=[np.ascontiguousarray(im[::-1], dtype=np.float32) for im in second])
        else:
            H = W = 1
            images = dict(img=[], sd=[])
        path, ell = self._latent_layers(pb)
        traj = self._traj_columns(pb)
        with unlocked():
            self.meta.data = dict(kind=[kind], J=[J], W=[W], H=[H], fps=[self._fps()], n_train=[pb.n_train],
                                  unit=[self._unit()])
            if kind == "pose":
                conns = np.asarray(s.dataset.renderer.connections, dtype=np.int32).reshape(-1, 2)
                self.bones.data = dict(a=conns[:, 0], b=conns[:, 1], c=self._bone_colors(pb, len(conns)))
            self.frames.data = cols if cols is not None else dict(u=[], v=[], r=[])
            self.ghost.data = self._ghost_columns(pb)
            self.images.data = images
            self.traj.data = traj
            if path is not None:
                self._set_latent_layers(path, ell)
            self.forecast_box.left = float(traj["t"][pb.n_train - 1]) if pb.T > pb.n_train else None
            self.forecast_box.visible = pb.T > pb.n_train
            self._set_ranges(pb, kind, W, H)
            self.slider.end = max(1, pb.T - 1)
            self.slider.title = f"frame (of {pb.T})"
            for f in self._figs.values():
                if f.title.text.startswith(PLAY_TITLE):  # narrow image plots: the label is in the note
                    f.title.text = PLAY_TITLE if kind == "image" else f"{PLAY_TITLE}: {pb.label}"
            self._figs["time"].title.text = self._time_title(pb)
            self._figs["time"].yaxis.axis_label = "principal component" if pb.preview else "latent coordinate"
            self._show_frame(0)

    def _show_frame(self, i):
        """Draw frame i from the data just sent, as the browser's render callback does (so
        that the first frame is on screen before anything is played), and put the slider
        there. Call inside ``unlocked()``."""
        tr = self.traj.data
        T = len(tr["t"])
        if T == 0:
            return
        i = int(min(max(round(i), 0), T - 1))
        fc = bool(tr["fc"][i])
        col = FORECAST_COLOR if fc else TRAIN_PATH_COLOR
        self.marker.data = dict(lx=[float(tr["lx"][i])], ly=[float(tr["ly"][i])], color=[col])
        self.span.location = float(tr["t"][i])
        self.span.line_color = FORECAST_COLOR if fc else "#333333"
        meta = self.meta.data
        kind, J = meta["kind"][0], int(meta["J"][0])
        if kind == "pose":
            u = np.asarray(self.frames.data["u"])[i * J:(i + 1) * J]
            v = np.asarray(self.frames.data["v"])[i * J:(i + 1) * J]
            r = np.asarray(self.frames.data["r"])[i * J:(i + 1) * J]
            a, b = np.asarray(self.bones.data["a"]), np.asarray(self.bones.data["b"])
            col = [c or (FORECAST_COLOR if fc else BONE_COLOR) for c in self.bones.data["c"]]
            self.pose_bones.data = dict(x0=u[a], y0=v[a], x1=u[b], y1=v[b], color=col)
            gu = np.asarray(self.ghost.data["gu"])
            if gu.size:
                gu, gv = gu[i * J:(i + 1) * J], np.asarray(self.ghost.data["gv"])[i * J:(i + 1) * J]
                self.ghost_bones.data = dict(x0=gu[a], y0=gv[a], x1=gu[b], y1=gv[b])
            else:
                self.ghost_bones.data = dict(x0=[], y0=[], x1=[], y1=[])
            self.pose_joints.data = dict(x=u, y=v, r=2 * r)
        elif kind == "image":
            W, H = meta["W"][0], meta["H"][0]
            self.img_src.data = dict(image=[self.images.data["img"][i]], x=[0], y=[0], dw=[W], dh=[H])
            self.sd_src.data = dict(image=[self.images.data["sd"][i]], x=[0], y=[0], dw=[W], dh=[H])
        elif kind == "vector":
            y = np.asarray(self.frames.data["u"])[i * J:(i + 1) * J]
            sd = np.asarray(self.frames.data["r"])[i * J:(i + 1) * J]
            self.vec_src.data = dict(d=np.arange(J), y=y, lo=y - 2 * sd, hi=y + 2 * sd)
        n, unit, t = int(meta["n_train"][0]), meta["unit"][0], float(tr["t"][i])
        self.info.text = f"frame {i + 1}/{T}  t = {seqs.time_text(t, unit)}" + (
            f"  forecast +{seqs.time_text(t - float(tr['t'][n - 1]), unit)}" if fc else "")
        self.info.text_color = FORECAST_COLOR if fc else "#333333"
        self.slider.value = i

    def _set_ranges(self, pb, kind, W, H):
        f = self._figs
        if kind == "pose":
            _, R = self._pose_extent()
            f["out"].x_range = Range1d(-R, R)
            f["out"].y_range = Range1d(-R, R)
        elif kind == "image":
            ds, truth = self.state.dataset, pb.truth is not None
            vmin, vmax = seqs.image_range(ds)
            f["sd"].visible = not pb.preview  # the data has no sd
            for name in ("out", "sd"):
                f[name].x_range.start, f[name].x_range.end = 0, W
                f[name].y_range.start, f[name].y_range.end = 0, H
                f[name].frame_width, f[name].frame_height = image_frame(W, H, IMG_FRAME_H)
            # fixed scales as in "Generated": a frame's pixels on the data's range, its sd
            # on a log scale up to the sd far from the data; an inferred stretch shows its truth there
            self._img_mappers["out"].update(low=vmin, high=vmax)
            if truth:
                self._img_mappers["sd"].update(palette=Greys256, low=vmin, high=vmax)
                self._sd_glyph.color_mapper = self._img_mappers["sd"]
            elif not pb.preview:
                lo, hi = seqs.sd_range(self.state.model)
                self._img_mappers["sd_log"].update(low=lo, high=hi)
                self._sd_glyph.color_mapper = self._img_mappers["sd_log"]
            f["sd"].title.text = "Truth" if truth else SD_TITLE
        elif kind == "vector":  # one scale for every frame, as poses and images have
            sd = np.sqrt(np.maximum(np.asarray(pb.var), 0.0))
            lo, hi = float(np.min(pb.mean - 2 * sd)), float(np.max(pb.mean + 2 * sd))
            if pb.truth is not None:
                lo, hi = min(lo, float(np.min(pb.truth))), max(hi, float(np.max(pb.truth)))
            pad = 0.05 * (hi - lo or 1.0)
            f["out"].x_range = Range1d(-0.5, pb.mean.shape[1] - 0.5)
            f["out"].y_range = Range1d(lo - pad, hi + pad)
        tr = self.traj.data
        lo = float(min(np.min(tr["xlo"]), np.min(tr["ylo"])))
        hi = float(max(np.max(tr["xhi"]), np.max(tr["yhi"])))
        pad = 0.05 * (hi - lo or 1.0)
        t = tr["t"]
        f["time"].x_range = Range1d(float(t[0]), float(t[-1]) if pb.T > 1 else float(t[0]) + 1)
        f["time"].y_range = Range1d(lo - pad, hi + pad)

    @guarded
    def _reproject(self, *events):
        if self._kind != "pose":
            return
        pb = self.state.playback()
        if pb is None:
            return
        cols, _ = self._frames_columns(pb)
        with unlocked():
            self.frames.data = cols
            self.ghost.data = self._ghost_columns(pb)
            self._show_frame(self.slider.value)

    @guarded
    def _relatent(self, *events):
        pb = self.state.playback()
        if pb is None or pb.preview or self._kind is None:
            return
        path, ell = self._latent_layers(pb)
        with unlocked():
            self.traj.data = self._traj_columns(pb)
            self._set_latent_layers(path, ell)
            self._figs["time"].title.text = self._time_title(pb)
            self._show_frame(self.slider.value)

    def output_panel(self):
        """The played pose / frame (and its sd image)."""
        return self._out_pane

    def timeline_panel(self):
        """Sequence and horizon choice, play controls, the latent coordinates against time."""
        return pn.Column(self._controls, self._time_pane, self._note, self._gallery_pane)

    def __panel__(self):
        return pn.Column(self.output_panel(), self.timeline_panel())
