"""Parsers: the fetched files of a data set -> one ``Dataset``.

One function per ``DatasetSpec.loader``; each takes ``(spec, paths, split)`` where
``paths`` maps a registry file name to its local path. Any failure while reading a
file becomes a ``ParseError`` naming that file. The motion-capture parsers live in
``bgplvm.datasets.mocap`` and are imported lazily.
"""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path

import numpy as np

from .errors import DatasetError, ParseError
from .record import Dataset, ImageRenderer, StickFigureRenderer, VectorRenderer
from .registry import DatasetSpec

# Class order of the one-hot columns of DataTrnLbls.txt etc. Source: Neil Lawrence's
# teaching material (github.com/lawrennd/snippets, _datasets/includes/oil-flow-data.md:
# "labelled according to the multi-phase flow configuration (homogeneous, annular or
# laminar)", and _dimred/includes/oil-flow-sklearn-pca.md, which names the columns
# ["homogeneous", "annular", "stratified"] in that order). "Laminar" = stratified.
OIL_LABEL_NAMES = ("homogeneous", "annular", "stratified")
OIL_FILES = {"train": "DataTrn", "test": "DataTst", "validation": "DataVdn"}


@contextlib.contextmanager
def reading(path: Path, spec: DatasetSpec):
    """Turn any exception raised while parsing ``path`` into a ParseError naming it."""
    try:
        yield
    except DatasetError:
        raise
    except Exception as e:  # noqa: BLE001 -- re-raised with the file name
        raise ParseError(
            f"could not parse {path} (data set {spec.name!r}): {type(e).__name__}: {e}. "
            f"{parse_remedy(spec, e)}"
        ) from e


def parse_remedy(spec: DatasetSpec, e: BaseException) -> str:
    """What to do about a file that failed to parse. It passed its size / sha256 check just
    before (``load`` fetches first), so deleting and downloading it again fetches the same
    bytes: only a file that went missing or unreadable since is worth fetching again."""
    if isinstance(e, OSError):
        return (f"The file could not be read (removed or made unreadable since it was checked?): "
                f"run `bgplvm datasets fetch {spec.name}` to check it and fetch it again.")
    return ("The file passed its size and sha256 check, so it holds the expected bytes: this is "
            "a fault of the loader or of a library it uses (a version it was not written for?); "
            "please report it with this message.")


def _check(cond: bool, msg: str) -> None:
    if not cond:
        raise ValueError(msg)


def base_meta(spec: DatasetSpec, split: str, **extra) -> dict:
    """Registry facts every Dataset carries in ``meta`` (JSON-able)."""
    meta = {
        "name": spec.name,
        "title": spec.title,
        "split": split,
        "licence": spec.licence,
        "citation": spec.citation,
        "description": spec.description,
        "urls": spec.urls,
        "sha256": {f.name: f.sha256 for f in spec.files if f.sha256},
        "embedded": spec.embedded,
    }
    meta.update(extra)
    return meta


# --------------------------------------------------------------------------- oil
def load_oil(spec: DatasetSpec, paths: dict, split: str) -> Dataset:
    stem = OIL_FILES[split]
    with reading(paths[f"{stem}.txt"], spec):
        Y = np.loadtxt(paths[f"{stem}.txt"], dtype=np.float64, ndmin=2)
        _check(Y.shape[1] == 12, f"expected 12 columns, got shape {Y.shape}")
    with reading(paths[f"{stem}Lbls.txt"], spec):
        onehot = np.loadtxt(paths[f"{stem}Lbls.txt"], dtype=np.float64, ndmin=2)
        _check(onehot.shape == (Y.shape[0], 3), f"expected labels of shape ({Y.shape[0]}, 3), got {onehot.shape}")
        _check(bool(np.all((onehot == 0) | (onehot == 1)) and np.all(onehot.sum(1) == 1)),
               "labels are not one-hot rows")
    return Dataset(
        name=spec.name,
        Y=Y,
        # 12 readings = 6 gamma beams x 2 energies; the column order is not documented
        # at the source, so the columns are left unnamed.
        renderer=VectorRenderer(),
        labels=onehot.argmax(1).astype(np.int64),
        label_names=OIL_LABEL_NAMES,
        meta=base_meta(spec, split, label_names_source="lawrennd/snippets (oil-flow-data.md)"),
    )


