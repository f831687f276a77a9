"""Building blocks shared by the explorer's views: the page's sizes, the guard that turns a
failing callback into a message in the page, two-way widgets for state parameters,
a plain text box, and the base class of the views that rebuild their plot.

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

import panel as pn
import param
from bokeh.models import Div
from panel.io.document import unlocked

from .state import ExplorerState
from .user_input import UserError

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

    @property
    def visible(self) -> bool:
        return self._pane.visible

    @visible.setter
    def visible(self, v: bool) -> None:
        self._pane.visible = v

    def __panel__(self):
        return self._pane


class Rebuilding(pn.viewable.Viewer):
    """A view whose HoloViews pane is rebuilt when some state parameters change."""

    state = param.ClassSelector(class_=ExplorerState)
    _rebuild_on: tuple[str, ...] = ()

    def __init__(self, **params):
        super().__init__(**params)
        self._pane = pn.pane.HoloViews(None, linked_axes=False)
        # a Div (TextBox): its text names the data set and changes while its tab may be hidden
        self._placeholder = TextBox("", color="#666", font_size="13px")
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
            return f"<i>No model of {html.escape(ds.name)} yet: press <b>Train</b> (section 2), or open a saved model.</i>"
        return "<i>No model yet: train one or open a saved model.</i>"

    def _build(self):  # pragma: no cover - abstract
        raise NotImplementedError
