"""CMU subject 35: ASF/AMC parsing, forward kinematics, 'cmu35gplvm' features and inverse.

Reads the real files from the offline data mirror (``$BGPLVM_DATA_MIRROR`` or
``../shared/datasets`` beside the repository).
"""

from __future__ import annotations

import time

import numpy as np
import pytest
import scipy.io
from scipy.spatial.transform import Rotation

from bgplvm.datasets.mocap import cmu35
from bgplvm.datasets.mocap.asf import parse_asf, read_amc, read_asf
from bgplvm.datasets.mocap.errors import MocapParseError
from mirror import find_mirror


_root = find_mirror("cmu_mocap_35/cmu35WalkJog.mat")
CMU = _root / "cmu_mocap_35" if _root else None
pytestmark = pytest.mark.skipif(
    CMU is None, reason="CMU 35 files not found: set BGPLVM_DATA_MIRROR or put shared/datasets beside the repo")


@pytest.fixture(scope="module")
def paths():
    return {"cmu35WalkJog.mat": CMU / "cmu35WalkJog.mat", "35.asf": CMU / "35.asf"}


@pytest.fixture(scope="module")
def skel():
    return read_asf(CMU / "35.asf")


@pytest.fixture(scope="module")
def amc(skel):
    return read_amc(CMU / "35_01.amc", skel)


@pytest.fixture(scope="module")
def mat():
    return scipy.io.loadmat(CMU / "cmu35WalkJog.mat")


@pytest.fixture(scope="module")
def train(paths):
    return cmu35.build(paths, "train")


# ------------------------------------------------------------------ parsing
def test_asf_skeleton(skel):
    assert skel.n_bones == 30 and skel.n_points == 31
    assert skel.length_unit == 0.45 and skel.angle_unit == "deg"
    assert skel.bone_names[:3] == ("lhipjoint", "lfemur", "ltibia")
    assert skel.parents[skel.bone_index("lfemur")] == skel.bone_index("lhipjoint")
    assert skel.parents[skel.bone_index("lowerback")] == -1
    assert skel.axes[skel.bone_index("lhumerus")] == (180.0, -30.0, -90.0)
    assert skel.dofs[skel.bone_index("lfoot")] == ("rx", "rz")
    assert skel.limits[skel.bone_index("ltibia")] == ((-10.0, 170.0),)
    # the channel layout is the one channels.tsv describes
    rows = [ln.split("\t") for ln in (CMU / "channels.tsv").read_text().splitlines()[1:]]
    assert skel.channel_names == tuple(f"{b}.{d}" for _, b, d in rows) == cmu35.CHANNEL_NAMES


def test_amc_rows_equal_mat_rows(amc, mat):
    assert amc.shape == (358, 62)
    # cmu35WalkJog.mat's first 90 rows are trial 35_01, every 4th frame from the first
    np.testing.assert_array_equal(mat["Y"][:90], amc[0::4])


# ------------------------------------------------------------------ features
def _matlab_recipe(Y, lbls):
    """GPmat lvmLoadData 'cmu35gplvm', transcribed loop by loop (1-based -> 0-based)."""
    general = np.array(list(range(7, 39)) + list(range(41, 48)) + list(range(49, 51))
                       + list(range(53, 60)) + list(range(61, 63))) - 1
    joint = np.arcsin(np.sin(np.pi * Y[:, general] / 180))
    out = []
    start = 0
    for i in range(lbls.shape[1]):
        end = np.flatnonzero(lbls[:, i]).max()
        for t in range(start + 1, end + 1):
            out.append(np.concatenate([
                joint[t],
                Y[t - 1, [0, 2]] - Y[t, [0, 2]], Y[t, [1]],
                np.sin(np.pi * Y[t, [3, 5]] / 180),
                np.sin(np.pi * Y[t - 1, [4]] / 180) - np.sin(np.pi * Y[t, [4]] / 180),
                np.cos(np.pi * Y[t, [3, 5]] / 180),
                np.cos(np.pi * Y[t - 1, [4]] / 180) - np.cos(np.pi * Y[t, [4]] / 180),
            ]))
        start = end + 1
    return np.array(out)