# --------------------------------------------------------------------------- images
def load_frey_faces(spec: DatasetSpec, paths: dict, split: str) -> Dataset:
    path = paths["frey_rawface.mat"]
    with reading(path, spec):
        import scipy.io

        ff = scipy.io.loadmat(path)["ff"]
        _check(ff.ndim == 2 and ff.shape[0] == 560, f"expected `ff` of shape (560, frames), got {ff.shape}")
    N = ff.shape[1]
    # Each column is one frame stored row by row, 20 wide: reshape (28, 20) in C order
    # is upright (checked by rendering; pinned by a pixel-statistics test).
    return Dataset(
        name=spec.name,
        Y=ff.T.astype(np.float64),
        renderer=ImageRenderer(height=28, width=20, order="C", vmin=0.0, vmax=255.0),
        sequence=np.zeros(N, dtype=np.int64),
        times=np.arange(N, dtype=np.float64),
        meta=base_meta(spec, split, time_unit="frame", pixel_range=[0, 255]),
    )


def load_digits(spec: DatasetSpec, paths: dict, split: str) -> Dataset:
    path = paths["digits.npy"]
    with reading(path, spec):
        d = np.load(path, allow_pickle=False)
        _check(d.shape == (10, 55, 16, 16), f"expected an array of shape (10, 55, 16, 16), got {d.shape}")
    return Dataset(
        name=spec.name,
        Y=d.reshape(550, 256).astype(np.float64),
        renderer=ImageRenderer(height=16, width=16, order="C", vmin=0.0, vmax=1.0),
        labels=np.repeat(np.arange(10, dtype=np.int64), 55),
        label_names=tuple(str(k) for k in range(10)),
        meta=base_meta(spec, split, pixel_range=[0, 1], ink=0.0),
    )


def load_usps(spec: DatasetSpec, paths: dict, split: str) -> Dataset:
    path = paths["usps.h5"]
    with reading(path, spec):
        import h5py

        with h5py.File(path, "r") as h:
            X = np.asarray(h[split]["data"], dtype=np.float64)
            t = np.asarray(h[split]["target"], dtype=np.int64)
        _check(X.ndim == 2 and X.shape[1] == 256 and t.shape == (X.shape[0],),
               f"expected data (N, 256) and target (N,), got {X.shape} and {t.shape}")
    return Dataset(
        name=spec.name,
        Y=X,
        renderer=ImageRenderer(height=16, width=16, order="C", vmin=0.0, vmax=1.0),
        labels=t,
        label_names=tuple(str(k) for k in range(10)),
        meta=base_meta(spec, split, pixel_range=[0, 1], ink=1.0),
    )


# --------------------------------------------------------------------------- motion capture
def _with_registry_meta(ds: Dataset, spec: DatasetSpec, split: str) -> Dataset:
    """The parser's meta (recipe details) on top of the registry's, except that the
    registry's name, licence, citation, URLs and checksums always win."""
    reg = base_meta(spec, split)
    meta = {**reg, **dict(ds.meta or {}), "parser_name": ds.name}
    for k in ("name", "title", "split", "licence", "citation", "urls", "sha256", "embedded"):
        meta[k] = reg[k]
    return dataclasses.replace(ds, name=spec.name, meta=meta)


def _call_mocap(spec: DatasetSpec, paths: dict, module: str, call):
    import importlib

    try:
        mod = importlib.import_module(f"bgplvm.datasets.mocap.{module}")
    except ImportError as e:
        raise DatasetError(
            f"data set {spec.name!r} needs the motion-capture parser bgplvm.datasets.mocap.{module}, "
            f"which could not be imported ({e})."
        ) from e
    if not hasattr(mod, "build"):
        raise DatasetError(
            f"data set {spec.name!r}: bgplvm.datasets.mocap.{module} has no build() function yet."
        )
    files = ", ".join(str(p) for p in paths.values())
    try:
        return call(mod.build)
    except ParseError as e:  # the parser names the file; add the data set, paths and a remedy
        raise ParseError(
            f"data set {spec.name!r}: {e} (files: {files}). {parse_remedy(spec, e.__cause__ or e)}"
        ) from e
    except DatasetError:
        raise
    except Exception as e:  # noqa: BLE001 -- re-raised with the file names
        raise ParseError(
            f"could not parse the files of data set {spec.name!r} ({files}): {type(e).__name__}: {e}. "
            f"{parse_remedy(spec, e)}"
        ) from e


def load_cmu35(spec: DatasetSpec, paths: dict, split: str) -> Dataset:
    ds = _call_mocap(spec, paths, "cmu35", lambda build: build(dict(paths), split))
    return _with_registry_meta(ds, spec, split)


def load_osu(spec: DatasetSpec, paths: dict, split: str) -> Dataset:
    motion = spec.options["motion"]
    ds = _call_mocap(spec, paths, "osu", lambda build: build(motion, dict(paths)))
    return _with_registry_meta(ds, spec, split)


