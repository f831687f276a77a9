"""A multi-view model (``bgplvm.MRD``) in the real browser (issue 45, point 5): the page
opens it with one ARD bar group per view, moving the point generates every view side by
side, the drawn view can be switched, and one view of a frame gives the others with the
candidates to step through. Runs on the embedded synthetic walk (its joint angles and
their camera image), so that a clone without the data mirror runs it too."""

from __future__ import annotations

import re

import numpy as np
import pytest

from explorer_server import start_server
from views_model import walk_mrd

from .conftest import ARTIFACTS
from .test_explorer_browser import ARD, LATENT, OUTPUT, plot_info, readout, shot_of, show_tab, wait_for

pytestmark = pytest.mark.browser

OTHER = "image at the point"


@pytest.fixture(scope="module")
def views_server(tmp_path_factory):
    path = tmp_path_factory.mktemp("views") / "walk-views.npz"
    walk_mrd(iters=150).save(path)
    srv = start_server(ARTIFACTS / "browser-server-views.log", {"BGPLVM_EXPLORER_MODEL": str(path)})
    yield f"{srv.url}/app"
    srv.stop()


def test_a_multi_view_model_generates_every_view_and_infers_one_from_another(page, views_server):
    page.goto(views_server)
    lat = plot_info(page, LATENT, timeout=60)
    plot_info(page, OUTPUT)
    other = plot_info(page, OTHER)
    assert page.get_by_text(re.compile(r"2 views, drawn: pose")).first.is_visible()
    page.screenshot(path=str(ARTIFACTS / "browser-views-01-loaded.png"), full_page=True)

    # moving the point generates the other view too: its figure changes with the mouse
    before = shot_of(page, other, "frame")
    (x0, x1), (y0, y1) = lat["xrange"], lat["yrange"]
    for f in (0.2, 0.8):
        px, py = plot_info(page, LATENT, [x0 + f * (x1 - x0)], [y0 + f * (y1 - y0)])["pts"][0]
        page.mouse.move(px, py, steps=3)
    wait_for(lambda: "following" in readout(page), timeout=15, what="the readout following the mouse")
    wait_for(lambda: np.abs(shot_of(page, plot_info(page, OTHER), "frame") - before).sum() > 0, timeout=15,
             what="the image view redrawn at the new point")

    # one bar group per view in the ARD tab
    show_tab(page, "Relevance")
    ard = plot_info(page, ARD)
    assert ard["title"] == "ARD relevance per view" and ard["xlabel"] == "latent dimension q, view"
    page.screenshot(path=str(ARTIFACTS / "browser-views-02-ard.png"), full_page=True)

    # observe the image view of a frame, infer the pose; step through the candidates
    show_tab(page, "Observe & infer")
    page.get_by_role("button", name="Infer the other views").click()
    def status():
        loc = page.get_by_text(re.compile(r"^candidate \d+ of \d+: log density"))
        return loc.first.inner_text() if loc.count() else ""

    wait_for(lambda: re.search(r"candidate 1 of (\d+)", status()), timeout=30,
             what="the candidates of the inferred latent point")
    assert "pinned" in readout(page)
    n = int(re.search(r"candidate 1 of (\d+)", status()).group(1))
    if n > 1:
        page.get_by_role("button", name="candidate \u25b6").click()
        wait_for(lambda: f"candidate 2 of {n}" in status(), timeout=15, what="the second candidate")
    page.screenshot(path=str(ARTIFACTS / "browser-views-03-inferred.png"), full_page=True)

    # the image view drawn as the primary one: the pose is then the other view
    page.get_by_role("button", name="image", exact=True).click()
    plot_info(page, "pose at the point", timeout=30)
    wait_for(lambda: page.get_by_text(re.compile(r"drawn: image")).count() > 0, timeout=15,
             what="the model summary naming the drawn view")
    page.screenshot(path=str(ARTIFACTS / "browser-views-04-image-drawn.png"), full_page=True)
