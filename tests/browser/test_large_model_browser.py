"""A model of 1e5 rows in the page (issue 34, point 7): its latent points arrive as a
Datashader image, not as 1e5 glyphs; hover, click and zoom answer; the data is read from
the file the model refers to. How fast they answer is measured by
bench/bench_explorer_large.py (timed tests are not reliable on shared machines)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from explorer_server import start_server

from .conftest import ARTIFACTS
from .test_explorer_browser import LATENT, plot_info, readout, shot_of, wait_for

pytestmark = pytest.mark.browser

N = 100_000

#: the longest data source in the page's Bokeh document (rows of the largest glyph source)
JS_LONGEST_SOURCE = """() => {
  let n = 0;
  for (const doc of Bokeh.documents) for (const m of doc.all_models)
    if (m.data !== undefined && m.data !== null && typeof m.get_length === "function") n = Math.max(n, m.get_length() || 0);
  return n;
}"""


def large_model_file(folder, N=N, iters=3):
    """A static model of N rows (Q = 3, M = 30) saved with its rows referenced."""
    from bgplvm import BayesianGPLVM

    rng = np.random.default_rng(0)
    X = rng.standard_normal((N, 2)) * [1.5, 1.0]
    Y = np.sin(X @ rng.standard_normal((2, 12))) + 0.05 * rng.standard_normal((N, 12))
    np.save(folder / "rows.npy", Y)
    m = BayesianGPLVM(Y, 3, 30)
    m.fit(max_iters=iters)
    m.save(folder / "large.npz", data=folder / "rows.npy")
    return folder / "large.npz"


@pytest.fixture(scope="module")
def large_server(tmp_path_factory):
    path = large_model_file(tmp_path_factory.mktemp("large"))
    srv = start_server(ARTIFACTS / "browser-server-large.log", {"BGPLVM_EXPLORER_MODEL": str(path)})
    yield f"{srv.url}/app", path
    srv.stop()


def test_a_large_model_opens_as_a_density_image_and_answers(page, large_server):
    url, path = large_server
    page.goto(url)
    lat = plot_info(page, LATENT, timeout=60)
    page.get_by_text(f"{N:,} points: drawn as a density image").first.wait_for(timeout=30_000)
    assert page.get_by_text(re.compile(r"Its data is referenced, not copied .*rows\.npy")).first.is_visible()
    # the page holds no column of N rows: what it receives does not grow with the model
    longest = page.evaluate(JS_LONGEST_SOURCE)
    assert 0 < longest < N / 10, longest
    img = shot_of(page, lat, "frame")
    assert len(np.unique(img.reshape(-1, 3), axis=0)) > 20  # the density image over the background
    page.screenshot(path=str(ARTIFACTS / "browser-large-01-loaded.png"), full_page=True)

    # the mouse generates (follow mode), a click pins and selects the training point there
    (x0, x1), (y0, y1) = lat["xrange"], lat["yrange"]
    for f in (0.45, 0.5):
        px, py = plot_info(page, LATENT, [x0 + f * (x1 - x0)], [y0 + f * (y1 - y0)])["pts"][0]
        page.mouse.move(px, py, steps=2)
    wait_for(lambda: "following" in readout(page) and "x0 = -0.000" not in readout(page), timeout=15,
             what="the readout following the mouse")
    from bgplvm import BayesianGPLVM

    dims = [int(q) for q in re.search(r"x(\d+) = .*, x(\d+) = ", readout(page)).groups()]  # the axes shown
    mu = BayesianGPLVM.load(path).latent_mean[:, dims]
    n = int(np.argmin(np.sum((mu - np.median(mu, 0)) ** 2, 1)))  # a point in the dense middle
    px, py = plot_info(page, LATENT, [float(mu[n, 0])], [float(mu[n, 1])])["pts"][0]
    page.mouse.click(px, py)
    text = wait_for(lambda: re.search(r"pinned.*training #(\d+)", readout(page)), timeout=15,
                    what="a click to select a training point")
    k = int(text.group(1))
    assert np.hypot(*(mu[k] - mu[n])) < 0.02 * np.hypot(x1 - x0, y1 - y0)

    # zooming in re-aggregates the image at the new ranges (finer, not magnified pixels)
    before = shot_of(page, lat, "frame")
    cx, cy, w, h = lat["frame"]
    page.mouse.move(cx + w / 2, cy + h / 2)
    for _ in range(4):
        page.mouse.wheel(0, -300)
        page.wait_for_timeout(150)
    wait_for(lambda: plot_info(page, LATENT)["xrange"][1] - plot_info(page, LATENT)["xrange"][0] < 0.8 * (x1 - x0),
             timeout=10, what="the wheel to zoom in")
    page.wait_for_timeout(2000)
    after = shot_of(page, plot_info(page, LATENT), "frame")
    h, w = min(after.shape[0], before.shape[0]), min(after.shape[1], before.shape[1])  # tick labels move the frame
    assert np.abs(after[:h, :w] - before[:h, :w]).sum(axis=2).mean() > 5
    page.screenshot(path=str(ARTIFACTS / "browser-large-02-zoomed.png"), full_page=True)
