"""Headless tests of the explorer: state, pure plot functions, views driven through
their streams (``stream.event(...)``, ``dmap[()]``), uploads, export and the CLI."""

from __future__ import annotations

import dataclasses
import io
import time
import xml.etree.ElementTree as ET

import numpy as np
import pytest

hv = pytest.importorskip("holoviews")
from PIL import Image  # noqa: E402

from bgplvm.datasets import Dataset, load  # noqa: E402
from bgplvm.datasets.record import ImageRenderer, VectorRenderer  # noqa: E402
from bgplvm import BayesianGPLVM, DynamicalGPLVM  # noqa: E402

from bgplvm.explorer import plots  # noqa: E402
from bgplvm.explorer.export import export_bytes, latent_csv, latent_npz  # noqa: E402
from bgplvm.explorer.latent import (  # noqa: E402
    ard_off_mask, grid_points, latent_bounds, top_two_dims, variance_grid)
from bgplvm.explorer.sequences import pose_spread  # noqa: E402
from bgplvm.explorer.state import ExplorerState, UserError  # noqa: E402
from bgplvm.explorer.user_input import MAX_UPLOAD_BYTES  # noqa: E402

hv.extension("bokeh")


@pytest.fixture(scope="module")
def walk():
    ds = load("synth_walk")
    sel = np.arange(0, ds.N, 4)  # 80 rows, both sequences
    return Dataset(name="synth_walk", Y=ds.Y[sel], renderer=ds.renderer, labels=ds.labels[sel],
                   label_names=ds.label_names, sequence=ds.sequence[sel], times=ds.times[sel])


@pytest.fixture(scope="module")
def walk_model(walk):
    # an initialised (unfitted) model is a valid model for everything the explorer does
    m = BayesianGPLVM(walk.Y, latent_dim=4, num_inducing=10, kernel="rbf", seed=0)
    m.metadata = {"dataset": "synth_walk"}
    return m


@pytest.fixture
def state(walk, walk_model):
    s = ExplorerState()
    s.set_dataset(walk)
    s.set_model(walk_model, walk)
    return s


# --------------------------------------------------------------------------- helpers
def test_ard_helpers():
    a = np.array([1.0, 0.3, 1e-4, 2.0])
    assert top_two_dims(a) == (3, 0)
    assert ard_off_mask(a).tolist() == [False, False, True, False]
    assert top_two_dims(np.array([0.5])) == (0, 0)


def test_grid_orientation_matches_predictive_variance(walk_model):
    fixed = walk_model.latent_mean.mean(0)
    b = latent_bounds(walk_model.latent_mean, walk_model.latent_variance, (0, 1))
    V = variance_grid(walk_model, fixed, (0, 1), b, res=7)
    xs, ys = np.linspace(b[0], b[2], 7), np.linspace(b[1], b[3], 7)
    p = fixed.copy()
    p[0], p[1] = xs[5], ys[2]
    assert V.shape == (7, 7)
    np.testing.assert_allclose(V[2, 5], walk_model.predictive_variance(p[None])[0])
    X = grid_points(fixed, (0, 1), b, 7)
    assert np.all(X[:, 2:] == fixed[2:])


