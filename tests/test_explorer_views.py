"""A multi-view model (``bgplvm.MRD``) in the explorer, driven from Python (issue 45, point
5): it opens drawn one view at a time, every view is generated at the latent point, the
ARD chart has one group per view, and one view of a frame gives the others."""

from __future__ import annotations

import io

import holoviews as hv
import numpy as np
import pytest

from bgplvm.explorer.state import ExplorerState
from bgplvm.explorer.user_input import UserError
from views_model import walk_mrd

hv.extension("bokeh")


@pytest.fixture(scope="module")
def mrd():
    return walk_mrd(iters=150)


@pytest.fixture
def state(mrd):
    s = ExplorerState()
    buf = io.BytesIO()
    mrd.save(buf)
    s.load_model_bytes("walk-views.npz", buf.getvalue())
    return s


def test_a_multi_view_model_opens_drawn_as_its_data_set_draws_each_view(state, mrd):
    assert state.mrd is not None and state.view_names == ["pose", "image"]
    assert "2 views of one latent space (pose, image)" in state.info
    # the pose view is drawn as the walk is (its stick figure), first; the image as vectors
    assert state.view_name == "pose" and state.dataset.renderer.kind == "pose"
    assert state.view_datasets["image"].renderer.kind == "vector"
    # model is the pose view's single-view model at the shared q(X)
    np.testing.assert_allclose(state.model.latent_mean, mrd.latent_mean)
    np.testing.assert_allclose(state.model.Y, mrd.views["pose"].Y)
    info = state.summary()
    assert info["bound"] == pytest.approx(mrd.elbo())
    assert info["views"].startswith("2 views (pose, image), drawn: pose; shared by pose + image:")


def test_every_view_is_generated_at_the_latent_point(state, mrd):
    state.cursor = (0.3, -0.2)
    vec = state.latent_vector()
    out = state.generate_views()
    assert set(out) == {"pose", "image"}
    for name, (mean, var) in out.items():
        m_ref, v_ref = mrd.predict(vec[None, :], view=name)
        np.testing.assert_allclose(mean, m_ref[0], rtol=1e-12)
        np.testing.assert_allclose(var, v_ref[0], rtol=1e-12)
    # the primary view's is the page's generated output
    np.testing.assert_allclose(state.generate()[0], out["pose"][0], rtol=1e-12)


def test_switching_the_drawn_view_keeps_the_latent_point(state, mrd):
    state.cursor = (0.25, 0.5)
    dims, cursor = (state.x_dim, state.y_dim), state.cursor
    state.show_view("image")
    assert state.view_name == "image" and state.model.Y.shape == mrd.views["image"].shape
    assert state.dataset.renderer.kind == "vector" and state.mrd is not None
    assert (state.x_dim, state.y_dim) == dims and state.cursor == cursor
    # the observed view moves off the drawn one where it was the same
    assert state.observed_view == "pose"
    with pytest.raises(UserError, match="no view 'depth'; the views are pose, image"):
        state.set_views_model(state.mrd, view="depth")


def test_one_view_gives_the_others_with_candidates_to_step_through(state, mrd):
    state.observed_view = "image"
    fr = state.view_frames
    assert fr.label.startswith("training rows") and fr.N == mrd.views["pose"].shape[0]
    state.view_frame = 40
    state.infer_from_view()
    c = state.view_candidates
    K = state.n_candidates
    assert K >= 1 and np.all(np.diff(c.log_density[0, :K]) <= 0)  # best bound first
    # the point is pinned at the best candidate's mean, in every dimension
    np.testing.assert_allclose(state.latent_vector(), c.mu[0, 0])
    assert state.pinned and state.candidate_text().startswith(f"candidate 1 of {K}: log density")
    # the pose generated there is the model's reconstruction of that frame's pose
    mean = state.generate_views(["pose"])["pose"][0]
    ref = mrd.view("pose").predict(c.mu[0, :1])[0][0]
    np.testing.assert_allclose(mean, ref, rtol=1e-12)
    # and closer to the frame's recorded pose than the mean pose is
    truth = fr.views["pose"][40]
    Y = mrd.views["pose"].Y
    assert np.sqrt(np.mean((mean - truth) ** 2)) < 0.5 * np.sqrt(np.mean((Y.mean(0) - truth) ** 2))
    if K > 1:
        state.show_candidate(1)
        np.testing.assert_allclose(state.latent_vector(), c.mu[0, 1])
        assert "from the best" in state.candidate_text()
    state.view_frame = fr.N + 5
    with pytest.raises(UserError, match=f"frame {fr.N + 5} is not among the {fr.N} training rows"):
        state.infer_from_view()


def test_saving_from_the_page_keeps_every_view_and_a_single_view_model_replaces_it(state, mrd):
    from bgplvm import MRD

    data = state.save_model_bytes().getvalue()
    back = MRD.load(io.BytesIO(data))
    assert back.view_names == ["pose", "image"] and back.metadata.get("dataset") == "synth_walk"
    assert back.elbo() == pytest.approx(mrd.elbo(), rel=1e-10)
    state.set_model(mrd.view("image"))
    assert state.mrd is None and state.view_name == "" and state.summary()["views"] == ""


