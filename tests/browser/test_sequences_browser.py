"""Explorer 2 in a real browser: the default page shows real motion capture with its
trajectories, Play animates the pose in the browser (frames counted), forecasting past the
end draws a widening band, the page fits 1366 px, and bad uploads get clear messages.
Screenshots go to test-artifacts/."""

from __future__ import annotations

import io
import re
import time

import numpy as np
import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from bgplvm.explorer.widgets import OUT_W
from mirror import needs_data

from .conftest import ARTIFACTS
from .test_explorer_browser import (LATENT, OUTPUT, PLAYING, TIMELINE, open_app, plot_info, readout, shot_of,
                                    start_training, wait_for)

pytestmark = pytest.mark.browser

# The played sequence as BokehJS holds it: the time plot's source (t, band limits, forecast
# flags) and the latent figure's path source.
JS_TRAJ = """() => {
  for (const v of Bokeh.index.all_views()) {
    const m = v.model;
    if (!(m.title && m.title.text && m.title.text.startsWith('Latent trajectory over time'))) continue;
    for (const r of m.renderers) {
      const d = r.data_source && r.data_source.data;
      if (d && d.xhi) return {t: Array.from(d.t), xlo: Array.from(d.xlo), xhi: Array.from(d.xhi),
                              ylo: Array.from(d.ylo), yhi: Array.from(d.yhi), fc: Array.from(d.fc)};
    }
  }
  return null;
}"""

JS_PATHS = """() => {
  for (const v of Bokeh.index.all_views()) {
    const m = v.model;
    if (!(m.title && m.title.text && m.title.text.startsWith('Latent space'))) continue;
    for (const r of m.renderers) {
      const d = r.data_source && r.data_source.data;
      if (d && d.xs && d.dash) return d.xs.length;
    }
  }
  return 0;
}"""

# Jump the player to a frame (as dragging the slider does).
JS_SEEK = """(frac) => {
  for (const v of Bokeh.index.all_views()) {
    const m = v.model;
    if (m.css_classes && m.css_classes.includes('play-slider')) {
      m.value = Math.round(frac * m.end); return m.value;
    }
  }
  return null;
}"""


def frames_per_second(page) -> tuple[int, int]:
    """(most frames drawn in any 1-s window, distinct frame indices in it) since reset."""
    fr = page.evaluate("() => window.__bgplvm_frames || []")
    best, best_distinct = 0, 0
    for k, (t0, _) in enumerate(fr):
        win = [i for t, i in fr[k:] if t - t0 < 1000]
        if len(win) > best:
            best, best_distinct = len(win), len(set(win))
    return best, best_distinct


@needs_data("cmu35")
def test_default_page_shows_real_mocap_with_trajectories(page, server):
    t0 = time.time()
    open_app(page, server)
    ready = time.time() - t0
    lat = plot_info(page, LATENT)
    assert lat["title"] == "Latent space: cmu35"
    play = plot_info(page, PLAYING)
    assert play["title"].startswith("Playing: 35_01")
    assert page.get_by_text(re.compile(r"^CMU mocap subject 35 .*dynamical model \(pre-trained: Q=")).first.is_visible()
    assert page.evaluate(JS_PATHS) == 2  # the sequence's path: training part and forecast
    traj = page.evaluate(JS_TRAJ)
    assert traj is not None and len(traj["t"]) == 89 + 60 and sum(traj["fc"]) == 60
    # the pose and the latent view are drawn (many colours, not blank canvases)
    for info in (lat, play, plot_info(page, OUTPUT), plot_info(page, TIMELINE)):
        img = shot_of(page, info, "frame")
        assert len(np.unique(img.reshape(-1, 3), axis=0)) > 20, info["title"]
    page.screenshot(path=str(ARTIFACTS / "explorer2-01-default-page.png"), full_page=True)
    print(f"page open to plots drawn: {ready:.2f} s")


#: a 1280 px wide window less a classic 15 px scroll bar: the page fits it without a sideways
#: scroll (it was 1360 px wide, and the played figure was cut off on a 1280 px laptop)
FIT_WIDTH = 1265


def _fits(page, prefixes, what):
    widths = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
    assert widths[0] <= widths[1], f"{what}: the page overflows sideways: {widths}"
    for prefix in prefixes:
        x, y, w, h = plot_info(page, prefix)["box"]
        assert x >= 0 and x + w <= FIT_WIDTH, (what, prefix, x, w)


