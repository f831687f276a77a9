"""Several views of one data set, for a multi-view model (``bgplvm.MRD``).

``camera_view(ds)``: a motion-capture data set whose renderer computes 3-D joint positions
(CMU 35: forward kinematics of its skeleton) as two views of each frame -- "angles", the
features themselves, and "image", the 2-D positions of the joints that a fixed pinhole
camera sees. Recovering a pose from its 2-D image is the classic ambiguous problem (a joint
in front of or behind another projects alike), on data already here.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .record import Dataset, VectorRenderer


#: the camera's focal length in pixels: image positions in pixels, of unit scale for a model
#: (with a focal length of 1 their variance, ~2e-4, is below what the jitter allows)
FOCAL_PX = 500.0


def project(P: np.ndarray, distance: float = 4.0, azimuth_deg: float = 30.0, height: float = 1.0,
            focal: float = FOCAL_PX) -> np.ndarray:
    """(N, J, 2) image positions (pixels from the centre) of points P (N, J, 3) (metres, z
    up) seen by a pinhole camera of focal length ``focal`` pixels at ``height`` metres,
    ``distance`` metres from the origin in the ground plane at ``azimuth_deg`` from the -y
    axis, looking horizontally at the z axis: u = f (q . right) / (q . forward),
    v = f (q . up) / (q . forward), q = p - camera."""
    a = np.deg2rad(azimuth_deg)
    camera = np.array([distance * np.sin(a), -distance * np.cos(a), height])
    forward = np.array([-np.sin(a), np.cos(a), 0.0])
    right = np.array([np.cos(a), np.sin(a), 0.0])
    up = np.array([0.0, 0.0, 1.0])
    q = P - camera
    depth = q @ forward
    if np.any(depth <= 0.1):
        raise ValueError("a point is behind or at the camera: move it further away (distance=)")
    return focal * np.stack([(q @ right) / depth, (q @ up) / depth], axis=-1)


def camera_view(ds: Dataset, distance: float = 4.0, azimuth_deg: float = 30.0) -> Dataset:
    """``ds`` with ``views`` {"angles": its Y, "image": (N, 2 J) its joints' 2-D positions
    (u0, v0, u1, v1, ...) seen by the camera of ``project``}. ``ds.renderer`` must give 3-D
    positions (``positions_many(Y)`` or ``positions(y)``)."""
    r = ds.renderer
    if getattr(r, "kind", None) != "pose":
        raise ValueError(f"{ds.name!r} is not drawn as a pose: there are no joints to photograph")
    P = r.positions_many(ds.Y) if hasattr(r, "positions_many") else np.stack([r.positions(y) for y in ds.Y])
    uv = project(P, distance, azimuth_deg).reshape(ds.N, -1)
    meta = {**ds.meta, "views": ["angles", "image"],
            "camera": {"distance_m": distance, "azimuth_deg": azimuth_deg, "height_m": 1.0, "focal_px": FOCAL_PX}}
    return dataclasses.replace(ds, name=f"{ds.name}_camera", views={"angles": ds.Y, "image": uv},
                               view_renderers={"angles": r, "image": VectorRenderer()}, meta=meta)
