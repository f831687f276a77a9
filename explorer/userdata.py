"""A user's own data drawn as what it is: arrays (vectors or image sequences) and motion
capture (an Acclaim ASF skeleton with its AMC motions, as CMU distributes them), with time
stamps and sequence ids when they have them, so that the player, forecasting and
observe-and-infer work on them as on the shipped data.

Pure functions (no Panel): uploaded bytes in, a ``bgplvm.datasets.Dataset`` out, or a
``UserError`` whose message says what is wrong and what to do.

Arrays
    .npy / .csv / .txt: Y (N, D). .npz: ``Y`` (or the only array), and optionally ``t`` /
    ``times`` (N,) time stamps and ``sequence`` / ``sequences`` (N,) ids. Without time
    stamps, "rows are frames in time order" gives t = row / fps (one sequence).
    Declared an **image sequence**, each row is one H x W frame stored row-major (C order:
    the first W values are the top row) or column-major (F order: the first H values are
    the left column).
Motion capture
    one ``.asf`` and one or more ``.amc`` files (each AMC one sequence). Frames are taken
    every ``subsample``-th (120 Hz CMU captures: 4 gives 30 frames/s); Y holds every AMC
    channel except the root's ground-plane position (TX, TZ), which only says where the
    walk is in the room; poses are drawn in place by forward kinematics of the skeleton.
"""

from __future__ import annotations

import io
import os
import tempfile
import warnings
from dataclasses import dataclass, field

import numpy as np

from bgplvm.datasets import Dataset, DatasetError, load_array, numpy_header_problem
from bgplvm.datasets.record import ImageRenderer, VectorRenderer

from .user_input import UserError, check_upload

KINDS = ("vector", "image", "mocap")
ORDERS = {"row-major (C)": "C", "column-major (F)": "F"}
AMC_RATE_HZ = 120.0
TIME_KEYS = ("t", "times", "time")
SEQUENCE_KEYS = ("sequence", "sequences", "seq", "sequence_ids")


