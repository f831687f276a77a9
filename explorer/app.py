"""The explorer page. ``panel serve explorer/app.py`` (or ``bgplvm serve``) runs it;
each browser session executes this module and gets its own ``ExplorerState``.

The page opens on real motion capture: CMU subject 35 (walks and jogs) with the shipped
pre-trained dynamical model (``bgplvm.assets``). The model file ships without the data;
the data come from the user cache, the offline mirror or a one-time download. When none
of those works (a fresh machine offline), the page opens on the embedded synthetic walk
and says why and how to get the real data.

``create_app(state)`` builds the page for one session and is importable for tests.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
from pathlib import Path

import holoviews as hv
import panel as pn

from bgplvm.explorer.ard_view import ArdView
from bgplvm.explorer.export import ExportPanel
from bgplvm.explorer.infer_view import InferView
from bgplvm.explorer.latent_view import LatentView
from bgplvm.explorer.loading import asset_message, load_asset_cached
from bgplvm.explorer.model_panel import ModelPanel, one_listing_per_name
from bgplvm.explorer.output_view import OutputView
from bgplvm.explorer.player import PlayerView
from bgplvm.explorer.state import ExplorerState
from bgplvm.explorer.views_view import ViewsView
from bgplvm.explorer.warm import ensure_warm, is_warm
from bgplvm.explorer.widgets import RIGHT_W

log = logging.getLogger("explorer")

HELP = """
**How to use.** (1) The page opens on CMU motion capture (subject 35, walks and jogs) with a
pre-trained **dynamical** model; pick another data set, upload your own (an array, an image
sequence, or ASF + AMC motion capture) or open a saved model. (2) In the **latent space**, move
the mouse (follow mode) or click to generate the pose / frame at that point, with its
uncertainty; clicking a training point shows its data in the **Training point** tab (and, for
vectors, in the Generated plot). (3) **Play** a training sequence: the
marker moves along its latent trajectory while the pose animates; past the last training frame
the dynamical model **forecasts** from its time prior, and the bands and discs show how the
uncertainty grows; data loaded without a model play as recorded, to look at before training.
(4) **Observe & infer**: hide part of a test frame and let the model infer it; with a model of
several views (MRD), show one view of a frame and infer the others, stepping through the
candidates. The **Relevance
(ARD)** tab shows how much each latent dimension is used (click a bar to show that dimension on
an axis; the others are held at the sliders' values). (5) **Train** a
new model (static or dynamical) -- it runs in a separate low-priority process. (6) **Export**
figures, coordinates and the played sequence as an animated GIF. From the keyboard: Tab to a
tab header, then Enter, or the arrow keys for its neighbours.
"""


def dataset_options() -> dict[str, str]:
    """{label: name} of the data sets offered in the page."""
    from bgplvm.datasets import list_datasets

    opts = {}
    try:
        for info in list_datasets():
            tag = "embedded" if getattr(info, "embedded", False) else (
                "cached" if getattr(info, "cached", False) else "download")
            title = getattr(info, "title", info.name)
            # the tag once: embedded sets' titles say "(embedded)" already
            opts[title if f"({tag})" in title else f"{title} [{tag}]"] = info.name
    except Exception:  # a broken registry must not stop the page
        log.exception("list_datasets failed")
    return opts


@functools.lru_cache(maxsize=4)
def _load_model(path: str, mtime: float):
    """A model file given by path (``BGPLVM_EXPLORER_MODEL``), read once per process."""
    from bgplvm import BayesianGPLVM

    return BayesianGPLVM.load(path)


def _load_asset(name: str):
    return load_asset_cached(name)


def initial_state(model_path: str | os.PathLike | None = None) -> ExplorerState:
    """A session's starting state: the model named by ``model_path`` /
    ``BGPLVM_EXPLORER_MODEL`` if given, else the default asset (CMU 35, dynamical), else
    -- its data unavailable -- the embedded synthetic walk, with the reason shown."""
    from bgplvm.assets import DEFAULT_ASSET, FALLBACK_ASSET, AssetUnavailable, get_spec

    state = ExplorerState()
    path = model_path or os.environ.get("BGPLVM_EXPLORER_MODEL")
    if path:
        p = Path(path)
        try:
            m = _load_model(str(p.resolve()), p.stat().st_mtime)
            state.set_model(m)
            state.info = (f"Loaded {state.dataset_name} with the model {p.name} "
                          f"(Q={m.latent_dim}, M={m.num_inducing}, N={state.model.Y.shape[0]:,}"
                          + (f"; {len(m.view_names)} views, drawn: {state.view_name}" if state.mrd is not None else "")
                          + ")."
                          + (f" Its data is referenced, not copied into the model file: read from "
                             f"{m.data_file}." if getattr(m, "data_file", None) else ""))
            return state
        except Exception as e:  # fall through to the default asset
            log.exception("could not load %s", p)
            state.error = f"Could not load the model {p.name} ({type(e).__name__}: {e}); showing the default."
    note = ""
    for name in (os.environ.get("BGPLVM_EXPLORER_ASSET") or DEFAULT_ASSET, FALLBACK_ASSET):
        try:
            m, ds = _load_asset(name)
        except AssetUnavailable as e:
            log.warning("default model %s unavailable: %s", name, e)
            note = (f"**Real motion capture is not available here**: {e}. Showing the embedded synthetic "
                    "walk instead. ")
            continue
        except Exception as e:  # a broken asset must not stop the page
            log.exception("could not load asset %s", name)
            note = f"Could not load the pre-trained {name} model ({type(e).__name__}: {e}). "
            continue
        state.set_model(m, ds)
        state.asset_name = name
        state.info = note + asset_message(get_spec(name).title, m) + (
            " Press Play, move over the latent space, or train your own.")
        if note:
            state.error = ""
        return state
    from bgplvm.datasets import DEFAULT_DATASET

    state.load_dataset(DEFAULT_DATASET)
    state.info = note + "No pre-trained model could be loaded: press Train."
    return state


#: what the page says when its connection to the server is lost (server stopped, network)
DISCONNECTED = ("Connection to the bgplvm server lost: this page no longer responds. "
                "Reload it once the server runs again (bgplvm serve).")


def extensions() -> None:
    """Panel's and HoloViews' set-up for the page. Plots draw with Canvas 2D, not WebGL
    (HoloViews' default): every plot here is small (a few thousand glyphs at most), and a
    WebGL plot is copied onto its canvas at every repaint, which on a machine without a
    GPU (software GL: VMs, remote desktops, headless browsers) took 50-150 ms per mouse
    move; with Canvas 2D a move's output is on screen in ~60 ms (bench/bench_load.py)."""
    # a lost connection to the server is said on the page (it used to look alive and do
    # nothing: hover, Train and Stop were silently dropped)
    pn.extension("filedropper", notifications=True, disconnect_notification=DISCONNECTED)
    hv.extension("bokeh", logo=False)
    hv.renderer("bokeh").webgl = False


#: BokehJS's tab headers take the keyboard focus (tabIndex 0) but not a key: Enter or Space
#: opens the focused tab, the arrow keys move to its neighbour and open it (the ARIA tabs
#: pattern). The headers live in shadow roots, so the key's real target is the first
#: element of its composed path; a click rebuilds them, so the focus is put back.
TAB_KEYS_JS = """
if (!window._bgplvm_tab_keys) {
  window._bgplvm_tab_keys = true;
  document.addEventListener("keydown", (e) => {
    const el = e.composedPath()[0];
    if (!(el && el.classList && el.classList.contains("bk-tab"))) return;
    let target = null;
    if (e.key === "Enter" || e.key === " ") target = el;
    else if (e.key === "ArrowRight") target = el.nextElementSibling;
    else if (e.key === "ArrowLeft") target = el.previousElementSibling;
    if (!(target && target.classList.contains("bk-tab"))) return;
    e.preventDefault();
    const title = target.textContent;
    target.click();
    // the click rebuilds the headers (and the server may re-render the whole tabs view):
    // the focus goes to the active header of that title wherever it now is
    const find = (root) => {
      for (const t of root.querySelectorAll(".bk-tab.bk-active"))
        if (t.textContent === title) return t;
      for (const x of root.querySelectorAll("*"))
        if (x.shadowRoot) { const t = find(x.shadowRoot); if (t) return t; }
      return null;
    };
    const lost = () => {  // nothing focused: the focused header was removed
      let a = document.activeElement;
      while (a && a.shadowRoot && a.shadowRoot.activeElement) a = a.shadowRoot.activeElement;
      return a == null || a === document.body || !a.isConnected;
    };
    // the server may re-render the view after its round trip (seconds on a busy machine):
    // try until it has
    for (const ms of [50, 200, 500, 1000, 2000, 3500, 5000, 8000])
      setTimeout(() => { if (lost()) { const now = find(document); if (now) now.focus(); } }, ms);
  });
}
"""


def keyboard_tabs(doc) -> None:
    """Install TAB_KEYS_JS in the page of ``doc`` (a Bokeh document) once it is ready."""
    from bokeh.events import DocumentReady
    from bokeh.models import CustomJS

    doc.js_on_event(DocumentReady, CustomJS(code=TAB_KEYS_JS))


def create_app(state: ExplorerState | None = None) -> pn.viewable.Viewable:
    """The whole page for one session."""
    extensions()
    state = state if state is not None else initial_state()

    player = PlayerView(state=state)
    infer = InferView(state=state)
    model_panel = ModelPanel(state=state, dataset_options=dataset_options())
    ard = ArdView(state=state)
    latent = LatentView(state=state, decorators=[player.attach_latent, infer.attach_latent])
    output = OutputView(state=state)
    export = ExportPanel(state=state)
    views = ViewsView(state=state)

    error = pn.pane.Alert("", alert_type="danger", visible=False, sizing_mode="stretch_width",
                          css_classes=["error-box"])
    info = pn.pane.Markdown("", styles={"color": "#2c5e2e", "font-size": "13px"}, margin=(0, 10),
                            sizing_mode="stretch_width", css_classes=["info-line"])
    dismiss = pn.widgets.Button(label="Dismiss", width=90, visible=False)

    def show_error(*_):
        error.object = f"**Error:** {state.error}" if state.error else ""
        error.visible = dismiss.visible = bool(state.error)

    def show_info(*_):
        info.object = state.info

    state.param.watch(show_error, "error")
    state.param.watch(show_info, "info")
    dismiss.on_click(lambda e: setattr(state, "error", ""))
    show_error()
    show_info()

    if pn.state.curdoc is not None and pn.state.curdoc.session_context is not None:
        pn.state.on_session_destroyed(lambda ctx: state.shutdown())
        keyboard_tabs(pn.state.curdoc)
        one_listing_per_name(pn.state.curdoc)

    header = pn.Row(
        pn.pane.Markdown("## bgplvm explorer", margin=(0, 20, 0, 10), styles={"color": "white"}),
        pn.pane.Markdown("Bayesian GP-LVM and its dynamical variant (Titsias & Lawrence; Damianou, Titsias & "
                         "Lawrence): latent space, sequences in time, what the model generates and how sure it is.",
                         styles={"color": "#dde6f0", "font-size": "13px"}, margin=(14, 10, 0, 10)),
        styles={"background": "#1f3b5a"}, sizing_mode="stretch_width", height=56)
    help_card = pn.Card(pn.pane.Markdown(HELP, styles={"font-size": "13px"}), title="Help",
                        collapsed=True, sizing_mode="stretch_width")
    tabs = pn.Tabs(("Play & forecast", pn.Column(player.timeline_panel())),
                   ("Observe & infer", pn.Column(views.observe_panel(), infer)),
                   ("Training point", output.training_panel()),
                   ("Relevance (ARD)", ard),
                   # hidden tabs are rendered when first opened: a new session costs less
                   width=RIGHT_W, dynamic=True)
    right = pn.Column(output.readout_pane, pn.Row(output.generated_panel(), player.output_panel()),
                      views.generated_panel(), output.caption_panel(), tabs, width=RIGHT_W + 10)
    centre = pn.Column(latent, latent.sliders_card())
    main = pn.Column(pn.Row(error, dismiss), info, help_card, pn.Row(centre, right))
    sidebar = pn.Column(model_panel, export, width=290)
    page = pn.Column(header, pn.Row(sidebar, main), sizing_mode="stretch_width")
    page.state = state  # handy for debugging and tests
    return page


def _console(msg: str) -> None:
    print(f"[bgplvm explorer] {msg}", file=sys.stderr, flush=True)


if pn.state.served:
    # before anything is sent: the page's resources (FileDropper's JS, served locally) are
    # chosen when the first document goes out, even when the app fills in later
    extensions()

    if is_warm():
        create_app().servable(title="bgplvm explorer")
    else:
        # `panel serve explorer/app.py` without the --setup warm-up: the first session pays
        # for it. Send a page that says so at once, then build the real one in place.
        holder = pn.Column(pn.pane.Markdown(
            "### bgplvm explorer is warming up\n\nCompiling the numerical kernels and loading the default "
            "model (CMU motion capture). With an empty compile cache this takes about a minute, once; "
            "later starts take seconds. This page fills in by itself.", css_classes=["warming-up"]),
            pn.indicators.LoadingSpinner(value=True, size=40), sizing_mode="stretch_width")

        async def _fill():
            # the warm-up (up to a minute with an empty compile cache) runs in a worker
            # thread: on the server's event loop it would hold up everything else it serves,
            # this page's own stylesheets included, and the message above would stay hidden
            import asyncio

            try:
                await asyncio.get_running_loop().run_in_executor(
                    None, functools.partial(ensure_warm, console=_console, make_page=create_app))
                holder.objects = [create_app()]
            except Exception as e:  # say so in the page rather than spin forever
                log.exception("explorer start failed")
                holder.objects = [pn.pane.Alert(f"The explorer could not start: {type(e).__name__}: {e}",
                                                alert_type="danger")]

        pn.state.onload(_fill)
        holder.servable(title="bgplvm explorer")
