"""Observe and infer, headless: test frames, masks from the state, inference of one frame
and of a stretch (dynamical model), the error readout against nearest neighbour, the
inferred stretch as the player's playback (truth as a ghost), and the view's sources."""

from __future__ import annotations

import io
import re
import time

import numpy as np
import pytest

hv = pytest.importorskip("holoviews")

from bgplvm import DynamicalGPLVM  # noqa: E402

from bgplvm.explorer import inference as inf  # noqa: E402
from bgplvm.explorer.state import ExplorerState, UserError  # noqa: E402

hv.extension("bokeh")


@pytest.fixture(scope="module")
def dyn_model(walk):
    m = DynamicalGPLVM(walk.Y, walk.times, latent_dim=3, num_inducing=10, sequences=walk.sequence, seed=0)
    m.fit(max_iters=30, progress=False)
    return m


@pytest.fixture
def st(walk, dyn_model):
    s = ExplorerState()
    s.set_model(dyn_model, walk)
    return s


def _run(state, timeout=120):
    state.start_inference()
    t0 = time.time()
    while state.poll_inference():
        assert time.time() - t0 < timeout
        time.sleep(0.05)


def test_sources_masks_and_defaults(st, walk):
    srcs = st.infer_sources()
    assert list(srcs) == ["training rows"]  # synth_walk has no test split
    assert st.infer_source == "training rows"
    assert "legs" in st.mask_options() and "joints I click" in st.mask_options()
    assert st.mask_part == "legs" and st.hidden_columns().size == 24
    st.toggle_joint(11)  # the head
    assert st.mask_part == "joints I click" and st.hidden_columns().tolist() == [33, 34, 35]
    st.toggle_joint(11)
    assert st.mask_joints == [] and st.hidden_columns().size == 0


def test_empty_mask_is_a_clear_message(st):
    st.mask_part = "joints I click"
    st.mask_joints = []
    with pytest.raises(UserError, match="Nothing is hidden"):
        st.start_inference()


def test_infer_one_frame_reconstructs_the_hidden_joints(st, walk):
    st.mask_part, st.infer_frame, st.infer_length = "legs", 5, 1
    _run(st)
    r = st.inference
    assert r is not None and r.n == 1 and st.error == ""
    cols = st.hidden_columns()
    # observed entries pass through, hidden ones are inferred with a positive variance
    obs = np.setdiff1d(np.arange(walk.D), cols)
    np.testing.assert_array_equal(r.mean[0, obs], walk.Y[5, obs])
    assert np.all(r.var[0, obs] == 0) and np.all(r.var[0, cols] > 0)
    assert not r.observed[0, cols].any() and r.observed[0, obs].all()
    assert r.mu.shape == (1, 3) and np.all(r.S > 0)
    assert r.error["n"] == cols.size and np.isfinite(r.error["value"]) and np.isfinite(r.nn_error["value"])
    assert "nearest neighbour" in st.infer_status and st.play_mode == "sequence"
    # the inferred joints are the model's, not a fill: well below the training mean's error
    from bgplvm.explorer.masks import reconstruction_error

    mean_fill = reconstruction_error(walk, walk.Y.mean(0), walk.Y[5], cols)
    assert r.error["unit"] == mean_fill["unit"] and r.error["value"] < 0.6 * mean_fill["value"]


def test_infer_a_stretch_plays_against_its_truth(st, walk):
    st.mask_part, st.infer_frame, st.infer_length = "right arm", 20, 8
    _run(st)
    r = st.inference
    assert r.n == 8 and np.all(np.diff(r.t) > 0)
    assert st.play_mode == "inferred"
    pb = st.playback()
    assert pb.T == 8 and pb.truth is not None and np.array_equal(pb.truth, walk.Y[20:28])
    np.testing.assert_array_equal(pb.hidden, st.hidden_columns())