def test_train_and_test_sets(train, paths, mat):
    assert train.Y.shape == (2613, 59)
    assert train.name == "cmu35gplvm" and train.renderer.kind == "pose"
    np.testing.assert_allclose(train.Y, _matlab_recipe(mat["Y"], mat["lbls"]), rtol=0, atol=1e-12)
    assert len(np.unique(train.sequence)) == 31 and len(train.meta["trials"]) == 31
    # 9 jog trials (35_17, 19-26): 362 frames -> 353 rows
    assert train.label_names[train.labels[0]] == "walk" and int((train.labels == 1).sum()) == 353
    s0 = train.times[train.sequence == 0]
    np.testing.assert_allclose(s0[:3], [0.0, 0.05, 0.10])
    assert len(s0) == 89 and np.all(train.times[train.sequence == 30] >= 0)

    test = cmu35.build(paths, "test")
    assert test.Y.shape == (124, 59) and test.meta["trials"] == ["35_29"]
    lt = mat["lblstest"][:, 1] == 1
    np.testing.assert_allclose(test.Y, _matlab_recipe(mat["Ytest"][lt], np.ones((lt.sum(), 1))), atol=1e-12)


def test_features_round_trip(paths, train):
    for s, (trial, _, Yc) in enumerate(cmu35.load_walk_jog(paths["cmu35WalkJog.mat"])):
        F = cmu35.features(Yc)
        np.testing.assert_array_equal(F, train.Y[train.sequence == s])
        Yr = cmu35.features_to_channels(F, start=train.meta["start_channels"][s], include_start=True)
        # features -> angles -> features
        np.testing.assert_allclose(cmu35.features(Yr), F, rtol=0, atol=1e-10)
        # and the channels themselves, wherever the recipe keeps them
        np.testing.assert_allclose(Yr[:, :6], Yc[:, :6], atol=1e-9)  # root angles are within +-180 here
        np.testing.assert_allclose(Yr[:, cmu35.LEFT_OUT_CHANNELS], Yc[:, cmu35.LEFT_OUT_CHANNELS], atol=1e-9)
        G = cmu35.FEATURE_CHANNELS
        inside = np.abs(Yc[:, G]) <= 90
        np.testing.assert_allclose(Yr[:, G][inside], Yc[:, G][inside], atol=1e-9)


def test_inverse_defaults_and_pose_channels(train):
    F = train.Y[train.sequence == 3]
    Yr = cmu35.features_to_channels(F)  # start at the origin, heading 0
    assert Yr.shape == (len(F), 62) and np.all(np.isfinite(Yr))
    P = cmu35.pose_channels(F[:5])
    np.testing.assert_allclose(P[:, [0, 2, 4]], 0.0)
    np.testing.assert_allclose(P[:, 1], F[:5, 52])
    np.testing.assert_allclose(P[:, 3], np.degrees(np.arctan2(F[:5, 53], F[:5, 56])))


# ------------------------------------------------------------------ kinematics
def _independent_fk(asf_skel, frame_values: dict[str, list[float]]) -> dict[str, np.ndarray]:
    """Per-bone recursion with scipy rotations, ASF (y-up) frame, by bone name."""
    s = asf_skel
    root_vals = dict(zip(s.root_order, frame_values["root"]))
    R_root = Rotation.from_euler("xyz", [root_vals["RX"], root_vals["RY"], root_vals["RZ"]], degrees=True)
    pos = {"root": np.array([root_vals["TX"], root_vals["TY"], root_vals["TZ"]])}
    rot = {"root": R_root}

    def visit(parent):
        for b, name in enumerate(s.bone_names):
            pname = "root" if s.parents[b] < 0 else s.bone_names[s.parents[b]]
            if pname != parent:
                continue
            C = Rotation.from_euler("xyz", s.axes[b], degrees=True)
            dofs = s.dofs[b]
            M = (Rotation.from_euler("".join(d[1] for d in dofs), frame_values[name], degrees=True)
                 if dofs else Rotation.identity())
            rot[name] = rot[parent] * C * M * C.inv()
            d = np.array(s.directions[b])
            pos[name] = pos[parent] + rot[name].apply(d / np.linalg.norm(d) * s.lengths[b])
            visit(name)

    visit("root")
    return pos