# --------------------------------------------------------------------------- arrays
def _read_array_upload(filename: str, data: bytes) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """(Y, t or None, sequence or None) from an uploaded array file."""
    check_upload(data, filename)
    ext = os.path.splitext(filename)[1].lower()
    if ext not in (".npy", ".npz", ".csv", ".txt", ".tsv"):
        raise UserError(f"{filename}: unsupported file type {ext or '(none)'}; use .npy, .npz or .csv "
                        "(or .asf + .amc for motion capture)")
    t = seq = None
    if ext == ".npz":  # read here, in memory (the other types go through load_array's checks)
        why = numpy_header_problem(data[:8], ext, filename)
        if why:  # else np.load takes it for a pickle and relays numpy's advice to unpickle it
            raise UserError(why)
        try:
            with np.load(io.BytesIO(data), allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files}
        except Exception as e:
            raise UserError(f"{filename}: not a readable .npz file ({type(e).__name__}: {e})") from None
        t = next((arrays.pop(k) for k in TIME_KEYS if k in arrays), None)
        seq = next((arrays.pop(k) for k in SEQUENCE_KEYS if k in arrays), None)
        for k in ("labels", "label"):
            arrays.pop(k, None)
        if "Y" in arrays:
            Y = arrays["Y"]
        elif len(arrays) == 1:
            Y = next(iter(arrays.values()))
        else:
            raise UserError(f"{filename} holds the arrays {sorted(arrays)}: name the data 'Y' "
                            f"(and time stamps 't', sequence ids 'sequence')")
        try:
            from bgplvm.datasets import validate_array

            Y = validate_array(Y, filename, allow_missing=True)
        except DatasetError as e:
            raise UserError(str(e)) from None
    else:
        fd, path = tempfile.mkstemp(suffix=ext, prefix="bgplvm-upload-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            try:
                Y = load_array(path, allow_missing=True)  # NaN / empty cells: missing values
            except DatasetError as e:
                msg = str(e).replace(path, filename).replace(os.path.basename(path), filename)
                raise UserError(msg if filename in msg else f"{filename}: {msg}") from None
            except Exception as e:  # any parser failure is a bad file, not a server error
                raise UserError(f"{filename}: could not read it as an array ({type(e).__name__}: {e})") from None
        finally:
            os.unlink(path)
    Y = np.asarray(Y, dtype=np.float64)
    if Y.ndim != 2:
        raise UserError(f"{filename}: expected a 2-D array (N rows, D columns), got shape {Y.shape}")
    if Y.shape[0] < 3 or Y.shape[1] < 1:
        raise UserError(f"{filename}: need at least 3 rows and 1 column, got shape {Y.shape}")
    try:  # missing values (NaN) train; what the model cannot take is refused now, with its indices
        from bgplvm.missing import check_training_outputs

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a mostly-missing upload: said on the page instead
            check_training_outputs(Y, name=filename)
    except ValueError as e:
        raise UserError(str(e)) from None
    return Y, t, seq


def _times(filename: str, N: int, t, seq, rows_are_frames: bool, fps: float):
    """Validated (times, sequence) or (None, None)."""
    from bgplvm.dynamical import check_times

    if t is None and seq is not None and rows_are_frames:
        seq = np.asarray(seq)
        t = np.empty(N)
        for s in np.unique(seq):  # time = frame number within each sequence
            rows = np.flatnonzero(seq == s)
            t[rows] = np.arange(rows.size) / fps
    if t is None and rows_are_frames:
        t = np.arange(N) / fps
    if t is None:
        if seq is None:
            return None, None
        try:  # the ids alone (one per row, integer or string): against placeholder times
            return None, check_times(np.arange(N, dtype=np.float64), N, seq)[1]
        except ValueError as e:
            raise UserError(f"{filename}: {e}") from None
    try:
        t, seq = check_times(t, N, seq)
    except ValueError as e:
        raise UserError(f"{filename}: {e}") from None
    return t, seq


def _frame_rate(t: np.ndarray, seq, default: float) -> float:
    """Frames per time unit of time stamps t (N,): 1 / the median step within sequences
    (``default`` when no sequence has two frames)."""
    ids = np.zeros(len(t)) if seq is None else np.asarray(seq)
    steps = np.concatenate([np.diff(t[ids == s]) for s in np.unique(ids)] or [np.empty(0)])
    steps = steps[steps > 0]
    return float(1.0 / np.median(steps)) if steps.size else default


def image_renderer(D: int, height: int | None, width: int | None, order: str,
                   vmin: float, vmax: float, filename: str = "upload") -> ImageRenderer:
    """An ImageRenderer for rows of D pixels; H or W may be left out (0/None) when the
    other divides D, both when D is a perfect square."""
    order = ORDERS.get(order, order)
    if order not in ("C", "F"):
        raise UserError(f"pixel order must be row-major (C) or column-major (F), got {order!r}")
    H, W = int(height or 0), int(width or 0)
    if H <= 0 and W <= 0:
        r = int(round(np.sqrt(D)))
        if r * r != D:
            raise UserError(f"{filename}: rows have {D} values; give the frame height and width "
                            f"(H x W must equal {D})")
        H = W = r
    elif H <= 0:
        H = D // W
    elif W <= 0:
        W = D // H
    if H * W != D:
        raise UserError(f"{filename}: rows have {D} values but a {H} x {W} frame has {H * W} pixels; "
                        f"fix the height and width (H x W must equal {D})")
    # column-major: reshape (W, H) in C order and transpose = reshape (H, W) in F order
    return ImageRenderer(height=H, width=W, order=order, vmin=float(vmin), vmax=float(vmax))


def array_dataset(filename: str, data: bytes, kind: str = "vector", height: int | None = None,
                  width: int | None = None, order: str = "C", rows_are_frames: bool = False,
                  fps: float = 30.0) -> Dataset:
    """An uploaded array as a Dataset drawn as vectors or as an image sequence."""
    if kind not in ("vector", "image"):
        raise UserError(f"an array upload is drawn as 'vector' or 'image', not {kind!r}")
    Y, t, seq = _read_array_upload(filename, data)
    N, D = Y.shape
    own_times = t is not None
    t, seq = _times(filename, N, t, seq, rows_are_frames, float(fps))
    if own_times:  # the file's time stamps set the playback rate, not the page's frames/s
        fps = _frame_rate(t, seq, float(fps))
    name = os.path.splitext(os.path.basename(filename))[0] or "upload"
    meta = {"title": f"{filename} (uploaded)", "fps": float(fps), "time_unit": "s", "uploaded": True,
            "own_times": own_times}
    missing = int(np.isnan(Y).sum())
    if missing:
        meta["missing"] = missing
    if kind == "image":
        lo, hi = float(np.nanmin(Y)), float(np.nanmax(Y))
        renderer = image_renderer(D, height, width, order, lo, hi, filename)
        meta["title"] = f"{filename} (uploaded image sequence, {renderer.height} x {renderer.width})"
    else:
        renderer = VectorRenderer()
    return Dataset(name=name, Y=Y, renderer=renderer, sequence=seq, times=t, meta=meta)


# --------------------------------------------------------------------------- motion capture
@dataclass(frozen=True)
class AmcPoseRenderer:
    """Rows of AMC channels without the root's TX, TZ -> (J, 3) points, z up, metres, by
    forward kinematics of ``skeleton`` (the figure stays in place on the ground plane)."""

    skeleton: object
    kept: tuple[int, ...]  # channel index of each column of a row
    kind: str = field(default="pose", init=False)

    @property
    def connections(self):
        return self.skeleton.connections

    @property
    def names(self):
        return self.skeleton.point_names

    def channels(self, Y: np.ndarray) -> np.ndarray:
        Y = np.nan_to_num(np.atleast_2d(np.asarray(Y, dtype=np.float64)))
        C = np.zeros((Y.shape[0], self.skeleton.n_channels))
        C[:, list(self.kept)] = Y
        return C

    def positions_many(self, Y: np.ndarray) -> np.ndarray:
        return self.skeleton.positions(self.channels(Y), zup=True) * self.skeleton.metres_per_unit

    def positions(self, y: np.ndarray) -> np.ndarray:
        return self.positions_many(np.reshape(y, (1, -1)))[0]


def one_per_name(files: dict) -> dict:
    """Dropped files, each once under its own name: of those with one name (a file dropped
    twice; a folder's drop sends "dir/walk.amc", the same file dropped alone "walk.amc") the
    last in ``files`` -- the latest dropped -- is kept, where it is. A motion dropped under
    two such names was read, and listed, as two sequences."""
    out: dict = {}
    for name, data in files.items():
        own = str(name).replace("\\", "/").rstrip("/").rsplit("/", 1)[-1] or str(name)
        out.pop(own, None)
        out[own] = data
    return out


def mocap_dataset(files: dict[str, bytes], subsample: int = 4, rate_hz: float = AMC_RATE_HZ) -> Dataset:
    """One ASF skeleton plus AMC motions (each a sequence) as a Dataset drawn as a skeleton.
    A file given twice (``one_per_name``) counts once, the later one."""
    from bgplvm.datasets.mocap.asf import parse_amc, parse_asf

    files = one_per_name(files)
    asf = {n: d for n, d in files.items() if n.lower().endswith(".asf")}
    amc = {n: d for n, d in files.items() if n.lower().endswith(".amc")}
    other = sorted(n for n in files if n not in asf and n not in amc)
    if other:
        raise UserError(f"motion capture needs one .asf skeleton and .amc motion files; "
                        f"{', '.join(other)} is neither")
    if len(asf) != 1:
        raise UserError("motion capture needs exactly one .asf skeleton file beside the .amc motions"
                        + (f" (got {len(asf)}: {', '.join(sorted(asf))})" if asf else ""))
    if not amc:
        raise UserError("add one or more .amc motion files for this skeleton (each becomes a sequence)")
    subsample = max(1, int(subsample))
    (asf_name, asf_bytes), = asf.items()
    check_upload(asf_bytes, asf_name)
    try:
        skel = parse_asf(asf_bytes.decode("ascii", errors="replace"), source=asf_name)
    except ValueError as e:
        raise UserError(f"could not read the skeleton: {e}") from None
    names = skel.channel_names
    kept = tuple(i for i, n in enumerate(names) if n not in ("root.TX", "root.TZ"))
    Ys, seqs, times, trials = [], [], [], []
    for s, (name, data) in enumerate(sorted(amc.items())):
        check_upload(data, name)
        try:
            C = np.asarray(parse_amc(data.decode("ascii", errors="replace"), skel, source=name), dtype=np.float64)
        except ValueError as e:
            raise UserError(f"could not read the motion: {e} (is {name} a motion of {asf_name}?)") from None
        C = C[::subsample]
        if C.shape[0] < 3:
            raise UserError(f"{name}: only {C.shape[0]} frames after taking every {subsample}th; need at least 3")
        Ys.append(C[:, list(kept)])
        seqs.append(np.full(C.shape[0], s, dtype=np.int64))
        times.append(np.arange(C.shape[0]) * subsample / rate_hz)
        trials.append(os.path.splitext(name)[0])
    fps = rate_hz / subsample
    title = f"{asf_name} + {len(amc)} motion(s) (uploaded motion capture, {fps:g} frames/s)"
    return Dataset(name=os.path.splitext(asf_name)[0] or "mocap", Y=np.vstack(Ys),
                   renderer=AmcPoseRenderer(skel, kept), sequence=np.concatenate(seqs),
                   times=np.concatenate(times),
                   meta={"title": title, "trials": trials, "frame_rate_hz": fps, "time_unit": "s", "uploaded": True,
                         "channel_names": [names[i] for i in kept],
                         "asf": asf_bytes.decode("ascii", errors="replace")})  # to draw it again (drawing_of)


# --------------------------------------------------------------------------- saved models
#: what a saved model keeps of an uploaded data set's meta (the rows are in the model)
_DRAWING_META = ("title", "trials", "fps", "frame_rate_hz", "time_unit")


def drawing_of(ds: Dataset) -> dict | None:
    """How to draw an uploaded data set again, JSON-safe, for a saved model's metadata: the
    model file holds the rows, but not the skeleton or image shape, the trial names, nor
    (for a static model) the sequence ids and time stamps; without them a reopened model
    of uploaded motion capture or images was drawn as plain vectors. None for the shipped
    data sets, which are found by name."""
    meta = ds.meta or {}
    if not meta.get("uploaded"):
        return None
    r = ds.renderer
    if isinstance(r, ImageRenderer):
        how = {"kind": "image", "height": int(r.height), "width": int(r.width), "order": r.order,
               "vmin": None if r.vmin is None else float(r.vmin), "vmax": None if r.vmax is None else float(r.vmax)}
    elif isinstance(r, AmcPoseRenderer) and meta.get("asf"):
        how = {"kind": "amc", "asf": meta["asf"], "kept": [int(i) for i in r.kept]}
    else:
        how = {"kind": "vector"}
    out = {"renderer": how, **{k: meta[k] for k in _DRAWING_META if meta.get(k) is not None}}
    if ds.times is not None:
        out["times"] = [float(v) for v in ds.times]
    if ds.sequence is not None:
        out["sequence"] = np.asarray(ds.sequence).tolist()
    return out


def dataset_from_drawing(name: str, Y: np.ndarray, drawing: dict) -> Dataset:
    """The Dataset ``drawing_of`` described, around the model's rows ``Y``."""
    from bgplvm.datasets.mocap.asf import parse_asf

    how = drawing.get("renderer", {})
    if how.get("kind") == "image":
        renderer = ImageRenderer(height=how["height"], width=how["width"], order=how.get("order", "C"),
                                 vmin=how.get("vmin"), vmax=how.get("vmax"))
    elif how.get("kind") == "amc":
        renderer = AmcPoseRenderer(parse_asf(how["asf"], source=f"{name} (saved skeleton)"), tuple(how["kept"]))
    else:
        renderer = VectorRenderer()
    meta = {k: drawing[k] for k in _DRAWING_META if k in drawing}
    meta.update(uploaded=True, title=f"{drawing.get('title', name)} (rows stored in the model file)")
    if how.get("kind") == "amc":
        meta["asf"] = how["asf"]
    times = np.asarray(drawing["times"], dtype=np.float64) if "times" in drawing else None
    seq = np.asarray(drawing["sequence"]) if "sequence" in drawing else None
    return Dataset(name=name, Y=np.asarray(Y), renderer=renderer, sequence=seq, times=times, meta=meta)
