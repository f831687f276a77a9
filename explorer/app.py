"""The explorer page. ``panel serve explorer/app.py`` (or ``bgplvm serve``) runs it;
each browser session executes this module and gets its own ``ExplorerState``.

``create_app(state)`` builds the page for one session and is importable for tests.
"""

from __future__ import annotations

import functools
import logging
import os
from pathlib import Path

import holoviews as hv
import panel as pn

from explorer.state import ExplorerState
from explorer.views import ArdView, LatentView, ModelPanel, OutputView
from explorer.export import ExportPanel

log = logging.getLogger("explorer")

ASSETS = Path(__file__).parent / "assets"
#: Small model of the embedded default data set, made by explorer/make_default_model.py.
DEFAULT_MODEL = ASSETS / "synth_walk_model.npz"

HELP = """
**How to use.** (1) Pick a data set (the embedded walk is loaded with a small pre-trained
model), upload your own array, or open a saved model. (2) Train: latent dimensions Q, inducing
points M, kernel and iterations; progress and the bound curve update live and *Stop* keeps the
best point so far. (3) The **ARD chart** shows which latent dimensions the model kept (grey:
switched off); click a bar to put it on an axis. (4) In the **latent space**, move the mouse
(follow mode) or click to generate the output at that latent point, with its uncertainty;
clicking a training point shows its data beside. (5) **Export** figures (PNG, SVG) and latent
coordinates (CSV, NPZ) as downloads; the toolbar's save icon saves the on-screen plot.
"""


def dataset_options() -> dict[str, str]:
    """{label: name} of the data sets offered in the page."""
    from bgplvm_datasets import list_datasets

    opts = {}
    try:
        for info in list_datasets():
            tag = "embedded" if getattr(info, "embedded", False) else (
                "cached" if getattr(info, "cached", False) else "download")
            opts[f"{getattr(info, 'title', info.name)} [{tag}]"] = info.name
    except Exception:  # a broken registry must not stop the page
        log.exception("list_datasets failed")
    return opts


@functools.lru_cache(maxsize=4)
def _load_model(path: str, mtime: float):
    """The start-up model, read once per process (sessions only read it; training and
    uploads make new model objects)."""
    from model import BayesianGPLVM

    return BayesianGPLVM.load(path)


def initial_state(model_path: str | os.PathLike | None = None) -> ExplorerState:
    """A state with the embedded default data set and, when the shipped pre-trained
    model exists (or ``BGPLVM_EXPLORER_MODEL`` names one), that model."""
    from bgplvm_datasets import DEFAULT_DATASET

    state = ExplorerState()
    path = Path(model_path or os.environ.get("BGPLVM_EXPLORER_MODEL") or DEFAULT_MODEL)
    if path.exists():
        try:
            m = _load_model(str(path.resolve()), path.stat().st_mtime)
            state.set_model(m)  # with the data set the model names (or its own Y)
            state.info = (f"Loaded {state.dataset_name} with a pre-trained model "
                          f"(Q={m.latent_dim}, M={m.num_inducing}). Train to refit.")
            return state
        except Exception as e:  # fall back to the default data set without a model
            log.exception("could not load %s", path)
            state.error = f"Could not load the pre-trained model ({type(e).__name__}: {e}); press Train."
    state.load_dataset(DEFAULT_DATASET)
    return state


def create_app(state: ExplorerState | None = None) -> pn.viewable.Viewable:
    """The whole page for one session."""
    pn.extension("filedropper", notifications=False)
    hv.extension("bokeh", logo=False)
    state = state if state is not None else initial_state()

    model_panel = ModelPanel(state=state, dataset_options=dataset_options())
    ard = ArdView(state=state)
    latent = LatentView(state=state)
    output = OutputView(state=state)
    export = ExportPanel(state=state)

    error = pn.pane.Alert("", alert_type="danger", visible=False, sizing_mode="stretch_width",
                          css_classes=["error-box"])
    info = pn.pane.Markdown("", styles={"color": "#2c5e2e", "font-size": "13px"}, margin=(0, 10))
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

    header = pn.Row(
        pn.pane.Markdown("## bgplvm explorer", margin=(0, 20, 0, 10), styles={"color": "white"}),
        pn.pane.Markdown("Bayesian GP-LVM (Titsias & Lawrence; Damianou, Titsias & Lawrence): "
                         "latent space, ARD relevance and what the model generates.",
                         styles={"color": "#dde6f0", "font-size": "13px"}, margin=(14, 10, 0, 10)),
        styles={"background": "#1f3b5a"}, sizing_mode="stretch_width", height=56)
    help_card = pn.Card(pn.pane.Markdown(HELP, styles={"font-size": "13px"}), title="Help",
                        collapsed=True, sizing_mode="stretch_width")
    main = pn.Column(
        pn.Row(error, dismiss), info, help_card,
        pn.Row(pn.Column(latent, pn.Row(latent.sliders_card(), export)),
               pn.Column(output, ard)),
    )
    page = pn.Column(header, pn.Row(model_panel, main), sizing_mode="stretch_width")
    page.state = state  # handy for debugging and tests
    return page


def _warm() -> None:
    from explorer.warm import ensure_warm

    ensure_warm()


if pn.state.served:
    _warm()
    create_app().servable(title="bgplvm explorer")
