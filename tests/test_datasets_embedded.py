"""The embedded defaults (synth_walk, synth_video): shipped in the package, made by
datasets/make_embedded.py, with real low-dimensional latent structure."""

from __future__ import annotations

import json

import numpy as np
import pytest

import bgplvm.datasets as bd
from bgplvm.datasets import make_embedded
from bgplvm.datasets.download import EMBEDDED_DIR


@pytest.fixture(autouse=True)
def _offline(monkeypatch, tmp_path):
    # Embedded data must load with no mirror, an empty cache and no network.
    monkeypatch.setenv("BGPLVM_DATA_MIRROR", str(tmp_path / "no_mirror"))
    monkeypatch.setenv("BGPLVM_CACHE_DIR", str(tmp_path / "no_cache"))


def test_default_is_embedded():
    assert bd.DEFAULT_DATASET == "synth_walk"
    ds = bd.load(bd.DEFAULT_DATASET)
    assert ds.meta["embedded"] and "generated" in ds.meta["citation"].lower()


@pytest.mark.parametrize("name", ["synth_walk", "synth_video"])
def test_committed_files_match_the_generator(name):
    """The .npz files in the repo are exactly what make_embedded.py produces."""
    fresh = make_embedded.make_walk() if name == "synth_walk" else make_embedded.make_video()
    path = EMBEDDED_DIR / f"{name}.npz"
    assert path.stat().st_size < 300_000
    with np.load(path, allow_pickle=False) as z:
        assert set(z.files) == set(fresh)
        for k, v in fresh.items():
            if v.dtype.kind in "fu":  # floats / uint8 pixels: allow libm last-bit differences
                np.testing.assert_allclose(z[k].astype(float), v.astype(float), rtol=1e-5, atol=1.01 if v.dtype.kind == "u" else 1e-5, err_msg=k)
            else:
                np.testing.assert_array_equal(z[k], v, err_msg=k)


def test_synth_walk_record():
    ds = bd.load("synth_walk")
    assert ds.Y.shape == (320, 54)
    assert ds.label_names == ("walk", "run") and np.bincount(ds.labels).tolist() == [200, 120]
    assert np.bincount(ds.sequence).tolist() == [80] * 4
    np.testing.assert_allclose(ds.times[:3], [0, 1 / 30, 2 / 30], atol=1e-6)
    assert ds.renderer.kind == "pose" and len(ds.renderer.names) == 18
    assert len(ds.meta["truth"]["phase"]) == 320
    json.dumps(ds.meta)


def test_synth_walk_geometry():
    """Bone lengths stay constant (up to the 5 mm noise); z is up; feet touch the ground;
    the pelvis is the x/y origin."""
    ds = bd.load("synth_walk")
    r = ds.renderer
    P = np.stack([r.positions(y) for y in ds.Y])  # (N, 18, 3)
    idx = {n: i for i, n in enumerate(r.names)}
    for (a, b), length in [(("l_hip", "l_knee"), 0.45), (("r_knee", "r_ankle"), 0.43),
                           (("l_shoulder", "l_elbow"), 0.30), (("r_elbow", "r_wrist"), 0.27)]:
        d = np.linalg.norm(P[:, idx[a]] - P[:, idx[b]], axis=1)
        assert abs(np.median(d) - length) < 0.01 and d.std() < 0.01
    assert np.all(P[:, idx["head"], 2] > P[:, idx["pelvis"], 2] + 0.5)
    feet = P[:, [idx["l_ankle"], idx["l_toe"], idx["r_ankle"], idx["r_toe"]], 2].min(1)
    walk = ds.labels == 0
    assert np.all(np.abs(feet[walk]) < 0.05)  # walking: always a foot on the ground
    assert np.abs(P[:, idx["pelvis"], :2]).max() < 0.03


def test_synth_walk_has_low_dimensional_structure():
    """Phase (a circle) and gait dominate: few principal components explain the data,
    and walking and running rows are far apart."""
    ds = bd.load("synth_walk")
    Yc = ds.Y - ds.Y.mean(0)
    s = np.linalg.svd(Yc, compute_uv=False)
    explained = np.cumsum(s**2) / np.sum(s**2)
    assert explained[3] > 0.9
    # nearest neighbours mostly share gait and phase
    D = ((ds.Y[:, None] - ds.Y[None]) ** 2).sum(-1)
    np.fill_diagonal(D, np.inf)
    nn = D.argmin(1)
    assert np.mean(ds.labels[nn] == ds.labels) > 0.95
    phase = np.asarray(ds.meta["truth"]["phase"])
    dphi = np.abs(np.angle(np.exp(1j * (phase[nn] - phase))))
    assert np.median(dphi) < 0.5


def test_synth_video_record_and_orientation():
    ds = bd.load("synth_video")
    assert ds.Y.shape == (300, 576) and ds.labels is None
    assert 0 <= ds.Y.min() and ds.Y.max() <= 1
    assert np.all(ds.sequence == 0) and ds.times[1] == pytest.approx(0.04)
    img = ds.renderer.image(ds.Y[0])
    assert img.shape == (24, 24)
    # Frame 0: the shape sits right of centre, the dot (brightest) at its right end;
    # a quarter path later (frame 37-38) the shape is in the upper half (row 0 = top).
    r, c = np.unravel_index(np.argmax(img), img.shape)
    assert c > 17 and 9 <= r <= 14
    later = ds.renderer.image(ds.Y[37])
    rows = np.arange(24)
    assert (later.sum(1) * rows).sum() / later.sum() < 11


def test_synth_video_has_low_dimensional_structure():
    ds = bd.load("synth_video")
    D = ((ds.Y[:, None] - ds.Y[None]) ** 2).sum(-1)
    np.fill_diagonal(D, np.inf)
    nn = D.argmin(1)
    # the nearest frame is a neighbour in time (the trajectory is a closed 1-D curve
    # on a torus of (position, orientation))
    gap = np.abs(nn - np.arange(ds.N))
    assert np.mean(np.minimum(gap, ds.N - gap) <= 2) > 0.95