def test_inference_feeds_the_view_and_the_latent_view(st, walk):
    from bokeh.document import Document

    from bgplvm.explorer.infer_view import InferView
    from bgplvm.explorer.player import PlayerView

    iv = InferView(state=st)
    pv = PlayerView(state=st)
    doc = Document()
    iv._fig_pane.get_root(doc)
    pv._out_pane.get_root(doc)
    # before inferring: the frame with its hidden joints in red
    assert len(iv.bones.data["x0"]) == len(walk.renderer.connections)
    assert sum(iv.joints.data["hidden"]) == 8 and len(iv.lat_star.data["x"]) == 0
    st.mask_part, st.infer_frame, st.infer_length = "legs", 3, 4
    _run(st)
    assert len(iv.lat_star.data["x"]) == 1 and len(iv.lat_ell.data["xs"]) >= 1
    assert len(iv.ghost.data["x0"]) == len(walk.renderer.connections)  # the truth as a ghost
    assert len(iv.discs.data["x"]) == 8
    assert iv._figs["out"].title.text.startswith("Observed & inferred: error")
    # the player now plays the stretch with the truth beside it, its inferred bones in
    # orange as in the infer figure (the legs' bones; the others in the frame's colour)
    from bgplvm.explorer.masks import hidden_bones
    from bgplvm.explorer.player import BONE_COLOR
    from bgplvm.explorer.plots import INFERRED_COLOR

    assert len(pv.ghost.data["gu"]) == 4 * len(walk.renderer.positions(walk.Y[0]))
    legs = hidden_bones(walk, st.hidden_columns())
    assert 0 < legs.sum() < legs.size
    assert pv.pose_bones.data["color"] == [INFERRED_COLOR if h else BONE_COLOR for h in legs]
    # and so does the GIF of the stretch: some orange in its frames
    from PIL import Image

    from bgplvm.explorer.export import sequence_gif

    gif = Image.open(io.BytesIO(sequence_gif(st)))
    assert gif.n_frames == 4
    rgb = np.asarray(gif.convert("RGB"), dtype=int)
    assert np.any((np.abs(rgb - [255, 140, 0]).sum(-1)) < 40)
    iv._play.value = False
    assert st.play_mode == "sequence" and len(pv.ghost.data["gu"]) == 0
    assert set(pv.pose_bones.data["color"]) == {BONE_COLOR}


def test_nearest_neighbour_fill_uses_only_observed_entries():
    Ytr = np.array([[0.0, 0.0, 5.0], [1.0, 1.0, 9.0]])
    Ym = np.array([[0.9, 1.2, np.nan]])
    np.testing.assert_array_equal(inf.nearest_neighbour_fill(Ytr, Ym), [[0.9, 1.2, 9.0]])
    # a training frame is not its own neighbour
    np.testing.assert_array_equal(inf.nearest_neighbour_fill(Ytr, Ym, exclude=[1]), [[0.9, 1.2, 5.0]])


def test_cmu_test_trial_is_offered_and_legs_infer_better_than_nearest_neighbour():
    from tests.mirror import find_mirror

    if find_mirror("cmu_mocap_35/cmu35WalkJog.mat") is None:
        pytest.skip("offline data mirror not found")
    from bgplvm.explorer.loading import load_asset_cached

    m, ds = load_asset_cached("cmu35")
    s = ExplorerState()
    s.set_model(m, ds)
    srcs = s.infer_sources()
    assert list(srcs)[0] == "test trial" and srcs["test trial"].Y.shape == (124, 59)
    s.mask_part, s.infer_frame, s.infer_length = "legs", 70, 1
    _run(s, timeout=300)
    r = s.inference
    assert r.error["unit"] == "deg" and r.error["n"] == 14
    assert r.error["value"] < r.nn_error["value"]


def test_a_model_on_new_data_starts_from_its_first_test_source():
    from tests.mirror import find_mirror

    if find_mirror("cmu_mocap_35/cmu35WalkJog.mat") is None:
        pytest.skip("offline data mirror not found")
    from bgplvm.explorer.loading import load_asset_cached

    s = ExplorerState()
    s.set_model(*load_asset_cached("cmu35"))
    s.infer_source, s.infer_frame, s.infer_length = "training rows", 40, 6
    s.set_model(*load_asset_cached("cmu35"))  # the same data: the choice stays
    assert (s.infer_source, s.infer_frame, s.infer_length) == ("training rows", 40, 6)
    s.set_model(*load_asset_cached("synth_walk"))  # other data: its first source, the default frame
    src = next(iter(s.infer_sources()))
    n = s.infer_sources()[src].Y.shape[0]
    assert (s.infer_source, s.infer_frame) == (src, min(ExplorerState.param.infer_frame.default, n - 1))
    assert s.infer_length == 1


