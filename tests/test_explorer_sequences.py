"""Headless tests of the explorer's sequence features: the frames the player plays (one
batched call, forecasts whose uncertainty grows), the player's Bokeh sources and its
latent-view layers, the sequence exports (GIF, trajectory figure), the shipped model
assets (data-free files, the data check, the fallback when the data are unavailable),
and training in a worker process (dynamical models, the queue)."""

from __future__ import annotations

import io
import json
import time
import xml.etree.ElementTree as ET

import numpy as np
import pytest

hv = pytest.importorskip("holoviews")
from PIL import Image  # noqa: E402

from bgplvm.datasets import Dataset, VectorRenderer  # noqa: E402
from bgplvm import BayesianGPLVM, DynamicalGPLVM  # noqa: E402

from bgplvm.explorer import sequences as seqs  # noqa: E402
from bgplvm.explorer.export import export_bytes, sequence_gif, trajectory_figure  # noqa: E402
from bgplvm.explorer.state import ExplorerState, UserError  # noqa: E402

hv.extension("bokeh")


@pytest.fixture(scope="module")
def dyn_model(walk):
    # fitted enough that q(X) at the training frames is much tighter than the time prior
    m = DynamicalGPLVM(walk.Y, walk.times, latent_dim=3, num_inducing=10, sequences=walk.sequence, seed=0)
    m.fit(max_iters=60, progress=False)
    m.metadata = {"dataset": "synth_walk"}
    return m


@pytest.fixture
def dstate(walk, dyn_model):
    s = ExplorerState()
    s.set_model(dyn_model, walk)
    return s


def _render(*panes):
    from bokeh.document import Document

    doc = Document()
    for p in panes:
        p.get_root(doc)
    return doc


# --------------------------------------------------------------------------- frames
def test_playback_covers_the_sequence_then_forecasts_with_growing_uncertainty(walk, dyn_model):
    s = 1
    rows = np.flatnonzero(walk.sequence == s)
    pb = seqs.playback(dyn_model, walk, s, horizon=40)
    assert pb.dynamical and pb.n_train == rows.size and pb.T == rows.size + 40
    np.testing.assert_allclose(pb.t[:pb.n_train], walk.times[rows])
    dt = np.diff(walk.times[rows]).mean()
    np.testing.assert_allclose(np.diff(pb.t[pb.n_train - 1:]), dt, rtol=1e-6)
    # at the training times q(x*) is q(X) of those rows (qxstar reproduces q(X))
    np.testing.assert_allclose(pb.mu[:pb.n_train], dyn_model.latent_mean[rows], atol=1e-6)
    np.testing.assert_allclose(pb.S[:pb.n_train], dyn_model.latent_variance[rows], rtol=1e-4, atol=1e-9)
    # past the end the latent variance grows towards the prior's, and so does the output's
    S_end, S_last = pb.S[-1].sum(), pb.S[pb.n_train - 1].sum()
    prior = dyn_model.time_kernel.Kdiag(pb.t[-1:])[0] * dyn_model.latent_dim
    assert S_end > 2 * S_last and S_end == pytest.approx(prior, rel=0.01)
    assert np.all(np.diff(pb.S[pb.n_train - 1:].sum(1)) > -1e-9)
    assert pb.var[-1].mean() > 2 * pb.var[pb.n_train - 1].mean()
    # covFstar: an uncertain latent point gives different variances per output dimension
    assert np.ptp(pb.var[-1]) > 1e-6
    assert pb.mean.shape == pb.var.shape == (pb.T, walk.D)
    assert pb.is_forecast.sum() == 40


def test_playback_of_a_static_model_has_no_forecast(walk):
    m = BayesianGPLVM(walk.Y, latent_dim=3, num_inducing=8, seed=0)
    pb = seqs.playback(m, walk, 2, horizon=50)
    rows = np.flatnonzero(walk.sequence == 2)
    assert not pb.dynamical and pb.T == pb.n_train == rows.size
    np.testing.assert_allclose(pb.mu, m.latent_mean[rows])