@needs_data("cmu35", "frey_faces")
def test_page_fits_a_1280_pixel_window(page, server):
    """The default page, its Observe & infer tab, and a video model's four images in a row
    (generated mean and sd, played frame and sd) and its inferred images."""
    page.set_viewport_size({"width": FIT_WIDTH, "height": 900})
    open_app(page, server)
    _fits(page, (LATENT, OUTPUT, PLAYING, TIMELINE), "default page")
    _infer_tab(page)
    _fits(page, (LATENT, OUTPUT, PLAYING), "Observe & infer tab")
    _open_pretrained(page, "Frey", "frey")
    _fits(page, (LATENT, OUTPUT, PLAYING, "Played: sd"), "Frey video")
    page.locator(".infer-button button").first.click()
    page.get_by_text(re.compile(r"^RMS error")).first.wait_for(timeout=120000)
    _fits(page, (LATENT, "Observed", "Truth", "Inferred sd"), "Frey, inferred")
    page.screenshot(path=str(ARTIFACTS / "explorer2-fit-1280.png"), full_page=False)


def test_mouse_where_the_legend_was_still_generates(page, server):
    """The legend sits outside the data: the top-left corner of the view follows the mouse.
    The corner is read from the view's ranges at each try, and the mouse moved there again:
    with the corner computed once, a user run without the mirror timed out once (it passed
    alone; a view whose ranges still moved after the page opened is the likely cause)."""
    open_app(page, server)

    def followed():
        lat = plot_info(page, LATENT)
        (x0, x1), (y0, y1) = lat["xrange"], lat["yrange"]
        tx, ty = x0 + 0.04 * (x1 - x0), y1 - 0.04 * (y1 - y0)
        px, py = plot_info(page, LATENT, [tx], [ty])["pts"][0]
        page.mouse.move(px - 20, py + 20, steps=2)
        page.mouse.move(px, py, steps=2)
        page.wait_for_timeout(300)
        m = re.search(r"x\d+ = (-?[\d.]+), x\d+ = (-?[\d.]+) \(following", readout(page))
        return m and abs(float(m.group(1)) - tx) < 0.02 * (x1 - x0) and abs(float(m.group(2)) - ty) < 0.02 * (y1 - y0)

    wait_for(followed, timeout=15.0, what="readout at the top-left corner")


def test_play_animates_the_pose_in_the_browser(page, server):
    open_app(page, server)
    play = plot_info(page, PLAYING)
    before = shot_of(page, play, "frame")
    page.evaluate("() => { window.__bgplvm_frames = []; }")
    page.locator(".play-toggle button").first.click()
    shots = []
    t0 = time.time()
    while time.time() - t0 < 1.2:
        shots.append(shot_of(page, play, "frame"))
    page.wait_for_timeout(max(0, int(3000 - 1000 * (time.time() - t0))))
    n, distinct = frames_per_second(page)
    # the browser drew the pose at >= 20 different frames within one second (1x = 30 frames/s)
    assert distinct >= 20, f"only {distinct} distinct frames in the best second ({n} renders)"
    # and the pixels moved: screenshots taken while playing differ from each other
    keys = {hash(s.tobytes()) for s in shots}
    assert len(keys) >= 3 and any(np.abs(s - before).sum(axis=2).max() > 60 for s in shots)
    page.screenshot(path=str(ARTIFACTS / "explorer2-02-playback.png"), full_page=True)
    page.locator(".play-toggle button").first.click()  # pause
    page.wait_for_timeout(300)
    n_paused = len(page.evaluate("() => window.__bgplvm_frames"))
    page.wait_for_timeout(500)
    assert len(page.evaluate("() => window.__bgplvm_frames")) == n_paused  # paused: nothing drawn
    print(f"playback: {distinct} distinct frames in the best second ({n} renders)")


