"""Run by ``panel serve --setup`` once before the server accepts sessions."""

from bgplvm.explorer.probe import maybe_install
from bgplvm.explorer.warm import ensure_warm


def _page():
    """The page rendered once to warm up; the app (Panel, HoloViews, Bokeh) is imported only
    here, after the warm-up has said on the console what it is doing."""
    from bgplvm.explorer.app import create_app

    return create_app()


maybe_install()  # only with BGPLVM_LATENCY_PROBE set (load tests)
ensure_warm(make_page=_page)