def _amc_frame(n: int) -> dict[str, list[float]]:
    """Frame n (1-based) of 35_01.amc, read without the module's reader."""
    lines = (CMU / "35_01.amc").read_text().splitlines()
    i = lines.index(str(n))
    out = {}
    for ln in lines[i + 1:]:
        tok = ln.split()
        if len(tok) == 1 and tok[0].isdigit():
            break
        out[tok[0]] = [float(v) for v in tok[1:]]
    return out


@pytest.mark.parametrize("frame", [1, 150, 358])
def test_forward_kinematics_matches_independent(skel, amc, frame):
    P = skel.positions(amc[frame - 1], zup=False)
    ref = _independent_fk(skel, _amc_frame(frame))
    for j, name in enumerate(skel.point_names):
        np.testing.assert_allclose(P[j], ref[name], atol=1e-9, err_msg=name)
    # z-up display frame: (x, y, z) -> (x, -z, y)
    Pz = skel.positions(amc[frame - 1])
    np.testing.assert_allclose(Pz, np.c_[P[:, 0], -P[:, 2], P[:, 1]])
    # batched == one by one
    np.testing.assert_allclose(skel.positions(amc[[0, frame - 1]])[1], Pz)


def test_bone_lengths(skel, amc, train):
    for Y, scale, fk in ((amc[::50], 1.0, skel.positions),
                         (train.Y[::200], train.renderer.scale, train.renderer.positions_many)):
        P = fk(Y)
        for b, (i, j) in enumerate(skel.connections):
            np.testing.assert_allclose(np.linalg.norm(P[:, j] - P[:, i], axis=1), skel.lengths[b] * scale, rtol=1e-12)
    assert train.renderer.scale == pytest.approx(0.0254 / 0.45)


def test_pose_is_upright(train, skel, amc):
    head, lt, rt = (skel.point_names.index(n) for n in ("head", "ltoes", "rtoes"))
    for Y in (train.Y[::97], cmu35.features(amc[::4])):
        P = train.renderer.positions_many(Y)
        feet = np.maximum(P[:, lt, 2], P[:, rt, 2])
        assert np.all(P[:, head, 2] - feet > 1.2), "head should be > 1.2 m above the feet (z up)"
    # the raw frames too, in ASF units (1 unit = 5.6 cm)
    P = skel.positions(amc[::30])
    assert np.all(P[:, head, 2] > P[:, lt, 2] + 20)


def test_renderer_contract_and_speed(train):
    r = train.renderer
    assert r.kind == "pose" and len(r.names) == 31
    assert len(r.connections) == 30  # one segment per bone
    P = r.positions(train.Y[0])
    assert P.shape == (31, 3) and np.all(np.isfinite(P))
    assert all(0 <= i < 31 and 0 <= j < 31 for i, j in r.connections)
    assert r.positions(np.asarray(train.Y[0]).tolist()).shape == (31, 3)
    rng = np.random.default_rng(0)
    for y in (rng.normal(size=59) * 1e3, np.full(59, 1e12), np.zeros(59), -np.ones(59) * 5):
        assert np.all(np.isfinite(r.positions(y)))
    rows = train.Y[:200]
    best = np.inf
    for _ in range(3):
        t0 = time.perf_counter()
        for y in rows:
            r.positions(y)
        best = min(best, (time.perf_counter() - t0) / len(rows))
    assert best < 1e-3, f"{best * 1e3:.2f} ms per row"


