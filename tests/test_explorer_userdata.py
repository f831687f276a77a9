"""A user's own data in the explorer: arrays drawn as vectors or image sequences (row- or
column-major), time stamps and sequence ids, ASF + AMC motion capture, and the messages
bad uploads get."""

from __future__ import annotations

import io

import numpy as np
import pytest

from bgplvm.explorer.state import ExplorerState, UserError
from bgplvm.explorer.userdata import AmcPoseRenderer, array_dataset, image_renderer, mocap_dataset
from tests.mirror import find_mirror

# A three-bone Acclaim skeleton (a leg) and a three-frame motion of it.
TINY_ASF = """:version 1.10
:name tiny
:units
  mass 1.0
  length 0.45
  angle deg
:root
   order TX TY TZ RX RY RZ
   axis XYZ
   position 0 0 0
   orientation 0 0 0
:bonedata
  begin
     id 1
     name hip
     direction 0 -1 0
     length 2.0
     axis 0 0 0 XYZ
  end
  begin
     id 2
     name femur
     direction 0 -1 0
     length 7.0
     axis 0 0 0 XYZ
    dof rx ry rz
  end
  begin
     id 3
     name tibia
     direction 0 -1 0
     length 7.0
     axis 0 0 0 XYZ
    dof rx
  end
:hierarchy
  begin
    root hip
    hip femur
    femur tibia
  end
"""


def tiny_amc(n_frames: int = 12) -> str:
    lines = [":FULLY-SPECIFIED", ":DEGREES"]
    for f in range(1, n_frames + 1):
        a = 10.0 * np.sin(f / 3.0)
        lines += [str(f), f"root {f * 0.5} 17.0 {f * 0.1} 0 {f} 0", f"femur {a} 0 0", f"tibia {abs(a)}"]
    return "\n".join(lines) + "\n"


def _npz(**arrays) -> bytes:
    b = io.BytesIO()
    np.savez(b, **arrays)
    return b.getvalue()


# --------------------------------------------------------------------------- arrays
def test_image_sequence_row_and_column_major():
    frame = np.arange(6.0).reshape(2, 3)  # H=2, W=3
    Y = np.stack([frame.ravel(order="C"), frame.ravel(order="C") + 1, frame.ravel(order="C") + 2])
    ds = array_dataset("v.npy", _npy(Y), kind="image", height=2, width=3, order="C")
    np.testing.assert_array_equal(ds.renderer.image(ds.Y[0]), frame)
    Yf = np.stack([frame.ravel(order="F")] * 3)
    ds = array_dataset("v.npy", _npy(Yf), kind="image", height=2, width=3, order="F")
    np.testing.assert_array_equal(ds.renderer.image(ds.Y[0]), frame)
    # one side given: the other follows; square rows need neither
    assert image_renderer(6, 2, 0, "C", 0, 1).width == 3
    assert image_renderer(16, 0, 0, "C", 0, 1).height == 4


def _npy(A) -> bytes:
    b = io.BytesIO()
    np.save(b, A)
    return b.getvalue()


def test_image_size_mismatch_is_a_clear_error():
    with pytest.raises(UserError, match=r"rows have 6 values but a 4 x 2 frame has 8 pixels"):
        array_dataset("v.npy", _npy(np.zeros((3, 6))), kind="image", height=4, width=2)
    with pytest.raises(UserError, match="give the frame height and width"):
        array_dataset("v.npy", _npy(np.zeros((3, 6))), kind="image")


def test_time_stamps_and_sequences_from_npz():
    Y = np.random.default_rng(0).normal(size=(10, 4))
    seq = np.r_[np.zeros(6, int), np.ones(4, int)]
    t = np.r_[np.arange(6) * 0.1, np.arange(4) * 0.1]
    ds = array_dataset("d.npz", _npz(Y=Y, t=t, sequence=seq))
    np.testing.assert_allclose(ds.times, t)
    np.testing.assert_array_equal(ds.sequence, seq)
    with pytest.raises(UserError, match="unsorted|duplicated"):
        array_dataset("d.npz", _npz(Y=Y, t=t[::-1], sequence=seq))
    with pytest.raises(UserError, match="one time stamp per row"):
        array_dataset("d.npz", _npz(Y=Y, t=t[:5]))
    # sequence ids without times, "rows are frames": time restarts in each sequence
    ds = array_dataset("d.npz", _npz(Y=Y, sequence=seq), rows_are_frames=True, fps=10)
    np.testing.assert_allclose(ds.times, t)


