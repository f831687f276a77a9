"""The ARD view: one bar per latent dimension (its ARD weight); clicking a bar puts that
dimension on the chosen axis of the latent view."""

from __future__ import annotations

import numpy as np
import holoviews as hv
import panel as pn
from holoviews.streams import Params, Tap

from . import plots
from .latent import ard_off_mask, segmentation_roles
from .widgets import PLOT_W, Rebuilding, TextBox, checkbox, guarded

class ArdView(Rebuilding):
    """Bar chart of the ARD weights; clicking a bar puts that dimension on an axis."""

    _rebuild_on = ("model_version", "sort_ard")

    def __init__(self, **params):
        self._assign = pn.widgets.RadioButtonGroup(options={"x axis": "x", "y axis": "y"}, value="x",
                                                   color="default", width=150)
        self._sort = checkbox(params["state"], "sort_ard", "sort by weight")
        super().__init__(**params)
        s = self.state
        self._xsel = pn.widgets.Select(label="x axis", width=210)
        self._ysel = pn.widgets.Select(label="y axis", width=210)
        self._xsel.param.watch(lambda e: self._select("x", e.new), "value")
        self._ysel.param.watch(lambda e: self._select("y", e.new), "value")
        s.param.watch(self._sync_selects, ["model_version", "x_dim", "y_dim"])
        self._sync_selects()

    def _build(self):
        s = self.state
        # a multi-view model's bars carry "q view" labels, written upwards: a taller figure
        dmap = hv.DynamicMap(self._bars, streams=[Params(s, ["x_dim", "y_dim"])]).opts(
            width=PLOT_W - 60, height=230 if s.mrd is None else 320, toolbar="right", default_tools=["save"])
        self._sort.visible = s.mrd is None  # the views' groups keep the dimensions' order
        # streams go on the final object: .opts() on a DynamicMap returns a new one
        self._tap = Tap(source=dmap)
        self._tap.add_subscriber(self._on_tap)
        return dmap

    def _bars(self, x_dim, y_dim):
        s = self.state
        if s.model is None:
            return plots.ard_bars(np.zeros(0), 0, 0)
        if s.mrd is not None:  # one group per view: shared and private dimensions at a glance
            seg = s.mrd.segmentation()
            return plots.ard_view_bars(seg.relevance, seg, x_dim, y_dim)
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
        if self.state.mrd is not None:  # the dimensions' roles across the views
            users = segmentation_roles(self.state.mrd.segmentation(), m.latent_dim)
            opts = {f"dim {q}  ({users[q]})": q for q in range(m.latent_dim)}
            for w, v in ((self._xsel, self.state.x_dim), (self._ysel, self.state.y_dim)):
                w.options = opts
                w.value = v
            return
        alpha = np.asarray(m.ard_weights)
        off = ard_off_mask(alpha)
        opts = {f"dim {q}  (alpha {alpha[q]:.3g}{', off' if off[q] else ''})": q for q in range(m.latent_dim)}
        for w, v in ((self._xsel, self.state.x_dim), (self._ysel, self.state.y_dim)):
            w.options = opts
            w.value = v

    def _help_text(self) -> str:
        if self.state.mrd is not None:
            return ("One group of bars per view: each view's ARD weights relative to its largest. "
                    "<span style='color:#2ca02c'>Green</span>: shared with another view, "
                    "<span style='color:#ff7f0e'>orange</span>: private to the view, "
                    "<span style='color:#b0b0b0'>grey</span>: off for it (below the dashed line). "
                    "Red / blue outline: x / y axis. Click a bar to show its dimension on the chosen axis.")
        return ("One bar per latent dimension: the ARD weight alpha_q = 1/lengthscale_q^2. "
                "<span style='color:#b0b0b0'>Light grey</span>: switched off. "
                "<span style='color:#d62728'>Red</span>: x axis, <span style='color:#1f77b4'>blue</span>: y axis. "
                "Click a bar to show it on the chosen axis.")

    def __panel__(self):
        # a Div (TextBox): its text changes with the model while this tab may be hidden
        help_ = TextBox(self._help_text(), width=PLOT_W - 60)
        self.state.param.watch(lambda e: setattr(help_, "object", self._help_text()), "model_version")
        has_model = pn.bind(lambda v: self.state.model is not None, self.state.param.model_version)
        return pn.Column(
            self._pane, self._placeholder,
            pn.Column(help_,
                      pn.Row(pn.pane.Markdown("Click assigns to", margin=(0, 5, 0, 10)), self._assign, self._sort),
                      pn.Row(self._xsel, self._ysel), visible=has_model),
        )