# --------------------------------------------------------------------------- embedded
def load_synth_walk(spec: DatasetSpec, paths: dict, split: str) -> Dataset:
    path = paths["synth_walk.npz"]
    with reading(path, spec), np.load(path, allow_pickle=False) as z:
        Y = z["Y"].astype(np.float64)
        names = tuple(str(s) for s in z["joint_names"])
        connections = tuple((int(a), int(b)) for a, b in z["connections"])
        labels, sequence, times = z["labels"].astype(np.int64), z["sequence"].astype(np.int64), z["times"]
        label_names = tuple(str(s) for s in z["label_names"])
        truth = {k: z[k].astype(float).tolist() for k in ("phase", "speed")}
    return Dataset(
        name=spec.name,
        Y=Y,
        renderer=StickFigureRenderer(connections=connections, names=names, layout="interleaved", up_axis=2),
        labels=labels,
        label_names=label_names,
        sequence=sequence,
        times=times.astype(np.float64),
        meta=base_meta(spec, split, units="metres", fps=30.0, time_unit="s", truth=truth),
    )


def load_synth_video(spec: DatasetSpec, paths: dict, split: str) -> Dataset:
    path = paths["synth_video.npz"]
    with reading(path, spec), np.load(path, allow_pickle=False) as z:
        frames = z["frames"]  # (N, H, W) uint8
        N, H, W = frames.shape
        Y = frames.reshape(N, H * W).astype(np.float64) / 255.0
        sequence, times = z["sequence"].astype(np.int64), z["times"].astype(np.float64)
        truth = {k: z[k].astype(float).tolist() for k in ("path_angle", "orientation")}
    return Dataset(
        name=spec.name,
        Y=Y,
        renderer=ImageRenderer(height=H, width=W, order="C", vmin=0.0, vmax=1.0),
        sequence=sequence,
        times=times,
        meta=base_meta(spec, split, fps=25.0, time_unit="s", pixel_range=[0, 1], truth=truth),
    )


#: the 21 body points of the pose view, by their index in the 63 numbers (x, y, z each; y
#: grows downwards): 0 root (1: the root again), 2 spine, 3 neck, 4 head, 5-8 and 9-12 the
#: two arms (clavicle, shoulder, elbow, hand), 13-15 and 16-18 the two legs (hip, knee,
#: ankle), 19 and 20 the toes. Found by drawing them (bone lengths agree between the sides).
ANKUR_CONNECTIONS = ((0, 2), (2, 3), (3, 4), (3, 5), (5, 6), (6, 7), (7, 8), (3, 9), (9, 10), (10, 11),
                     (11, 12), (0, 13), (13, 14), (14, 15), (15, 19), (0, 16), (16, 17), (17, 18), (18, 20))

#: names of the 21 points (the sides "a" and "b": which is the subject's left is not recorded)
ANKUR_NAMES = ("root", "root (copy)", "spine", "neck", "head",
               *(f"{j} (side {s})" for s in "ab" for j in ("clavicle", "shoulder", "elbow", "hand")),
               *(f"{j} (side {s})" for s in "ab" for j in ("hip", "knee", "ankle")),
               "toes (side a)", "toes (side b)")


def load_ankur_pose(spec: DatasetSpec, paths: dict, split: str) -> Dataset:
    path = paths["ankurDataPoseSilhouette.mat"]
    suffix = "" if split == "train" else "_test"
    with reading(path, spec):
        import scipy.io

        d = scipy.io.loadmat(path)
        pose, silhouette = d[f"Z{suffix}"].astype(np.float64), d[f"Y{suffix}"].astype(np.float64)
        _check(pose.shape[1] == 63 and silhouette.shape[1] == 100 and pose.shape[0] == silhouette.shape[0],
               f"expected poses (N, 63) and silhouettes (N, 100), got {pose.shape} and {silhouette.shape}")
    stick = StickFigureRenderer(connections=ANKUR_CONNECTIONS, up_axis=1, up_sign=-1.0, names=ANKUR_NAMES)
    return Dataset(
        name=spec.name,
        Y=pose,
        renderer=stick,
        views={"pose": pose, "silhouette": silhouette},
        view_renderers={"pose": stick, "silhouette": VectorRenderer()},
        meta=base_meta(spec, split, views=["pose", "silhouette"]),
    )


LOADERS = {
    "ankur_pose": load_ankur_pose,
    "oil": load_oil,
    "frey_faces": load_frey_faces,
    "digits": load_digits,
    "usps": load_usps,
    "cmu35": load_cmu35,
    "osu": load_osu,
    "synth_walk": load_synth_walk,
    "synth_video": load_synth_video,
}