def test_rows_are_frames_gives_one_sequence_at_fps():
    ds = array_dataset("d.csv", b"1,2\n3,4\n5,6\n7,8\n", rows_are_frames=True, fps=4)
    np.testing.assert_allclose(ds.times, [0, 0.25, 0.5, 0.75])
    assert ds.sequence.tolist() == [0, 0, 0, 0]
    assert array_dataset("d.csv", b"1,2\n3,4\n5,6\n").times is None


def test_npz_with_unnamed_arrays_asks_for_names():
    with pytest.raises(UserError, match="name the data 'Y'"):
        array_dataset("d.npz", _npz(a=np.zeros((4, 2)), b=np.zeros((4, 2))))


def test_state_upload_declared_as_image_sequence():
    s = ExplorerState()
    s.upload_kind = "image sequence"
    s.image_height, s.image_width, s.image_order = 2, 3, "F"
    s.rows_are_frames = True
    s.load_upload("v.npy", _npy(np.random.default_rng(0).uniform(size=(8, 6))))
    assert s.dataset.renderer.kind == "image" and s.dataset.renderer.order == "F"
    assert s.dataset.times is not None and "dynamical prior" in s.info


# --------------------------------------------------------------------------- motion capture
def test_asf_amc_upload_becomes_sequences_drawn_by_kinematics():
    files = {"tiny.asf": TINY_ASF.encode(), "walk_a.amc": tiny_amc(12).encode(), "walk_b.amc": tiny_amc(8).encode()}
    ds = mocap_dataset(files, subsample=2)
    assert ds.N == 6 + 4 and ds.sequence.tolist() == [0] * 6 + [1] * 4
    np.testing.assert_allclose(ds.times[:3], [0, 2 / 120, 4 / 120])
    assert ds.meta["trials"] == ["walk_a", "walk_b"] and ds.meta["frame_rate_hz"] == 60
    # root TX, TZ are left out of Y (where the walk is in the room), the rest kept
    assert "root.TX" not in ds.meta["channel_names"] and "femur.rx" in ds.meta["channel_names"]
    r = ds.renderer
    assert isinstance(r, AmcPoseRenderer) and r.kind == "pose"
    P = r.positions(ds.Y[0])
    assert P.shape == (4, 3) and np.all(np.isfinite(P))
    # the leg hangs down from the root (z up), 16 units * metres_per_unit long
    assert P[3, 2] < P[0, 2]
    np.testing.assert_allclose(np.linalg.norm(P[3] - P[1]), (7 + 7) * 0.0254 / 0.45, rtol=0.2)


def test_state_collects_asf_then_amc():
    s = ExplorerState()
    assert s.load_upload_files({"tiny.asf": TINY_ASF.encode()}) is False
    assert "add its .amc" in s.info
    assert s.load_upload_files({"tiny.asf": TINY_ASF.encode(), "m.amc": tiny_amc(9).encode()})
    assert s.dataset.renderer.kind == "pose" and s.dataset.N == 3  # every 4th of 9 frames


@pytest.mark.parametrize("files, match", [
    ({"a.asf": TINY_ASF.encode(), "b.asf": TINY_ASF.encode(), "m.amc": b"1\n"}, "exactly one .asf"),
    ({"a.asf": b":version 1.10\n:name x\n", "m.amc": b"1\n"}, "could not read the skeleton"),
    ({"a.asf": TINY_ASF.encode(), "m.amc": b":DEGREES\n1\nroot 1 2 3\n"}, "could not read the motion"),
    ({"a.asf": TINY_ASF.encode(), "m.amc": tiny_amc(4).encode()}, "need at least 3"),
])
def test_bad_mocap_uploads(files, match):
    with pytest.raises(UserError, match=match):
        mocap_dataset(files, subsample=4)


def test_real_cmu_asf_and_amc_upload():
    mirror = find_mirror("cmu_mocap_35/35_01.amc")
    if mirror is None:
        pytest.skip("offline data mirror not found")
    d = mirror / "cmu_mocap_35"
    ds = mocap_dataset({"35.asf": (d / "35.asf").read_bytes(), "35_01.amc": (d / "35_01.amc").read_bytes()})
    assert ds.Y.shape == (90, 60) and ds.meta["frame_rate_hz"] == 30
    P = ds.renderer.positions_many(ds.Y[:5])
    height = P[..., 2].max(1) - P[..., 2].min(1)
    assert np.all((height > 1.4) & (height < 2.0))  # a person, in metres