def _band_heights(img: np.ndarray, col: int) -> int:
    """Height in pixels of the taller of the two 2-sd bands (x red, y blue) in a column of
    the time plot. Where the bands overlap (the forecast reverting to the prior) their
    blend is neither red nor blue, so it counts for both; lines (saturated) count for none."""
    c = img[:, col, :].astype(int)
    R, G, B = c[:, 0], c[:, 1], c[:, 2]
    light = c.min(axis=1) > 150  # tints, not the mean lines
    both = light & (G < np.minimum(R, B) - 8) & (np.abs(R - B) <= 12)
    red = light & (R - B > 12)
    blue = light & (B - R > 12)
    return int(max((red | both).sum(), (blue | both).sum()))


def test_forecast_past_the_end_draws_a_widening_band(page, server):
    open_app(page, server)
    traj = page.evaluate(JS_TRAJ)
    n = len(traj["t"]) - sum(traj["fc"])
    w_last = traj["xhi"][n - 1] - traj["xlo"][n - 1] + traj["yhi"][n - 1] - traj["ylo"][n - 1]
    w_end = traj["xhi"][-1] - traj["xlo"][-1] + traj["yhi"][-1] - traj["ylo"][-1]
    assert w_end > 3 * w_last
    assert page.evaluate(JS_SEEK, 1.0) == len(traj["t"]) - 1  # the last forecast frame
    page.wait_for_timeout(500)
    # drawn: the band is taller at the end than at the last training frame
    tl = plot_info(page, TIMELINE, [traj["t"][n - 1], traj["t"][-1] - 0.02], [0.0, 0.0])
    img = shot_of(page, tl, "frame")
    fx = tl["frame"][0]
    c_last = int(round(tl["pts"][0][0] - fx))
    c_end = int(round(tl["pts"][1][0] - fx)) - 2
    assert _band_heights(img, c_end) > 2 * max(_band_heights(img, c_last), 1), (
        _band_heights(img, c_end), _band_heights(img, c_last))
    # the played pose shows the forecast (purple) and its uncertainty discs
    play = plot_info(page, PLAYING)
    pim = shot_of(page, play, "frame")
    purple = (np.abs(pim[..., 0] - 0x8e) < 30) & (np.abs(pim[..., 1] - 0x44) < 30) & (np.abs(pim[..., 2] - 0xad) < 30)
    assert purple.sum() > 50
    page.screenshot(path=str(ARTIFACTS / "explorer2-03-forecast.png"), full_page=True)


def test_image_sequence_upload_with_wrong_size_gets_a_message(page, server):
    open_app(page, server)
    page.get_by_role("button", name="image sequence").click()
    for label, value in (("height H", "4"), ("width W", "4")):
        box = page.get_by_label(label)
        box.fill(value)
        box.press("Enter")
    page.wait_for_timeout(300)
    buf = io.BytesIO()
    np.save(buf, np.zeros((5, 10)))
    page.locator(".upload-array input[type=file]").set_input_files(
        files=[{"name": "frames.npy", "mimeType": "application/octet-stream", "buffer": buf.getvalue()}])
    msg = page.get_by_text("rows have 10 values but a 4 x 4 frame has 16 pixels")
    msg.wait_for(timeout=15000)
    assert msg.is_visible()
    assert not page.get_by_text("Traceback").count()
    page.screenshot(path=str(ARTIFACTS / "explorer2-04-bad-image-upload.png"), full_page=True)
    # the page still plays
    page.locator(".play-toggle button").first.click()
    wait_for(lambda: len(page.evaluate("() => window.__bgplvm_frames || []")) > 5, what="playback after an error")


