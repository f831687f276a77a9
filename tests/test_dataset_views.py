"""Several views of one data set (``bgplvm.datasets.views``): a pose and its camera image."""

from __future__ import annotations

import numpy as np
import pytest

from bgplvm.datasets import load
from bgplvm.datasets.views import camera_view, project


def test_the_camera_projects_as_a_pinhole():
    # camera at (4 sin 30, -4 cos 30, 1) looking horizontally at the z axis
    a = np.deg2rad(30.0)
    on_axis = np.array([[[0.0, 0.0, 1.0]]])  # the point it looks at: the image centre
    np.testing.assert_allclose(project(on_axis), [[[0.0, 0.0]]], atol=1e-9)
    up = project(np.array([[[0.0, 0.0, 1.5]]]))[0, 0]
    assert up[1] == pytest.approx(500 * 0.5 / 4.0) and up[0] == pytest.approx(0.0, abs=1e-9)
    right = np.array([np.cos(a), np.sin(a), 0.0])
    away = np.array([-np.sin(a), np.cos(a), 0.0])  # the camera's forward direction
    near = 0.3 * right + [0.0, 0.0, 1.0]
    uv = project(np.array([[near, near + away]]))[0]
    assert uv[0, 0] == pytest.approx(500 * 0.3 / 4.0) and uv[1, 0] == pytest.approx(500 * 0.3 / 5.0)  # further: smaller
    with pytest.raises(ValueError, match="behind or at the camera"):
        project(np.array([[[4 * np.sin(a), -4 * np.cos(a), 1.0]]]))


def test_a_walk_becomes_two_views_of_its_frames():
    ds = load("synth_walk", progress=False)
    two = camera_view(ds)
    assert two.name == "synth_walk_camera" and set(two.views) == {"angles", "image"}
    J = ds.renderer.positions(ds.Y[0]).shape[0]
    assert two.views["image"].shape == (ds.N, 2 * J) and np.array_equal(two.views["angles"], ds.Y)
    P = np.stack([ds.renderer.positions(y) for y in ds.Y[:3]])
    np.testing.assert_allclose(two.views["image"][:3], project(P).reshape(3, -1))
    assert two.meta["camera"]["distance_m"] == 4.0 and np.array_equal(two.sequence, ds.sequence)
    with pytest.raises(ValueError, match="not drawn as a pose"):
        camera_view(load("synth_video", progress=False))