def test_upload_limits_and_sequence_ids_without_times():
    """A small .npz that unpacks to hundreds of MB is refused before it is read; sequence
    ids without time stamps are checked (length) and string ids are kept."""
    from bgplvm.explorer.user_input import MAX_UNPACKED_MB

    big = io.BytesIO()
    np.savez_compressed(big, Y=np.zeros((MAX_UNPACKED_MB * 2**17 // 8 + 1, 8)))
    assert len(big.getvalue()) < 2**20
    with pytest.raises(UserError, match="unpacks to"):
        array_dataset("bomb.npz", big.getvalue())
    Y = np.random.default_rng(0).normal(size=(10, 3))
    with pytest.raises(UserError, match="one id per row"):
        array_dataset("d.npz", _npz(Y=Y, sequence=np.zeros(8, int)))
    ds = array_dataset("d.npz", _npz(Y=Y, sequence=np.array(["a"] * 5 + ["b"] * 5)))
    assert ds.sequence.tolist() == ["a"] * 5 + ["b"] * 5 and ds.meta["uploaded"]


def test_an_upload_named_like_a_shipped_set_does_not_get_its_test_split():
    pytest.importorskip("bgplvm.datasets")
    from bgplvm import BayesianGPLVM

    Y = np.random.default_rng(0).normal(size=(30, 12))
    s = ExplorerState()
    s.load_upload("oil.npy", _npy(Y))
    s.set_model(BayesianGPLVM(Y, latent_dim=2, num_inducing=5, seed=0), s.dataset)
    assert all("test" not in name for name in s.infer_sources())


def test_uploaded_time_stamps_set_the_playback_rate():
    """An .npz with its own t plays at the rate of its time stamps (0.1 s steps: 10 frames/s),
    not at the page's frames/s setting, which applies to 'rows are frames' only."""
    Y = np.random.default_rng(0).normal(size=(10, 3))
    seq = np.r_[np.zeros(6, int), np.ones(4, int)]
    t = np.r_[np.arange(6) * 0.1, np.arange(4) * 0.1]
    assert array_dataset("d.npz", _npz(Y=Y, t=t, sequence=seq), fps=30).meta["fps"] == pytest.approx(10.0)
    assert array_dataset("d.npy", _npy(Y), rows_are_frames=True, fps=25).meta["fps"] == 25.0


def test_amc_frames_may_count_from_zero_but_not_skip():
    """Some exporters number AMC frames from 0, a clip may start at its take's frame number;
    a gap is still an error that says why."""
    amc0 = tiny_amc(4).replace("\n1\n", "\n0\n").replace("\n2\n", "\n1\n").replace("\n3\n", "\n2\n").replace("\n4\n", "\n3\n")
    ds = mocap_dataset({"tiny.asf": TINY_ASF.encode(), "zero.amc": amc0.encode()}, subsample=1)
    assert ds.N == 4
    clip = tiny_amc(4)  # a clip cut from a longer take: frames 101..104
    for k in range(4, 0, -1):
        clip = clip.replace(f"\n{k}\n", f"\n{100 + k}\n")
    assert mocap_dataset({"tiny.asf": TINY_ASF.encode(), "clip.amc": clip.encode()}, subsample=1).N == 4
    gap = tiny_amc(4).replace("\n3\n", "\n5\n")
    with pytest.raises(UserError, match="numbered consecutively"):
        mocap_dataset({"tiny.asf": TINY_ASF.encode(), "gap.amc": gap.encode()}, subsample=1)


def test_motions_dropped_one_at_a_time_accumulate():
    """A skeleton, then one motion (the set loads), then another: the drop area keeps its
    files, so the second motion joins the first (a fresh area after each load made it
    'Motion received: now add the .asf skeleton')."""
    import holoviews as hv

    from bgplvm.explorer.model_panel import ModelPanel

    hv.extension("bokeh")
    s = ExplorerState()
    mp = ModelPanel(state=s)
    w = mp._upload
    w.value = {"tiny.asf": TINY_ASF.encode()}
    assert "add its .amc" in s.info
    w.value = {**w.value, "walk_a.amc": tiny_amc(12).encode()}
    assert s.dataset.meta["trials"] == ["walk_a"] and mp._upload is w
    w.value = {**w.value, "walk_b.amc": tiny_amc(16).encode()}
    assert s.dataset.meta["trials"] == ["walk_a", "walk_b"] and not s.error
    w.value = {**w.value, "bad.amc": b":DEGREES\n1\nroot 1 2 3\n"}  # refused: a fresh area
    assert "could not read the motion" in s.error and mp._upload is not w


def test_a_motion_dropped_twice_is_listed_and_read_once_the_latest():
    """The same motion dropped twice -- again under its name, or once from a folder
    ("mocap/walk_a.amc") -- is one sequence: the copy dropped last, listed once."""
    import holoviews as hv

    from bgplvm.explorer.userdata import one_per_name
    from bgplvm.explorer.model_panel import ModelPanel

    assert list(one_per_name({"mocap/a.amc": 1, "b.amc": 2, "a.amc": 3, "c\\a.amc": 4}).items()) == \
        [("b.amc", 2), ("a.amc", 4)]
    ds = mocap_dataset({"tiny.asf": TINY_ASF.encode(), "mocap/walk.amc": tiny_amc(12).encode(),
                        "walk.amc": tiny_amc(16).encode(), "d/tiny.asf": TINY_ASF.encode()}, subsample=4)
    assert ds.meta["trials"] == ["walk"] and ds.N == 4 and "1 motion(s)" in ds.meta["title"]
    hv.extension("bokeh")
    s = ExplorerState()
    mp = ModelPanel(state=s)
    w = mp._upload
    w.value = {"tiny.asf": TINY_ASF.encode()}
    w.value = {**w.value, "walk_a.amc": tiny_amc(12).encode()}
    w.value = {**w.value, "walk_b.amc": tiny_amc(12).encode()}
    assert s.dataset.meta["trials"] == ["walk_a", "walk_b"] and s.dataset.N == 3 + 3
    # walk_a again, longer (the widget's value for that name is replaced)
    w.value = {**w.value, "walk_a.amc": tiny_amc(16).encode()}
    assert s.dataset.meta["trials"] == ["walk_a", "walk_b"] and s.dataset.N == 4 + 3 and not s.error
    assert "Receiving" not in s.info and s.info.count("walk_a") <= 1
    # and from a folder, shorter again: still one walk_a, the latest
    w.value = {**w.value, "mocap/walk_a.amc": tiny_amc(20).encode()}
    assert s.dataset.meta["trials"] == ["walk_a", "walk_b"] and s.dataset.N == 5 + 3 and not s.error
    # what the page lists while a drop settles names each file once
    files = []
    mp._settle = lambda key, fn, *a, **k: files.append(s.info)  # keep the drop waiting
    w.value = {**w.value, "walk_b.amc": tiny_amc(16).encode()}
    assert files == ["Receiving motion capture: tiny.asf, walk_b.amc, walk_a.amc..."]


@pytest.mark.parametrize("kind", ["mocap", "image"])
def test_a_saved_model_of_uploaded_data_reopens_drawn_as_it_was(kind):
    """The model file holds the rows; the skeleton or image shape, the trial names and
    (for a static model) the sequences and times go in its metadata, so a reopened model
    of uploaded motion capture or images is not drawn as plain vectors."""
    from bgplvm import BayesianGPLVM

    s = ExplorerState()
    if kind == "mocap":
        s.load_upload_files({"tiny.asf": TINY_ASF.encode(), "a.amc": tiny_amc(12).encode(),
                             "b.amc": tiny_amc(16).encode()})
    else:
        s.upload_kind, s.image_height, s.image_width, s.rows_are_frames = "image sequence", 3, 4, True
        s.load_upload("faces.npy", _npy(np.random.default_rng(0).uniform(size=(10, 12))))
    ds = s.dataset
    s.set_model(BayesianGPLVM(ds.Y, latent_dim=2, num_inducing=3, seed=0), ds)
    saved = s.save_model_bytes().getvalue()
    t = ExplorerState()
    t.load_model_bytes("model.npz", saved)
    back = t.dataset
    assert back.renderer.kind == ds.renderer.kind and back.N == ds.N
    np.testing.assert_array_equal(back.sequence, ds.sequence)
    np.testing.assert_allclose(back.times, ds.times)
    assert (back.meta or {}).get("trials") == (ds.meta or {}).get("trials")
    if kind == "mocap":
        np.testing.assert_allclose(back.renderer.positions(back.Y[3]), ds.renderer.positions(ds.Y[3]))
    else:
        assert (back.renderer.height, back.renderer.width) == (3, 4)
        np.testing.assert_allclose(back.renderer.image(back.Y[0]), ds.renderer.image(ds.Y[0]))


def test_upload_settings_changed_after_the_drop_apply_to_it():
    """Ticking 'rows are frames' or changing the AMC subsampling after the drop reads the
    open upload again (it did nothing, and nothing said so); a setting that does not fit
    says so and leaves the data set as it was; another data set is never re-read."""
    s = ExplorerState()
    s.load_upload("rows.npy", _npy(np.random.default_rng(0).uniform(size=(12, 6))))
    assert s.dataset.times is None
    s.rows_are_frames = True
    assert s.dataset.times is not None and s.dataset.N == 12
    s.upload_kind, s.image_height = "image sequence", 5  # 6 pixels are not 5 rows of an image
    assert "new settings" in s.error and s.dataset.renderer.kind == "vector"
    s.error = ""
    s.load_upload_files({"tiny.asf": TINY_ASF.encode(), "a.amc": tiny_amc(24).encode()})
    assert s.dataset.N == 6
    s.mocap_subsample = 2
    assert s.dataset.N == 12 and not s.error
    s.set_dataset(_other())
    s.mocap_subsample = 3
    assert s.dataset.name == "other"


def _other():
    from bgplvm.datasets import Dataset
    from bgplvm.datasets.record import VectorRenderer

    return Dataset(name="other", Y=np.eye(4), renderer=VectorRenderer())


def test_the_colour_key_names_sequences_by_their_trials():
    import holoviews as hv

    from bgplvm.explorer import plots
    from bgplvm.explorer.sequences import sequence_names

    ds = mocap_dataset({"tiny.asf": TINY_ASF.encode(), "walk_a.amc": tiny_amc(12).encode(),
                        "walk_b.amc": tiny_amc(16).encode()}, subsample=4)
    names = sequence_names(ds)
    assert names == {0: "walk_a", 1: "walk_b"}
    cols = plots.point_table(np.zeros((ds.N, 2)), (0, 1), sequence=ds.sequence, color_mode="sequence",
                             sequence_names=names)
    assert set(cols["group"]) == {"walk_a", "walk_b"}
    assert len(cols["label"]) == ds.N  # one label per point (the key's names once replaced them)
    hv.extension("bokeh")
    pts = plots.latent_points(np.zeros((ds.N, 2)), (0, 1), sequence=ds.sequence, color_mode="sequence",
                              sequence_names=names)
    assert len(pts) == ds.N and set(pts.dimension_values("group")) == {"walk_a", "walk_b"}
    # grouped in the key's order (Bokeh's legend follows the rows' order), each row keeping its number
    groups = list(dict.fromkeys(pts.dimension_values("group")))
    assert groups == list(plots.group_colors(cols["group"]))
    assert sorted(pts.dimension_values("index")) == list(range(ds.N))
    shuffled = plots.latent_points(np.zeros((6, 2)), (0, 1), labels=np.array([2, 0, 1, 0, 2, 1]),
                                   label_names=("a", "b", "c"), color_mode="label")
    assert list(shuffled.dimension_values("label")) == ["a", "a", "b", "b", "c", "c"]
    assert list(shuffled.dimension_values("index")) == [1, 3, 2, 5, 0, 4]
    assert sequence_names(array_dataset("x.npy", _npy(np.eye(3)))) == {}  # no trials: the ids


def test_the_upload_note_knows_which_prior_is_chosen():
    from bgplvm.explorer.state import ExplorerState

    s = ExplorerState()
    Y = np.random.default_rng(0).normal(size=(10, 4))
    s.prior = "static"
    s.load_upload("d.npz", _npz(Y=Y, t=np.arange(10) * 0.1))
    assert "choose the dynamical prior" in s.info
    s.prior = "dynamical"
    s.load_upload("d.npz", _npz(Y=Y, t=np.arange(10) * 0.1))
    assert "dynamical prior (chosen)" in s.info and "choose the" not in s.info
    # and says where the playback rate comes from: the file's time stamps, or the box
    assert "Plays at 10 frames/s (its own time stamps; the frames/s box is not used)" in s.info
    s.upload_fps, s.rows_are_frames = 25.0, True
    s.load_upload("rows.npy", _npy(Y))
    assert "Plays at 25 frames/s (the frames/s box)" in s.info