def test_static_model_infers_frames_with_infer_latent(walk):
    from bgplvm import BayesianGPLVM

    m = BayesianGPLVM(walk.Y, latent_dim=3, num_inducing=10, seed=0)
    m.fit(max_iters=30, progress=False)
    s = ExplorerState()
    s.set_model(m, walk)
    s.mask_part, s.infer_frame, s.infer_length = "arms", 10, 3
    _run(s)
    r = s.inference
    assert r.n == 3 and r.method.startswith("static") and r.mu.shape == (3, 3)
    assert np.isfinite(r.error["value"]) and r.error["n"] == 3 * 18


def test_a_result_is_shown_only_for_its_own_frames_and_mask(st, walk):
    """After a change of mask (or frames) the last result is not drawn or read out as the
    current one: it showed the old error, and a never-inferred joint in orange."""
    from bokeh.document import Document

    from bgplvm.explorer.infer_view import InferView

    iv = InferView(state=st)
    iv._fig_pane.get_root(Document())
    st.mask_part, st.infer_frame, st.infer_length = "legs", 3, 1
    _run(st)
    assert iv._figs["out"].title.text.startswith("Observed & inferred: error")
    assert "(nearest neighbour:" in iv._status.object
    st.toggle_joint(11)  # the head instead of the legs
    assert iv._figs["out"].title.text == "Observed & inferred: hidden red"
    assert "changed since the last inference" in iv._status.object
    assert len(iv.lat_star.data["x"]) == 0 and len(iv.discs.data["x"]) == 0
    st.toggle_joint(11)
    st.mask_part = "legs"  # back to what was inferred: shown again
    assert iv._figs["out"].title.text.startswith("Observed & inferred: error")


def test_a_stretch_of_training_rows_stays_in_its_sequence(st, walk):
    """Training rows of two sequences are not one stretch in time (the dynamical model
    refused the unsorted times; a static model's playback ran backwards): the stretch
    ends with its sequence, and the page says how far it can go."""
    from bokeh.document import Document

    from bgplvm.explorer.infer_view import InferView

    seq = np.asarray(walk.sequence)
    last = int(np.flatnonzero(seq == seq[0])[-1])  # the first sequence's last row
    src = st.infer_sources()["training rows"]
    assert st.stretch_room(src, last - 4) == 5
    assert st.stretch_room(src, last + 1) == np.sum(seq == seq[last + 1])  # the whole next sequence
    iv = InferView(state=st)
    iv._fig_pane.get_root(Document())
    st.mask_part, st.infer_frame = "legs", last - 4
    st.infer_length = 30
    _, a, n = st.infer_frames()
    assert (a, n) == (last - 4, 5) and "up to 5" in iv._length.name
    _run(st)
    assert np.all(np.diff(st.inference.t) > 0) and st.inference.n == 5
    assert st.playback().label == f"inferred, training rows {last - 4}-{last}"
    st.infer_frame = 0  # the length typed is kept for a frame with more room
    assert st.infer_frames()[2] == min(30, np.sum(seq == seq[0])) and st.infer_length == 30


def test_a_result_that_ends_after_the_mask_changed_is_not_read_out(st, walk):
    """The mask (or the frames) may change while an inference runs: when it ends, its
    readout must not describe the new choice (the status watcher wrote it after the
    figures had been told it was stale)."""
    from bokeh.document import Document

    from bgplvm.explorer.infer_view import InferView

    iv = InferView(state=st)
    iv._fig_pane.get_root(Document())
    st.mask_part, st.infer_frame, st.infer_length = "legs", 3, 1
    st.start_inference()
    st.toggle_joint(11)  # the head, while the legs are being inferred
    t0 = time.time()
    while st.poll_inference():
        assert time.time() - t0 < 120
        time.sleep(0.05)
    assert "changed since the last inference" in iv._status.object
    assert iv._figs["out"].title.text == "Observed & inferred: hidden red"


