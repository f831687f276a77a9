"""Acclaim ASF skeletons, AMC motions and forward kinematics.

An ASF file describes a skeleton in its rest pose: for every bone a unit ``direction``
(in the global frame), a ``length``, an ``axis`` (three Euler angles plus their order,
the orientation of the bone's local frame in the global frame) and the ``dof`` it rotates
about.  An AMC file then gives, per frame, the root's translation and rotation and each
bone's dof angles.

Forward kinematics (the standard Acclaim convention, written for column vectors)::

    C_b   = E(axis_b, order_b)               rest orientation of bone b's local frame
    M_b   = E(dof angles of b, order_b)      the frame's rotation, in that local frame
    L_b   = C_b  M_b  C_b^-1                 the same rotation expressed globally
    W_b   = W_parent(b)  L_b                 accumulated rotation (W_root = C_r M_r C_r^-1)
    p_b   = p_parent(b) + length_b * W_b direction_b      end point of bone b
    p_root = root position + (TX, TY, TZ)

``E(a, "XYZ") = Rz(a_z) Ry(a_y) Rx(a_x)``: the rotation about the first axis of the order
string is applied first (this is scipy's extrinsic ``from_euler("xyz", ...)``); the
dof angles use the ``axis`` order too, as GPmat's ``acclaim2xyz`` does (CMU files always
list the dofs as rx ry rz and use the order XYZ, so the two readings agree there).

Coordinates: ASF/AMC are y-up.  ``Skeleton.positions`` returns z-up points by default via
the proper rotation (x, y, z) -> (x, -z, y) (right-handed, so left stays left); pass
``zup=False`` for the raw ASF frame.  Lengths are in ASF length units: for the CMU files
(``:units length 0.45``) one unit is 1/0.45 inch, so metres = value * 0.0254 / 0.45
(``Skeleton.metres_per_unit``).

Points: index 0 is the root, index ``b + 1`` the end of bone ``b`` (ASF bone order);
``connections`` are the ``(parent point, child point)`` pairs, one per bone.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import MocapParseError

__all__ = [
    "Skeleton",
    "parse_asf",
    "read_asf",
    "parse_amc",
    "read_amc",
    "euler_matrices",
    "ZUP_FROM_ASF",
]

# Proper rotation taking the ASF y-up frame to the display z-up frame: (x, y, z) -> (x, -z, y).
ZUP_FROM_ASF = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]])

_AXIS_INDEX = {"X": 0, "Y": 1, "Z": 2}
_INCH = 0.0254


def _tuple3(v) -> tuple[float, float, float]:
    t = tuple(float(x) for x in v)
    if len(t) != 3:
        raise ValueError(f"expected 3 numbers, got {len(t)}")
    return t  # type: ignore[return-value]


def euler_matrices(angles: np.ndarray, order: str) -> np.ndarray:
    """Rotation matrices for Euler angles (radians), first axis of ``order`` applied first.

    angles : (..., 3) angles about x, y, z (always in xyz slots, whatever the order).
    order  : a permutation of "XYZ".
    Returns (..., 3, 3) ``R = R_{order[2]} R_{order[1]} R_{order[0]}``.
    """
    angles = np.asarray(angles, dtype=np.float64)
    c = np.cos(angles)
    s = np.sin(angles)
    shape = angles.shape[:-1]
    mats = []
    for ax in range(3):
        R = np.zeros(shape + (3, 3))
        i, j = [k for k in range(3) if k != ax]
        R[..., ax, ax] = 1.0
        R[..., i, i] = c[..., ax]
        R[..., j, j] = c[..., ax]
        # right-handed: Rx = [[1,0,0],[0,c,-s],[0,s,c]], Ry = [[c,0,s],[0,1,0],[-s,0,c]], ...
        sign = 1.0 if ax != 1 else -1.0
        R[..., i, j] = -sign * s[..., ax]
        R[..., j, i] = sign * s[..., ax]
        mats.append(R)
    a, b, c_ = (_AXIS_INDEX[ch] for ch in order.upper())
    return mats[c_] @ mats[b] @ mats[a]


@dataclass(frozen=True)
class Skeleton:
    """An Acclaim skeleton, stored as plain numbers (so it can be written as JSON).

    Bone fields are tuples in ASF bone order (length B).  ``parents[b]`` is the index of
    bone b's parent bone, or -1 when its parent is the root.  Angles (``axes``,
    ``root_orientation``, ``limits``) are in degrees whatever the file's angle unit;
    ``angle_unit`` says how AMC channel values are to be read ("deg" or "rad").
    Lists are accepted and converted to tuples (for a round trip through JSON).
    """

    name: str
    bone_names: tuple[str, ...]
    parents: tuple[int, ...]
    directions: tuple[tuple[float, float, float], ...]
    lengths: tuple[float, ...]
    axes: tuple[tuple[float, float, float], ...]
    axis_orders: tuple[str, ...]
    dofs: tuple[tuple[str, ...], ...]
    limits: tuple[tuple[tuple[float, float], ...], ...] = ()
    root_order: tuple[str, ...] = ("TX", "TY", "TZ", "RX", "RY", "RZ")
    root_axis: str = "XYZ"
    root_position: tuple[float, float, float] = (0.0, 0.0, 0.0)
    root_orientation: tuple[float, float, float] = (0.0, 0.0, 0.0)
    length_unit: float = 1.0
    angle_unit: str = "deg"

    # ------------------------------------------------------------------ set-up
    def __post_init__(self):
        B = len(self.bone_names)
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731
        set_("bone_names", tuple(str(n) for n in self.bone_names))
        set_("parents", tuple(int(p) for p in self.parents))
        set_("directions", tuple(_tuple3(d) for d in self.directions))
        set_("lengths", tuple(float(x) for x in self.lengths))
        set_("axes", tuple(_tuple3(a) for a in self.axes))
        set_("axis_orders", tuple(str(o).upper() for o in self.axis_orders))
        set_("dofs", tuple(tuple(str(d).lower() for d in ds) for ds in self.dofs))
        set_("limits", tuple(tuple((float(a), float(b)) for a, b in ls) for ls in self.limits))
        set_("root_order", tuple(str(o).upper() for o in self.root_order))
        set_("root_axis", str(self.root_axis).upper())
        set_("root_position", _tuple3(self.root_position))
        set_("root_orientation", _tuple3(self.root_orientation))
        set_("length_unit", float(self.length_unit))
        for name in ("parents", "directions", "lengths", "axes", "axis_orders", "dofs"):
            if len(getattr(self, name)) != B:
                raise ValueError(f"Skeleton {self.name!r}: {name} has {len(getattr(self, name))} entries, expected {B}")
        for o in self.axis_orders + (self.root_axis,):
            if sorted(o) != ["X", "Y", "Z"]:
                raise ValueError(f"Skeleton {self.name!r}: bad rotation order {o!r}")
        if sorted(self.root_order) != sorted(["TX", "TY", "TZ", "RX", "RY", "RZ"]):
            raise ValueError(f"Skeleton {self.name!r}: bad root order {self.root_order}")
        if self.angle_unit not in ("deg", "rad"):
            raise ValueError(f"Skeleton {self.name!r}: angle unit must be 'deg' or 'rad'")

        # topological order (parents before children), cycle check
        order, seen = [], set()
        children = {b: [] for b in range(-1, B)}
        for b, p in enumerate(self.parents):
            if not -1 <= p < B or p == b:
                raise ValueError(f"Skeleton {self.name!r}: bone {self.bone_names[b]!r} has bad parent {p}")
            children[p].append(b)
        stack = list(reversed(children[-1]))
        while stack:
            b = stack.pop()
            if b in seen:
                raise ValueError(f"Skeleton {self.name!r}: hierarchy has a cycle")
            seen.add(b)
            order.append(b)
            stack.extend(reversed(children[b]))
        if len(order) != B:
            missing = [self.bone_names[b] for b in range(B) if b not in seen]
            raise ValueError(f"Skeleton {self.name!r}: bones not connected to the root: {missing}")

        # channel layout: root channels in root_order, then each bone's dofs in ASF order
        names = [f"root.{o}" for o in self.root_order]
        dof_col = -np.ones((B, 3), dtype=np.intp)
        col = len(self.root_order)
        for b, ds in enumerate(self.dofs):
            for d in ds:
                if d not in ("rx", "ry", "rz"):
                    raise ValueError(f"Skeleton {self.name!r}: bone {self.bone_names[b]!r} has unsupported dof {d!r}")
                dof_col[b, _AXIS_INDEX[d[1].upper()]] = col
                names.append(f"{self.bone_names[b]}.{d}")
                col += 1

        C = np.zeros((B, 3, 3))
        for b in range(B):
            C[b] = euler_matrices(np.deg2rad(self.axes[b]), self.axis_orders[b])
        groups: dict[str, list[int]] = {}
        for b, o in enumerate(self.axis_orders):
            groups.setdefault(o, []).append(b)

        set_("_order", tuple(order))
        set_("_parent_point", np.array([p + 1 for p in self.parents], dtype=np.intp))
        set_("_dof_col", dof_col)
        set_("_has_dof", dof_col >= 0)
        set_("_dof_col_safe", np.where(dof_col >= 0, dof_col, 0))
        set_("_C", C)
        set_("_Ct", np.ascontiguousarray(np.swapaxes(C, -1, -2)))
        # ASF directions are unit vectors printed to ~6 digits: normalise so that bone
        # lengths come out as the file's `length` exactly
        D = np.array(self.directions, dtype=np.float64).reshape(B, 3)
        norms = np.linalg.norm(D, axis=1)
        if np.any(norms < 1e-6):
            raise ValueError(f"Skeleton {self.name!r}: a bone has a zero direction")
        set_("_offsets", np.array(self.lengths)[:, None] * D / norms[:, None])
        set_("_order_groups", tuple((o, np.array(bs, dtype=np.intp)) for o, bs in groups.items()))
        set_("_root_t_cols", np.array([self.root_order.index(k) for k in ("TX", "TY", "TZ")], dtype=np.intp))
        set_("_root_r_cols", np.array([self.root_order.index(k) for k in ("RX", "RY", "RZ")], dtype=np.intp))
        Cr = euler_matrices(np.deg2rad(self.root_orientation), self.root_axis)
        set_("_Cr", Cr)
        set_("_channel_names", tuple(names))
        set_("_angle_scale", np.pi / 180.0 if self.angle_unit == "deg" else 1.0)

    # ------------------------------------------------------------- properties
    @property
    def n_bones(self) -> int:
        return len(self.bone_names)

    @property
    def n_points(self) -> int:
        """J = bones + 1 (the root)."""
        return len(self.bone_names) + 1

    @property
    def point_names(self) -> tuple[str, ...]:
        return ("root",) + self.bone_names

    @property
    def connections(self) -> tuple[tuple[int, int], ...]:
        """(parent point, child point) for every bone, ASF bone order."""
        return tuple((int(self._parent_point[b]), b + 1) for b in range(self.n_bones))

    @property
    def channel_names(self) -> tuple[str, ...]:
        """Channel layout of a row: ``root.TX`` ... then ``bone.rx`` ... in ASF bone order."""
        return self._channel_names

    @property
    def n_channels(self) -> int:
        return len(self._channel_names)

    @property
    def metres_per_unit(self) -> float:
        """Acclaim ``:units length L`` means one unit is 1/L inch."""
        return _INCH / self.length_unit

    def bone_index(self, name: str) -> int:
        return self.bone_names.index(name)

    # ----------------------------------------------------- forward kinematics
    def global_rotations(self, channels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Root rotation (N, 3, 3) and accumulated bone rotations W (N, B, 3, 3), ASF frame."""
        Yc = np.asarray(channels, dtype=np.float64)
        N = Yc.shape[0]
        a = self._angle_scale
        rot = Yc[:, self._root_r_cols] * a
        W_root = self._Cr @ euler_matrices(rot, self.root_axis) @ self._Cr.T
        ang = np.where(self._has_dof, Yc[:, self._dof_col_safe], 0.0) * a  # (N, B, 3)
        M = np.empty((N, self.n_bones, 3, 3))
        for o, bs in self._order_groups:
            M[:, bs] = euler_matrices(ang[:, bs], o)
        L = self._C @ M @ self._Ct  # (N, B, 3, 3)
        W = np.empty((N, self.n_bones + 1, 3, 3))
        W[:, 0] = W_root
        pp = self._parent_point
        for b in self._order:
            W[:, b + 1] = W[:, pp[b]] @ L[:, b]
        return W_root, W[:, 1:]

    def positions(self, channels: np.ndarray, zup: bool = True) -> np.ndarray:
        """Forward kinematics.

        channels : (C,) or (N, C) AMC channel values in ``channel_names`` order
                   (root translation in length units, angles in ``angle_unit``).
        Returns (J, 3) or (N, J, 3) point positions in ASF length units: the root, then
        the end of each bone (ASF order); z-up unless ``zup=False``.
        """
        Yc = np.asarray(channels, dtype=np.float64)
        single = Yc.ndim == 1
        Yc = np.atleast_2d(Yc)
        if Yc.ndim != 2 or Yc.shape[1] != self.n_channels:
            raise ValueError(f"expected rows of {self.n_channels} channels, got shape {np.shape(channels)}")
        _, Wb = self.global_rotations(Yc)
        N = Yc.shape[0]
        P = np.empty((N, self.n_points, 3))
        P[:, 0] = np.asarray(self.root_position) + Yc[:, self._root_t_cols]
        seg = np.einsum("nbij,bj->nbi", Wb, self._offsets)  # bone vectors, (N, B, 3)
        pp = self._parent_point
        for b in self._order:
            P[:, b + 1] = P[:, pp[b]] + seg[:, b]
        if zup:
            P = P @ ZUP_FROM_ASF.T
        return P[0] if single else P


