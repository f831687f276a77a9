"""CMU subject 35 walks and jogs, as the paper uses them ('cmu35gplvm' features).

Source: GPmat's ``cmu35WalkJog.mat`` (``Y`` 2644 x 62 training frames, ``Ytest`` 169 x 62,
raw AMC channels in ASF bone order, every 4th frame of the 120 Hz trials) and the CMU
skeleton ``35.asf``.  The feature recipe is GPmat ``datasets/lvmLoadData.m``,
``case 'cmu35gplvm'`` (Lawrence 2007; loaded by the vargplvm demo
``demCmu35gplvmVargplvm3.m``).  Within each sequence, for frames t = 1 .. T-1 (0-based),
with ``d2r = pi/180``, the 59 features are::

    0:50   asin(sin(Y[t, G] d2r))                50 joint angles, radians, folded to [-pi/2, pi/2]
    50:52  Y[t-1, [TX, TZ]] - Y[t, [TX, TZ]]     root ground-plane velocity (ASF units / frame)
    52     Y[t, TY]                              root height
    53:55  sin(Y[t, [RX, RZ]] d2r)
    55     sin(Y[t-1, RY] d2r) - sin(Y[t, RY] d2r)
    56:58  cos(Y[t, [RX, RZ]] d2r)
    58     cos(Y[t-1, RY] d2r) - cos(Y[t, RY] d2r)

``G`` (``FEATURE_CHANNELS``) is every bone channel except the clavicles (ry, rz) and the
fingers (rx).  A sequence of T frames gives T - 1 rows, so the 31 training trials (2644
frames) give 2613 x 59 and test trial 35_29 (125 frames) gives 124 x 59.

The inverse (:func:`features_to_channels`) is exact except for what the recipe throws
away: (1) a joint angle outside [-90, 90] degrees comes back folded (asin(sin(a)) maps
100 deg to 80 deg: in these data the knees of the jogs, the elbows and the humerus z
rotations sometimes go past 90 deg); (2) the root x/z position and the RY heading are
known only up to the values at the frame before the first row (``start``); (3) the
left-out clavicle and finger channels are filled with the constants they hold in every
frame of ``cmu35WalkJog.mat`` (clavicles 0, fingers 7.12502 deg), so they come back
exactly for these data; (4) root angles come back in (-180, 180].
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .asf import Skeleton, read_asf
from .errors import MocapParseError

__all__ = [
    "FEATURE_CHANNELS",
    "LEFT_OUT_CHANNELS",
    "LEFT_OUT_VALUES",
    "TRAIN_TRIALS",
    "TEST_TRIALS",
    "MOTION_NAMES",
    "FEATURE_NAMES",
    "features",
    "features_to_channels",
    "pose_channels",
    "CMU35PoseRenderer",
    "load_walk_jog",
    "read_taylor_scale_bias",
    "TAYLOR_ANGLE_OFFSET",
    "build",
]

N_CHANNELS = 62
N_FEATURES = 59

# Python 0-based columns of the 62 channels (channels.tsv / ASF bone order).
# MATLAB generalInd = [7:38 41:47 49:50 53:59 61:62].
FEATURE_CHANNELS = np.r_[6:38, 40:47, 48:50, 52:59, 60:62]
# lclavicle ry rz, lfingers rx, rclavicle ry rz, rfingers rx
LEFT_OUT_CHANNELS = np.array([38, 39, 47, 50, 51, 59])
# The values these channels take in every frame of cmu35WalkJog.mat (to ~1e-13).
LEFT_OUT_VALUES = np.array([0.0, 0.0, 7.12502, 0.0, 0.0, 7.12502])
TX, TY, TZ, RX, RY, RZ = range(6)

# Trial table of cmu35WalkJog.mat, from GPmat datasets/lvmLoadData.m, case 'cmu35WalkJog'
# (training examples 01-17, 19-26, 28, 30-34; test examples 18 and 29), with the row
# ranges of the .mat file.  motion: 0 walk, 1 run/jog -- inferred from trial length
# (jogs are the 35-44 frame trials at 30 Hz), not from CMU's own trial index.
# (trial, first row, number of rows, motion)
TRAIN_TRIALS: tuple[tuple[str, int, int, int], ...] = (
    ("35_01", 0, 90, 0), ("35_02", 90, 102, 0), ("35_03", 192, 107, 0),
    ("35_04", 299, 109, 0), ("35_05", 408, 107, 0), ("35_06", 515, 110, 0),
    ("35_07", 625, 90, 0), ("35_08", 715, 114, 0), ("35_09", 829, 96, 0),
    ("35_10", 925, 108, 0), ("35_11", 1033, 97, 0), ("35_12", 1130, 100, 0),
    ("35_13", 1230, 114, 0), ("35_14", 1344, 103, 0), ("35_15", 1447, 102, 0),
    ("35_16", 1549, 111, 0), ("35_17", 1660, 42, 1), ("35_19", 1702, 40, 1),
    ("35_20", 1742, 41, 1), ("35_21", 1783, 41, 1), ("35_22", 1824, 42, 1),
    ("35_23", 1866, 41, 1), ("35_24", 1907, 38, 1), ("35_25", 1945, 42, 1),
    ("35_26", 1987, 35, 1), ("35_28", 2022, 105, 0), ("35_30", 2127, 103, 0),
    ("35_31", 2230, 106, 0), ("35_32", 2336, 98, 0), ("35_33", 2434, 106, 0),
    ("35_34", 2540, 104, 0),
)
TEST_TRIALS: tuple[tuple[str, int, int, int], ...] = (
    ("35_18", 0, 44, 1), ("35_29", 44, 125, 0),
)
MOTION_NAMES = ("walk", "run/jog")
N_TRAIN_FRAMES = 2644
N_TEST_FRAMES = 169
# The vargplvm demo's time stamps: 0, 0.05, 0.10, ... within each sequence.
TIME_STEP = 0.05


def _channel_names() -> tuple[str, ...]:
    bones = [("lfemur", "xyz"), ("ltibia", "x"), ("lfoot", "xz"), ("ltoes", "x"),
             ("rfemur", "xyz"), ("rtibia", "x"), ("rfoot", "xz"), ("rtoes", "x"),
             ("lowerback", "xyz"), ("upperback", "xyz"), ("thorax", "xyz"),
             ("lowerneck", "xyz"), ("upperneck", "xyz"), ("head", "xyz"),
             ("lclavicle", "yz"), ("lhumerus", "xyz"), ("lradius", "x"), ("lwrist", "y"),
             ("lhand", "xz"), ("lfingers", "x"), ("lthumb", "xz"),
             ("rclavicle", "yz"), ("rhumerus", "xyz"), ("rradius", "x"), ("rwrist", "y"),
             ("rhand", "xz"), ("rfingers", "x"), ("rthumb", "xz")]
    names = [f"root.{k}" for k in ("TX", "TY", "TZ", "RX", "RY", "RZ")]
    names += [f"{b}.r{a}" for b, axes in bones for a in axes]
    return tuple(names)


CHANNEL_NAMES = _channel_names()
FEATURE_NAMES: tuple[str, ...] = (
    tuple(f"{CHANNEL_NAMES[c]} (rad)" for c in FEATURE_CHANNELS)
    + ("root.vx (-dTX)", "root.vz (-dTZ)", "root.TY",
       "sin root.RX", "sin root.RZ", "-d sin root.RY",
       "cos root.RX", "cos root.RZ", "-d cos root.RY")
)


# ------------------------------------------------------------------ features
def features(Y62: np.ndarray) -> np.ndarray:
    """'cmu35gplvm' features of ONE sequence.

    Y62 : (T, 62) raw channels (degrees, ASF length units), consecutive frames.
    Returns (T - 1, 59): the row for frame t uses frames t - 1 and t (module docstring).
    """
    Y = np.asarray(Y62, dtype=np.float64)
    if Y.ndim != 2 or Y.shape[1] != N_CHANNELS or Y.shape[0] < 2:
        raise ValueError(f"expected (T >= 2, {N_CHANNELS}) channels of one sequence, got {Y.shape}")
    d2r = np.pi / 180.0
    prev, cur = Y[:-1], Y[1:]
    return np.hstack([
        np.arcsin(np.sin(cur[:, FEATURE_CHANNELS] * d2r)),
        prev[:, [TX, TZ]] - cur[:, [TX, TZ]],
        cur[:, [TY]],
        np.sin(cur[:, [RX, RZ]] * d2r),
        np.sin(prev[:, [RY]] * d2r) - np.sin(cur[:, [RY]] * d2r),
        np.cos(cur[:, [RX, RZ]] * d2r),
        np.cos(prev[:, [RY]] * d2r) - np.cos(cur[:, [RY]] * d2r),
    ])


def _check_features(F) -> np.ndarray:
    F = np.asarray(F, dtype=np.float64)
    if F.ndim != 2 or F.shape[1] != N_FEATURES:
        raise ValueError(f"expected (T, {N_FEATURES}) features, got {F.shape}")
    return F


def _atan2_deg(s, c):
    """Angle in degrees from (possibly model-generated) sin and cos values.

    Both are clipped into [-1, 1] first; atan2 only needs their ratio and signs, so this
    is exact for true sin/cos pairs and well defined for any finite input (atan2(0, 0) = 0).
    """
    return np.degrees(np.arctan2(np.clip(s, -1.0, 1.0), np.clip(c, -1.0, 1.0)))


def features_to_channels(F: np.ndarray, start: np.ndarray | None = None,
                         left_out: np.ndarray | None = None,
                         include_start: bool = False) -> np.ndarray:
    """Inverse of :func:`features`: (T, 59) features of one sequence -> (T, 62) channels.

    F        : (T, 59) rows for consecutive frames 1 .. T of a sequence.
    start    : (62,) channels of frame 0 (the frame before the first row), or None for
               zeros.  Only its root TX, TZ (start of the integrated position) and RY
               (start of the integrated heading) are used.
    left_out : (6,) values for the clavicle/finger channels ``LEFT_OUT_CHANNELS``;
               default ``LEFT_OUT_VALUES`` (their constant values in these data).
    include_start : prepend the start frame (as reconstructed) -> (T + 1, 62).

    Joint angles: degrees(F[:, :50]) (folded to [-90, 90], see module docstring).
    Root TX, TZ: start - cumsum(velocity) (the feature is Y[t-1] - Y[t]).
    Root TY: F[:, 52].  Root RX, RZ: atan2(sin, cos).  Root RY: atan2 of
    sin(RY_0) - cumsum(d sin), cos(RY_0) - cumsum(d cos).
    """
    F = _check_features(F)
    T = F.shape[0]
    s = np.zeros(N_CHANNELS) if start is None else np.asarray(start, dtype=np.float64).reshape(N_CHANNELS)
    d2r = np.pi / 180.0
    Y = np.empty((T, N_CHANNELS))
    Y[:, FEATURE_CHANNELS] = np.degrees(F[:, :50])
    Y[:, LEFT_OUT_CHANNELS] = LEFT_OUT_VALUES if left_out is None else np.asarray(left_out, dtype=np.float64)
    Y[:, TX] = s[TX] - np.cumsum(F[:, 50])
    Y[:, TZ] = s[TZ] - np.cumsum(F[:, 51])
    Y[:, TY] = F[:, 52]
    Y[:, RX] = _atan2_deg(F[:, 53], F[:, 56])
    Y[:, RZ] = _atan2_deg(F[:, 54], F[:, 57])
    sin_ry = np.sin(s[RY] * d2r) - np.cumsum(F[:, 55])
    cos_ry = np.cos(s[RY] * d2r) - np.cumsum(F[:, 58])
    # no clipping here: the integrated pair need not lie on the unit circle, atan2 copes
    Y[:, RY] = np.degrees(np.arctan2(sin_ry, cos_ry))
    if include_start:
        s0 = s.copy()
        s0[LEFT_OUT_CHANNELS] = Y[0, LEFT_OUT_CHANNELS] if T else LEFT_OUT_VALUES
        Y = np.vstack([s0, Y])
    return Y


def pose_channels(F: np.ndarray) -> np.ndarray:
    """Channels for drawing single feature rows, each on its own: (N, 59) -> (N, 62).

    One row has no absolute position or heading (those are differences), so the root is
    put at TX = TZ = 0 and RY = 0, with the row's height TY and its RX, RZ (atan2 of the
    clipped sin/cos).  Joint angles as in :func:`features_to_channels`.  Non-finite
    entries are replaced by 0 so a bad generated row still draws.
    """
    F = np.nan_to_num(np.atleast_2d(np.asarray(F, dtype=np.float64)), nan=0.0, posinf=0.0, neginf=0.0)
    F = _check_features(F)
    Y = np.zeros((F.shape[0], N_CHANNELS))
    Y[:, FEATURE_CHANNELS] = np.degrees(F[:, :50])
    Y[:, LEFT_OUT_CHANNELS] = LEFT_OUT_VALUES
    Y[:, TY] = F[:, 52]
    Y[:, RX] = _atan2_deg(F[:, 53], F[:, 56])
    Y[:, RZ] = _atan2_deg(F[:, 54], F[:, 57])
    return Y


# ------------------------------------------------------------------ renderer
@dataclass(frozen=True)
class CMU35PoseRenderer:
    """Draw a 'cmu35gplvm' row (59,) -- or a raw channel row (62,) -- as a stick figure.

    ``positions(y) -> (J, 3)``: forward kinematics of ``skeleton`` (J = 30 bones + root =
    31 points), z up, in metres (``scale`` = metres per ASF unit).  A 59-dim row is drawn
    with its root above the origin at the row's height and with its RX/RZ tilt, facing
    RY = 0 (see :func:`pose_channels`); a 62-dim row is drawn where its channels put it.
    Any finite input gives finite points; ~0.2 ms per row.
    """

    skeleton: Skeleton
    scale: float | None = None  # None -> skeleton.metres_per_unit
    kind: str = field(default="pose", init=False)

    def __post_init__(self):
        if isinstance(self.skeleton, dict):  # from JSON
            object.__setattr__(self, "skeleton", Skeleton(**self.skeleton))
        if self.scale is None:
            object.__setattr__(self, "scale", self.skeleton.metres_per_unit)
        object.__setattr__(self, "scale", float(self.scale))

    @property
    def connections(self) -> tuple[tuple[int, int], ...]:
        return self.skeleton.connections

    @property
    def names(self) -> tuple[str, ...]:
        return self.skeleton.point_names

    def channels(self, Y: np.ndarray) -> np.ndarray:
        """(N, 59) features or (N, 62) channels -> (N, 62) channels to draw."""
        Y = np.atleast_2d(np.asarray(Y, dtype=np.float64))
        if Y.shape[-1] == N_FEATURES:
            return pose_channels(Y)
        if Y.shape[-1] == N_CHANNELS:
            return np.nan_to_num(Y, nan=0.0, posinf=0.0, neginf=0.0)
        raise ValueError(f"expected rows of {N_FEATURES} features or {N_CHANNELS} channels, got {Y.shape}")

    def positions_many(self, Y: np.ndarray) -> np.ndarray:
        """(N, 59|62) -> (N, J, 3) points, z up, metres."""
        return self.skeleton.positions(self.channels(Y), zup=True) * self.scale

    def positions(self, y: np.ndarray) -> np.ndarray:
        """(59,) or (62,) -> (J, 3) points, z up, metres."""
        return self.positions_many(np.reshape(y, (1, -1)))[0]


# ------------------------------------------------------------------ loading
def _load_mat(path: Path) -> dict:
    import scipy.io

    try:
        d = scipy.io.loadmat(path)
    except Exception as e:  # scipy raises several types for corrupt files
        raise MocapParseError(path.name, f"cannot read as a MATLAB file: {e}") from None
    want = {"Y": (N_TRAIN_FRAMES, N_CHANNELS), "lbls": (N_TRAIN_FRAMES, len(TRAIN_TRIALS)),
            "Ytest": (N_TEST_FRAMES, N_CHANNELS), "lblstest": (N_TEST_FRAMES, len(TEST_TRIALS))}
    for k, shape in want.items():
        if k not in d:
            raise MocapParseError(path.name, f"no variable {k!r}")
        if d[k].shape != shape:
            raise MocapParseError(path.name, f"{k} has shape {d[k].shape}, expected {shape}")
    for k in ("Y", "Ytest"):
        if not np.all(np.isfinite(d[k])):
            raise MocapParseError(path.name, f"{k} has non-finite values")
    for k, trials in (("lbls", TRAIN_TRIALS), ("lblstest", TEST_TRIALS)):
        for col, (trial, first, n, _) in enumerate(trials):
            rows = np.flatnonzero(d[k][:, col])
            if rows.size != n or rows[0] != first or rows[-1] != first + n - 1:
                raise MocapParseError(path.name, f"{k} column {col} ({trial}) does not cover rows {first}..{first + n - 1}")
    return d


def load_walk_jog(path: str | os.PathLike, split: str = "train") -> list[tuple[str, int, np.ndarray]]:
    """Raw channel sequences of cmu35WalkJog.mat: [(trial, motion, (T, 62)), ...].

    split "train": the 31 training trials; "test": trial 35_29 only (as 'cmu35gplvm');
    "test_all": both test trials (35_18, 35_29).
    """
    path = Path(path)
    d = _load_mat(path)
    if split == "train":
        Y, trials = d["Y"], TRAIN_TRIALS
    elif split == "test":
        Y, trials = d["Ytest"], TEST_TRIALS[1:]
    elif split == "test_all":
        Y, trials = d["Ytest"], TEST_TRIALS
    else:
        raise ValueError(f"split must be 'train', 'test' or 'test_all', got {split!r}")
    return [(t, m, np.array(Y[first:first + n], dtype=np.float64)) for t, first, n, m in trials]


# Taylor et al.'s 59 single-frame features are [root TX TY TZ, sin RX RY RZ, cos RX RY RZ,
# the 50 joint angles in degrees]: 'cmu35gplvm' joint angle c (0..49) is Taylor feature c + 9
# (the ``scale(missingInd + 9)`` of GPmat's fgplvmTaylorAngleErrors.m).
TAYLOR_ANGLE_OFFSET = 9


def read_taylor_scale_bias(path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray]:
    """``scale`` and ``bias`` (59,) each of GPmat's ``cmu35TaylorScaleBias.mat``.

    The per-feature normalisation of Taylor et al.'s 'cmu35Taylor' features (a feature
    x is used as (x - bias) * scale); the paper's SC error multiplies joint-angle errors
    in degrees by ``scale[c + TAYLOR_ANGLE_OFFSET]``.  The file stores both as 1 x 59.
    """
    import scipy.io

    path = Path(path)
    try:
        d = scipy.io.loadmat(path)
    except Exception as e:  # scipy raises several types for corrupt files
        raise MocapParseError(path.name, f"cannot read as a MATLAB file: {e}") from None
    out = []
    for k in ("scale", "bias"):
        if k not in d:
            raise MocapParseError(path.name, f"no variable {k!r}")
        v = np.asarray(d[k], dtype=np.float64)
        if v.shape != (1, N_FEATURES):
            raise MocapParseError(path.name, f"{k} has shape {v.shape}, expected (1, {N_FEATURES})")
        if not np.all(np.isfinite(v)):
            raise MocapParseError(path.name, f"{k} has non-finite values")
        out.append(v.ravel().copy())
    if np.any(out[0] <= 0):
        raise MocapParseError(path.name, "scale has entries <= 0")
    return out[0], out[1]


def build(paths: dict[str, Path], split: str = "train"):
    """The paper's CMU 35 data set with 'cmu35gplvm' features.

    paths : {"cmu35WalkJog.mat": path, "35.asf": path} (local, verified files).
    split : "train" -> Y (2613, 59), 31 sequences; "test" -> trial 35_29, Y (124, 59).

    labels: 0 walk / 1 run/jog per row; sequence: index into ``meta["trials"]``;
    times: 0, 0.05, 0.10, ... within each sequence (vargplvm demo).  To go back to the
    raw channels of sequence s: ``features_to_channels(Y[sequence == s],
    start=meta["start_channels"][s])``; to draw a row: ``renderer.positions(y)``.
    """
    from bgplvm.datasets.record import Dataset

    try:
        mat, asf = Path(paths["cmu35WalkJog.mat"]), Path(paths["35.asf"])
    except KeyError as e:
        raise KeyError(f"cmu35.build needs paths for 'cmu35WalkJog.mat' and '35.asf', missing {e}") from None
    skeleton = read_asf(asf)
    if skeleton.channel_names != CHANNEL_NAMES:
        raise MocapParseError(asf.name, "skeleton's channel layout is not the CMU 35 one (channels.tsv)")
    seqs = load_walk_jog(mat, split)
    Fs, labels, seq_ids, times, starts = [], [], [], [], []
    for s, (trial, motion, Yc) in enumerate(seqs):
        F = features(Yc)
        Fs.append(F)
        labels.append(np.full(len(F), motion))
        seq_ids.append(np.full(len(F), s))
        times.append(TIME_STEP * np.arange(len(F)))
        starts.append(Yc[0].tolist())
    name = "cmu35gplvm" if split == "train" else f"cmu35gplvm_{split}"
    meta = {
        "name": name,
        "title": f"CMU mocap subject 35, walks and jogs ({split}), 'cmu35gplvm' features",
        "description": (
            "CMU motion capture subject 35 (GPmat cmu35WalkJog.mat, every 4th frame of the "
            "120 Hz trials), 59 features per frame as in GPmat lvmLoadData 'cmu35gplvm': "
            "50 joint angles (radians, asin(sin)), root x/z velocity, root height, sin/cos "
            "of root RX/RZ and frame differences of sin/cos of root RY."
        ),
        "licence": ("CMU Graphics Lab Motion Capture Database: free for research and commercial "
                    "products; the data may not be resold directly, even in converted form."),
        "citation": ("The data used in this project was obtained from mocap.cs.cmu.edu. The database "
                     "was created with funding from NSF EIA-0196217."),
        "split": split,
        "trials": [t for t, _, _ in seqs],
        "feature_names": list(FEATURE_NAMES),
        "channel_names": list(CHANNEL_NAMES),
        "start_channels": starts,
        "time_step": TIME_STEP,
        "frame_rate_hz": 30.0,
        "inverse": "bgplvm.datasets.mocap.cmu35.features_to_channels",
    }
    return Dataset(
        name=name,
        Y=np.vstack(Fs),
        renderer=CMU35PoseRenderer(skeleton),
        labels=np.concatenate(labels).astype(np.int64),
        label_names=MOTION_NAMES,
        sequence=np.concatenate(seq_ids).astype(np.int64),
        times=np.concatenate(times),
        meta=meta,
    )
