"""What to hide for observe-and-infer: body parts, clicked joints, image regions.

Pure functions: a data set (its renderer says what a row is) in, output columns out.
For a skeleton, a joint's columns are those that place it relative to its parent: the
rotation channels of the bone ending at it (the root: the root's channels); for marker
data, its three coordinates. For images, pixel columns of a region or a random subset.

The error readout is the paper's RA for joint angles (root mean square error in degrees
over the hidden angles), else the root mean square error in the data's units.
"""

from __future__ import annotations

import re

import numpy as np

#: Body parts offered for skeletons (what each means is decided from the joint names).
PARTS = ("legs", "left leg", "right leg", "arms", "left arm", "right arm", "trunk and head",
         "left side", "right side")
#: The paper's CMU reconstruction protocols ('cmu35gplvm' feature columns, 0-based).
CMU_PROTOCOLS = {"the paper's 'legs' (columns 7-13)": np.arange(7, 14),
                 "the paper's 'body' (columns 20-49)": np.arange(20, 50)}
REGIONS = ("top half", "bottom half", "left half", "right half", "centre box", "random pixels")

_LEG = r"(hip|hipjoint|femur|tibia|foot|toes?|knee|ankle|thigh|shin|leg|heel)"
_ARM = r"(clavicle|humerus|radius|wrist|hand|fingers?|thumb|shoulder|elbow|arm|forearm)"


def _side_limb(name: str):
    """('l' | 'r' | None, 'leg' | 'arm' | None) of a joint name such as lfemur, l_knee,
    LeftHand, r.elbow."""
    n = name.lower()
    m = re.match(r"^(left|right|l|r)[_.\- ]?(.*)$", n)
    side, rest = (None, n)
    if m and (re.fullmatch(_LEG + r".*", m.group(2)) or re.fullmatch(_ARM + r".*", m.group(2))):
        side, rest = m.group(1)[0], m.group(2)
    if re.fullmatch(_LEG + r".*", rest):
        return side, "leg"
    if re.fullmatch(_ARM + r".*", rest):
        return side, "arm"
    return side, None


def part_joints(names, part: str) -> np.ndarray:
    """(J,) bool: the joints of ``part`` (one of PARTS)."""
    out = []
    for nm in names:
        side, limb = _side_limb(nm)
        hit = {"legs": limb == "leg", "left leg": limb == "leg" and side == "l",
               "right leg": limb == "leg" and side == "r", "arms": limb == "arm",
               "left arm": limb == "arm" and side == "l", "right arm": limb == "arm" and side == "r",
               "trunk and head": limb is None, "left side": side == "l",
               "right side": side == "r"}.get(part)
        if hit is None:
            raise ValueError(f"unknown body part {part!r}; choose from {', '.join(PARTS)}")
        out.append(hit)
    return np.array(out, dtype=bool)


def joint_columns(ds) -> list[np.ndarray]:
    """For each of the renderer's J points, the output columns that place it."""
    r = ds.renderer
    kind = getattr(r, "kind", "vector")
    if kind != "pose":
        raise ValueError("joints exist only for skeleton data")
    from bgplvm.datasets.record import StickFigureRenderer

    if isinstance(r, StickFigureRenderer):
        J = ds.D // 3
        if r.layout == "interleaved":
            return [np.arange(3 * j, 3 * j + 3) for j in range(J)]
        return [np.array([j, J + j, 2 * J + j]) for j in range(J)]
    sk = r.skeleton
    names = list(sk.channel_names)
    if ds.D == 59 and hasattr(r, "channels") and not hasattr(r, "kept"):
        # CMU 'cmu35gplvm' features: columns 0..49 are FEATURE_CHANNELS, 50..58 the root
        from bgplvm.datasets.mocap.cmu35 import FEATURE_CHANNELS

        col_of = {int(ch): k for k, ch in enumerate(FEATURE_CHANNELS)}
        root = np.arange(50, 59)
    else:  # rows of kept AMC channels (explorer.userdata.AmcPoseRenderer)
        kept = list(getattr(r, "kept", range(len(names))))
        col_of = {ch: k for k, ch in enumerate(kept)}
        root = np.array([col_of[i] for i, n in enumerate(names) if n.startswith("root.") and i in col_of])
    cols = [root]
    for b, bone in enumerate(sk.bone_names):
        chans = [i for i, n in enumerate(names) if n.split(".")[0] == bone]
        cols.append(np.array(sorted(col_of[i] for i in chans if i in col_of), dtype=int))
    return cols