def test_image_upload_with_missing_pixels_trains_and_shows_them_as_missing(page, server):
    """Frames with a hole each (NaN): the page says how many pixels are missing, a model
    trains on the rest, and a training frame is drawn with its hole in the missing colour
    (magenta), not as black or white."""
    open_app(page, server)
    page.get_by_role("button", name="image sequence").click()
    page.wait_for_timeout(300)
    yy, xx = np.mgrid[0:8, 0:8]
    frames = []
    for k in range(30):
        c = 2 + 4 * (0.5 + 0.5 * np.sin(k / 5))
        f = np.exp(-((xx - c) ** 2 + (yy - 3.5) ** 2) / 6.0)
        f[(k % 4) * 2:(k % 4) * 2 + 2, 5:7] = np.nan  # a 2 x 2 hole, moving
        frames.append(f.ravel())
    buf = io.BytesIO()
    np.save(buf, np.array(frames))
    page.locator(".upload-array input[type=file]").set_input_files(
        files=[{"name": "holes.npy", "mimeType": "application/octet-stream", "buffer": buf.getvalue()}])
    page.get_by_text(re.compile(r"120 of 1,920 entries \(6\.2%\) are missing")).first.wait_for(timeout=20000)
    status = start_training(page, 15)
    wait_for(lambda: "Finished" in status.inner_text() or "failed" in status.inner_text(), timeout=180,
             what="training to finish")
    assert re.search(r"Finished after \d+ iterations", status.inner_text()), status.inner_text()
    wait_for(lambda: plot_info(page, LATENT)["title"].endswith("holes"), timeout=30, what="the new latent view")
    x, y = page.evaluate(JS_FIRST_TRAINING_POINT)  # click on a training point: it is selected
    px, py = plot_info(page, LATENT, [x], [y])["pts"][0]
    page.mouse.click(px, py)
    wait_for(lambda: "pinned" in readout(page), what="pinned readout")
    page.locator(".bk-tab").filter(has_text="Training point").first.click()
    info = plot_info(page, "Training #", timeout=20)
    wait_for(lambda: re.search(r"training #\d+: 4 missing", readout(page)), what="the count of missing values")
    assert page.get_by_text(re.compile(r"holes \(30 x 64, 6\.2% missing\)")).count() == 1  # the model panel
    img = shot_of(page, info, "frame")
    magenta = (np.abs(img[..., 0] - 0xE0) < 40) & (img[..., 1] < 60) & (np.abs(img[..., 2] - 0xA0) < 40)
    assert magenta.sum() > 20, "the missing pixels are not drawn in the missing colour"
    page.screenshot(path=str(ARTIFACTS / "explorer2-04b-missing-pixels.png"), full_page=True)


JS_FIRST_TRAINING_POINT = """() => {
  for (const v of Bokeh.index.all_views()) {
    const m = v.model;
    if (!(m.title && m.title.text && m.title.text.startsWith('Latent space'))) continue;
    let best = null;
    for (const r of m.renderers) {  // the scatter of q(x_n) means: the most markers
      const d = r.data_source && r.data_source.data;
      const g = r.glyph;
      if (!(g && g.type === 'Scatter' && d && g.x && g.x.field)) continue;
      const xs = d[g.x.field], ys = d[g.y.field];
      if (xs && ys && (!best || xs.length > best[0].length)) best = [xs, ys];
    }
    if (best) return [best[0][0], best[1][0]];
  }
  return null;
}"""


JS_INFER = """() => {
  for (const v of Bokeh.index.all_views()) {
    const m = v.model;
    if (!(m.title && m.title.text && m.title.text.startsWith('Latent space'))) continue;
    const out = {};
    for (const r of m.renderers) {
      const d = r.data_source && r.data_source.data;
      if (!d) continue;
      if (r.glyph.type === 'Patches' && r.glyph.fill_color && r.glyph.fill_color.value === '#ff8c00') out.ellipses = d.xs.length;
      if (r.glyph.type === 'Scatter' && d.x && r.glyph.marker && r.glyph.marker.value === 'star') out.stars = d.x.length;
    }
    return out;
  }
  return null;
}"""


def _infer_tab(page):
    page.locator(".bk-tab").filter(has_text="Observe & infer").first.click()
    page.wait_for_timeout(500)


