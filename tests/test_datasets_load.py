"""Every real data set loads through the offline mirror (../shared/datasets) with the
expected shapes, label counts and a few known values; renderers give the right
geometry (images upright, stick figures with z up).

The whole real fetch -> verify -> parse path runs: files are copied from the mirror
into a fresh cache (one per module) and checked by sha256 on the way.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import bgplvm.datasets as bd
from mirror import find_mirror
from bgplvm.datasets import registry


SHARED = find_mirror("oil/DataTrn.txt")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(SHARED is None, reason="../shared/datasets (the offline mirror) not found"),
]


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("bgplvm_cache")


@pytest.fixture(scope="module")
def load(cache):
    loaded = {}

    def _load(name, split="train"):
        if (name, split) not in loaded:
            loaded[name, split] = bd.load(name, split=split, mirror=SHARED, cache_dir=cache, progress=False)
        return loaded[name, split]

    return _load


# name, split, shape, label counts (None: no labels)
EXPECTED = [
    ("oil", "train", (1000, 12), [343, 316, 341]),
    ("oil", "test", (1000, 12), [324, 363, 313]),
    ("oil", "validation", (1000, 12), [334, 325, 341]),
    ("frey_faces", "train", (1965, 560), None),
    ("digits", "train", (550, 256), [55] * 10),
    ("usps", "train", (7291, 256), [1194, 1005, 731, 658, 652, 556, 664, 645, 542, 644]),
    ("usps", "test", (2007, 256), [359, 264, 198, 166, 200, 160, 170, 147, 166, 177]),
    ("cmu35", "train", (2613, 59), [2260, 353]),
    ("cmu35", "test", (124, 59), [124]),
    ("osu_run1", "train", (55, 123), None),
    ("osu_quickwalk", "train", (77, 123), None),
    ("osu_dogwalk", "train", (489, 123), None),
    ("osu_sprint", "train", (67, 123), None),
    ("osu_swagger1", "train", (146, 120), None),
    ("osu_handspring1", "train", (86, 120), None),
    ("ankur_pose", "train", (1927, 63), None),
    ("ankur_pose", "test", (418, 63), None),
]


@pytest.mark.parametrize("name,split,shape,counts", EXPECTED, ids=[f"{e[0]}-{e[1]}" for e in EXPECTED])
def test_shapes_labels_and_record(load, name, split, shape, counts):
    ds = load(name, split)
    spec = registry.REGISTRY[name]
    assert isinstance(ds, bd.Dataset) and ds.name == name
    assert ds.Y.shape == shape and ds.Y.dtype == np.float64 and np.all(np.isfinite(ds.Y))
    assert ds.N == spec.n_rows[split]  # list_datasets() reports what load() gives
    if counts is None:
        assert ds.labels is None
    else:
        assert np.bincount(ds.labels).tolist() == counts
        assert len(ds.label_names) >= len(counts)
    assert ds.renderer.kind == spec.kind
    for key in ("name", "licence", "citation", "urls"):
        assert ds.meta[key], key
    assert ds.meta["licence"] == spec.licence and ds.meta["split"] == split
    json.dumps(ds.meta)  # meta is JSON-able (it goes into model files)


def test_splits_are_listed(load):
    assert registry.REGISTRY["oil"].splits == ("train", "test", "validation")
    assert registry.REGISTRY["usps"].splits == ("train", "test")
    assert registry.REGISTRY["cmu35"].splits == ("train", "test")


# --------------------------------------------------------------------------- known values
def test_oil_values(load):
    tr, te = load("oil"), load("oil", "test")
    np.testing.assert_array_equal(tr.Y[0, :3], [0.3315, 0.2156, 0.6802])
    np.testing.assert_array_equal(te.Y[0, :3], [0.5803, 0.498, 0.8809])
    assert tr.label_names == ("homogeneous", "annular", "stratified")
    assert tr.labels[:3].tolist() == [0, 1, 0] and te.labels[:3].tolist() == [0, 2, 2]
    assert not np.array_equal(load("oil", "validation").Y, tr.Y)


def test_frey_values(load):
    ds = load("frey_faces")
    np.testing.assert_array_equal(ds.Y[0, :5], [81, 136, 167, 185, 187])
    assert ds.Y.min() >= 0 and ds.Y.max() <= 255
    assert np.all(ds.sequence == 0) and np.array_equal(ds.times, np.arange(1965))


def test_digits_and_usps_values(load):
    d = load("digits")
    assert d.labels[:55].tolist() == [0] * 55 and d.labels[-1] == 9
    assert 0 <= d.Y.min() and d.Y.max() <= 1 and d.Y.mean() > 0.5  # ink 0 on background 1
    u = load("usps")
    assert u.labels[:5].tolist() == [6, 5, 4, 7, 3]
    assert 0 <= u.Y.min() and u.Y.max() <= 1 and u.Y.mean() < 0.5  # ink 1 on background 0
    assert load("usps", "test").labels[:1].tolist() != []


def test_cmu35_first_row_follows_the_recipe(load):
    """Row 0 = frame 2 of trial 35_01 with the 'cmu35gplvm' recipe of PROVENANCE.md,
    recomputed here from the raw .mat independently of the parser."""
    import scipy.io

    raw = scipy.io.loadmat(SHARED / "cmu_mocap_35" / "cmu35WalkJog.mat")["Y"]
    G = np.r_[6:38, 40:47, 48:50, 52:59, 60:62]
    d = np.pi / 180
    y0, y1 = raw[0], raw[1]
    expect = np.r_[
        np.arcsin(np.sin(y1[G] * d)), y0[[0, 2]] - y1[[0, 2]], y1[1],
        np.sin(y1[[3, 5]] * d), np.sin(y0[4] * d) - np.sin(y1[4] * d),
        np.cos(y1[[3, 5]] * d), np.cos(y0[4] * d) - np.cos(y1[4] * d),
    ]
    ds = load("cmu35")
    np.testing.assert_allclose(ds.Y[0], expect, atol=1e-12)
    assert len(np.unique(ds.sequence)) == 31 and len(np.unique(load("cmu35", "test").sequence)) == 1
    np.testing.assert_allclose(ds.times[:3], [0.0, 0.05, 0.10])
    assert ds.label_names[ds.labels[0]].startswith("walk")


def test_cmu35_taylor_scale_bias_is_fetched_and_cached(load, cache):
    """The scale file is a verified file of "cmu35": fetched into the cache with the others."""
    scale, bias = bd.cmu35_taylor_scale_bias(mirror=SHARED, cache_dir=cache, progress=False)
    assert (cache / "cmu_mocap_35" / "cmu35TaylorScaleBias.mat").is_file()
    assert scale.shape == bias.shape == (59,) and np.all(scale > 0) and np.all(np.isfinite(bias))
    assert "cmu35TaylorScaleBias.mat" in load("cmu35").meta["sha256"]


# --------------------------------------------------------------------------- image orientation
def _mean_image(ds, rows=None):
    rows = np.arange(ds.N) if rows is None else rows
    return np.mean([ds.renderer.image(ds.Y[i]) for i in rows], axis=0)


def test_frey_frames_are_upright(load):
    """Checked by eye once (a rendered strip of frames); pinned here by statistics of
    the mean face: bright forehead at the top, dark eye band in the upper third, and
    the lit side of the face on the right."""
    ds = load("frey_faces")
    img = ds.renderer.image(ds.Y[0])
    assert img.shape == (28, 20)
    M = _mean_image(ds, np.arange(0, ds.N, 5))
    rows = M.mean(1)
    assert 4 <= int(np.argmin(rows[:14])) <= 9  # the eyes
    assert rows[:3].mean() > rows[-3:].mean() + 20  # forehead brighter than chin/neck
    assert M[:, 15:19].mean() > M[:, 0:4].mean() + 10  # lighting from the right


@pytest.mark.parametrize("name,ink", [("digits", 0.0), ("usps", 1.0)])
def test_digit_images_are_upright(load, name, ink):
    """Mean '7': its bar is at the top; mean '3': its strokes lie right of centre."""
    ds = load(name)
    cols = np.arange(16)

    def ink_of(k):
        M = _mean_image(ds, np.where(ds.labels == k)[0][:50])
        return M if ink == 1.0 else 1.0 - M

    seven, three = ink_of(7), ink_of(3)
    assert seven.shape == (16, 16)
    assert seven[:5].mean() > 1.3 * seven[-5:].mean()
    assert (three.sum(0) * cols).sum() / three.sum() > 7.5 + 0.3


# --------------------------------------------------------------------------- pose geometry
def test_osu_stick_figure_is_upright(load):
    ds = load("osu_run1")
    r = ds.renderer
    names = list(r.names)
    P = np.stack([r.positions(y) for y in ds.Y])  # (N, J, 3), z up
    assert P.shape == (55, 41, 3)
    head = P[:, [names.index("LFHD"), names.index("RFHD")], 2].mean(1)
    feet = P[:, [names.index("LHEE"), names.index("RHEE")], 2].mean(1)
    assert np.all(head > feet)
    assert len(r.connections) == 22 and all(0 <= a < 41 and 0 <= b < 41 for a, b in r.connections)


def test_cmu35_skeleton_is_upright(load):
    ds = load("cmu35")
    r = ds.renderer
    names = list(r.names)
    for y in ds.Y[::200]:
        P = r.positions(y)
        assert P.shape == (31, 3) and np.all(np.isfinite(P))
        assert P[names.index("head"), 2] > P[names.index("lfoot"), 2] + 1.0  # metres


def test_ankur_pose_has_two_views_and_an_upright_symmetric_figure(load):
    """The pose view's 21 points joined by ``ANKUR_CONNECTIONS`` are a person: the head above
    the feet in every frame, and each bone of one side as long as its mirror on the other."""
    ds = load("ankur_pose")
    assert set(ds.views) == {"pose", "silhouette"} and ds.views["silhouette"].shape == (1927, 100)
    assert np.array_equal(ds.views["pose"], ds.Y) and ds.view_renderers["silhouette"].kind == "vector"
    r = ds.renderer
    P = np.stack([r.positions(y) for y in ds.Y[::10]])  # (n, 21, 3), z up
    assert np.all(P[:, 4, 2] > P[:, [15, 18], 2].max(axis=1) + 40)  # head over the ankles
    length = lambda a, b: np.linalg.norm(P[:, a] - P[:, b], axis=1)  # noqa: E731
    for (a, b), (c, d) in [((5, 6), (9, 10)), ((6, 7), (10, 11)), ((7, 8), (11, 12)), ((0, 13), (0, 16)),
                           ((13, 14), (16, 17)), ((14, 15), (17, 18)), ((15, 19), (18, 20))]:
        np.testing.assert_allclose(length(a, b), length(c, d), rtol=0.05)
    assert len(r.connections) == 19
