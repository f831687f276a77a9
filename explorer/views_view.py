"""The multi-view part of the page (a ``bgplvm.MRD`` opened): which view is drawn as the
primary one, every other view generated at the same latent point beside it, and
observe-a-view -- show one view of a frame (a silhouette), infer the others (its pose),
step through the candidate latent points a view leaves open.

Hidden (and nothing computed) while the model shown is of one view.
"""

from __future__ import annotations

import numpy as np
import holoviews as hv
import panel as pn
import param
from holoviews.streams import Params

from . import plots
from . import sequences as seqs
from .shared import shared
from .widgets import OUT_H, OUT_W, RIGHT_W, TextBox, guarded, image_frame

#: what moves the generated views
_MOVES = ["cursor", "fixed", "azimuth", "elevation", "x_dim", "y_dim"]


def view_figure(ds, mean: np.ndarray, var: np.ndarray | None, title: str, azimuth: float, elevation: float,
                truth: np.ndarray | None = None, color: str = "#1f3b73"):
    """One view's row drawn as its data set draws it: a pose (2-sd discs per joint), an
    image, or a vector with its +-2 sd band (``truth``: a row of data drawn beside)."""
    r = ds.renderer
    kind = getattr(r, "kind", "vector")
    if kind == "pose":
        zc, R = shared(ds, "pose_extent", lambda: seqs.pose_extent(r, ds.Y))
        centre = lambda P: P - np.array([P[:, 0].mean(), P[:, 1].mean(), zc])  # noqa: E731
        spread = 2 * seqs.pose_spread(r, mean, var) if var is not None else None
        return plots.pose_plot(centre(r.positions(mean)), r.connections, azimuth, elevation, spread=spread,
                               limits=(-R, -R, R, R), title=title, color=color)
    if kind == "image":
        vmin, vmax = seqs.image_range(ds)
        img = r.image(mean)
        fw, fh = image_frame(img.shape[1], img.shape[0])
        return plots.image_plot(img, title, vmin, vmax).opts(frame_width=max(60, fw), frame_height=fh,
                                                            colorbar=False)
    std = np.sqrt(np.maximum(var, 0)) if var is not None else None
    lo, hi = float(np.nanmin(ds.Y)), float(np.nanmax(ds.Y))
    pad = 0.1 * (hi - lo or 1.0)
    return plots.vector_plot(mean, std, truth, title=title, ylim=(lo - pad, hi + pad))