def test_the_ard_chart_has_one_group_per_view_coloured_by_the_segmentation(mrd):
    from bgplvm.explorer import plots

    seg = mrd.segmentation()
    el = plots.ard_view_bars(seg.relevance, seg, 0, 3)
    bars = el.get(0)
    rows = bars.dframe()
    assert list(rows["dim"]) == [f"{q} {v}" for v in ("pose", "image") for q in range(4)]
    for _, r in rows.iterrows():
        q, view = int(r["dim"].split()[0]), r["view"]
        on = q in seg.on[view]
        shared = any(q in d for d in seg.shared.values())
        assert r["color"] == (plots.OFF_COLOR if not on else plots.SHARED_COLOR if shared else plots.PRIVATE_COLOR)
        assert r["axis"] == {0: "x axis", 3: "y axis"}.get(q, "")
        assert r["relevance"] == pytest.approx(seg.relevance[view][q])
    assert el.get(1).data == seg.threshold


def test_the_page_builds_with_a_multi_view_model(state):
    from bgplvm.explorer.app import create_app
    from bgplvm.explorer.views_view import ViewsView

    page = create_app(state)
    assert page.state is state and not state.error
    v = ViewsView(state=state)
    assert v._drawn.options == ["pose", "image"] and v._drawn.value == "pose"
    assert len(v._others.objects) == 1  # the image, beside the pose the output view draws
    v._on_infer(None)
    assert not state.error and "candidate 1 of" in v._status.object
    v._drawn.value = "image"
    assert state.view_name == "image" and len(v._others.objects) == 1 and not state.error


def test_a_skeleton_without_side_names_offers_only_the_parts_it_can_place():
    from bgplvm.datasets import Dataset
    from bgplvm.datasets.loaders import ANKUR_CONNECTIONS, ANKUR_NAMES
    from bgplvm.datasets.record import StickFigureRenderer

    s = ExplorerState()
    r = StickFigureRenderer(connections=ANKUR_CONNECTIONS, up_axis=1, up_sign=-1.0, names=ANKUR_NAMES)
    s.dataset = Dataset(name="poses", Y=np.zeros((3, 63)), renderer=r)
    assert s.mask_options() == ["legs", "arms", "trunk and head", "joints I click"]
    s.mask_part = "legs"
    cols = s.hidden_columns()
    assert cols.size == 8 * 3  # hips, knees, ankles and toes, x y z each


def test_a_dynamical_multi_view_model_plays_and_forecasts_every_view():
    """A ``DynamicalMRD``'s views are dynamical models at its q(X) (``MRD.view``): the page
    plays its sequences and forecasts past them, and every view is generated on the way."""
    from views_model import walk_dynamical_mrd

    m = walk_dynamical_mrd()
    s = ExplorerState()
    s.set_model(m)
    assert s.is_dynamical and type(s.model).__name__ == "DynamicalGPLVM"
    np.testing.assert_allclose(s.model.latent_mean, m.latent_mean, atol=1e-12)
    assert len(s.sequence_options()) == len(np.unique(m.sequences)) == 4
    pb = s.playback()
    assert pb is not None and pb.mean.shape[1] == m.views["pose"].shape[1]
    # the forecast past the sequence is the multi-view model's for the drawn view
    t_next = np.array([m.t[m.sequences == 0].max() + 0.5])
    np.testing.assert_allclose(s.model.forecast(t_next, 0)[0], m.forecast(t_next, 0)["pose"][0], rtol=1e-10)


def test_a_frame_missing_the_observed_view_says_so():
    from bgplvm import MRD
    from views_model import walk_views

    views = walk_views(8)
    views["image"] = views["image"].copy()
    views["image"][5] = np.nan  # frame 5's image is missing: its pose alone places it
    s = ExplorerState()
    s.set_model(MRD(views, latent_dim=3, num_inducing=8, seed=0))
    s.observed_view, s.view_frame = "image", 5
    with pytest.raises(UserError, match="frame 5 has no image .*observe another view"):
        s.infer_from_view()
    s.observed_view = "pose"
    s.infer_from_view()
    assert s.n_candidates >= 1


def test_the_model_panel_says_how_the_views_intervals_were_calibrated(mrd):
    """A multi-view model's intervals line is the MRD's: 'as fitted' with what to do, then,
    once ``MRD.calibrate`` ran, each view's calibration from the others on one line."""
    s = ExplorerState()
    buf = io.BytesIO()
    mrd.save(buf)
    s.load_model_bytes("walk-views.npz", buf.getvalue())
    assert "m.calibrate()" in s.summary()["calibration"]
    m = walk_mrd(iters=150)
    m.calibrate(rows=120, folds=3)
    buf = io.BytesIO()
    m.save(buf)
    s.load_model_bytes("walk-views-calibrated.npz", buf.getvalue())
    line = s.summary()["calibration"]
    assert "pose from image: calibrated" in line and "; image from pose: calibrated" in line and "\n" not in line