def test_stop_ends_a_running_inference_and_the_page_can_infer_again(st, walk):
    """Stop in Observe & infer, as training's: the optimiser of q(X*) ends at its next
    iteration, the view is usable at once (Infer on, Stop off), the page says it was
    stopped, nothing is installed; a later Infer runs as usual."""
    from bokeh.document import Document

    from bgplvm.explorer.infer_view import InferView

    iv = InferView(state=st)
    iv._fig_pane.get_root(Document())
    assert iv._stop.disabled  # nothing to stop
    st.mask_part, st.infer_frame, st.infer_length = "legs", 0, 10
    n = st.infer_frames()[2]
    assert n > 1
    st.start_inference()
    job = st._infer_job
    assert st.infer_running and not iv._stop.disabled and iv._infer.disabled
    iv._stop.clicks += 1  # the button, as a click in the page
    assert not st.infer_running and st._infer_job is None
    assert iv._stop.disabled and not iv._infer.disabled
    assert st.inference is None and not st.poll_inference()
    assert re.match(rf"Inference stopped after .*: nothing inferred for the {n} frames\. Press Infer", st.infer_status)
    assert st.info == st.infer_status and st.infer_status in iv._status.object
    # the worker thread's optimiser was told to stop: it ends well before its 150 iterations
    assert job["cancel"] and job["done"].wait(120)
    assert job["error"] is None and job["result"].iterations < inf.INFER_ITERS
    assert st.inference is None and not st.poll_inference()  # its late result is not installed
    st.stop_inference()  # nothing running: nothing happens
    assert st.infer_status.startswith("Inference stopped")
    _run(st)
    assert st.inference is not None and st.inference.n == n and not st.infer_running
    assert "nearest neighbour" in st.infer_status and iv._stop.disabled


def test_held_out_frames_are_numbered_as_the_data_set_numbers_them(dyn_model, walk):
    src = inf.Source("held-out frames", "held-out", walk.Y[40:60], walk.times[40:60], first=40)  # a new sequence
    r = inf.infer(dyn_model, walk, src, 5, 3, np.arange(3), max_iters=5)
    assert r.first == 40 and r.frames == "held-out frames 45-47"


def test_data_without_time_speaks_of_points_not_frames(walk):
    """Oil or digits have no time stamps: the tab, its messages and the test set's label
    say 'points' (they said 'frames' and 'test trial test')."""
    from bgplvm.datasets import Dataset
    from bgplvm import BayesianGPLVM

    from bgplvm.explorer.infer_view import InferView

    plain = Dataset(name="plain", Y=walk.Y, renderer=walk.renderer, labels=walk.labels,
                    label_names=walk.label_names)
    m = BayesianGPLVM(plain.Y, latent_dim=3, num_inducing=10, seed=0)
    s = ExplorerState()
    s.set_model(m, plain)
    view = InferView(state=s)
    assert (view._source.name, view._frame.name) == ("test points", "first point")
    assert view._length.name.startswith("points (several at once")
    assert view._intro.object.startswith("Hide part of test points")
    s.mask_part, s.infer_frame, s.infer_length = "arms", 10, 2
    _run(s)
    assert s.inference.noun == "point" and "; 2 points," in s.infer_status
    assert re.search(r"; 2 points, (<1 ms|\d+ ms|[\d.]+ s)\.$", s.infer_status)  # not '0.0 s'
    assert s.play_mode == "sequence" and not view._play.visible  # points in no time order do not play
    assert len(view.lat_path.data["x"]) == 0 and len(view.lat_star.data["x"]) == 2  # no path: a star each
    assert "The figure shows point 10, the first of the 2" in view._method.object
    assert s.inference.method == "static: q(x*) of each point on its own"
    srcs = inf.sources_for(m, plain, test_ds=plain)
    assert srcs["test trial"].label == f"test set ({plain.N} points, not trained on)"
    st = ExplorerState()
    st.set_model(m, walk)  # the same rows in time: frames
    view2 = InferView(state=st)
    assert view2._frame.name == "first frame"
    st.set_dataset(plain)  # the data set changes under the same model: the view follows it
    assert view2._frame.name == "first point" and view2._intro.object.startswith("Hide part of test points")
    st.set_model(m, walk)  # model and data set in one batch of events
    assert view2._frame.name == "first frame" and view2._intro.object.startswith("Hide part of test frames")


def test_image_ranges_give_square_pixels():
    from bgplvm.explorer.infer_view import square_pixels

    fw, fh = 100, 150
    for W, H in ((16, 16), (20, 28), (40, 10)):
        x0, x1, y0, y1 = square_pixels(W, H, (fw, fh))
        assert x0 <= 0 and x1 >= W and y0 <= 0 and y1 >= H  # the whole image shows
        assert (x1 - x0) / fw == pytest.approx((y1 - y0) / fh)  # one data unit: as wide as high
        assert min(x1 - x0 - W, y1 - y0 - H) == pytest.approx(0)  # and the image fills one side
        assert x0 + x1 == pytest.approx(W) and y0 + y1 == pytest.approx(H)  # centred