@needs_data("cmu35")
def test_mask_legs_of_a_test_frame_and_infer(page, server):
    open_app(page, server)
    lat_before = shot_of(page, plot_info(page, LATENT), "frame")
    _infer_tab(page)
    chosen = page.locator(".infer-source select").first.evaluate("(el) => el.options[el.selectedIndex].text")
    assert chosen.startswith("test trial 35_29")
    before = plot_info(page, "Observed & inferred")
    assert before["title"] == "Observed & inferred: hidden red"
    page.locator(".infer-button button").first.click()
    status = page.get_by_text(re.compile(r"^RA error .*: [\d.]+\u00b0 \(nearest neighbour: [\d.]+\u00b0\)"))
    status.wait_for(timeout=120000)
    m = re.search(r": ([\d.]+)\u00b0 \(nearest neighbour: ([\d.]+)", status.inner_text())
    ra, nn = float(m.group(1)), float(m.group(2))
    assert 0 < ra < 30 and nn > 0
    wait_for(lambda: plot_info(page, "Observed & inferred")["title"].startswith("Observed & inferred: error"),
             what="the inferred frame's figure")
    after = plot_info(page, "Observed & inferred")
    # q(x*) on the latent view: its mean (a star) and 2-sd ellipse, drawn (orange pixels appear)
    wait_for(lambda: (page.evaluate(JS_INFER) or {}).get("stars") == 1, what="q(x*) on the latent view")
    assert page.evaluate(JS_INFER)["ellipses"] >= 1
    page.wait_for_timeout(400)
    lat = shot_of(page, plot_info(page, LATENT), "frame")
    orange = lambda im: ((np.abs(im[..., 0] - 255) < 30) & (np.abs(im[..., 1] - 140) < 40) & (im[..., 2] < 80)).sum()
    assert orange(lat) > orange(lat_before) + 30
    # the reconstruction is drawn: orange inferred bones over the grey truth
    fig = shot_of(page, after, "frame")
    assert orange(fig) > 50
    page.screenshot(path=str(ARTIFACTS / "explorer2-06-observe-infer.png"), full_page=True)
    print(f"RA error {ra:.2f} deg against nearest neighbour {nn:.2f} deg")


def test_a_running_inference_can_be_stopped(page, server):
    """Stop beside Infer, as training's: a long stretch of CMU's test trial (seconds of
    inference) is stopped, the page says so and infers again."""
    open_app(page, server)
    _infer_tab(page)
    chosen = page.locator(".infer-source select").first.evaluate("(el) => el.options[el.selectedIndex].text")
    if not chosen.startswith("test trial"):  # the synthetic walk's stretches end in under a second
        pytest.skip(f"needs the CMU default page (the data mirror); test frames here: {chosen}")
    stop = page.locator(".infer-stop button").first
    assert stop.is_disabled()
    length = page.locator(".infer-length input").first
    length.fill("200")  # cut to the room the source has
    length.press("Enter")
    page.wait_for_timeout(300)
    page.locator(".infer-button button").first.click()
    page.get_by_text(re.compile(r"^Inferring q\(x\*\) for \d+ frames")).first.wait_for(timeout=30000)
    try:
        stop.click(timeout=5000)
    except PlaywrightTimeout:  # disabled again: the inference ended before the click
        pass
    status = page.get_by_text(re.compile(r"^Inference stopped after .*nothing inferred for the \d+ frames"))
    done = page.get_by_text(re.compile(r"\(nearest neighbour: [\d.]+"))
    wait_for(lambda: status.count() or done.count(), timeout=15, what="the inference stopped or finished")
    if not status.count():  # a fast machine: the stretch was inferred before Stop arrived
        pytest.skip("the inference finished before the Stop click reached the server; stopping is "
                    "checked without timing in test_explorer_infer.py")
    assert page.locator(".infer-button button").first.is_enabled() and stop.is_disabled()
    page.screenshot(path=str(ARTIFACTS / "explorer2-06b-inference-stopped.png"), full_page=True)
    # the page goes on: a one-frame inference finishes as usual
    length.fill("1")
    length.press("Enter")
    page.wait_for_timeout(300)
    page.locator(".infer-button button").first.click()
    page.get_by_text(re.compile(r"\(nearest neighbour: [\d.]+")).first.wait_for(timeout=120000)
    assert stop.is_disabled()


def test_empty_mask_gets_a_clear_message(page, server):
    open_app(page, server)
    _infer_tab(page)
    page.locator(".infer-mask select").first.select_option("joints I click")
    page.wait_for_timeout(300)
    page.locator(".infer-button button").first.click()
    msg = page.get_by_text(re.compile(r"Nothing is hidden"))
    msg.wait_for(timeout=15000)
    assert msg.first.is_visible() and not page.get_by_text("Traceback").count()
    page.screenshot(path=str(ARTIFACTS / "explorer2-07-empty-mask.png"), full_page=True)


JS_INFER_JOINTS = """() => {
  for (const v of Bokeh.index.all_views()) {
    const m = v.model;
    if (!(m.title && m.title.text && m.title.text.startsWith('Observed & inferred'))) continue;
    for (const r of m.renderers) {
      const d = r.data_source && r.data_source.data;
      if (d && d.hidden) return {x: Array.from(d.x), y: Array.from(d.y), hidden: Array.from(d.hidden)};
    }
  }
  return null;
}"""


