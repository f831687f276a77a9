"""OSU ACCAD marker motion capture (Open Motion Data Project), e.g. 'osu_run1'.

Each ``<motion>TXT.ZIP`` holds one tab-separated text file: a header row
``Field  Time  <subject>:<MARKER>:X  <subject>:<MARKER>:Y  <subject>:<MARKER>:Z ...``
(some files have no ``<subject>:`` prefix), then one row per frame (120 Hz): frame
number, time in seconds, and the marker positions in millimetres, with ``-9999.99`` for a
marker the cameras lost.  z is up (heights run from ~15 mm at the toes to ~1.7 m);
x and y span the capture floor.  ``connections.txt`` lists marker pairs (``LFHD, RFHD``),
one stick-figure segment per line.

Recipe (:func:`build`), following GPmat ``mocapLoadTextData`` as used by
``lvmLoadData('run1')``/``'stick'`` and GPy ``datasets.osu_run1``:

1. missing markers: GPmat/GPy drop every marker that is missing in any frame; that loses
   markers the stick figure needs (run1 loses STRN and LWRB, i.e. 4 of the 22 segments).
   Here a marker missing in some frames is filled over the full-rate frames by linear
   interpolation in time of its offset from the body centre (the mean of the markers
   seen in every frame), the offset held constant before its first / after its last
   seen frame -- most gaps are at the start or end of a take, where the subject is
   entering or leaving the capture volume, so holding the absolute position would leave
   the marker behind.  Only a marker missing in more than ``max_missing`` (default half)
   of the frames is dropped, with the segments that use it (swagger1: LHEE, RMT5;
   handspring1: CLAV).  ``meta["filled"]`` counts the filled frames per marker,
   ``meta["dropped_markers"]`` lists the dropped ones.
2. every ``subsample``-th frame starting with the first (GPmat ``Y(1:4:end, :)``;
   120 Hz -> 30 Hz; GPy's ``Y[0:-1:4]`` differs only by possibly leaving out the last).
3. ``centre``: subtract each frame's mean marker position (per axis) -- the figure runs
   on the spot; then multiply by ``scale`` (default 1/400, GPmat's ``Y/400``).
4. columns in GPmat/GPy order ``[x_1..x_M, y_1..y_M, z_1..z_M]`` (``layout="blocks"``).

So 'osu_run1' is 55 x 123 (217 frames, 41 markers, none dropped).
"""

from __future__ import annotations

import os
import zipfile
import zlib
from pathlib import Path

import numpy as np

from .errors import MocapParseError

__all__ = ["parse_text", "read_zip", "read_connections", "fill_missing", "build", "MISSING"]

MISSING = -9999.99


def _decode(data: bytes, source: str) -> str:
    try:
        return data.decode("ascii")
    except UnicodeDecodeError:
        raise MocapParseError(source, "not an ASCII text file") from None


