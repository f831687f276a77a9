"""What observe-and-infer hides: body parts and clicked joints mapped to output columns
(CMU features, AMC channels, markers), image regions, and the error readout."""

from __future__ import annotations

import numpy as np
import pytest

from bgplvm.datasets import Dataset, load
from bgplvm.datasets.record import ImageRenderer

from bgplvm.explorer import masks as M
from tests.mirror import find_mirror


@pytest.fixture(scope="module")
def walk():
    return load("synth_walk")


@pytest.fixture(scope="module")
def cmu():
    if find_mirror("cmu_mocap_35/cmu35WalkJog.mat") is None:
        pytest.skip("offline data mirror not found")
    return load("cmu35")


def test_side_and_limb_from_joint_names():
    names = ["root", "lfemur", "rtibia", "lowerback", "lhumerus", "l_knee", "r_elbow", "LeftHand", "neck"]
    assert M.part_joints(names, "left leg").tolist() == [0, 1, 0, 0, 0, 1, 0, 0, 0]
    assert M.part_joints(names, "right side").tolist() == [0, 0, 1, 0, 0, 0, 1, 0, 0]
    assert M.part_joints(names, "arms").tolist() == [0, 0, 0, 0, 1, 0, 1, 1, 0]
    # "lowerback" starts with an l but is not the left of anything
    assert M.part_joints(names, "trunk and head").tolist() == [1, 0, 0, 1, 0, 0, 0, 0, 1]
    with pytest.raises(ValueError, match="unknown body part"):
        M.part_joints(names, "tail")


def test_marker_joints_are_their_three_coordinates(walk):
    cols = M.joint_columns(walk)
    assert len(cols) == walk.D // 3 and cols[2].tolist() == [6, 7, 8]
    legs = M.part_columns(walk, "legs")
    assert legs.size == 8 * 3  # hips, knees, ankles, toes
    assert M.hidden_joints(walk, legs).sum() == 8


def test_cmu_parts_are_feature_columns(cmu):
    cols = M.joint_columns(cmu)
    names = cmu.renderer.names
    assert cols[names.index("lfemur")].tolist() == [0, 1, 2]
    assert cols[names.index("rtoes")].tolist() == [13]
    assert cols[0].tolist() == list(range(50, 59))  # the root: velocities, height, sin/cos
    assert M.part_columns(cmu, "legs").tolist() == list(range(14))
    assert M.part_columns(cmu, "right leg").tolist() == list(range(7, 14))
    # the paper's protocols
    assert M.part_columns(cmu, "the paper's 'legs' (columns 7-13)").tolist() == list(range(7, 14))
    assert M.part_columns(cmu, "the paper's 'body' (columns 20-49)").tolist() == list(range(20, 50))
    # every feature column belongs to exactly one joint
    allc = np.concatenate(cols)
    assert sorted(allc.tolist()) == list(range(59))
    assert M.columns_of_joints(cmu, [names.index("head"), 0]).tolist() == [29, 30, 31] + list(range(50, 59))


def test_ra_error_is_degrees_over_hidden_angles(cmu):
    truth = cmu.Y[:3]
    pred = truth.copy()
    cols = np.arange(7, 14)
    pred[:, cols] += np.deg2rad(2.0)
    pred[:, 55] += 5.0  # a root feature, not hidden: no effect
    err = M.reconstruction_error(cmu, pred, truth, cols)
    assert err["unit"] == "deg" and err["value"] == pytest.approx(2.0) and err["n"] == 21


def test_image_regions_follow_the_drawn_image():
    r = ImageRenderer(height=4, width=2, order="F")  # column-major rows
    y = np.arange(8.0)
    img = r.image(y)
    top = M.region_columns(r, "top half")
    np.testing.assert_array_equal(np.sort(top), np.sort(img[:2].ravel().astype(int)))
    left = M.region_columns(r, "left half")
    np.testing.assert_array_equal(np.sort(left), np.sort(img[:, :1].ravel().astype(int)))
    rnd = M.region_columns(r, "random pixels", fraction=0.5, seed=3)
    assert rnd.size == 4 and np.array_equal(rnd, M.region_columns(r, "random pixels", 0.5, 3))
    ds = Dataset(name="im", Y=np.zeros((3, 8)), renderer=r)
    err = M.reconstruction_error(ds, np.ones((1, 8)), np.zeros((1, 8)), top)
    assert err["unit"] == "" and err["value"] == pytest.approx(1.0)