class ViewsView(pn.viewable.Viewer):
    """The drawn-view switch, the other views at the latent point, and observe-a-view."""

    state = param.Parameter()

    def __init__(self, **params):
        super().__init__(**params)
        s = self.state
        self._drawn = pn.widgets.RadioButtonGroup(options=[], color="default", width=RIGHT_W - 150)
        self._drawn.param.watch(self._on_drawn, "value")
        self._others = pn.Row(width=RIGHT_W)
        self._observed = pn.widgets.Select(label="observe the view", width=160)
        self._observed.param.watch(lambda e: setattr(s, "observed_view", e.new) if e.new else None, "value")
        self._frame = pn.widgets.IntInput(label="frame", value=0, start=0, width=110)
        self._frame.param.watch(lambda e: setattr(s, "view_frame", int(e.new)), "value")
        self._infer = pn.widgets.Button(label="Infer the other views", color="primary", width=170)
        self._infer.on_click(self._on_infer)
        self._prev = pn.widgets.Button(label="\u25c0 candidate", width=110, disabled=True)
        self._next = pn.widgets.Button(label="candidate \u25b6", width=110, disabled=True)
        self._prev.on_click(lambda e: self._step(-1))
        self._next.on_click(lambda e: self._step(+1))
        # a Bokeh Div, not a Markdown pane: it changes while its tab may be hidden (TextBox)
        self._status = TextBox(css_classes=["views-status"])
        # panes made once and refilled: a pane made while its tab is hidden was given Panel's
        # stylesheets at cdn.holoviz.org (TextBox)
        self._frame_panes: list[pn.pane.HoloViews] = []
        self._frame_pane = pn.Row(width=RIGHT_W)
        s.param.watch(self._on_model, ["model_version"])
        s.param.watch(self._show_candidates, ["candidates_version", "candidate"])
        s.param.watch(lambda e: self._show_frame(), ["view_frame", "observed_view", "azimuth", "elevation"])
        self._on_model()

    # ---- a model (or another drawn view) installed
    @guarded
    def _on_model(self, *events):
        s = self.state
        if s.mrd is None:
            self._others.objects = []
            for p in self._frame_panes:
                p.object, p.visible = None, False
            return
        self._drawn.options = s.view_names
        self._drawn.value = s.view_name
        self._others.objects = [self._generated(n) for n in s.view_names if n != s.view_name]
        self._observed.options = s.view_names
        self._observed.value = s.observed_view
        fr = s.view_frames
        self._frame.end = fr.N - 1
        self._frame.value = int(np.clip(s.view_frame, 0, fr.N - 1))
        self._show_candidates()
        self._show_frame()

    def _generated(self, name: str) -> pn.pane.HoloViews:
        """View ``name`` generated at the latent point, following it."""
        s = self.state
        ds = s.view_datasets[name]

        def draw(**kw):
            mean, var = s.generate_views([name])[name]
            return view_figure(ds, mean, var, f"{name} at the point", s.azimuth, s.elevation)

        dmap = hv.DynamicMap(draw, streams=[Params(s, _MOVES)])
        size = {} if getattr(ds.renderer, "kind", "vector") == "image" else dict(width=OUT_W, height=OUT_H)
        return pn.pane.HoloViews(dmap.opts(toolbar=None, default_tools=[], fontsize={"title": "10pt"}, **size),
                                 linked_axes=False)

    @guarded
    def _on_drawn(self, event):
        if event.new and event.new != self.state.view_name:
            self.state.show_view(event.new)

    # ---- observe one view, infer the others
    @guarded
    def _on_infer(self, event):
        s = self.state
        self._status.object = f"Inferring q(x*) from the {s.observed_view} of frame {s.view_frame} ..."
        s.infer_from_view()

    @guarded
    def _step(self, d: int):
        s = self.state
        s.show_candidate(int(np.clip(s.candidate + d, 0, max(s.n_candidates - 1, 0))))

    def _show_candidates(self, *events):
        s = self.state
        K = s.n_candidates
        self._prev.disabled = K == 0 or s.candidate == 0
        self._next.disabled = K == 0 or s.candidate >= K - 1
        if s.mrd is None:
            self._status.object = ""
            return
        others = ", ".join(n for n in s.view_names if n != s.observed_view)
        self._status.object = (
            f"<b>{s.candidate_text()}</b>. The point is pinned at this candidate's q(x*) mean (all its dimensions): "
            f"the views drawn above are what the model says the frame's {others} are. A {s.observed_view} "
            "can fit several latent points: step through them, best bound first."
            if K else f"Choose a frame of the {s.view_frames.label} and infer its {others} from its "
                      f"{s.observed_view} alone.")

    def _show_frame(self):
        """The chosen frame's every view as recorded (the observed one and the truth of the others)."""
        s = self.state
        if s.mrd is None:
            return
        fr, n = s.view_frames, int(np.clip(s.view_frame, 0, s.view_frames.N - 1))
        while len(self._frame_panes) < len(s.view_names):  # more views than ever before (rare)
            self._frame_panes.append(pn.pane.HoloViews(None, linked_axes=False))
            self._frame_pane.objects = list(self._frame_panes)
        for pane, name in zip(self._frame_panes, s.view_names):
            y = fr.views[name][n]
            what = "observed" if name == s.observed_view else "hidden (truth)"
            fig = view_figure(s.view_datasets[name], y, None, f"frame {n}: {name}, {what}", s.azimuth, s.elevation,
                              color="#333333" if name == s.observed_view else "#8c564b")
            size = {} if getattr(s.view_datasets[name].renderer, "kind", "vector") == "image" else dict(
                width=OUT_W, height=OUT_H)
            pane.object = fig.opts(toolbar=None, default_tools=[], fontsize={"title": "9pt"}, **size)
            pane.visible = True
        for pane in self._frame_panes[len(s.view_names):]:
            pane.object, pane.visible = None, False

    # ---- layout
    def generated_panel(self):
        """The drawn-view switch and the other views at the latent point (under the output)."""
        has = pn.bind(lambda v: self.state.mrd is not None, self.state.param.model_version)
        return pn.Column(pn.Row(pn.pane.Markdown("**Drawn view**", margin=(8, 5, 0, 10)), self._drawn),
                         self._others, visible=has, css_classes=["views-generated"])

    def observe_panel(self):
        """Observe a view of a frame, infer the others (the Observe & infer tab, first)."""
        has = pn.bind(lambda v: self.state.mrd is not None, self.state.param.model_version)
        head = pn.pane.Markdown("#### Observe a view, infer the others", margin=(0, 10))
        return pn.Column(head, pn.Row(self._observed, self._frame, self._infer),
                         pn.Row(self._prev, self._next), self._status, self._frame_pane,
                         visible=has, css_classes=["views-observe"])

    def __panel__(self):
        return pn.Column(self.generated_panel(), self.observe_panel())