def parse_text(text: str, source: str = "<osu text>") -> tuple[np.ndarray, list[str], np.ndarray, str | None]:
    """Parse an OSU marker text file.

    Returns times (T,) seconds, marker names (M), positions (T, M, 3) in mm with NaN
    where missing, and the subject prefix of the header (or None).
    """
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        raise MocapParseError(source, "empty file")
    header = [h.strip() for h in lines[0].split("\t")]
    while header and not header[-1]:
        header.pop()
    if len(header) < 5 or header[0].lower() != "field" or header[1].lower() != "time":
        raise MocapParseError(source, f"header does not start with 'Field<TAB>Time<TAB>...': {lines[0][:60]!r}")
    cols = header[2:]
    if len(cols) % 3:
        raise MocapParseError(source, f"header has {len(cols)} marker columns, not a multiple of 3")
    names, subject = [], None
    for m in range(len(cols) // 3):
        trio = cols[3 * m:3 * m + 3]
        stems = {c[:-2] for c in trio}
        if [c[-2:].upper() for c in trio] != [":X", ":Y", ":Z"] or len(stems) != 1:
            raise MocapParseError(source, f"header columns {trio} are not <marker>:X, :Y, :Z")
        stem = stems.pop()
        prefix, _, marker = stem.rpartition(":")
        subject = subject or (prefix or None)
        names.append(marker)
    if len(set(names)) != len(names):
        raise MocapParseError(source, "duplicate marker names in the header")
    width = 2 + 3 * len(names)
    rows = []
    for i, ln in enumerate(lines[1:], start=2):
        tok = ln.split()
        if len(tok) != width:
            raise MocapParseError(source, f"line {i} has {len(tok)} values, expected {width} (truncated?)")
        try:
            rows.append([float(t) for t in tok])
        except ValueError:
            raise MocapParseError(source, f"line {i}: non-numeric value") from None
    if not rows:
        raise MocapParseError(source, "no frames")
    S = np.array(rows)
    if not np.all(np.isfinite(S)):
        raise MocapParseError(source, "non-finite values")
    times = S[:, 1]
    if np.any(np.diff(times) <= 0):
        raise MocapParseError(source, "time stamps do not increase")
    X = S[:, 2:].reshape(len(S), len(names), 3)
    X[X == MISSING] = np.nan
    return times, names, X, subject


def read_zip(path: str | os.PathLike) -> tuple[np.ndarray, list[str], np.ndarray, str | None, str]:
    """Read ``<motion>TXT.ZIP``: :func:`parse_text` of its one .txt member, plus that name."""
    path = Path(path)
    try:
        with zipfile.ZipFile(path) as zf:
            members = [n for n in zf.namelist() if n.lower().endswith(".txt")]
            if len(members) != 1:
                raise MocapParseError(path.name, f"expected one .txt file in the archive, found {members}")
            data = zf.read(members[0])
    except (zipfile.BadZipFile, zlib.error, EOFError) as e:
        raise MocapParseError(path.name, f"not a valid zip archive ({e}); truncated, or an HTML error page?") from None
    except OSError as e:
        raise MocapParseError(path.name, f"cannot read: {e}") from None
    source = f"{path.name}/{members[0]}"
    return (*parse_text(_decode(data, source), source), members[0])


def read_connections(path: str | os.PathLike) -> list[tuple[str, str]]:
    """``connections.txt``: one ``A, B`` marker pair per non-empty line."""
    path = Path(path)
    try:
        text = _decode(path.read_bytes(), path.name)
    except OSError as e:
        raise MocapParseError(path.name, f"cannot read: {e}") from None
    pairs = []
    for i, ln in enumerate(text.splitlines(), start=1):
        if not ln.strip():
            continue
        parts = [p.strip() for p in ln.split(",")]
        if len(parts) != 2 or not all(parts) or not all(p.replace("-", "").replace("_", "").isalnum() for p in parts):
            raise MocapParseError(path.name, f"line {i}: expected 'MARKER, MARKER', got {ln!r}")
        pairs.append((parts[0], parts[1]))
    if not pairs:
        raise MocapParseError(path.name, "no connections")
    return pairs


def fill_missing(X: np.ndarray, max_missing: float = 0.5) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fill missing marker positions by interpolating in time, relative to the body.

    X : (T, M, 3) with NaN where missing (a marker is missing in a frame if any of its
    coordinates is NaN).  The body centre c_t is the mean of the markers seen in every
    frame (zero if there are none); a gap of marker m is filled with
    c_t + linear interpolation in t of (X[t, m] - c_t), held constant beyond the first /
    last frame where m is seen.  Returns (X filled (T, M, 3), keep (M,) bool -- markers
    missing in at most ``max_missing`` of the frames, and seen at least once --,
    n_missing (M,)).  Dropped markers' columns are left as they were.
    """
    X = np.array(X, dtype=np.float64)
    T, M, _ = X.shape
    missing = np.isnan(X).any(axis=2)
    n_missing = missing.sum(axis=0)
    keep = (n_missing < T) & (n_missing <= max_missing * T)
    complete = n_missing == 0
    centre = X[:, complete].mean(axis=1) if complete.any() else np.zeros((T, 3))
    t = np.arange(T)
    for m in np.flatnonzero(keep & (n_missing > 0)):
        ok = ~missing[:, m]
        for a in range(3):
            X[:, m, a] = centre[:, a] + np.interp(t, t[ok], X[ok, m, a] - centre[ok, a])
    return X, keep, n_missing


def build(name: str, paths: dict[str, Path], *, subsample: int = 4, centre: bool = True,
          scale: float = 1.0 / 400.0, max_missing: float = 0.5):
    """An OSU ACCAD motion as a Dataset (recipe in the module docstring).

    name  : "osu_<motion>" or "<motion>", e.g. "osu_run1".
    paths : {"<motion>TXT.ZIP": path, "connections.txt": path}.
    Returns Y (frames, 3 x markers) in blocks layout, drawn by a StickFigureRenderer
    (z up, one segment per usable line of connections.txt); sequence all 0; times from
    the file's Time column (seconds) of the kept frames; no labels.
    """
    from bgplvm.datasets.record import Dataset, StickFigureRenderer

    motion = name[4:] if name.startswith("osu_") else name
    key = f"{motion}TXT.ZIP"
    if key not in paths or "connections.txt" not in paths:
        raise KeyError(f"osu.build({name!r}) needs paths for {key!r} and 'connections.txt', got {sorted(paths)}")
    if subsample < 1:
        raise ValueError("subsample must be >= 1")
    times, names, X, subject, member = read_zip(paths[key])
    pairs = read_connections(paths["connections.txt"])

    X, keep, n_missing = fill_missing(X, max_missing)
    kept = [n for n, k in zip(names, keep) if k]
    index = {n: i for i, n in enumerate(kept)}
    connections, skipped = [], []
    for a, b in pairs:
        if a in index and b in index:
            connections.append((index[a], index[b]))
        else:
            skipped.append(f"{a}-{b}")
    n_full = int(X.shape[0])
    X = X[::subsample][:, keep]
    times = times[::subsample]
    if centre:
        X = X - X.mean(axis=1, keepdims=True)
    X = X * scale
    Y = np.concatenate([X[:, :, 0], X[:, :, 1], X[:, :, 2]], axis=1)

    ds_name = f"osu_{motion}"
    meta = {
        "name": ds_name,
        "title": f"OSU ACCAD motion capture: {motion}",
        "description": (
            f"Marker motion capture '{motion}' ({member}), {len(kept)} markers, every "
            f"{subsample}th frame of 120 Hz, "
            + ("each frame centred, " if centre else "")
            + f"mm x {scale:g}; columns [x..., y..., z...]; gaps filled by interpolation relative to the body centre."
        ),
        "licence": "CC BY-NC-SA 3.0",
        "citation": "Open Motion Data Project, Advanced Computing Center for the Arts and Design (ACCAD), The Ohio State University.",
        "source_file": member,
        "subject": subject,
        "markers": kept,
        "dropped_markers": [n for n, k in zip(names, keep) if not k],
        "filled": {n: int(c) for n, c, k in zip(names, n_missing, keep) if k and c},
        "connections_skipped": skipped,
        "n_frames_full_rate": n_full,
        "subsample": subsample,
        "centre": centre,
        "scale_per_mm": scale,
        "up_axis": "z",
        "layout": "blocks",
    }
    return Dataset(
        name=ds_name,
        Y=Y,
        renderer=StickFigureRenderer(connections=tuple(connections), names=tuple(kept),
                                     layout="blocks", up_axis=2),
        sequence=np.zeros(len(Y), dtype=np.int64),
        times=np.asarray(times, dtype=np.float64),
        meta=meta,
    )
