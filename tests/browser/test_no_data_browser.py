"""The page a user without the real data gets (no mirror, an empty cache, no network): the
embedded synthetic walk with its pre-trained dynamical model, and a line saying why and how
to get the real data. These run with and without the mirror (their server never has it);
the CMU and Frey pages are checked where the data are (test_sequences_browser.py)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from .conftest import ARTIFACTS
from .test_explorer_browser import (LATENT, OUTPUT, PLAYING, TIMELINE, check_exports, open_app, plot_info, shot_of,
                                    wait_for)
from .test_sequences_browser import FIT_WIDTH, JS_INFER, JS_PATHS, JS_TRAJ, _fits, _infer_tab, frames_per_second

pytestmark = pytest.mark.browser


def test_default_page_without_data_shows_the_synthetic_walk_and_why(page, server_without_data):
    open_app(page, server_without_data)
    assert plot_info(page, LATENT)["title"] == "Latent space: synth_walk"
    assert plot_info(page, PLAYING)["title"].startswith("Playing: ")
    why = page.get_by_text(re.compile(r"Real motion capture is not available here"))
    assert why.first.is_visible()
    assert page.get_by_text(re.compile(r"bgplvm datasets fetch cmu35")).first.is_visible()  # the remedy
    assert page.get_by_text(re.compile(r"Synthetic walk \(embedded\), dynamical model \(pre-trained: Q=")).first.is_visible()
    assert page.evaluate(JS_PATHS) == 2  # the played sequence's path: training part and forecast
    traj = page.evaluate(JS_TRAJ)
    assert traj is not None and sum(traj["fc"]) > 0
    for prefix in (LATENT, PLAYING, OUTPUT, TIMELINE):
        img = shot_of(page, plot_info(page, prefix), "frame")
        assert len(np.unique(img.reshape(-1, 3), axis=0)) > 20, prefix
    page.screenshot(path=str(ARTIFACTS / "no-data-01-default-page.png"), full_page=True)


def test_page_without_data_fits_a_1280_pixel_window_and_plays(page, server_without_data):
    page.set_viewport_size({"width": FIT_WIDTH, "height": 900})
    open_app(page, server_without_data)
    _fits(page, (LATENT, OUTPUT, PLAYING, TIMELINE), "synthetic default page")
    page.evaluate("() => { window.__bgplvm_frames = []; }")
    page.locator(".play-toggle button").first.click()
    page.wait_for_timeout(2500)
    page.locator(".play-toggle button").first.click()
    _, distinct = frames_per_second(page)
    # it plays (the rate is measured on the CMU page, test_play_animates_the_pose_in_the_browser)
    assert distinct >= 10, f"only {distinct} distinct frames in the best second"
    page.screenshot(path=str(ARTIFACTS / "no-data-02-fit-1280.png"), full_page=False)


def test_exports_without_data(page, server_without_data):
    open_app(page, server_without_data)
    check_exports(page, "synth_walk", min_frames=20)


def test_observe_and_infer_without_data(page, server_without_data):
    open_app(page, server_without_data)
    _infer_tab(page)
    page.locator(".infer-button button").first.click()
    status = page.get_by_text(re.compile(r"^RMS error of the hidden values: [\d.]+ \(nearest neighbour: [\d.]+\)"))
    status.first.wait_for(timeout=120000)
    err, nn = map(float, re.findall(r"(?<=: )[\d.]+(?=[ )])", status.first.inner_text())[:2])
    assert 0 < err < nn  # the model's fill beats copying the nearest training frame here
    wait_for(lambda: (page.evaluate(JS_INFER) or {}).get("stars") == 1, what="q(x*) on the latent view")
    assert not page.get_by_text("Traceback").count()
    page.screenshot(path=str(ARTIFACTS / "no-data-03-observe-infer.png"), full_page=True)
