"""Generate the embedded default data sets (``datasets/embedded/*.npz``).

    python -m bgplvm.datasets.make_embedded        # rewrites both files

Both are made by this project, deterministically (fixed seeds), so the main job works
on a fresh machine with no network. A test regenerates them in memory and compares
with the committed files.

synth_walk
    A procedural gait generator drives an 18-joint skeleton (metres; x forward,
    y left, z up). A gait is a blend g in [0, 1] between walking (g = 0) and running
    (g = 1) at speed v (m/s): v and g set the stride frequency, hip/knee/arm amplitudes,
    trunk lean and bounce; the gait phase phi advances at the stride frequency. The
    two legs (and arms) are half a cycle apart. Four sequences of 80 frames at 30 Hz:
    slow walk, run, brisk walk, and a walk that accelerates into a run. A row of Y is
    the 18 joint positions [x0, y0, z0, x1, ...] with x, y relative to the pelvis and z
    the height above the ground, plus N(0, 5 mm^2) noise. The true latent structure is
    (cos phi, sin phi, g / v): a cylinder-like 2-3 dimensional manifold.

synth_video
    300 frames (25 Hz) of a 24x24 grey image: a dim bar with a bright dot at one end whose
    centre travels round a circle (period 150 frames) while the bar spins (period 100
    frames). Smooth Gaussian shapes, small pixel noise, stored as uint8. The latent
    structure is two angles (position on the path, orientation): a torus.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

OUT_DIR = Path(__file__).resolve().parent / "embedded"

# ---------------------------------------------------------------------------- skeleton
JOINT_NAMES = (
    "pelvis",
    "l_hip", "l_knee", "l_ankle", "l_toe",
    "r_hip", "r_knee", "r_ankle", "r_toe",
    "spine", "neck", "head",
    "l_shoulder", "l_elbow", "l_wrist",
    "r_shoulder", "r_elbow", "r_wrist",
)
CONNECTIONS = (
    (0, 1), (1, 2), (2, 3), (3, 4),
    (0, 5), (5, 6), (6, 7), (7, 8),
    (0, 9), (9, 10), (10, 11),
    (10, 12), (12, 13), (13, 14),
    (10, 15), (15, 16), (16, 17),
)
THIGH, SHIN, FOOT = 0.45, 0.43, 0.15
UPPER_ARM, FOREARM = 0.30, 0.27
HIP_HALF_WIDTH, SHOULDER_HALF_WIDTH = 0.10, 0.18
FPS_WALK = 30.0


def _bump(phi, centre, kappa):
    """Smooth periodic bump in [0, 1] (a von Mises shape) peaking at phi = centre."""
    return np.exp(kappa * (np.cos(phi - centre) - 1.0))


def _lerp(a, b, g):
    return a + (b - a) * g


def gait_params(v, g):
    """Stride frequency (Hz) and joint amplitudes for speed v (m/s) and run blend g."""
    return dict(
        freq=_lerp(0.85 + 0.12 * (v - 1.0), 1.30 + 0.06 * (v - 3.0), g),
        hip_amp=_lerp(0.28 + 0.10 * (v - 1.0), 0.55 + 0.06 * (v - 3.0), g),
        hip_off=_lerp(0.04, 0.15, g),
        knee_base=_lerp(0.08, 0.30, g),
        knee_swing=_lerp(0.60, 1.45, g),
        knee_load=_lerp(0.15, 0.40, g),
        push=_lerp(0.25, 0.45, g),
        arm_amp=_lerp(0.22 + 0.08 * (v - 1.0), 0.55, g),
        elbow=_lerp(0.25, 1.45, g),
        lean=_lerp(0.04, 0.20, g),
        bounce=_lerp(0.0, 0.05, g),
        yaw=_lerp(0.07, 0.12, g),
    )


def _leg(hip, phi, p):
    """Knee, ankle, toe positions (..., 3) of one leg at gait phase phi."""
    th = p["hip_off"] + p["hip_amp"] * np.sin(phi)  # thigh angle from vertical, + forward
    knee_flex = (
        p["knee_base"]
        + p["knee_swing"] * _bump(phi, -0.4, 3.0)  # swing: thigh moving forward
        + p["knee_load"] * _bump(phi, np.pi / 2 + 0.6, 4.0)  # loading after heel strike
    )
    shin = th - knee_flex  # shin angle from vertical
    plantar = p["push"] * _bump(phi, np.pi + 1.2, 4.0)  # toe-off push
    zero = np.zeros_like(th)
    knee = hip + THIGH * np.stack([np.sin(th), zero, -np.cos(th)], -1)
    ankle = knee + SHIN * np.stack([np.sin(shin), zero, -np.cos(shin)], -1)
    toe = ankle + FOOT * np.stack([np.cos(shin - plantar), zero, np.sin(shin - plantar)], -1)
    return knee, ankle, toe


def _arm(shoulder, phi, p):
    swing = -p["arm_amp"] * np.sin(phi)  # opposite to the leg on the same side
    elbow_flex = p["elbow"] + 0.15 * (1 + np.sin(phi)) / 2
    zero = np.zeros_like(phi)
    elbow = shoulder + UPPER_ARM * np.stack([np.sin(swing), zero, -np.cos(swing)], -1)
    fore = swing + elbow_flex
    wrist = elbow + FOREARM * np.stack([np.sin(fore), zero, -np.cos(fore)], -1)
    return elbow, wrist


def _rotz(vec, psi):
    vec = np.broadcast_to(vec, np.shape(psi) + (3,))
    c, s = np.cos(psi), np.sin(psi)
    x, y, z = vec[..., 0], vec[..., 1], vec[..., 2]
    return np.stack([c * x - s * y, s * x + c * y, z], -1)


def pose(phi, v, g):
    """Joint positions (T, 18, 3) for phase phi (T,), speed v (T,) and blend g (T,);
    pelvis at x = y = 0, feet touching z = 0 (in flight when running)."""
    p = gait_params(v[:, None], g[:, None])
    p = {k: val[:, 0] for k, val in p.items()}
    T = phi.shape[0]
    pelvis = np.zeros((T, 3))
    psi = p["yaw"] * np.sin(phi)  # pelvis yaw; shoulders counter-rotate
    unit_y = np.array([0.0, 1.0, 0.0])
    l_hip = _rotz(HIP_HALF_WIDTH * unit_y[None], -0.7 * psi)
    r_hip = _rotz(-HIP_HALF_WIDTH * unit_y[None], -0.7 * psi)
    l_knee, l_ankle, l_toe = _leg(l_hip, phi, p)
    r_knee, r_ankle, r_toe = _leg(r_hip, phi + np.pi, p)
    lean = np.stack([np.sin(p["lean"]), np.zeros(T), np.cos(p["lean"])], -1)
    spine = 0.25 * lean
    neck = 0.55 * lean
    head = neck + 0.20 * lean
    l_sh = neck + _rotz(SHOULDER_HALF_WIDTH * unit_y[None] - [0, 0, 0.03], psi)
    r_sh = neck + _rotz(-SHOULDER_HALF_WIDTH * unit_y[None] - [0, 0, 0.03], psi)
    l_elb, l_wr = _arm(l_sh, phi + np.pi, p)
    r_elb, r_wr = _arm(r_sh, phi, p)
    P = np.stack([pelvis, l_hip, l_knee, l_ankle, l_toe, r_hip, r_knee, r_ankle, r_toe,
                  spine, neck, head, l_sh, l_elb, l_wr, r_sh, r_elb, r_wr], axis=1)
    feet_z = P[:, [3, 4, 7, 8], 2]
    height = -feet_z.min(1) + 0.02 + p["bounce"] * (0.5 + 0.5 * np.cos(2 * phi))
    P[..., 2] += height[:, None]
    return P


def make_walk(seed: int = 35, n_frames: int = 80, noise: float = 0.005) -> dict:
    rng = np.random.default_rng(seed)
    t = np.arange(n_frames) / FPS_WALK
    ramp = np.clip((t - t[-1] * 0.3) / (t[-1] * 0.4), 0.0, 1.0)
    smooth = ramp * ramp * (3 - 2 * ramp)  # smoothstep
    sequences = [  # (speed, run blend) per frame
        (np.full(n_frames, 1.1), np.zeros(n_frames)),
        (np.full(n_frames, 3.0), np.ones(n_frames)),
        (np.full(n_frames, 1.6), np.zeros(n_frames)),
        (1.3 + (3.2 - 1.3) * smooth, smooth),
    ]
    Ys, phases, speeds, labels, seq, times = [], [], [], [], [], []
    for k, (v, g) in enumerate(sequences):
        freq = gait_params(v, g)["freq"]
        phi = rng.uniform(0, 2 * np.pi) + 2 * np.pi * np.cumsum(freq) / FPS_WALK
        P = pose(phi, v, g)
        Ys.append(P.reshape(n_frames, -1) + noise * rng.standard_normal((n_frames, P.shape[1] * 3)))
        phases.append(np.mod(phi, 2 * np.pi))
        speeds.append(v)
        labels.append((g > 0.5).astype(np.int64))
        seq.append(np.full(n_frames, k))
        times.append(t)
    return dict(
        Y=np.concatenate(Ys).astype(np.float32),
        labels=np.concatenate(labels).astype(np.int8),
        label_names=np.array(["walk", "run"]),
        sequence=np.concatenate(seq).astype(np.int8),
        times=np.concatenate(times).astype(np.float32),
        phase=np.concatenate(phases).astype(np.float32),
        speed=np.concatenate(speeds).astype(np.float32),
        joint_names=np.array(JOINT_NAMES),
        connections=np.array(CONNECTIONS, dtype=np.int8),
    )


# ---------------------------------------------------------------------------- video
def render_frame(cx, cy, theta, size=24):
    """(size, size) image in [0, 1]: row 0 at the top, column 0 at the left; (cx, cy)
    is the centre in (column, row) pixel units; theta the bar's angle (counter-
    clockwise as seen on screen, 0 = pointing right, the dot at the +end)."""
    rows, cols = np.mgrid[0:size, 0:size].astype(np.float64)
    dx, dy = cols - cx, -(rows - cy)  # screen y points up
    u = np.cos(theta) * dx + np.sin(theta) * dy
    w = -np.sin(theta) * dx + np.cos(theta) * dy
    bar = 0.55 * np.exp(-0.5 * ((u / 3.2) ** 2 + (w / 1.0) ** 2))
    dot = np.exp(-0.5 * (((u - 4.2) ** 2 + w**2) / 1.4**2))
    return np.clip(0.05 + 0.95 * np.maximum(bar, dot), 0.0, 1.0)


def make_video(seed: int = 7, n_frames: int = 300, size: int = 24, noise: float = 0.02) -> dict:
    rng = np.random.default_rng(seed)
    f = np.arange(n_frames)
    path_angle = 2 * np.pi * f / 150.0
    orientation = 2 * np.pi * f / 100.0
    centre = size / 2 - 0.5
    cx = centre + 5.5 * np.cos(path_angle)
    cy = centre - 5.5 * np.sin(path_angle)  # counter-clockwise on screen
    frames = np.stack([render_frame(cx[i], cy[i], orientation[i], size) for i in range(n_frames)])
    frames = np.clip(frames + noise * rng.standard_normal(frames.shape), 0.0, 1.0)
    return dict(
        frames=np.round(frames * 255).astype(np.uint8),
        sequence=np.zeros(n_frames, dtype=np.int8),
        times=(f / 25.0).astype(np.float32),
        path_angle=np.mod(path_angle, 2 * np.pi).astype(np.float32),
        orientation=np.mod(orientation, 2 * np.pi).astype(np.float32),
    )


def main() -> None:
    OUT_DIR.mkdir(exist_ok=True)
    for name, arrays in (("synth_walk", make_walk()), ("synth_video", make_video())):
        path = OUT_DIR / f"{name}.npz"
        np.savez_compressed(path, **arrays)
        print(f"wrote {path} ({path.stat().st_size / 1e3:.0f} kB)")


if __name__ == "__main__":
    main()
