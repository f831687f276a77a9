"""How a 3-D pose is seen on the screen: the orthographic projection at a view angle
(azimuth about z, elevation) and the square limits that hold a set of poses. Pure numpy."""

from __future__ import annotations

import numpy as np


def rotation(azimuth: float, elevation: float) -> np.ndarray:
    """(2, 3) orthographic projection: turn by azimuth about z, tilt by elevation."""
    a, e = np.deg2rad(azimuth), np.deg2rad(elevation)
    right = np.array([np.cos(a), np.sin(a), 0.0])
    # screen up: z tilted towards the viewer by the elevation
    fwd = np.array([-np.sin(a), np.cos(a), 0.0])
    up = np.array([0.0, 0.0, np.cos(e)]) - np.sin(e) * fwd
    return np.stack([right, up])


def project(P: np.ndarray, azimuth: float, elevation: float) -> np.ndarray:
    """(J, 3) z-up points -> (J, 2) screen coordinates."""
    return P @ rotation(azimuth, elevation).T


def pose_limits(Ps: np.ndarray, azimuth: float, elevation: float, pad: float = 0.1):
    """Square screen limits (x0, y0, x1, y1) holding all (n, J, 3) poses, centred per pose."""
    R = rotation(azimuth, elevation)
    C = Ps - Ps.mean(axis=1, keepdims=True) * np.array([1, 1, 0])
    uv = C.reshape(-1, 3) @ R.T
    lo, hi = uv.min(axis=0), uv.max(axis=0)
    c = (lo + hi) / 2
    half = (hi - lo).max() / 2 * (1 + pad) + 1e-9
    return c[0] - half, c[1] - half, c[0] + half, c[1] + half
