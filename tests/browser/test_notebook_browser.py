"""``m.explore()`` served as a notebook serves it (issue 46, point 3): the Panel object the
method returns, put on a page by ``pn.serve`` in this process, draws the latent space and
generates under the mouse in the real browser."""

from __future__ import annotations

import socket

import numpy as np
import panel as pn
import pytest

from .conftest import ARTIFACTS
from .test_explorer_browser import LATENT, OUTPUT, plot_info, readout, wait_for

pytestmark = pytest.mark.browser


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def explorer_url():
    from bgplvm import BayesianGPLVM
    from bgplvm.datasets import load

    ds = load("synth_walk")
    m = BayesianGPLVM(ds.Y[::4], latent_dim=3, num_inducing=10, seed=0).fit(max_iters=40, progress=False)
    m.metadata = {"dataset": "synth_walk"}
    ex = m.explore()
    port = _free_port()
    srv = pn.serve({"explore": lambda: ex.__panel__()}, port=port, address="127.0.0.1", show=False, threaded=True,
                   websocket_origin=[f"127.0.0.1:{port}"])
    yield f"http://127.0.0.1:{port}/explore", ex
    srv.stop()


def test_the_explore_object_is_the_page_in_a_browser(page, explorer_url):
    url, ex = explorer_url
    page.goto(url)
    lat = plot_info(page, LATENT, timeout=60)
    plot_info(page, OUTPUT)
    (x0, x1), (y0, y1) = lat["xrange"], lat["yrange"]
    px, py = plot_info(page, LATENT, [x0 + 0.6 * (x1 - x0)], [y0 + 0.4 * (y1 - y0)])["pts"][0]
    page.mouse.move(px, py, steps=3)
    wait_for(lambda: "following" in readout(page), timeout=15, what="the readout following the mouse")
    # the page and the Python object are one state
    wait_for(lambda: abs(ex.state.cursor[0] - (x0 + 0.6 * (x1 - x0))) < 0.1 * (x1 - x0), timeout=15,
             what="the object's state following the page")
    page.screenshot(path=str(ARTIFACTS / "browser-notebook-explore.png"), full_page=True)
    assert np.isfinite(ex.state.generate()[0]).all()