def test_pose_spread_exact_for_marker_renderer(walk):
    r = walk.renderer
    var = np.tile([0.01, 0.04, 0.04], walk.D // 3)
    sd = pose_spread(r, walk.Y[0], var)
    np.testing.assert_allclose(sd, np.sqrt(0.03))


# --------------------------------------------------------------------------- state
def test_set_model_picks_the_two_most_relevant_dims(state, walk_model):
    assert state.dims == top_two_dims(walk_model.ard_weights)
    np.testing.assert_allclose(state.fixed, walk_model.latent_mean.mean(0))
    assert state.param.x_dim.bounds == (0, 3)


def test_assign_axis_swaps_when_taken(state):
    x, y = state.dims
    state.assign_axis(y, "x")
    assert state.dims == (y, x)
    other = ({0, 1, 2, 3} - {x, y}).pop()
    state.assign_axis(other, "y")
    assert state.dims == (y, other)
    state.assign_axis(99, "x")  # ignored
    assert state.dims == (y, other)


def test_changing_an_axis_keeps_the_latent_point(state):
    """The generated point stays where it is in the full latent space when a view axis
    changes: the dimension leaving the axis keeps its coordinate (on its slider), the new
    one brings its own (before, the cursor's coordinate moved onto the new dimension)."""
    state.hover(0.3, -0.2)
    before = state.latent_vector().copy()
    x, y = state.dims
    other = ({0, 1, 2, 3} - {x, y}).pop()
    state.assign_axis(other, "x")
    np.testing.assert_allclose(state.latent_vector(), before)
    assert state.cursor == (before[other], before[y]) and state.fixed[x] == before[x]
    state.assign_axis(other, "y")  # a swap
    np.testing.assert_allclose(state.latent_vector(), before)


def test_hover_follows_only_in_follow_mode_and_click_pins(state, walk_model):
    state.hover(0.25, -0.5)
    assert state.cursor == (0.25, -0.5)
    n = 7
    mx, my = walk_model.latent_mean[n, state.x_dim], walk_model.latent_mean[n, state.y_dim]
    state.click(mx, my)
    assert state.pinned and not state.follow
    assert state.selected_index == n
    assert state.cursor == (pytest.approx(mx), pytest.approx(my))
    state.hover(5.0, 5.0)  # follow is off: ignored
    assert state.cursor == (pytest.approx(mx), pytest.approx(my))
    text = state.readout()
    assert f"{mx:.3f}" in text and f"#{n}" in text
    x0, y0, x1, y1 = state.bounds()
    state.click(x1, y1)  # empty corner: no training point
    assert state.selected_index == -1
    assert "(pinned)" in state.readout()
    state.follow = True  # following the mouse again: no longer pinned, and the readout says so
    state.hover(0.5, 0.5)
    assert not state.pinned and "following the mouse" in state.readout()


def test_generate_uses_the_full_latent_vector(state, walk_model):
    state.set_fixed(2, 0.7)
    vec = state.latent_vector(0.1, 0.2)
    assert vec[state.x_dim] == 0.1 and vec[state.y_dim] == 0.2
    assert vec[2] == 0.7 or 2 in state.dims
    mean, var = state.generate(0.1, 0.2)
    m2, v2 = walk_model.predict(vec[None])
    np.testing.assert_allclose(mean, m2[0])
    np.testing.assert_allclose(var, v2[0])
    assert mean.shape == (walk_model.Y.shape[1],)


def test_color_mode_resolution(state, walk):
    assert state.color_mode() == "label"
    state.color_by = "time"
    assert state.color_mode() == "time"
    state.color_by = "none"
    assert state.color_mode() == "none"


def test_colour_select_offers_what_the_data_has(state, walk, walk_model):
    """Data without time stamps or sequences (oil, digits) is not offered colouring by
    time or sequence (it coloured nothing); a choice the new data lacks falls back to auto."""
    from bgplvm.explorer.latent_view import LatentView

    lv = LatentView(state=state)
    assert lv._color.options == ["auto", "label", "sequence", "time", "none"]
    state.color_by = "time"
    plain = Dataset(name="plain", Y=walk.Y, renderer=walk.renderer, labels=walk.labels,
                    label_names=walk.label_names)
    state.set_dataset(plain)
    state.set_model(walk_model, plain)
    assert lv._color.options == ["auto", "label", "none"]
    assert state.color_by == "auto" and state.color_mode() == "label"
    state.set_dataset(walk)
    state.color_by = "sequence"
    state.set_dataset(plain)  # no view involved: the state itself falls back
    assert state.color_by == "auto"


def test_the_latent_view_draws_every_colouring_it_offers(state, walk):
    """Each choice of the colour select draws the latent view, with every point (colouring
    by sequence once failed on the default page: HoloViews refused its table and the view
    vanished behind an error)."""
    from bgplvm.explorer.latent_view import LatentView

    lv = LatentView(state=state)
    for mode in lv._color.options:
        state.color_by = mode
        state.error = ""
        lv._rebuild()
        assert state.error == "", (mode, state.error)
        fig = hv.render(lv._pane.object)
        sizes = [len(r.data_source.data["index"]) for r in fig.renderers
                 if "index" in getattr(r.data_source, "data", {})]
        assert walk.N in sizes, (mode, sizes)


def test_summary(state):
    info = state.summary()
    assert info["Q"] == 4 and info["M"] == 10 and info["N"] == 80
    assert info["snr"] > 0 and np.isfinite(info["bound"])
    assert info["time_prior"] == ""  # a static model


def test_summary_and_sd_images_use_the_models_calibration(state):
    """A calibrated model's panel says so, and the sd shown for f is the calibrated one
    (its variance scaled whole: the noise part comes off scaled too)."""
    from bgplvm.explorer.sequences import f_sd

    m = state.model
    assert state.summary()["calibration"].startswith("as fitted")
    x = m.latent_mean[:1]
    var_f = m.predict(x, include_noise=False, calibrated=False)[1]
    try:
        m.calibrate(rows=80, folds=4)
        assert state.summary()["calibration"].startswith("calibrated (")
        np.testing.assert_allclose(f_sd(m, m.predict(x)[1]) ** 2, var_f * m.calibration.scale ** 2, rtol=1e-9)
    finally:
        m.calibration = None
    np.testing.assert_allclose(f_sd(m, m.predict(x)[1]) ** 2, var_f, rtol=1e-9)


def test_summary_says_how_the_time_prior_is_computed(walk):
    """A dynamical model's panel names its time kernel and form (time_prior "auto" chose)."""
    s = ExplorerState()
    s.set_dataset(walk)
    for spec, form in (("matern32", "state_space (exact, state dimension 2)"), ("rbf", "dense")):
        m = DynamicalGPLVM(walk.Y, walk.times, sequences=walk.sequence, latent_dim=2,
                           num_inducing=5, time_kernel=spec)
        s.set_model(m, walk)
        line = s.summary()["time_prior"]
        assert line.startswith("Matern32Time(" if spec == "matern32" else "RBFTime(") and form in line


def test_save_and_open_model_roundtrip(state, walk_model):
    data = state.save_model_bytes().getvalue()
    s2 = ExplorerState()
    s2.load_model_bytes("m.npz", data)
    np.testing.assert_allclose(s2.model.latent_mean, walk_model.latent_mean)
    assert s2.dims == state.dims or set(s2.dims) == set(top_two_dims(walk_model.ard_weights))
    with pytest.raises(UserError, match="not a bgplvm model"):
        s2.load_model_bytes("junk.npz", b"not a zip file at all")
    # a multi-view model opens drawn one view at a time (tests/test_explorer_views.py), and
    # one of its views saved alone opens as a single-view model
    from bgplvm import MRD

    mrd = MRD({"a": walk_model.Y[:, :10], "b": walk_model.Y[:, 10:]}, latent_dim=2, num_inducing=5)
    buf = io.BytesIO()
    mrd.save(buf)
    s2.load_model_bytes("mrd.npz", buf.getvalue())
    assert s2.mrd is not None and s2.view_name == "a" and s2.model.Y.shape == (walk_model.Y.shape[0], 10)
    buf = io.BytesIO()
    mrd.view("b").save(buf)
    s2.load_model_bytes("b.npz", buf.getvalue())
    assert s2.mrd is None and s2.model.Y.shape == (walk_model.Y.shape[0], walk_model.Y.shape[1] - 10)


def test_a_model_of_rows_cut_from_a_shipped_data_set_reopens_drawn_as_they_were(walk_model):
    """A model of a window of a shipped data set (as the pre-trained Frey video, 300 of its
    1965 frames) reopened from its saved file is drawn as its data set again: the file
    records the cut and the playback rate; before, the named set's other row count made the
    page fall back to plain vectors."""
    full = load("synth_walk")
    cut = full.rows(20, 80)
    assert cut.N == 60 and cut.times[0] == 0.0 and cut.meta["rows"] == [20, 80]
    cut = dataclasses.replace(cut, meta={**cut.meta, "fps": 12.5, "time_unit": "frame"})
    m = BayesianGPLVM(cut.Y, latent_dim=3, num_inducing=8, kernel="rbf", seed=0)
    m.metadata = {"dataset": "synth_walk"}
    s = ExplorerState()
    s.set_model(m, cut)
    t = ExplorerState()
    t.load_model_bytes("model.npz", s.save_model_bytes().getvalue())
    ds = t.dataset
    assert type(ds.renderer) is type(full.renderer) and ds.N == 60 and ds.meta["rows"] == [20, 80]
    assert ds.meta["fps"] == 12.5 and ds.meta["time_unit"] == "frame"
    np.testing.assert_array_equal(ds.Y, full.Y[20:80])


def test_opening_a_model_sets_the_train_sections_prior_to_its_own(state, walk, walk_model):
    state.prior = "dynamical"
    state.set_model(walk_model, walk)
    assert state.prior == "static"
    d = DynamicalGPLVM(walk.Y, walk.times, sequences=walk.sequence, latent_dim=2, num_inducing=6,
                       time_kernel="rbf", seed=0)
    state.set_model(d, walk)
    assert state.prior == "dynamical" and state.time_kernel == "rbf"


# --------------------------------------------------------------------------- uploads
def _npy(a) -> bytes:
    b = io.BytesIO()
    np.save(b, a)
    return b.getvalue()


def test_upload_good_csv_and_npy():
    s = ExplorerState()
    s.load_upload("mine.csv", b"1,2,3\n4,5,6\n7,8,9\n1,1,1\n")
    assert s.dataset.Y.shape == (4, 3) and s.dataset_name == "mine"
    assert isinstance(s.dataset.renderer, VectorRenderer)
    s.load_upload("a.npy", _npy(np.random.default_rng(0).normal(size=(10, 2))))
    assert s.dataset.Y.shape == (10, 2)


def test_an_upload_with_missing_values_loads_trains_and_imputes():
    """NaN (or an empty CSV cell) is a missing value: the page says how many, the model
    trains on the observed entries, and observe-and-infer leaves them out of its error."""
    rng = np.random.default_rng(3)
    t = rng.uniform(0, 2 * np.pi, 40)
    Y = np.c_[np.cos(t), np.sin(t), np.cos(2 * t), np.sin(2 * t)] + 0.02 * rng.standard_normal((40, 4))
    Y[rng.random(Y.shape) < 0.1] = np.nan
    n_missing = int(np.isnan(Y).sum())
    s = ExplorerState()
    s.load_upload("holes.npy", _npy(Y))
    assert np.array_equal(s.dataset.Y, Y, equal_nan=True)
    assert f"{n_missing} of 160 entries" in s.info and "missing" in s.info
    csv = "a,b,c\n1,,3\n4,5,6\n7,8,\n1,2,3\n"
    s.load_upload("cells.csv", csv.encode())
    assert np.isnan(s.dataset.Y[0, 1]) and np.isnan(s.dataset.Y[2, 2]) and "2 of 12 entries" in s.info
    s.load_upload("holes.npy", _npy(Y))
    s.latent_dim, s.num_inducing, s.max_iters = 2, 8, 60
    s.start_training()
    _wait(s)
    assert s.model is not None and s.model.missing_fraction == pytest.approx(n_missing / 160)
    assert np.isfinite(s.model.elbo())
    from bgplvm.explorer.inference import nearest_neighbour_fill

    filled = nearest_neighbour_fill(Y, np.where(np.arange(4) < 2, Y[:3], np.nan), exclude=np.arange(3))
    assert np.all(np.isfinite(filled[:, 2:]))


@pytest.mark.parametrize("name,data,match", [
    ("bad.npy", _npy(np.zeros((3, 2, 2))), "2-D"),
    ("inf.npy", _npy(np.array([[1.0, np.inf], [1, 2], [3, 4]])), r"infinite.*mark missing values with NaN"),
    # NaN is a missing value (below), but not a whole row or a column seen once
    ("nanrow.npy", _npy(np.array([[np.nan, np.nan], [1, 2], [3, 4]])), r"nothing observed \(rows \[0\]\)"),
    ("nancol.npy", _npy(np.array([[1.0, np.nan], [1, np.nan], [3, 4]])), r"fewer than 2 rows \(columns \[1\]\)"),
    ("x.txt.exe", b"123", "unsupported file type"),
    ("garbage.npy", b"\x00\x01garbage", "could not|not|read"),
    ("empty.csv", b"", "empty"),
    ("few.csv", b"1,2\n3,4\n", "at least 3 rows"),
])
def test_bad_uploads_give_clear_errors(name, data, match):
    s = ExplorerState()
    with pytest.raises(UserError, match=match):
        s.load_upload(name, data)
    assert s.dataset is None


def test_huge_upload_refused_before_parsing():
    s = ExplorerState()
    with pytest.raises(UserError, match="limit is 50 MB"):
        s.load_upload("big.npy", b"\0" * (MAX_UPLOAD_BYTES + 1))


# --------------------------------------------------------------------------- training
def _wait(state, timeout=120):
    t0 = time.time()
    while state.poll():
        assert time.time() - t0 < timeout, "training did not finish"
        time.sleep(0.05)


def test_training_in_background_installs_model(walk):
    s = ExplorerState()
    s.set_dataset(walk)
    s.latent_dim, s.num_inducing, s.max_iters = 3, 8, 4
    s.start_training()
    assert s.training
    with pytest.raises(UserError, match="already training"):
        s.start_training()
    _wait(s)
    assert not s.training and s.model is not None and s.model.latent_dim == 3
    assert s.bound_history and "Finished" in s.train_status
    assert s.model.metadata.get("dataset") == "synth_walk"
    # another model opened: the message and curve were about the fit this page made
    s.set_model(s.model)
    assert s.train_status == "" and s.bound_history == []


def test_two_sessions_train_independently(walk):
    a, b = ExplorerState(), ExplorerState()
    for s, q in ((a, 2), (b, 3)):
        s.set_dataset(walk)
        s.latent_dim, s.num_inducing, s.max_iters = q, 6, 3
        s.start_training()
    _wait(a)
    _wait(b)
    assert a.model.latent_dim == 2 and b.model.latent_dim == 3
    assert a.model is not b.model


def test_stop_training_keeps_a_usable_model(walk):
    s = ExplorerState()
    s.set_dataset(walk)
    s.latent_dim, s.num_inducing, s.max_iters = 3, 8, 5000
    s.start_training()
    t0 = time.time()
    while not s.bound_history and time.time() - t0 < 60:
        s.poll()
        time.sleep(0.05)
    s.stop_training()
    _wait(s)
    assert s.model is not None and "Stopped" in s.train_status
    assert len(s.bound_history) < 5000


def test_training_error_is_reported_not_raised():
    s = ExplorerState()
    s.set_dataset(Dataset(name="tiny", Y=np.ones((3, 2)), renderer=VectorRenderer()))
    s.latent_dim, s.num_inducing, s.max_iters = 1, 3, 2
    s.kernel = "linear"
    s.start_training()
    _wait(s)
    assert not s.training  # finished or failed, but never stuck, and the state is usable
    assert s.model is not None or "Training failed" in s.error


# --------------------------------------------------------------------------- plots
def test_ard_bars_mark_roles_and_off_dims():
    bars = plots.ard_bars(np.array([1.0, 1e-5, 0.5]), x_dim=2, y_dim=0)
    roles = dict(zip(bars.dimension_values("dim"), bars.dimension_values("role")))
    assert roles == {"0": "y axis", "1 off": "off", "2": "x axis"}
    colors = dict(zip(bars.dimension_values("dim"), bars.dimension_values("color")))
    assert colors["1 off"] == plots.OFF_COLOR and colors["2"] == plots.X_COLOR
    sorted_bars = plots.ard_bars(np.array([1.0, 1e-5, 0.5]), 2, 0, sort=True)
    assert list(sorted_bars.dimension_values("dim")) == ["0", "2", "1 off"]


def test_latent_points_carry_index_and_label(walk_model, walk):
    pts = plots.latent_points(walk_model.latent_mean, (1, 0), walk.labels, walk.label_names,
                              walk.sequence, walk.times, "label")
    assert pts.kdims[0].label == "latent dimension 1"
    index = pts.dimension_values("index").astype(int)  # rows grouped by label, each with its number
    assert sorted(index) == list(range(walk.N))
    np.testing.assert_allclose(pts.dimension_values(0), walk_model.latent_mean[index, 1])
    assert set(pts.dimension_values("label")) == set(walk.label_names)
    assert list(pts.dimension_values("label")) == [walk.label_names[walk.labels[n]] for n in index]


def test_pose_projection_front_and_side():
    P = np.array([[1.0, 0, 0], [0, 1.0, 0], [0, 0, 1.0]])
    uv = plots.project(P, 0, 0)
    np.testing.assert_allclose(uv, [[1, 0], [0, 0], [0, 1]], atol=1e-12)
    uv = plots.project(P, 90, 0)
    np.testing.assert_allclose(uv, [[0, 0], [1, 0], [0, 1]], atol=1e-12)


# --------------------------------------------------------------------------- views
def _render(*panes):
    """Render panes into a Bokeh document, as the server does (hooks run)."""
    from bokeh.document import Document

    doc = Document()
    for p in panes:
        p.get_root(doc)
    return doc


def test_latent_view_streams_drive_generation(state):
    from bgplvm.explorer.latent_view import LatentView
    from bgplvm.explorer.output_view import OutputView

    lv = LatentView(state=state)
    ov = OutputView(state=state)
    _render(lv._pane, ov._pane)
    pointer, tap = lv._streams
    assert pointer.source is tap.source
    state.follow = True
    pointer.event(x=0.3, y=-0.2)
    assert state.cursor == (0.3, -0.2)
    # the output plot was updated in place: title and the pose's data sources
    assert ov._figures["bones"].title.text == "Generated at (0.30, -0.20)"
    pointer.event(x=0.3, y=-0.001)
    assert ov._figures["bones"].title.text == "Generated at (0.30, 0.00)"  # not "-0.00"
    pointer.event(x=0.3, y=-0.2)
    bones = ov._sources["bones"].data
    before = np.column_stack([bones["u"], bones["v"]]).copy()
    mean, _ = state.generate(0.3, -0.2)
    d = plots.pose_data(ov._centre(state.dataset.renderer.positions(mean)), state.dataset.renderer.connections,
                        state.azimuth, state.elevation)
    np.testing.assert_allclose(before, d["bones"][:, :2], rtol=1e-6, atol=1e-6)  # float32 on the wire
    discs = ov._sources["discs"].data  # one 2-sd disc per joint
    assert len(discs["x"]) == len(d["joints"]) and np.all(np.asarray(discs["r"]) >= 0)
    assert list(lv._marker_source.data["lx"]) == [0.3]
    pointer.event(x=-1.5, y=1.5)
    after = np.column_stack([ov._sources["bones"].data["u"], ov._sources["bones"].data["v"]])
    assert not np.allclose(before, after)
    assert list(lv._marker_source.data["ly"]) == [1.5]
    tap.event(x=0.1, y=0.1)
    assert state.pinned and not state.follow and state.cursor == (0.1, 0.1)
    mu = state.model.latent_mean
    tap.event(x=float(mu[9, state.x_dim]), y=float(mu[9, state.y_dim]))
    assert state.selected_index == 9
    assert list(lv._selected_source.data["lx"]) == [pytest.approx(mu[9, state.x_dim])]
    tap.event(x=0.1, y=0.1)
    assert state.selected_index == -1 and len(lv._selected_source.data["lx"]) == 0
    pointer.event(x=0.9, y=0.9)  # pinned: the mouse no longer moves the point
    assert state.cursor == (0.1, 0.1)
    state.azimuth = 30.0  # the view angle redraws the same pose turned
    turned = np.column_stack([ov._sources["joints"].data["u"], ov._sources["joints"].data["v"]])
    assert turned.shape == d["joints"].shape


def _rendered_callbacks(pane):
    """Stream callback types attached to the Bokeh plot (and subplots) of a pane."""
    import panel as pn
    from bokeh.document import Document

    p = pn.pane.HoloViews(pane.object)
    p.get_root(Document())
    plot = list(p._plots.values())[0][0]
    subs = list((getattr(plot, "subplots", None) or {}).values())
    return {type(c).__name__ for pl in [plot] + subs for c in pl.callbacks}


def test_streams_are_linked_in_the_rendered_plots(state):
    """Regression: a stream whose source is not part of what is rendered never fires."""
    from bgplvm.explorer.ard_view import ArdView
    from bgplvm.explorer.latent_view import LatentView

    assert {"PointerXYCallback", "TapCallback"} <= _rendered_callbacks(LatentView(state=state)._pane)
    assert "TapCallback" in _rendered_callbacks(ArdView(state=state)._pane)


def test_training_curve_is_extended_in_place_not_redrawn():
    """Progress polls stream the new points into the drawn curve's source (a new fit
    starts it over) and keep the y range on the fit's later bounds."""
    from bokeh.document import Document

    from bgplvm.explorer.model_panel import LiveBoundCurve

    curve = LiveBoundCurve()
    curve._pane.get_root(Document())
    src = curve._source
    assert src is not None, "the curve was not drawn"
    hist = [(i, -1e6 if i == 0 else -100.0 + i, "init") for i in range(20)]
    curve.update(hist[:10])
    assert list(src.data["iteration"]) == list(range(10))
    curve.update(hist)
    assert curve._source is src and list(src.data["iteration"]) == list(range(20))
    assert curve._plot.y_range.start > -200 and curve._plot.y_range.end > -81  # not flattened by -1e6
    curve.update([(0, -5.0, "init")])  # a new fit
    assert list(src.data["bound"]) == [-5.0]


def test_ard_view_tap_assigns_axis(state):
    from bgplvm.explorer.ard_view import ArdView

    av = ArdView(state=state)
    dmap = av._pane.object
    x, y = state.dims
    other = ({0, 1, 2, 3} - {x, y}).pop()
    # the Tap stream must be attached to the object the pane renders
    from holoviews.streams import Stream
    taps = [st for st in Stream.registry.get(dmap, []) if type(st).__name__ == "Tap"]
    assert taps
    av._assign.value = "y"
    off = ard_off_mask(state.model.ard_weights)
    taps[-1].event(x=plots.ard_label(other, bool(off[other])), y=0.0)
    assert state.y_dim == other
    el = dmap[()]
    roles = dict(zip(el.dimension_values("q"), el.dimension_values("role")))
    assert roles[other] == "y axis"


def test_latent_view_background_follows_sliders(state):
    from bgplvm.explorer.latent_view import LatentView

    lv = LatentView(state=state)
    overlay = lv._pane.object
    img0 = overlay[()].get(0).clone()
    q = ({0, 1, 2, 3} - set(state.dims)).pop()
    state.set_fixed(q, state.fixed[q] + 3.0)
    img1 = overlay[()].get(0)
    assert img1.data["variance"].shape == (200, 200) if isinstance(img1.data, dict) else True
    assert not np.allclose(img0.dimension_values(2), img1.dimension_values(2))


def test_image_and_vector_outputs(walk_model):
    rng = np.random.default_rng(0)
    Yimg = rng.random((30, 12))
    ds = Dataset(name="imgs", Y=Yimg, renderer=ImageRenderer(height=4, width=3, vmin=0, vmax=1))
    m = BayesianGPLVM(Yimg, latent_dim=2, num_inducing=5, seed=0)
    s = ExplorerState()
    s.set_model(m, ds)
    from bgplvm.explorer.output_view import OutputView

    ov = OutputView(state=s)
    _render(ov._pane, ov._sd_pane)
    assert {"x", "y", "dw", "dh"} <= set(ov._sources["mean"].data)  # still placed after updates
    img = ov._sources["mean"].data["image"][0]
    sd = ov._sources["sd"].data["image"][0]
    mean, var = s.generate()
    np.testing.assert_allclose(img, ds.renderer.image(mean)[::-1])  # Bokeh rows run bottom-up
    np.testing.assert_allclose(sd, ds.renderer.image(np.sqrt(var - m.noise_variance))[::-1])  # sd of f
    s.hover(s.cursor[0] + 3.0, s.cursor[1])
    assert not np.allclose(sd, ov._sources["sd"].data["image"][0])
    assert {"x", "y", "dw", "dh"} <= set(ov._sources["sd"].data)
    assert "Per-pixel sd" in ov._figures["sd"].title.text
    Yv = rng.random((30, 5))
    s2 = ExplorerState()
    s2.set_model(BayesianGPLVM(Yv, 2, 5, seed=0), Dataset(name="vec", Y=Yv, renderer=VectorRenderer()))
    ov2 = OutputView(state=s2)
    _render(ov2._pane)
    assert np.all(np.isnan(ov2._sources["train"].data["y"]))
    mu = s2.model.latent_mean
    s2.click(mu[4, s2.x_dim], mu[4, s2.y_dim])
    assert s2.selected_index == 4
    np.testing.assert_allclose(ov2._sources["train"].data["y"], Yv[4])
    mean, var = s2.generate()
    np.testing.assert_allclose(ov2._sources["mean"].data["y"], mean)
    band = ov2._sources["band"].data
    assert len(band["x"]) == 2 * Yv.shape[1]


def test_training_point_figure_survives_a_change_of_data_kind(walk_model):
    """From vectors to images under one view: the old training-point DynamicMap (Curves)
    was asked for an Image of the new data set and HoloViews raised, leaving the Training
    point tab empty; the tab explains where a vector's training point is drawn."""
    from bgplvm.explorer.output_view import OutputView

    rng = np.random.default_rng(1)
    Yv, Yi = rng.random((30, 5)), rng.random((30, 12))
    s = ExplorerState()
    s.set_model(BayesianGPLVM(Yv, 2, 5, seed=0), Dataset(name="vec", Y=Yv, renderer=VectorRenderer()))
    ov = OutputView(state=s)
    tab = ov.training_panel()
    _render(ov._pane, tab)
    assert not ov._train_pane.visible and ov._train_note.visible
    imgs = Dataset(name="imgs", Y=Yi, renderer=ImageRenderer(height=4, width=3, vmin=0, vmax=1))
    s.set_model(BayesianGPLVM(Yi, 2, 5, seed=0), imgs)
    s.selected_index = 7
    assert not s.error and ov._train_pane.visible and not ov._train_note.visible
    fig = ov._train_pane.object[()]  # the DynamicMap's element for the current stream values
    assert isinstance(fig, hv.Image) and fig.opts.get().kwargs["title"] == "Training #7"


def test_page_builds_headless(state):
    from bgplvm.explorer.app import create_app

    page = create_app(state)
    assert page.state is state


# --------------------------------------------------------------------------- export
@pytest.mark.parametrize("what", ["latent", "ard", "output"])
def test_export_png_and_svg_are_valid(state, what):
    state.selected_index = 3
    png = export_bytes(state, what, "png")
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    im = Image.open(io.BytesIO(png))
    assert im.size[0] > 300 and im.size[1] > 200
    assert len(np.unique(np.asarray(im.convert("L")))) > 10  # not blank
    svg = export_bytes(state, what, "svg")
    root = ET.fromstring(svg)
    assert root.tag.endswith("svg")
    assert b"<text" in svg


def test_export_coordinates(state, walk_model, walk):
    rows = latent_csv(state).decode().strip().splitlines()
    assert len(rows) == walk.N + 1
    head = rows[0].split(",")
    assert head[:4] == ["index", "label", "sequence", "time_s"] and "mu_3" in head and "var_0" in head
    first = rows[1].split(",")
    assert float(first[head.index("mu_0")]) == pytest.approx(walk_model.latent_mean[0, 0])
    z = np.load(io.BytesIO(latent_npz(state)))
    np.testing.assert_allclose(z["mu"], walk_model.latent_mean)
    assert set(z.files) >= {"mu", "S", "Z", "alpha", "labels", "sequence", "times"}
    if walk.label_names is not None:  # the names the labels index, as an uploaded .npz gives them
        assert z["label_names"][z["labels"][0]] == str(walk.label_names[walk.labels[0]])
        assert z["label_names"].dtype.kind == "U"  # np.load reads it without pickle
    about = str(z["about"]).splitlines()  # every array said in words
    assert [a.split(":")[0] for a in about] == [k for k in z.files if k != "about"]
    assert any(a.startswith("times: time stamps as the model uses them") for a in about)


def test_export_without_model_is_a_user_error():
    with pytest.raises(UserError):
        export_bytes(ExplorerState(), "latent", "png")


# --------------------------------------------------------------------------- cli
def test_what_cannot_change_under_a_fit_is_off_while_training(state):
    """While a model trains, every control that would change its data or settings is off,
    the upload's own settings included (ticking "rows are frames in time order" mid-fit was
    shown but never applied)."""
    from bgplvm.explorer.model_panel import ModelPanel

    mp = ModelPanel(state=state)
    ws = [mp._ds_load, mp._Q, mp._M, mp._iters, mp._prior, mp._asset_open, mp._kind, mp._H, mp._W,
          mp._order, mp._frames, mp._fps, mp._sub]
    state.training = True
    assert all(w.disabled for w in ws) and mp._train.disabled and not mp._stop.disabled
    state.training = False
    assert not any(w.disabled for w in ws) and not mp._train.disabled
    # the prior is a choice only for data with time stamps
    state.set_dataset(Dataset(name="flat", Y=state.dataset.Y, renderer=state.dataset.renderer))
    assert mp._prior.disabled and state.prior == "static" and "no time stamps" in mp._prior_note.object


def test_a_number_out_of_its_bounds_is_refused_in_words(state):
    """Typing 0 iterations or Q = 31 is refused with a message and the box shows the value
    in use again (it kept the refused number on screen while the old one was used)."""
    from bgplvm.explorer.model_panel import ModelPanel

    mp = ModelPanel(state=state)
    state.max_iters = 300
    mp._iters.value = 0
    assert state.max_iters == 300 and mp._iters.value == 300
    assert "iterations: 0 is not allowed; choose from 1 to" in state.error
    mp._Q.value = 31
    assert mp._Q.value == state.latent_dim and "latent dims Q: 31" in state.error
    state.error = ""
    mp._iters.value = 120  # in bounds: taken, both ways
    assert state.max_iters == 120 and state.error == ""
    state.max_iters = 80
    assert mp._iters.value == 80
    assert mp._fps.description  # the parameter's doc as the box's tooltip


def test_the_page_says_when_its_server_connection_is_lost():
    """Panel's disconnect notification is on (the page used to look alive after the server
    stopped, dropping every action silently; checked in a browser: the message appears)."""
    import panel as pn

    from bgplvm.explorer.app import DISCONNECTED, extensions

    extensions()
    assert pn.config.notifications and pn.config.disconnect_notification == DISCONNECTED
    assert "Reload" in DISCONNECTED


def test_serve_command_line():
    from bgplvm.explorer.cli import WEBSOCKET_MAX_BYTES, build_command

    cmd = build_command(port=5999, address="127.0.0.1", show=False)
    assert cmd[1:4] == ["-m", "panel", "serve"] and cmd[4].endswith("app.py")
    assert "--show" not in cmd and "--liveness" in cmd
    assert "127.0.0.1:5999" in cmd and str(WEBSOCKET_MAX_BYTES) in cmd
    assert WEBSOCKET_MAX_BYTES > MAX_UPLOAD_BYTES * 4 / 3
    assert "--show" in build_command(show=True)


def test_callback_errors_become_messages_not_crashes(state, monkeypatch):
    from bgplvm.explorer.model_panel import ModelPanel

    mp = ModelPanel(state=state, dataset_options={"nope": "no_such_data_set"})
    mp._ds_select.value = "no_such_data_set"
    mp._load_dataset()
    assert "no_such_data_set" in state.error  # the data layer's message, shown in the page
    state.error = ""

    def boom(*a, **k):
        raise RuntimeError("kaput")

    monkeypatch.setattr(state, "start_training", boom)
    mp._start()
    assert "kaput" in state.error and "session continues" in state.error


# --------------------------------------------------------------------------- review fixes
def test_a_model_is_kept_only_for_its_own_data(state, walk):
    """New data of the same shape is other data: the model fitted to the old goes."""
    other = Dataset(name="mine", Y=walk.Y + 1.0, renderer=walk.renderer)
    v = state.model_version
    state.set_dataset(other)
    assert state.model is None and state.model_version > v
    state.set_dataset(walk)  # the same data again would have kept it
    s2 = ExplorerState()
    s2.set_dataset(walk)
    m = BayesianGPLVM(walk.Y, latent_dim=2, num_inducing=5, seed=0)
    s2.set_model(m, walk)
    s2.set_dataset(Dataset(name="synth_walk", Y=walk.Y.copy(), renderer=walk.renderer))
    assert s2.model is m


def test_stopping_a_queued_fit_leaves_a_usable_session(walk, monkeypatch):
    """A fit stopped while it waited for a trainer has no model: the session says so and
    can train again (it stayed 'training' for good, poll raised AttributeError)."""
    from bgplvm.explorer import train_worker as tw

    monkeypatch.setattr(tw, "_slots", __import__("threading").BoundedSemaphore(1))
    tw._slots.acquire()  # every trainer busy
    try:
        s = ExplorerState()
        s.set_dataset(walk)
        s.latent_dim, s.num_inducing, s.max_iters = 2, 6, 3
        s.start_training()
        s.stop_training()
        _wait(s, timeout=30)
    finally:
        tw._slots.release()
    assert not s.training and s.model is None and "before training started" in s.train_status
    s.start_training()
    _wait(s)
    assert s.model is not None


def test_an_inference_of_a_replaced_model_is_dropped(state, walk, monkeypatch):
    """Installing another model while an inference runs forgets that inference: its result
    (for the old model) never lands on the new one."""
    import threading

    from bgplvm.explorer import inference as inf

    gate = threading.Event()
    real = inf.infer

    def slow(*a, **k):
        gate.wait(10)
        return real(*a, **k)

    monkeypatch.setattr(inf, "infer", slow)
    state.mask_part = state.mask_options()[1]
    state.start_inference()
    assert state.infer_running
    other = BayesianGPLVM(walk.Y, latent_dim=3, num_inducing=6, seed=1)
    state.set_model(other, walk)
    gate.set()
    assert not state.infer_running and not state.poll_inference() and state.inference is None


def test_saved_models_larger_than_the_training_settings_open(walk, state):
    big = BayesianGPLVM(walk.Y, latent_dim=31, num_inducing=5, seed=0)
    state.set_model(big, walk)
    assert state.model is big and state.latent_dim == 30 and state.x_dim < 31


def test_string_sequence_ids_draw_and_export(walk_model, walk):
    from bgplvm.explorer.export import export_bytes

    ids = np.where(walk.sequence == walk.sequence[0], "walk", "run")
    ds = Dataset(name="synth_walk", Y=walk.Y, renderer=walk.renderer, sequence=ids, times=walk.times)
    s = ExplorerState()
    s.set_dataset(ds)
    s.set_model(walk_model, ds)
    csv = export_bytes(s, "coords", "csv").decode()
    assert "sequence" in csv.splitlines()[0] and ",walk," in csv
    assert export_bytes(s, "latent", "png")[:4] == b"\x89PNG"


def test_shared_data_records_are_read_only():
    """The data set record every session shares (load_cached) cannot be changed in place by
    one session: writing into it raises instead of altering the other sessions' data."""
    from bgplvm.explorer.loading import load_cached

    ds = load_cached("synth_walk")
    assert load_cached("synth_walk") is ds
    for a in (ds.Y, ds.sequence, ds.times):
        if a is not None:
            with pytest.raises(ValueError, match="read-only"):
                a[0] = a[0]


def test_export_buttons_are_off_without_a_model(walk, walk_model):
    """No model, nothing to export: the buttons are disabled (a click used to be answered
    with no file, logged by Panel as a traceback), and on again once there is a model."""
    from bgplvm.explorer.export import ExportPanel
    from bgplvm.explorer.state import ExplorerState

    s = ExplorerState()
    s.set_dataset(walk)
    panel = ExportPanel(state=s)
    buttons = [b for row in panel._buttons for b in row]
    # the GIF of the data as the player plays it before a model is the one on
    assert buttons and {b.label for b in buttons if not b.disabled} == {"Played sequence GIF"}
    s.set_model(walk_model, walk)
    assert not any(b.disabled for b in buttons)
    s.set_dataset(Dataset(name="flat", Y=walk.Y + 1.0, renderer=walk.renderer))  # no model, no sequences
    assert all(b.disabled for b in buttons)


def test_a_gif_of_the_data_before_a_model(walk):
    """Before a model, the GIF holds the data as recorded: every frame of the sequence,
    no spread discs (poses); the image frame alone, without an sd panel (video)."""
    from bgplvm.explorer.export import sequence_gif

    s = ExplorerState()
    s.set_dataset(walk)
    gif = Image.open(io.BytesIO(sequence_gif(s)))
    assert gif.n_frames == int(np.sum(walk.sequence == 0))
    rgb = np.asarray(gif.convert("RGB"), dtype=int)
    assert not np.any(np.abs(rgb - [230, 25, 75]).sum(-1) < 60)  # no red spread discs
    Y = np.random.default_rng(0).uniform(size=(6, 12))
    vid = Dataset(name="vid", Y=Y, renderer=ImageRenderer(height=3, width=4, vmin=0, vmax=1),
                  sequence=np.zeros(6, int), times=np.arange(6.0))
    s.set_dataset(vid)
    gif = Image.open(io.BytesIO(sequence_gif(s, size=40)))
    assert gif.n_frames == 6 and gif.size == (160, 10 * 3 + 16)  # one 4 x 3 frame at 10x, caption above


def test_the_gif_plays_at_the_players_frame_rate(walk):
    """The GIF's frames last 1 / (the player's frames/s) on average: GIF counts in 1/100 s,
    so 30 frames/s alternate 30 and 40 ms (a fixed 30 ms ran 11 % fast, and data without a
    stated rate played at 20 frames/s in the GIF against 30 in the page)."""
    from bgplvm.explorer import sequences as seqs
    from bgplvm.explorer.export import sequence_gif

    assert seqs.gif_durations(3, 30.0) == [30, 40, 30] and sum(seqs.gif_durations(30, 30.0)) == 1000
    assert seqs.gif_durations(4, 15.0) == [70, 60, 70, 70]
    s = ExplorerState()
    for meta, fps in (({}, 30.0), ({"time_unit": "frame"}, 15.0), ({"fps": 24.0}, 24.0)):
        s.set_dataset(dataclasses.replace(walk, meta={**walk.meta, **meta}))
        assert seqs.frame_rate(s.dataset) == fps
        gif = Image.open(io.BytesIO(sequence_gif(s, size=40)))
        total = 0
        for i in range(gif.n_frames):
            gif.seek(i)
            total += gif.info["duration"]
        assert abs(total / gif.n_frames - 1000.0 / fps) < 10.0 / gif.n_frames + 1e-9


def test_latent_ellipses_are_one_path_broken_by_nan():
    """q(x)'s 2-sd ellipses are one NaN-separated path (one Bokeh line: a path per
    ellipse took HoloViews ~4 s to render for 2,613 points), with every ellipse's vertices."""
    from bgplvm.explorer.plots import ellipse_paths, latent_ellipses

    rng = np.random.default_rng(0)
    mu, S = rng.standard_normal((5, 3)), rng.uniform(0.1, 1.0, (5, 3))
    (path,) = latent_ellipses(mu, S, (0, 2)).split()
    xy = path.array()
    parts = ellipse_paths(mu, S, (0, 2))
    assert xy.shape == (sum(len(p) for p in parts) + len(parts) - 1, 2)
    breaks = np.flatnonzero(np.isnan(xy[:, 0]))
    assert len(breaks) == len(parts) - 1
    np.testing.assert_allclose(xy[:breaks[0]], parts[0])
    np.testing.assert_allclose(xy[breaks[-1] + 1:], parts[-1])


def test_sequence_exports_are_off_without_a_sequence(walk, walk_model):
    """The trajectory and the GIF need a sequence in the player: for data without sequence
    ids or time stamps their buttons are off (a click was answered with no file, logged by
    Panel as a traceback); the figure and coordinate exports stay on."""
    from bgplvm.explorer.export import ExportPanel

    flat = Dataset(name="flat", Y=walk.Y, renderer=walk.renderer)
    m = BayesianGPLVM(walk.Y, latent_dim=2, num_inducing=5, seed=0)
    s = ExplorerState()
    s.set_dataset(flat)
    s.set_model(m, flat)
    panel = ExportPanel(state=s)
    off = {b.label for row in panel._buttons for b in row if b.disabled}
    assert off == {"Trajectory PNG", "Trajectory SVG", "Played sequence GIF"}
    s.set_dataset(walk)
    s.set_model(walk_model, walk)
    assert not any(b.disabled for row in panel._buttons for b in row)


def test_a_refused_upload_gets_a_fresh_drop_area(state):
    """The drop area's list cannot be cleared from the server: a read or refused upload
    gets a new, empty widget (a refused file stayed listed as a green 'Upload complete'),
    and the area grows with its list instead of covering the controls below."""
    from bgplvm.explorer.model_panel import ModelPanel

    mp = ModelPanel(state=state)
    old = mp._upload
    old.value = {"bad.csv": b"a,b\n1,foo\n"}
    assert "non-numeric" in state.error
    assert mp._upload is not old and mp._upload.value == {} and mp._upload_slot.objects == [mp._upload]
    assert mp._upload.height is None and mp._upload.min_height == 90
    state.error = ""
    old = mp._upload
    old.value = {"skeleton.asf": b":version 1.10\n"}  # waits for its .amc files: the list stays
    assert mp._upload is old and "add its .amc" in state.info
    old.value = {"y.npy": b"\x93NUMPY", "skeleton.asf": b":version 1.10\n"}  # an array among them
    assert "add its .amc" in state.info and "Not read: y.npy" in state.info
    mp._upload.value = {"skeleton.asf": b":version 1.10\n", "y.csv": b"1,2\n3,4\n5,6\n"}  # the array last
    assert state.dataset.name.startswith("y") and "Not read: skeleton.asf" in state.info
    old = mp._model_upload
    old.value = {"model.npz": b"not a model"}
    assert "not a bgplvm model file" in state.error and mp._model_upload is not old


def test_the_data_set_choice_follows_an_opened_model(state, walk, walk_model):
    from bgplvm.explorer.model_panel import ModelPanel

    mp = ModelPanel(state=state, dataset_options={"walk": "synth_walk", "oil": "oil"})
    other = Dataset(name="oil", Y=walk.Y, renderer=walk.renderer)
    state.set_dataset(other)
    assert mp._ds_select.value == "oil"
    state.set_dataset(walk)
    state.set_model(walk_model, walk)
    assert mp._ds_select.value == "synth_walk"
    # a model of one's own (trained, or opened from a file) is not the last pre-trained one
    assert mp._asset_select.value == "" and mp.OWN_MODEL in mp._asset_select.options
    mp._open_asset()
    assert "choose a pre-trained model" in state.error
    state.set_dataset(Dataset(name="mine", Y=walk.Y + 1.0, renderer=walk.renderer))  # an upload
    assert mp._ds_select.value == "" and mp.OWN_DATA in mp._ds_select.options
    # no model open: the select says so (it named the last pre-trained model, as if open)
    assert mp._asset_select.value == "" and list(mp._asset_select.options)[0] == mp.NO_MODEL
    mp._asset_select.value = next(iter(mp._assets.values()))  # the user picks one to open


def test_the_training_curve_goes_with_its_history(state, walk_model, walk):
    from bgplvm.explorer.model_panel import ModelPanel

    mp = ModelPanel(state=state)
    state.bound_history = [(1, -10.0, "main"), (2, -5.0, "main")]  # a fit's progress
    assert mp._curve.visible
    state.set_model(walk_model, walk)  # another model opened: its message and curve go
    assert state.bound_history == [] and not mp._curve.visible


def test_cmu_times_are_shown_in_seconds_of_the_recording():
    """CMU 35 keeps the paper code's 0.05 per frame for frames recorded at 30 Hz: axes and
    readouts show seconds (frame / 30); other data sets' stamps pass through."""
    from bgplvm.explorer.sequences import seconds

    cmu = Dataset(name="cmu35", Y=np.zeros((3, 2)), renderer=VectorRenderer(),
                  meta={"time_step": 0.05, "frame_rate_hz": 30.0})
    np.testing.assert_allclose(seconds(cmu, [0.0, 0.05, 3.0]), [0.0, 1 / 30, 2.0])
    plain = Dataset(name="x", Y=np.zeros((3, 2)), renderer=VectorRenderer(), meta={"fps": 25.0})
    np.testing.assert_allclose(seconds(plain, [0.0, 1.5]), [0.0, 1.5])
    assert seconds(None, [2.0])[0] == 2.0


def test_latent_export_coloured_by_time_fits_its_colour_bar(state):
    """Colouring by time adds a second colour bar: the figure widens for it (its labels
    lay outside the image), and its label names the unit."""
    import re

    state.color_by = "time"
    svg = export_bytes(state, "latent", "svg").decode()
    width = float(re.search(r'viewBox="0 0 ([\d.]+)', svg).group(1))
    xs = [float(x) for x in re.findall(r'<text x="([\d.]+)"', svg)]
    assert width == 750 and max(xs) < width and "time (s)" in svg


def test_exports_of_an_inferred_stretch_say_what_they_hold(walk):
    """Trajectory and GIF files of an inferred stretch are named for it (they were named
    for the training sequence), and the GIF draws the truth (grey) under each pose."""
    from bgplvm.explorer.export import ExportPanel

    m = DynamicalGPLVM(walk.Y, walk.times, latent_dim=2, num_inducing=6, sequences=walk.sequence, seed=0)
    s = ExplorerState()
    s.set_model(m, walk)
    s.mask_part, s.infer_frame, s.infer_length = "legs", 2, 5
    s.start_inference()
    while s.poll_inference():
        time.sleep(0.05)
    panel = ExportPanel(state=s)
    assert panel._filename("sequence", "gif") == "bgplvm-synth_walk-sequence-inferred-training_rows_2-6.gif"
    gif = Image.open(io.BytesIO(export_bytes(s, "sequence", "gif")))
    assert gif.n_frames == 5
    rgb = np.asarray(gif.convert("RGB")).astype(int)
    grey = (np.ptp(rgb, axis=-1) < 3) & (abs(rgb[..., 0] - 184) < 5)
    assert grey.sum() > 300  # the truth's bones, (184, 184, 184) (the text's edges give ~40 such)



def test_time_on_another_clock_is_shown_in_seconds_everywhere(walk, walk_model):
    """A data set whose stamps are 0.05 per 30 Hz frame (CMU 35): the player's time axis
    and the CSV's time column show seconds (stamps / 1.5)."""
    from bgplvm.explorer.player import PlayerView

    meta = dict(walk.meta or {}, time_step=0.05, frame_rate_hz=30.0, time_unit="s")
    ds = Dataset(name="synth_walk", Y=walk.Y, renderer=walk.renderer, labels=walk.labels,
                 label_names=walk.label_names, sequence=walk.sequence, times=walk.times, meta=meta)
    s = ExplorerState()
    s.set_dataset(ds)
    s.set_model(walk_model, ds)
    rows = [r.split(",") for r in latent_csv(s).decode().strip().splitlines()]
    col = rows[0].index("time_s")
    np.testing.assert_allclose([float(r[col]) for r in rows[1:]], walk.times / 1.5)
    pv = PlayerView(state=s)
    pb = s.playback()
    np.testing.assert_allclose(pv.traj.data["t"], pb.t / 1.5)


def test_sd_range_covers_every_part_of_the_kernel(walk):
    """The sd colour scale's top is the prior sd of f over the data: bias and white parts
    included, and finite for a linear kernel (whose prior grows without bound far away);
    it spans SD_DECADES decades (a log scale)."""
    from bgplvm.explorer.sequences import SD_DECADES, f_sd, sd_range

    for kern in ("rbf+bias+white", "linear"):
        m = BayesianGPLVM(walk.Y, latent_dim=3, num_inducing=5, kernel=kern, seed=0)
        prior = m.kernel.Kdiag(m.latent_mean).max()
        lo, hi = sd_range(m)
        assert np.isfinite(hi) and hi == pytest.approx(np.sqrt(prior))
        assert lo == pytest.approx(hi * 10.0 ** -SD_DECADES)
    m = BayesianGPLVM(walk.Y, latent_dim=3, num_inducing=5, kernel="rbf+bias+white", seed=0)
    assert sd_range(m)[1] ** 2 > m.kernel_variance  # the bias and white parts count
    # an sd image shows f's sd: the generated image's (predictive of y) loses the noise
    _, var = m.predict(m.latent_mean[:1])
    _, var_f = m.predict(m.latent_mean[:1], include_noise=False)
    np.testing.assert_allclose(f_sd(m, var) ** 2, var_f, rtol=1e-9, atol=1e-12)


def test_vector_gif_frames_fill_their_frame(walk):
    """A GIF of vector data: each frame is drawn over the whole image (the canvas's scale
    was changed after it was made, which drew every frame into its top-left third)."""
    Y = walk.Y[:, 6:12]
    flat = Dataset(name="vec", Y=(Y - Y.mean(0)) / Y.std(0), renderer=VectorRenderer(), sequence=walk.sequence,
                   times=walk.times)
    m = BayesianGPLVM(flat.Y, latent_dim=2, num_inducing=6, seed=0)
    s = ExplorerState()
    s.set_model(m, flat)
    gif = Image.open(io.BytesIO(export_bytes(s, "sequence", "gif")))
    ink = np.asarray(gif.convert("L")) < 200
    H, W = ink.shape
    assert (W, H) == (480, 200) and gif.n_frames == s.playback().T
    assert ink[:, W // 2:].sum() > 200 and ink[H // 2:, :].sum() > 200  # not only the top-left


def test_checkboxes_follow_their_parameter_both_ways(state):
    """The page's checkboxes are one-item CheckBoxGroups (their text is a clickable
    <label>; Bokeh's Checkbox text was not) kept in step with the state's booleans."""
    from bgplvm.explorer.widgets import checkbox

    w = checkbox(state, "show_variance", "variance background")
    assert w.value == ["variance background"] and state.show_variance
    w.value = []
    assert state.show_variance is False
    state.show_variance = True
    assert w.value == ["variance background"]



@pytest.mark.parametrize("W,H", [(20, 28), (16, 16), (28, 20), (64, 16)])
def test_four_image_outputs_fit_the_right_column(W, H):
    """Generated mean and sd, played frame and sd stand in one row: their frames keep the
    image's aspect and, with what the row needs beside them, fit the right column."""
    from bgplvm.explorer.widgets import IMAGE_ROW_EXTRA, RIGHT_W, image_frame

    fw, fh = image_frame(W, H)
    assert fh <= 135 and abs(fw / fh - W / H) < 0.05
    assert 4 * fw + IMAGE_ROW_EXTRA <= RIGHT_W + 2


def test_colormap_of_no_values_is_white_without_a_warning():
    """The latent view exported with its variance background off: an all-NaN grid."""
    import warnings

    from bgplvm.explorer.figures import colormap

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rgb = colormap(np.full((3, 4), np.nan), "Greys")
    assert rgb.shape == (3, 4, 3) and (rgb == 255).all()


def test_a_model_that_explains_its_data_as_noise_is_named():
    """8 x 3 random data with Q = 10 collapses: signal sd ~1e-6 of the noise sd. The page
    says so (the latent view is flat) and draws its constant variance background."""
    from types import SimpleNamespace

    from bgplvm.explorer.latent import noise_only_note

    assert noise_only_note(SimpleNamespace(kernel_variance=2e-12, noise_variance=0.72)).startswith(" Note:")
    assert noise_only_note(SimpleNamespace(kernel_variance=0.36, noise_variance=0.001)) == ""
    img = plots.variance_image(np.full((5, 5), 2e-12), (-1, -1, 1, 1), (0, 1))
    lo, hi = img.opts.get().kwargs["clim"]
    assert lo < 2e-12 < hi
    assert plots.variance_image(np.linspace(1, 2, 25).reshape(5, 5), (-1, -1, 1, 1), (0, 1)).opts.get().kwargs[
        "clim"] == (None, None)


def test_a_dashed_line_in_a_png_figure_has_gaps():
    """PngCanvas draws dash=True as 4 px dashes with 3 px gaps (as the SVG canvas's
    stroke-dasharray), the pattern carried across corners; a solid line has no gaps."""
    import io as _io

    from PIL import Image

    from bgplvm.explorer.figures import PngCanvas, dashes

    assert dashes([(0, 0), (10, 0), (10, 4)], 4, 3) == [[(0.0, 0.0), (4.0, 0.0)], [(7.0, 0.0), (10.0, 0.0)],
                                                        [(10.0, 0.0), (10.0, 1.0)]]
    rows = {}
    for dash in (False, True):
        c = PngCanvas(60, 20)
        c.polyline([(5, 10), (55, 10)], "#000000", width=1.0, dash=dash)
        im = np.asarray(Image.open(_io.BytesIO(c.to_bytes())).convert("L"), dtype=float)
        rows[dash] = im[im.shape[0] // 2, int(0.2 * im.shape[1]):int(0.8 * im.shape[1])] < 128
    assert rows[False].all()
    assert 0.4 < rows[True].mean() < 0.75