@needs_data("cmu35")
def test_click_joints_on_the_figure_to_hide_them(page, server):
    open_app(page, server)
    _infer_tab(page)
    page.locator(".infer-mask select").first.select_option("joints I click")
    wait_for(lambda: sum((page.evaluate(JS_INFER_JOINTS) or {"hidden": [1]})["hidden"]) == 0, what="no joint hidden")
    j = page.evaluate(JS_INFER_JOINTS)
    head = max(range(len(j["y"])), key=lambda k: j["y"][k])  # the highest joint: the head
    px, py = plot_info(page, "Observed & inferred", [j["x"][head]], [j["y"][head]])["pts"][0]
    page.mouse.click(px, py)
    wait_for(lambda: page.evaluate(JS_INFER_JOINTS)["hidden"][head] == 1, what="the clicked joint hidden")
    assert sum(page.evaluate(JS_INFER_JOINTS)["hidden"]) == 1
    page.locator(".infer-button button").first.click()
    page.get_by_text(re.compile(r"^RA error")).first.wait_for(timeout=120000)


def _open_pretrained(page, word: str, key: str):
    """Pick the pre-trained model whose name holds ``word`` and open it; wait until the
    latent view's title names ``key``."""
    sel = page.locator("select").first
    labels = sel.locator("option").all_inner_texts()
    sel.select_option(index=next(i for i, t in enumerate(labels) if word in t))
    page.get_by_role("button", name="Open model").click()
    t0 = time.time()
    while key not in plot_info(page, LATENT)["title"]:
        assert time.time() - t0 < 60, f"{key} did not open"
        page.wait_for_timeout(200)
    _settled(page, PLAYING)


def _settled(page, prefix, still_s: float = 1.0, timeout: float = 30.0) -> None:
    """Wait until the plot titled ``prefix`` keeps its size and place for ``still_s``: the
    player's figures are resized for the new model a round trip after the latent view
    changed (on the CMU page, 1-2 s later on a busy 2-core machine)."""
    t0 = last_change = time.time()
    last = plot_info(page, prefix)["box"]
    while time.time() - last_change < still_s:
        assert time.time() - t0 < timeout, f"{prefix!r} still moving after {timeout} s"
        page.wait_for_timeout(200)
        box = plot_info(page, prefix)["box"]
        if box != last:
            last, last_change = box, time.time()


@needs_data("cmu35", "frey_faces")
def test_switching_video_and_pose_models_redraws_the_player(page, server):
    """Frey faces (a video), then CMU again: the player plays frames, then poses. It stayed
    blank after the video and then played the video on the pose model (its figures were
    replaced under the sources they share: 'reference ... isn't known' in the page). The
    Observe & infer tab is opened and left first: its texts, updated while it was hidden,
    were given cdn.holoviz.org stylesheets (the autouse guard fails on such requests)."""
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    open_app(page, server)
    _infer_tab(page)
    page.locator(".bk-tab").filter(has_text="Play & forecast").first.click()
    for word, key, width in (("Frey", "frey", 100), ("CMU", "cmu35", OUT_W)):
        _open_pretrained(page, word, key)
        # the frame / pose figure is the one shown (once the page has redrawn the player: CI's
        # fresh clone once read the previous figure, 148 px wide, while it was being replaced)
        wait_for(lambda: abs(plot_info(page, PLAYING)["box"][2] - width) < 30, timeout=20,
                 what=f"the {key} player figure")
        play = plot_info(page, PLAYING)
        before = shot_of(page, play, "frame")
        page.locator(".play-toggle button").first.click()
        page.wait_for_timeout(1200)
        after = shot_of(page, play, "frame")
        page.locator(".play-toggle button").first.click()
        assert np.abs(after.astype(int) - before).sum(axis=2).max() > 60, f"{key}: the player drew nothing"
    assert plot_info(page, PLAYING)["title"].startswith("Playing: 35_")
    _infer_tab(page)  # the tab comes back after its texts changed while hidden
    page.get_by_text("Hide part of test frames").first.wait_for(timeout=10000)
    assert not errors, errors