# ------------------------------------------------------------------ errors
def test_corrupt_files_raise_naming_the_file(tmp_path, skel):
    text = (CMU / "35.asf").read_text()
    bad = tmp_path / "35_trunc.asf"
    bad.write_text(text[: len(text) // 2])
    with pytest.raises(MocapParseError, match="35_trunc.asf"):
        read_asf(bad)
    with pytest.raises(ValueError, match="x.asf: line 29"):
        parse_asf(text.replace("length 7.41015", "length seven"), source="x.asf")

    amc_text = (CMU / "35_01.amc").read_text()
    bad = tmp_path / "35_trunc.amc"
    bad.write_text(amc_text[: len(amc_text) - 200])
    with pytest.raises(MocapParseError, match="35_trunc.amc"):
        read_amc(bad, skel)

    bad = tmp_path / "cmu35WalkJog.mat"
    bad.write_bytes((CMU / "cmu35WalkJog.mat").read_bytes()[:5000])
    with pytest.raises(MocapParseError, match="cmu35WalkJog.mat"):
        cmu35.build({"cmu35WalkJog.mat": bad, "35.asf": CMU / "35.asf"})


def test_asf_separators_and_bad_numbers(skel):
    """ASF 1.10 separators (commas; several limit pairs on one line) parse to the same
    skeleton; non-finite numbers and a zero length unit are parse errors naming the line."""
    text = (CMU / "35.asf").read_text()
    same = text.replace("direction 0.34202 -0.939693 0", "direction 0.34202, -0.939693, 0").replace(
        "limits (-160.0 20.0)\n           (-70.0 70.0)\n           (-60.0 70.0)",
        "limits (-160.0, 20.0) (-70.0 70.0) (-60.0 70.0)")
    assert same != text
    s2 = parse_asf(same, source="commas.asf")
    np.testing.assert_array_equal(s2.directions, skel.directions)
    assert s2.limits == skel.limits
    for bad, line in (("length 7.41015", "length nan"), ("axis 0 0 20  XYZ", "axis inf 0 20  XYZ")):
        with pytest.raises(MocapParseError, match="line 29|line 30|non-finite"):
            parse_asf(text.replace(bad, line, 1), source="x.asf")
    with pytest.raises(MocapParseError, match="line 7: length unit must be positive"):
        parse_asf(text.replace("length 0.45", "length 0"), source="x.asf")
    # open limits, as in the Acclaim format's own example; NaN is still an error
    s3 = parse_asf(text.replace("limits (-160.0 20.0)", "limits (-inf inf)", 1), source="open.asf")
    assert (-np.inf, np.inf) in [lim for ls in s3.limits for lim in ls]
    np.testing.assert_array_equal(s3.directions, skel.directions)
    with pytest.raises(MocapParseError, match="non-finite"):
        parse_asf(text.replace("limits (-160.0 20.0)", "limits (nan 20.0)", 1), source="x.asf")


def test_renderer_survives_json(train):
    import dataclasses
    import json

    r = train.renderer
    d = json.loads(json.dumps(dataclasses.asdict(r)))  # plain numbers, strings and lists
    assert d.pop("kind") == "pose"
    r2 = cmu35.CMU35PoseRenderer(**d)
    assert r2 == r
    np.testing.assert_array_equal(r2.positions(train.Y[5]), r.positions(train.Y[5]))


# ------------------------------------------------------------------ Taylor scale / bias
def test_taylor_scale_bias(tmp_path):
    scale, bias = cmu35.read_taylor_scale_bias(CMU / "cmu35TaylorScaleBias.mat")
    assert scale.shape == bias.shape == (59,) and np.all(scale > 0)
    # known values (MATLAB file of 2007): root TX scale and TY bias; the first joint angle
    np.testing.assert_allclose([scale[0], bias[1], scale[cmu35.TAYLOR_ANGLE_OFFSET]],
                               [0.670553822, 17.8870285, 0.0619384064], rtol=1e-8)

    bad = tmp_path / "cmu35TaylorScaleBias.mat"
    bad.write_bytes((CMU / "cmu35TaylorScaleBias.mat").read_bytes()[:300])
    with pytest.raises(MocapParseError, match="cmu35TaylorScaleBias.mat"):
        cmu35.read_taylor_scale_bias(bad)
    scipy.io.savemat(bad, {"scale": scale[None, :58], "bias": bias[None]})
    with pytest.raises(MocapParseError, match=r"scale has shape \(1, 58\)"):
        cmu35.read_taylor_scale_bias(bad)
    scipy.io.savemat(bad, {"scale": -scale[None], "bias": bias[None]})
    with pytest.raises(MocapParseError, match="<= 0"):
        cmu35.read_taylor_scale_bias(bad)