def columns_of_joints(ds, joints) -> np.ndarray:
    cols = joint_columns(ds)
    sel = [cols[int(j)] for j in joints if 0 <= int(j) < len(cols)]
    return np.unique(np.concatenate(sel)).astype(int) if sel else np.zeros(0, dtype=int)


def part_columns(ds, part: str) -> np.ndarray:
    """Output columns hidden by a body part (or one of the paper's CMU protocols)."""
    if part in CMU_PROTOCOLS:
        if ds.D != 59:
            raise ValueError(f"{part} applies to the CMU 'cmu35gplvm' features only")
        return CMU_PROTOCOLS[part].copy()
    names = ds.renderer.names
    return columns_of_joints(ds, np.flatnonzero(part_joints(names, part)))


def region_columns(renderer, region: str, fraction: float = 0.5, seed: int = 0) -> np.ndarray:
    """Pixel columns of an image region (in the upright image), or a random subset."""
    H, W = renderer.image(np.zeros(renderer.height * renderer.width)).shape
    idx = renderer.image(np.arange(H * W, dtype=float)).astype(int)  # column of each drawn pixel
    m = np.zeros((H, W), dtype=bool)
    if region == "top half":
        m[: H // 2] = True
    elif region == "bottom half":
        m[H // 2:] = True
    elif region == "left half":
        m[:, : W // 2] = True
    elif region == "right half":
        m[:, W // 2:] = True
    elif region == "centre box":
        m[H // 4: H - H // 4, W // 4: W - W // 4] = True
    elif region == "random pixels":
        rng = np.random.default_rng(seed)
        m.flat[rng.choice(H * W, int(round(fraction * H * W)), replace=False)] = True
    else:
        raise ValueError(f"unknown region {region!r}; choose from {', '.join(REGIONS)}")
    return np.sort(idx[m])


def hidden_joints(ds, cols) -> np.ndarray:
    """(J,) bool: joints whose own columns are (partly) hidden."""
    hidden = set(int(c) for c in cols)
    return np.array([bool(hidden.intersection(c.tolist())) for c in joint_columns(ds)])


def hidden_bones(ds, cols) -> np.ndarray:
    """(B,) bool, one per bone of ``ds.renderer.connections``: the bone ends at a joint whose
    columns are (partly) hidden (the figures draw those bones as hidden or inferred)."""
    hidden = hidden_joints(ds, cols)
    conns = np.asarray(ds.renderer.connections, dtype=int).reshape(-1, 2)
    return hidden[conns[:, 1]]


def angle_columns(ds) -> np.ndarray | None:
    """Columns that are joint angles and their unit, for the RA error: (cols, to_degrees)."""
    r = ds.renderer
    if getattr(r, "kind", "") != "pose" or not hasattr(r, "skeleton"):
        return None
    if ds.D == 59 and not hasattr(r, "kept"):
        return np.arange(50), 180.0 / np.pi  # 'cmu35gplvm': 50 joint angles in radians
    names = [r.skeleton.channel_names[i] for i in r.kept]
    cols = np.array([k for k, n in enumerate(names) if re.search(r"\.r[xyz]$", n, re.I)
                     and not n.startswith("root.")])
    scale = 1.0 if r.skeleton.angle_unit == "deg" else 180.0 / np.pi
    return cols, scale


def reconstruction_error(ds, pred: np.ndarray, truth: np.ndarray, cols) -> dict:
    """Error of the hidden entries: RA (degrees, over hidden joint angles) for skeletons
    with angles, else RMSE in the data's units. pred, truth: (n, D) or (D,). Entries the
    data themselves miss (NaN in truth) have nothing to compare with and are left out."""
    pred = np.atleast_2d(pred)
    truth = np.atleast_2d(truth)
    cols = np.asarray(cols, dtype=int)
    ang = angle_columns(ds)
    if ang is not None:
        acols, scale = ang
        use = np.intersect1d(cols, acols)
        if use.size:
            e = (pred[:, use] - truth[:, use]) * scale
            e = e[np.isfinite(e)]
            return {"value": float(np.sqrt(np.mean(e ** 2))) if e.size else float("nan"), "unit": "deg",
                    "n": int(e.size),
                    "name": "RA error (root mean square error of the hidden joint angles, in degrees)"}
    e = pred[:, cols] - truth[:, cols]
    e = e[np.isfinite(e)]
    return {"value": float(np.sqrt(np.mean(e ** 2))) if e.size else float("nan"), "unit": "", "n": int(e.size),
            "name": "RMS error of the hidden values"}