# =========================================================================== ASF
def _strip_lines(text: str) -> list[tuple[int, str]]:
    out = []
    for i, line in enumerate(text.splitlines(), start=1):
        s = line.split("#", 1)[0].replace(",", " ").strip()  # commas are whitespace (ASF 1.10)
        if s:
            out.append((i, s))
    return out


def _floats(tokens, source, lineno, n=None, infinite_ok=False):
    """Numbers of one line; ``infinite_ok``: limits may be open, e.g. ``(-inf inf)`` as in
    the Acclaim format's own example (NaN never)."""
    try:
        vals = [float(t) for t in tokens]
    except ValueError:
        raise MocapParseError(source, f"line {lineno}: expected numbers, got {' '.join(tokens)!r}") from None
    if not all(np.isfinite(vals) | (infinite_ok & np.isinf(vals))):
        raise MocapParseError(source, f"line {lineno}: non-finite number in {' '.join(tokens)!r}")
    if n is not None and len(vals) != n:
        raise MocapParseError(source, f"line {lineno}: expected {n} numbers, got {len(vals)}")
    return vals


def parse_asf(text: str, source: str = "<asf>") -> Skeleton:
    """Parse the text of an Acclaim ASF file into a :class:`Skeleton`.

    Raises :class:`MocapParseError` (naming ``source``) on anything malformed: missing
    sections, bones without direction/length/axis, unknown hierarchy names, ...
    """
    lines = _strip_lines(text)
    if not lines:
        raise MocapParseError(source, "empty ASF file")
    name = "skeleton"
    units = {"length": 1.0, "angle": "deg", "mass": 1.0}
    root = {"order": ["TX", "TY", "TZ", "RX", "RY", "RZ"], "axis": "XYZ",
            "position": [0.0, 0.0, 0.0], "orientation": [0.0, 0.0, 0.0]}
    bones: list[dict] = []
    hierarchy: list[tuple[int, list[str]]] = []
    seen_sections = set()
    section = None
    bone = None
    last_key = None
    for lineno, s in lines:
        tok = s.split()
        if s.startswith(":"):
            key = tok[0][1:].lower()
            seen_sections.add(key)
            section = key
            if key == "name" and len(tok) > 1:
                name = tok[1]
            if bone is not None:
                raise MocapParseError(source, f"line {lineno}: bone block not closed with 'end'")
            continue
        if section == "units":
            if len(tok) == 2 and tok[0].lower() in ("length", "mass"):
                units[tok[0].lower()] = _floats(tok[1:], source, lineno, 1)[0]
                if units[tok[0].lower()] <= 0:
                    raise MocapParseError(source, f"line {lineno}: {tok[0]} unit must be positive")
            elif len(tok) == 2 and tok[0].lower() == "angle":
                u = tok[1].lower()
                if u.startswith("deg"):
                    units["angle"] = "deg"
                elif u.startswith("rad"):
                    units["angle"] = "rad"
                else:
                    raise MocapParseError(source, f"line {lineno}: unknown angle unit {tok[1]!r}")
        elif section == "root":
            k = tok[0].lower()
            if k == "order":
                root["order"] = [t.upper() for t in tok[1:]]
            elif k == "axis":
                if len(tok) != 2:
                    raise MocapParseError(source, f"line {lineno}: bad root axis line")
                root["axis"] = tok[1].upper()
            elif k in ("position", "orientation"):
                root[k] = _floats(tok[1:], source, lineno, 3)
        elif section == "bonedata":
            k = tok[0].lower()
            if k == "begin":
                if bone is not None:
                    raise MocapParseError(source, f"line {lineno}: 'begin' inside a bone block")
                bone = {"line": lineno, "dof": [], "limits": []}
                last_key = None
            elif k == "end":
                if bone is None:
                    raise MocapParseError(source, f"line {lineno}: 'end' without 'begin'")
                for req in ("name", "direction", "length", "axis"):
                    if req not in bone:
                        raise MocapParseError(source, f"bone block at line {bone['line']} has no {req!r}")
                bones.append(bone)
                bone = None
            elif bone is None:
                raise MocapParseError(source, f"line {lineno}: {s!r} outside a bone block")
            elif k == "id":
                bone["id"] = tok[1] if len(tok) > 1 else None
            elif k == "name":
                if len(tok) != 2:
                    raise MocapParseError(source, f"line {lineno}: bad bone name line")
                bone["name"] = tok[1]
            elif k == "direction":
                bone["direction"] = _floats(tok[1:], source, lineno, 3)
            elif k == "length":
                bone["length"] = _floats(tok[1:], source, lineno, 1)[0]
            elif k == "axis":
                if len(tok) != 5:
                    raise MocapParseError(source, f"line {lineno}: axis needs 3 angles and an order")
                bone["axis"] = _floats(tok[1:4], source, lineno, 3)
                bone["axis_order"] = tok[4].upper()
            elif k == "dof":
                bone["dof"] = [t.lower() for t in tok[1:]]
            elif k == "limits" or (last_key == "limits" and s.startswith("(")):
                body = s[len("limits"):] if k == "limits" else s
                nums = _floats(body.replace("(", " ").replace(")", " ").split(), source, lineno,
                               infinite_ok=True)
                if not nums or len(nums) % 2:
                    raise MocapParseError(source, f"line {lineno}: limits come in (min max) pairs, "
                                                  f"got {len(nums)} numbers")
                bone["limits"] += [tuple(nums[i:i + 2]) for i in range(0, len(nums), 2)]
                k = "limits"
            elif k in ("bodymass", "cofmass"):
                pass
            else:
                raise MocapParseError(source, f"line {lineno}: unknown bone field {tok[0]!r}")
            last_key = k
        elif section == "hierarchy":
            if tok[0].lower() in ("begin", "end"):
                continue
            hierarchy.append((lineno, tok))
    if bone is not None:
        raise MocapParseError(source, f"file ends inside the bone block started at line {bone['line']} (truncated?)")
    for req in ("root", "bonedata", "hierarchy"):
        if req not in seen_sections:
            raise MocapParseError(source, f"no ':{req}' section (truncated or not an ASF file?)")
    if not bones:
        raise MocapParseError(source, "no bones in ':bonedata'")

    names = [b["name"] for b in bones]
    if len(set(names)) != len(names):
        raise MocapParseError(source, "duplicate bone names")
    index = {n: i for i, n in enumerate(names)}
    parents = [None] * len(bones)
    for lineno, tok in hierarchy:
        if tok[0] != "root" and tok[0] not in index:
            raise MocapParseError(source, f"line {lineno}: unknown parent {tok[0]!r} in ':hierarchy'")
        p = -1 if tok[0] == "root" else index[tok[0]]
        for child in tok[1:]:
            if child not in index:
                raise MocapParseError(source, f"line {lineno}: unknown bone {child!r} in ':hierarchy'")
            if parents[index[child]] is not None:
                raise MocapParseError(source, f"line {lineno}: bone {child!r} has two parents")
            parents[index[child]] = p
    orphans = [names[i] for i, p in enumerate(parents) if p is None]
    if orphans:
        raise MocapParseError(source, f"bones missing from ':hierarchy' (truncated?): {orphans}")
    for b in bones:
        if b["limits"] and len(b["limits"]) != len(b["dof"]):
            raise MocapParseError(source, f"bone {b['name']!r}: {len(b['limits'])} limits for {len(b['dof'])} dofs")
    to_deg = 1.0 if units["angle"] == "deg" else 180.0 / np.pi
    try:
        return Skeleton(
            name=name,
            bone_names=names,
            parents=parents,
            directions=[b["direction"] for b in bones],
            lengths=[b["length"] for b in bones],
            axes=[[a * to_deg for a in b["axis"]] for b in bones],
            axis_orders=[b["axis_order"] for b in bones],
            dofs=[b["dof"] for b in bones],
            limits=[[(lo * to_deg, hi * to_deg) for lo, hi in b["limits"]] for b in bones],
            root_order=root["order"],
            root_axis=root["axis"],
            root_position=root["position"],
            root_orientation=[a * to_deg for a in root["orientation"]],
            length_unit=units["length"],
            angle_unit=units["angle"],
        )
    except ValueError as e:
        raise MocapParseError(source, str(e)) from None