def test_joint_spread_exact_for_markers_and_sampled_through_kinematics(walk):
    r = walk.renderer
    T, D = 3, walk.D
    var = np.tile(np.array([0.01, 0.04, 0.04]), (T, D // 3))
    np.testing.assert_allclose(seqs.joint_spread(r, walk.Y[:T], var), np.sqrt(0.03))
    assert np.all(seqs.joint_spread(r, walk.Y[:T], np.zeros((T, D))) == 0)


def test_joint_spread_through_forward_kinematics():
    from bgplvm.datasets.mocap.asf import parse_asf

    from bgplvm.explorer.userdata import AmcPoseRenderer
    from tests.test_explorer_userdata import TINY_ASF

    sk = parse_asf(TINY_ASF)
    r = AmcPoseRenderer(sk, tuple(i for i, n in enumerate(sk.channel_names) if n not in ("root.TX", "root.TZ")))
    D = len(r.kept)
    mean = np.zeros((2, D))
    var = np.zeros((2, D))
    var[1] = 25.0  # 5 degrees sd on every angle
    sp = seqs.joint_spread(r, mean, var)
    assert sp.shape == (2, sk.n_points)
    assert np.all(sp[0] < 1e-12) and sp[1].max() > 1e-3
    # the same draws every frame: identical frames give identical spreads (no flicker)
    np.testing.assert_array_equal(seqs.joint_spread(r, mean[[1, 1]], var[[1, 1]])[0],
                                  seqs.joint_spread(r, mean[[1, 1]], var[[1, 1]])[1])


def test_image_frames_orientation():
    from bgplvm.datasets.record import ImageRenderer

    r = ImageRenderer(height=2, width=3, order="C")
    fr = seqs.image_frames(r, np.arange(6.0)[None], np.full((1, 6), 4.0))
    np.testing.assert_array_equal(fr["img"][0], [[0, 1, 2], [3, 4, 5]])
    np.testing.assert_allclose(fr["sd"][0], 2.0)


# --------------------------------------------------------------------------- state
def test_state_sequences_and_cached_playback(dstate, walk):
    opts = dstate.sequence_options()
    assert list(opts.values()) == [0, 1, 2, 3]
    assert dstate.play_sequence == 0 and dstate.is_dynamical and dstate.prior == "dynamical"
    pb = dstate.playback()
    assert dstate.playback() is pb  # cached
    dstate.forecast_steps = 10
    pb2 = dstate.playback()
    assert pb2 is not pb and pb2.T == pb2.n_train + 10
    dstate.set_play_sequence(3)
    assert dstate.playback().sequence == 3
    with pytest.raises(UserError, match="no sequence"):
        dstate.set_play_sequence(99)


def test_state_without_sequences_plays_nothing():
    s = ExplorerState()
    ds = Dataset(name="v", Y=np.random.default_rng(0).normal(size=(20, 3)), renderer=None)
    m = BayesianGPLVM(ds.Y, latent_dim=2, num_inducing=5, seed=0)
    s.set_model(m, Dataset(name="v", Y=ds.Y, renderer=VectorRenderer()))
    assert s.sequence_options() == {} and s.play_sequence is None and s.playback() is None
    with pytest.raises(UserError, match="nothing to export|no sequence"):
        sequence_gif(s)


def test_a_played_vector_sequence_keeps_one_scale_for_every_frame():
    """The vector player's axes hold every frame's mean +- 2 sd (a scale per frame jumped;
    its empty start drew BokehJS's "could not set initial ranges" warning)."""
    from bgplvm.datasets import VectorRenderer

    from bgplvm.explorer.player import PlayerView

    rng = np.random.default_rng(1)
    t = np.arange(25.0)
    Y = np.column_stack([np.sin(t / 3), np.cos(t / 4), 0.1 * t]) + 0.01 * rng.normal(size=(25, 3))
    ds = Dataset(name="v", Y=Y, renderer=VectorRenderer(), sequence=np.zeros(25, int), times=t)
    m = DynamicalGPLVM(Y, t, latent_dim=2, num_inducing=6, seed=0)
    s = ExplorerState()
    s.set_model(m, ds)
    pv = PlayerView(state=s)
    _render(pv._out_pane, pv._time_pane)
    pb = s.playback()
    out = pv._by_kind["vector"]["out"]
    sd = np.sqrt(pb.var)
    assert (out.x_range.start, out.x_range.end) == (-0.5, 2.5)
    assert out.y_range.start <= np.min(pb.mean - 2 * sd) and out.y_range.end >= np.max(pb.mean + 2 * sd)
    before = (out.y_range.start, out.y_range.end)
    pv.slider.value = pb.T - 1
    assert (out.y_range.start, out.y_range.end) == before


def test_principal_coords_are_the_data_on_its_leading_axes():
    rng = np.random.default_rng(0)
    Y = rng.normal(size=(50, 2)) @ np.array([[3.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 0.5]]) + 7.0
    C = seqs.principal_coords(Y)
    s = np.linalg.svd(Y - Y.mean(0), compute_uv=False)
    np.testing.assert_allclose(np.sum(C**2, axis=0), s[:2] ** 2)  # PC1 then PC2
    assert abs(C[:, 0] @ C[:, 1]) < 1e-8
    np.testing.assert_array_equal(seqs.principal_coords(Y), C)  # the same signs every call
    assert seqs.principal_coords(Y[:, :1]).shape == (50, 2)  # one column: PC2 is zeros
    # a wide upload takes only the two leading axes (ARPACK), with the same answer
    W = rng.normal(size=(1100, 1200)) * np.linspace(3.0, 1.0, 1200)
    C = seqs.principal_coords(W)
    s = np.linalg.svd(W - W.mean(0), compute_uv=False)
    np.testing.assert_allclose(np.sum(C**2, axis=0), s[:2] ** 2, rtol=1e-8)


def test_data_plays_as_recorded_before_any_model(walk, dyn_model):
    """Loaded data without a model: its sequences play as recorded (the page was empty
    until a model was trained), with the frames' principal coordinates against time."""
    from bgplvm.explorer.player import TIME_TITLE, PlayerView

    from bgplvm.explorer.latent_view import LatentView
    from bgplvm.explorer.output_view import OutputView

    s = ExplorerState()
    pv = PlayerView(state=s)
    lv, ov = LatentView(state=s), OutputView(state=s)
    _render(pv._out_pane, pv._time_pane)
    s.set_dataset(walk)
    assert s.model is None and list(s.sequence_options().values()) == [0, 1, 2, 3] and s.play_sequence == 0
    assert "Play & forecast plays the data as recorded" in s.info
    # one message where the latent view will be, none beside the player's figure
    assert "No model of synth_walk yet" in lv._placeholder.object and ov._placeholder.object == ""
    s.set_play_sequence(2)
    pb = s.playback()
    rows = np.flatnonzero(walk.sequence == 2)
    assert pb.preview and s.playback() is pb  # cached
    np.testing.assert_array_equal(pb.mean, walk.Y[rows])
    np.testing.assert_array_equal(pb.t, walk.times[rows])
    assert not pb.var.any() and pb.T == pb.n_train == rows.size
    np.testing.assert_allclose(pb.mu, seqs.principal_coords(walk.Y)[rows])
    # the player shows it: every frame sent, no spread, no forecast, no latent layers
    assert pv._out_pane.visible and pv._time_pane.visible
    J = len(walk.renderer.positions(walk.Y[0]))
    assert len(pv.frames.data["u"]) == pb.T * J and not np.any(pv.frames.data["r"])
    np.testing.assert_allclose(pv.traj.data["lx"], pb.mu[:, 0])
    assert not pv.forecast_box.visible and not pv._horizon.visible
    assert pv._figs["time"].title.text.startswith("Data over time") and "as recorded" in pv._note.object
    assert len(pv.path_src.data["xs"]) == 0
    # a model takes over the player
    s.set_model(dyn_model, walk)
    assert not s.playback().preview and pv._horizon.visible
    s.set_model(BayesianGPLVM(walk.Y, latent_dim=2, num_inducing=5, seed=0), walk)
    assert not pv._horizon.visible  # a static model has no forecast to set
    s.set_model(dyn_model, walk)
    assert pv._figs["time"].title.text.startswith(TIME_TITLE) and len(pv.path_src.data["xs"]) == 2
    # data without sequences still has nothing to play
    s.set_dataset(Dataset(name="flat", Y=walk.Y + 1.0, renderer=walk.renderer))
    assert s.playback() is None and not pv._out_pane.visible and "No sequences" in pv._note.object


def test_an_image_sequence_plays_before_any_model_without_its_sd_panel(walk):
    from bgplvm.datasets.record import ImageRenderer

    from bgplvm.explorer.player import PlayerView

    Y = np.random.default_rng(2).uniform(size=(12, 6))
    ds = Dataset(name="vid", Y=Y, renderer=ImageRenderer(height=2, width=3, vmin=0, vmax=1),
                 sequence=np.zeros(12, int), times=np.arange(12.0), meta={"time_unit": "frame"})
    s = ExplorerState()
    pv = PlayerView(state=s)
    _render(pv._out_pane, pv._time_pane)
    s.set_dataset(walk)  # its sequence 0 plays; the video's first sequence is 0 as well
    assert pv.meta.data["kind"] == ["pose"] and s.play_sequence == 0
    s.set_dataset(ds)
    f = pv._by_kind["image"]
    assert pv.meta.data["kind"] == ["image"] and len(pv.images.data["img"]) == 12
    np.testing.assert_allclose(np.asarray(pv.images.data["img"][3])[::-1], Y[3].reshape(2, 3))
    assert f["out"].visible and not f["sd"].visible  # the data has no sd
    m = BayesianGPLVM(Y, latent_dim=2, num_inducing=4, seed=0)
    s.set_model(m, ds)
    assert f["sd"].visible and f["sd"].title.text == "Played: sd"


def test_image_data_without_sequences_show_a_sample_of_rows(walk):
    """Digits-like data have no sequence to play: the tab shows a mosaic of rows instead,
    the same number of each class, whole classes to a row of tiles."""
    from bgplvm.datasets.record import ImageRenderer

    from bgplvm.explorer.player import GALLERY_TITLE, PlayerView

    rng = np.random.default_rng(3)
    labels = np.repeat(np.arange(5), 12)
    Y = rng.uniform(size=(60, 6))
    ds = Dataset(name="digits5", Y=Y, renderer=ImageRenderer(height=2, width=3, vmin=0, vmax=1), labels=labels)
    rows, cols = seqs.gallery_rows(ds, n=40, cols=8)
    assert cols == 8 and rows.size == 40
    np.testing.assert_array_equal(np.bincount(labels[rows]), [8] * 5)
    img = seqs.mosaic(ds.renderer, Y[rows], cols)
    assert img.shape == (5 * 3 - 1, 8 * 4 - 1) and np.isnan(img[2]).all()  # NaN between tiles
    np.testing.assert_array_equal(img[:2, :3], ds.renderer.image(Y[rows[0]]))
    s = ExplorerState()
    pv = PlayerView(state=s)
    s.set_dataset(ds)
    assert pv._gallery_pane.visible and pv._gallery_fig.title.text.startswith(f"{GALLERY_TITLE}: 40 of 60 rows")
    assert "No sequences to play" in pv._note.object
    s.set_dataset(walk)  # sequences: the player plays them instead
    assert not pv._gallery_pane.visible and pv._out_pane.visible


# --------------------------------------------------------------------------- player view
def test_player_sends_all_frames_once_and_draws_into_the_latent_view(dstate, walk):
    from bgplvm.explorer.player import PLAY_TITLE, TIME_TITLE, PlayerView
    from bgplvm.explorer.latent_view import LatentView

    pv = PlayerView(state=dstate)
    lv = LatentView(state=dstate, decorators=[pv.attach_latent])
    _render(lv._pane, pv._out_pane, pv._time_pane)
    pb = dstate.playback()
    J = len(walk.renderer.positions(walk.Y[0]))
    assert len(pv.traj.data["t"]) == pb.T and len(pv.frames.data["u"]) == pb.T * J
    assert pv.meta.data["kind"] == ["pose"] and pv.meta.data["n_train"] == [pb.n_train]
    assert pv.slider.end == pb.T - 1
    assert pv.forecast_box.left == pytest.approx(pb.t[pb.n_train - 1]) and pv.forecast_box.visible
    # bands: 2 sd of q(x*) in the two shown dims, widening past the end
    w = np.asarray(pv.traj.data["xhi"]) - np.asarray(pv.traj.data["xlo"])
    assert w[-1] > 2 * w[pb.n_train - 1]
    # per-frame models never go back to the server; the frame data are sent by it
    for m in (pv.slider, pv.toggle, pv.marker, pv.pose_bones, pv.pose_joints, pv.span, pv.info):
        assert m.syncable is False
    assert pv.frames.syncable and pv.traj.syncable
    # the frames carry the per-joint spread (one sd) of every frame
    r = np.asarray(pv.frames.data["r"]).reshape(pb.T, J)
    assert np.all(r >= 0) and r[-1].mean() > r[pb.n_train - 1].mean()
    # the latent figure got the sequence's path, ellipses and the moving marker
    fig = list(lv._pane._plots.values())[0][0].state
    sources = {getattr(rr, "data_source", None) for rr in fig.renderers}
    assert {pv.path_src, pv.ellipse_src, pv.marker} <= sources
    assert len(pv.path_src.data["xs"]) == 2  # training part and forecast
    assert pv._figs["out"].title.text.startswith(PLAY_TITLE) and pv._figs["time"].title.text.startswith(TIME_TITLE)
    # the render callback is wired to the slider, play to the toggle
    assert pv.slider.js_property_callbacks["change:value"] and pv.toggle.js_property_callbacks["change:active"]


def test_each_latent_figure_gets_its_own_layers_filled_when_built(dstate, walk, dyn_model):
    """The player's path and ellipses (and q(x*)'s) go into sources of the latent figure
    they are drawn in, made and filled when HoloViews builds it; a figure leaving the page
    is not written to. Shared sources had a new model's figure enter the page with the
    previous model's 35 ellipses, replaced by 33 in the same message: BokehJS painted them
    half-applied ("Out of bounds: 0 <= 33 < 33")."""
    from bgplvm.explorer.infer_view import InferView
    from bgplvm.explorer.player import PlayerView
    from bgplvm.explorer.latent_view import LatentView

    pv, iv = PlayerView(state=dstate), InferView(state=dstate)
    lv = LatentView(state=dstate, decorators=[pv.attach_latent, iv.attach_latent])
    _render(lv._pane, pv._out_pane, pv._time_pane)

    def figure():
        return list(lv._pane._plots.values())[0][0].state

    def layers(fig):
        return {id(r.data_source) for r in fig.renderers} & {id(pv.path_src), id(pv.ellipse_src), id(iv.lat_ell)}

    f1, ell1 = figure(), pv.ellipse_src
    n1, n_ell = len(f1.renderers), len(ell1.data["xs"])
    assert len(layers(f1)) == 3 and n_ell > 25 and len(pv.path_src.data["xs"]) == 2
    # a fixed dimension's slider updates the overlay, which runs its hooks again: no second set
    fixed = np.asarray(dstate.fixed).copy()
    fixed[0] += 0.1
    dstate.fixed = fixed
    assert figure() is f1 and len(f1.renderers) == n1
    # another model (static: no forecast, fewer ellipses): a new figure with new sources,
    # filled with its layers; the leaving figure's are as they were
    dstate.set_model(BayesianGPLVM(walk.Y, latent_dim=2, num_inducing=5, seed=0), walk)
    f2 = figure()
    assert f2 is not f1 and pv.ellipse_src is not ell1 and len(layers(f2)) == 3
    pb = dstate.playback()
    assert len(pv.ellipse_src.data["xs"]) == len(pv._latent_layers(pb)[1]["xs"]) < n_ell
    assert len(pv.path_src.data["xs"]) == 1 and len(ell1.data["xs"]) == n_ell
    # other axes: a new figure again, born with the layers on them
    ell2 = pv.ellipse_src
    dstate.assign_axis(dstate.y_dim, "x")
    f3 = figure()
    assert f3 is not f2 and pv.ellipse_src is not ell2 and len(layers(f3)) == 3
    np.testing.assert_allclose(pv.ellipse_src.data["xs"][0], pv._latent_layers(pb)[1]["xs"][0])
    # what changes while a figure stays (the forecast, the sequence) is written into it
    dstate.set_model(dyn_model, walk)  # a dynamical model again: a forecast
    f4, src = figure(), pv.path_src
    assert len(src.data["xs"]) == 2
    dstate.forecast_steps = 0
    assert figure() is f4 and pv.path_src is src and len(src.data["xs"]) == 1


def test_player_follows_sequence_horizon_dims_and_angle(dstate):
    from bgplvm.explorer.player import PlayerView

    pv = PlayerView(state=dstate)
    _render(pv._out_pane, pv._time_pane)
    T0 = len(pv.traj.data["t"])
    dstate.forecast_steps = 0
    assert len(pv.traj.data["t"]) == T0 - 60 and not pv.forecast_box.visible
    assert len(pv.path_src.data["xs"]) == 1
    pv._seq.value = 2
    assert dstate.play_sequence == 2
    pb = dstate.playback()
    np.testing.assert_allclose(pv.traj.data["lx"], pb.mu[:, dstate.x_dim])
    dstate.assign_axis(dstate.y_dim, "x")  # swap the axes
    np.testing.assert_allclose(pv.traj.data["lx"], pb.mu[:, dstate.x_dim])
    u0 = np.asarray(pv.frames.data["u"]).copy()
    dstate.azimuth = 40.0
    assert not np.allclose(u0, pv.frames.data["u"])


def test_player_image_frames(walk):
    from bgplvm.datasets.record import ImageRenderer

    from bgplvm.explorer.player import IMG_FRAME_H, PlayerView
    from bgplvm.explorer.widgets import image_frame

    # a smooth little video: two pixel patterns mixed by slow sines, plus noise
    rng = np.random.default_rng(1)
    t = np.arange(30.0)
    A, B = rng.uniform(size=(2, 12))
    Y = 0.5 + 0.3 * np.outer(np.sin(t / 4), A) + 0.3 * np.outer(np.cos(t / 5), B) + 0.01 * rng.normal(size=(30, 12))
    ds = Dataset(name="vid", Y=Y, renderer=ImageRenderer(height=4, width=3, vmin=0, vmax=1),
                 sequence=np.zeros(30, int), times=t, meta={"time_unit": "frame", "fps": 10})
    m = DynamicalGPLVM(Y, ds.times, latent_dim=2, num_inducing=6, seed=0)
    m.fit(max_iters=40, progress=False)
    s = ExplorerState()
    s.set_model(m, ds)
    pv = PlayerView(state=s)
    _render(pv._out_pane, pv._time_pane)
    pb = s.playback()
    assert pv.meta.data["kind"] == ["image"] and pv.meta.data["fps"] == [10.0]
    assert len(pv.images.data["img"]) == pb.T and np.asarray(pv.images.data["img"][0]).shape == (4, 3)
    # sd frames grow into the forecast
    assert np.mean(pv.images.data["sd"][-1]) > np.mean(pv.images.data["sd"][pb.n_train - 1])
    # fixed colour scales (pixels on the data's range, sd on a log scale up to the sd of f
    # far from the data, as "Generated"), and the drawing area follows the frames' 3:4 aspect
    img, sd = pv._img_mappers["out"], pv._sd_glyph.color_mapper
    assert (img.low, img.high) == (0, 1) and type(sd).__name__ == "LogColorMapper"
    assert sd.high == pytest.approx(np.sqrt(m.kernel_variance)) and sd.low == pytest.approx(sd.high / 100)
    f = pv._by_kind["image"]
    fw, fh = image_frame(3, 4, IMG_FRAME_H)  # as tall as fits four 3:4 frames in the right column
    assert f["out"].frame_width == f["sd"].frame_width == fw and f["out"].frame_height == fh
    assert abs(fw / fh - 0.75) < 0.02
    assert f["sd"].title.text == "Played: sd"
    # an inferred stretch plays beside its truth: that panel says so, in grey on the data's range
    s.mask_part, s.infer_frame, s.infer_length = "top half", 0, 6
    s.start_inference()
    while s.poll_inference():
        time.sleep(0.05)
    assert s.play_mode == "inferred", (s.error, s.infer_status, s.infer_frames())
    assert f["sd"].title.text == "Truth"
    sd = pv._sd_glyph.color_mapper
    assert type(sd).__name__ == "LinearColorMapper" and sd.palette[0] == "#000000" and (sd.low, sd.high) == (0, 1)
    assert "beside the truth" in pv._note.object


# --------------------------------------------------------------------------- exports
def test_sequence_gif_has_every_frame_at_the_data_rate(dstate):
    dstate.forecast_steps = 12
    pb = dstate.playback()
    gif = sequence_gif(dstate)
    im = Image.open(io.BytesIO(gif))
    assert im.format == "GIF" and im.n_frames == pb.T and im.info.get("loop") == 0
    assert abs(im.info["duration"] - 1000 / 30) <= 10
    im.seek(pb.T - 1)
    assert len(np.unique(np.asarray(im.convert("L")))) > 3  # not blank


def test_trajectory_figure_png_and_svg(dstate):
    png = trajectory_figure(dstate, "png")
    im = Image.open(io.BytesIO(png))
    assert im.size[0] > 800 and len(np.unique(np.asarray(im.convert("L")))) > 20
    svg = export_bytes(dstate, "trajectory", "svg")
    root = ET.fromstring(svg)
    assert root.tag.endswith("svg") and b"Latent trajectory" in svg and b"polygon" in svg


# --------------------------------------------------------------------------- assets
def test_asset_files_hold_no_data_and_check_it(tmp_path, walk, dyn_model):
    import bgplvm.assets as A

    buf = io.BytesIO()
    dyn_model.save(buf)
    rec = {"asset": "t", "dataset": "synth_walk", "data_sha256": A.sha256_rows(walk.Y)}
    path = tmp_path / "m.npz"
    path.write_bytes(A.strip_data(buf.getvalue(), rec))
    with np.load(path) as z:
        assert "Y" not in z.files and "asset.json" in z.files
    m = A.load_model_file(path, walk.Y)
    assert isinstance(m, DynamicalGPLVM)
    np.testing.assert_allclose(m.latent_mean, dyn_model.latent_mean)
    with pytest.raises(A.AssetUnavailable, match="other data"):
        A.load_model_file(path, walk.Y + 1.0)
    with pytest.raises(A.AssetUnavailable, match="holds no data"):
        A.load_model_file(path)


def test_shipped_assets_are_small_and_recorded():
    import bgplvm.assets as A

    for name, spec in A.ASSETS.items():
        if not spec.path.is_file():
            pytest.fail(f"asset {name} missing: python -m bgplvm.assets.make_assets {name}")
        assert spec.path.stat().st_size < 5 * 2**20
        if spec.embedded_data:
            continue
        rec = json.loads(spec.record_path.read_text())
        for key in ("dataset", "data_sha256", "seed", "iterations", "bound", "wall_time_s", "settings"):
            assert key in rec, (name, key)
        with np.load(spec.path) as z:
            assert "Y" not in z.files  # the real data are never shipped


def test_every_pre_trained_model_saved_from_the_page_reopens_as_it_was():
    """Open each shipped model, save it as the page does and open the file: the same data
    set comes back (its rows, drawing, playback rate and time unit); the Frey video (300 of
    1965 frames) came back as plain vectors. Models whose data are not here are skipped."""
    import bgplvm.assets as A

    done = []
    for name in A.ASSETS:
        s = ExplorerState()
        try:
            s.open_asset(name)
        except UserError as e:  # its data set is neither cached nor mirrored here
            assert "not cached" in str(e) or "could not" in str(e), e
            continue
        t = ExplorerState()
        t.load_model_bytes(f"{name}.npz", s.save_model_bytes().getvalue())
        a, b = s.dataset, t.dataset
        assert type(b.renderer) is type(a.renderer) and b.Y.shape == a.Y.shape, name
        np.testing.assert_array_equal(b.Y, a.Y)
        assert seqs.frame_rate(b) == seqs.frame_rate(a) and seqs.time_unit(b) == seqs.time_unit(a), name
        assert (b.times is None) == (a.times is None) and t.prior == s.prior, name
        done.append(name)
    assert done, done  # the embedded ones at least
    print("reopened:", done)


def test_unavailable_data_gives_a_clear_reason(monkeypatch):
    import bgplvm.assets as A
    from bgplvm.datasets import DatasetError

    def offline(*a, **k):
        raise DatasetError("could not download cmu35WalkJog.mat: network unreachable")

    monkeypatch.setattr("bgplvm.datasets.load", offline)
    with pytest.raises(A.AssetUnavailable, match="bgplvm datasets fetch cmu35"):
        A.dataset_for(A.get_spec("cmu35"))


def test_page_falls_back_to_the_synthetic_walk_when_offline(monkeypatch):
    import bgplvm.assets as A

    from bgplvm.explorer import app

    real = app._load_asset

    def fake(name):
        if name == "cmu35":
            raise A.AssetUnavailable("the 'cmu35' data set could not be loaded (offline)")
        return real(name)

    monkeypatch.setattr(app, "_load_asset", fake)
    monkeypatch.delenv("BGPLVM_EXPLORER_MODEL", raising=False)
    monkeypatch.delenv("BGPLVM_EXPLORER_ASSET", raising=False)
    st = app.initial_state()
    assert st.dataset_name == "synth_walk" and st.model is not None
    assert "Real motion capture is not available here" in st.info and "offline" in st.info


# --------------------------------------------------------------------------- training worker
def _wait(state, timeout=180):
    t0 = time.time()
    while state.poll():
        assert time.time() - t0 < timeout, "training did not finish"
        time.sleep(0.05)


def test_dynamical_training_in_a_worker_process(walk):
    s = ExplorerState()
    s.set_dataset(walk)
    s.prior, s.time_kernel = "dynamical", "rbf"
    s.latent_dim, s.num_inducing, s.max_iters = 2, 6, 4
    job = s.start_training()
    _wait(s)
    assert isinstance(s.model, DynamicalGPLVM) and s.is_dynamical
    assert job.pid is not None and "Finished" in s.train_status
    assert s.playback().T == s.playback().n_train + s.forecast_steps


def test_dynamical_prior_needs_time_stamps():
    s = ExplorerState()
    s.set_dataset(Dataset(name="v", Y=np.ones((5, 2)), renderer=VectorRenderer()))
    s.param.prior.objects  # both choices exist
    s.prior = "dynamical"
    with pytest.raises(UserError, match="time stamps"):
        s.start_training()


def test_trainers_are_limited_and_later_jobs_queue(walk, monkeypatch):
    from bgplvm.explorer import train_worker

    monkeypatch.setenv("BGPLVM_MAX_TRAINERS", "1")
    monkeypatch.setattr(train_worker, "_slots", None)
    a, b = ExplorerState(), ExplorerState()
    for s in (a, b):
        s.set_dataset(walk)
        s.latent_dim, s.num_inducing, s.max_iters = 2, 6, 5000
    a.start_training()
    t0 = time.time()
    while not a.bound_history and time.time() - t0 < 60:
        a.poll()
        time.sleep(0.05)
    b.start_training()
    time.sleep(0.5)
    b.poll()
    assert b.train_status.startswith("Queued")
    a.stop_training()
    _wait(a)
    b.stop_training()
    _wait(b)
    assert a.model is not None and "Stopped" in a.train_status


def _long_fit_running(walk):
    """A session whose 5000-iteration fit has reported its first iteration: (state, job)."""
    s = ExplorerState()
    s.set_dataset(walk)
    s.latent_dim, s.num_inducing, s.max_iters = 2, 6, 5000
    job = s.start_training()
    t0 = time.time()
    while not s.bound_history and time.time() - t0 < 60:
        s.poll()
        time.sleep(0.05)
    return s, job


@pytest.mark.skipif(not __import__("os").path.exists("/proc/self/environ"), reason="reads /proc (Linux)")
def test_worker_runs_below_the_server_with_capped_threads(walk):
    """The fit's process is scheduled below the server (SCHED_IDLE on Linux when other
    programs leave a core idle, else niced: ``choose_priority``) and its Numba/BLAS threads
    are capped, checked on the running worker."""
    import os

    s, job = _long_fit_running(walk)
    try:
        assert job.pid is not None and s.bound_history, "the worker did not start"
        environ = dict(kv.split("=", 1) for kv in
                       open(f"/proc/{job.pid}/environ").read().split("\0") if "=" in kv)
        assert environ["NUMBA_NUM_THREADS"] == "1" and environ["OPENBLAS_NUM_THREADS"] == "1"
        assert job.priority in ("idle", "nice")
        if job.priority == "idle" and hasattr(os, "SCHED_IDLE"):
            assert os.sched_getscheduler(job.pid) == os.SCHED_IDLE
        else:
            assert os.getpriority(os.PRIO_PROCESS, job.pid) > os.getpriority(os.PRIO_PROCESS, 0)
    finally:
        s.stop_training()
        _wait(s)


def test_choose_priority_follows_the_load_of_other_programs(monkeypatch):
    """SCHED_IDLE while other programs leave a core idle, nice when they keep every core
    busy (a SCHED_IDLE fit would never run), the environment variable wins."""
    from bgplvm.explorer import train_worker as tw
    from bgplvm._numba_config import idle_cores

    monkeypatch.delenv("BGPLVM_TRAIN_PRIORITY", raising=False)
    for free, want in ((1.6, "idle"), (0.6, "idle"), (0.3, "nice"), (0.0, "nice"), (None, "idle")):
        monkeypatch.setattr(idle_cores, "measure", lambda seconds, free=free: free)
        assert tw.choose_priority() == want, free
    monkeypatch.setenv("BGPLVM_TRAIN_PRIORITY", "nice")
    monkeypatch.setattr(idle_cores, "measure", lambda seconds: 2.0)
    assert tw.choose_priority() == "nice"
    assert tw.worker_env(priority="nice")["BGPLVM_TRAIN_PRIORITY"] == "nice"


def test_idle_cores_measure_sees_a_busy_program():
    """``measure`` counts another process's CPU time and not this process's own."""
    import os
    import subprocess
    import sys

    from bgplvm._numba_config import idle_cores

    if not idle_cores.available:
        pytest.skip("needs /proc/stat (Linux)")
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        during = idle_cores.measure(0.6)
    finally:
        hog.kill()
        hog.wait()
    assert 0.0 <= during <= os.cpu_count()
    assert during <= os.cpu_count() - 0.6


def test_starved_worker_is_reported(walk, monkeypatch):
    """A worker that gets (almost) no CPU is reported as starved and the page says it waits
    for a free core; one that computes is not."""
    from bgplvm.explorer import train_worker as tw

    s, job = _long_fit_running(walk)
    try:
        monkeypatch.setattr(tw, "STARVED_SECONDS", 0.2)
        job.starved()  # first mark
        time.sleep(0.3)
        assert not job.starved(), "a computing worker counted as starved"
        monkeypatch.setattr(tw, "_cpu_seconds", lambda pid: 10.0)  # no CPU time from now on
        job._cpu_mark = None
        job.starved()
        time.sleep(0.3)
        assert job.starved()
        s.poll()
        assert s.train_status.startswith("Waiting for CPU"), s.train_status
    finally:
        monkeypatch.undo()
        s.stop_training()
        _wait(s)


@pytest.mark.skipif(not __import__("os").path.exists("/proc/stat"), reason="reads /proc (Linux)")
def test_training_progresses_while_other_programs_keep_every_core_busy(walk):
    """With a busy program on every core, the fit still runs (niced, not SCHED_IDLE, which
    would starve: 4 iterations took over 2 minutes, against ~3 s on an idle machine)."""
    import os
    import subprocess
    import sys

    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 1)]
    try:
        time.sleep(0.5)
        s = ExplorerState()
        s.set_dataset(walk)
        s.latent_dim, s.num_inducing, s.max_iters = 2, 6, 3
        job = s.start_training()
        _wait(s, timeout=150)
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    assert job.priority == "nice"
    assert s.model is not None and "Finished" in s.train_status, s.train_status


def test_the_player_hides_and_shows_again_on_the_server_and_in_its_bokeh_figures(walk, dyn_model):
    """A Bokeh pane copies its object's layout properties back: visibility set on the pane
    alone was reset from the object, so after data without sequences the player stayed
    hidden on the server while the browser kept the last model's skeleton."""
    from bgplvm.explorer.player import PlayerView

    s = ExplorerState()
    pv = PlayerView(state=s)
    panes = (pv._out_pane, pv._time_pane)

    def shown():
        return [(p.visible, p.object.visible) for p in panes]

    assert shown() == [(False, False)] * 2  # no model yet
    s.set_model(dyn_model, walk)
    assert shown() == [(True, True)] * 2
    s.set_dataset(Dataset(name="other", Y=walk.Y + 1.0, renderer=walk.renderer))  # the model goes
    assert shown() == [(False, False)] * 2
    s.set_model(dyn_model, walk)
    assert shown() == [(True, True)] * 2