def _read_text(path: str | os.PathLike) -> str:
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise MocapParseError(path.name, f"cannot read: {e}") from None
    try:
        return data.decode("ascii")
    except UnicodeDecodeError:
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise MocapParseError(path.name, "not a text file") from None


def read_asf(path: str | os.PathLike) -> Skeleton:
    """Read an ASF file (see :func:`parse_asf`)."""
    return parse_asf(_read_text(path), source=Path(path).name)


# =========================================================================== AMC
def parse_amc(text: str, skeleton: Skeleton, source: str = "<amc>") -> np.ndarray:
    """Parse AMC motion text into rows in ``skeleton.channel_names`` order.

    Returns (F, C) float64: one row per frame, root channels first (in the ASF root
    order), then each bone's dofs in ASF bone order -- not the AMC line order.  Every frame
    must give every bone that has dofs, with the right number of values.
    """
    C = skeleton.n_channels
    start = {}
    col = len(skeleton.root_order)
    for b, ds in enumerate(skeleton.dofs):
        if ds:
            start[skeleton.bone_names[b]] = (col, len(ds))
            col += len(ds)
    start["root"] = (0, len(skeleton.root_order))
    frames: list[np.ndarray] = []
    row = None
    got: set[str] = set()
    last_no = 0
    frame_line = 0

    def close(lineno):
        if row is not None and len(got) != len(start):
            miss = sorted(set(start) - got)
            raise MocapParseError(source, f"frame {last_no} (line {frame_line}) lacks {miss} (truncated?)")

    for lineno, s in _strip_lines(text):
        if s.startswith(":"):
            continue
        tok = s.split()
        if len(tok) == 1 and tok[0].isdigit():
            close(lineno)
            no = int(tok[0])
            if row is None and not frames:
                last_no = no - 1  # the first frame: 1, 0 (some exporters) or a clip's own start
            if no != last_no + 1:
                raise MocapParseError(source, f"line {lineno}: frame {no} follows frame {last_no}; "
                                              "frames must be numbered consecutively")
            last_no, frame_line = no, lineno
            row = np.full(C, np.nan)
            frames.append(row)
            got = set()
            continue
        if row is None:
            raise MocapParseError(source, f"line {lineno}: data before the first frame number")
        name = tok[0]
        if name not in start:
            raise MocapParseError(source, f"line {lineno}: unknown bone {name!r}")
        if name in got:
            raise MocapParseError(source, f"line {lineno}: bone {name!r} twice in frame {last_no}")
        c0, n = start[name]
        row[c0:c0 + n] = _floats(tok[1:], source, lineno, n)
        got.add(name)
    close(None)
    if not frames:
        raise MocapParseError(source, "no frames")
    Y = np.vstack(frames)
    if not np.all(np.isfinite(Y)):
        raise MocapParseError(source, "non-finite channel values")
    return Y


def read_amc(path: str | os.PathLike, skeleton: Skeleton) -> np.ndarray:
    """Read an AMC file (see :func:`parse_amc`)."""
    return parse_amc(_read_text(path), skeleton, source=Path(path).name)
