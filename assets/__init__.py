"""Pre-trained models the explorer opens with (imported as ``bgplvm.assets``; the folder is
``assets/``).

    from bgplvm.assets import ASSETS, load_asset, AssetUnavailable
    model, ds = load_asset("cmu35")      # DynamicalGPLVM + the Dataset it was trained on

Each asset is a bgplvm model file **without its data**: the real data sets are not
redistributed with the package (they are fetched from their public URLs into the user
cache, or read from an offline mirror; see ``bgplvm.datasets``). What is shipped is the
fitted model only -- q(X)'s parameters, the inducing inputs, kernel and noise -- plus a
JSON record beside it (data set, rows, settings, seed, iterations, bound, wall time, and
``data_check``: the raw files' sha256, the shape and column sums of Y). ``load_asset`` loads
the data set, checks its rows against ``data_check`` (by what survives rounding: the same
page on every CPU) and puts Y back into the model. When the data cannot be had (no network, no mirror, no
cache) it raises ``AssetUnavailable`` with the reason and the remedy; the embedded
synthetic walk's model ships whole (its data are the project's own) and always loads.

Rebuild with ``python -m bgplvm.assets.make_assets NAME`` (see ``make_assets.py``).
"""

from __future__ import annotations

import hashlib
import io
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ASSETS_DIR = Path(__file__).resolve().parent


@dataclass(frozen=True)
class AssetSpec:
    """One shipped model: which data it was fitted to and how it was built."""

    name: str
    title: str
    file: str
    dataset: str  # bgplvm.datasets name
    split: str = "train"
    rows: tuple[int, int] | None = None  # [start, stop) of the data set's rows, or all
    embedded_data: bool = False  # True: the file holds its Y (embedded, project-made data)
    model_class: str = "DynamicalGPLVM"
    settings: dict = field(default_factory=dict)  # constructor arguments
    iters: int = 1000
    fps: float = 30.0  # playback speed 1x, frames per second
    time_unit: str = "s"

    @property
    def path(self) -> Path:
        return ASSETS_DIR / self.file

    @property
    def record_path(self) -> Path:
        return self.path.with_suffix(".json")


ASSETS: dict[str, AssetSpec] = {a.name: a for a in (
    AssetSpec(
        name="cmu35", title="CMU mocap subject 35 (walks and jogs), dynamical model",
        file="cmu35_dynamical.npz", dataset="cmu35",
        settings=dict(latent_dim=9, num_inducing=50, kernel="rbf", time_kernel="matern32", seed=0),
        iters=1000, fps=30.0, time_unit="s"),
    AssetSpec(
        name="frey_video", title="Frey faces as a video (frames 0-299), dynamical model",
        file="frey_video_dynamical.npz", dataset="frey_faces", rows=(0, 300),
        settings=dict(latent_dim=6, num_inducing=40, kernel="rbf", time_kernel="matern32", seed=0),
        iters=400, fps=15.0, time_unit="frame"),
    AssetSpec(
        name="synth_walk_dynamical", title="Synthetic walk (embedded), dynamical model",
        file="synth_walk_dynamical.npz", dataset="synth_walk", embedded_data=True,
        settings=dict(latent_dim=4, num_inducing=25, kernel="rbf", time_kernel="matern32", seed=0),
        iters=400, fps=30.0, time_unit="s"),
    AssetSpec(
        name="synth_walk", title="Synthetic walk (embedded), static model",
        file="synth_walk_model.npz", dataset="synth_walk", embedded_data=True,
        model_class="BayesianGPLVM", settings=dict(latent_dim=5, num_inducing=25, kernel="rbf", seed=0),
        iters=400, fps=30.0, time_unit="s"),
)}

#: The asset the explorer opens on, and the one it falls back to when that one's data
#: cannot be loaded.
DEFAULT_ASSET = "cmu35"
FALLBACK_ASSET = "synth_walk_dynamical"


class AssetUnavailable(RuntimeError):
    """An asset's data set could not be loaded (offline, no mirror, no cache) or does not
    match the model; the message says why and what to do."""


def sha256_rows(Y: np.ndarray) -> str:
    """sha256 of Y as C-contiguous float64 bytes, with its shape. Recorded for information:
    the rows are computed from the raw files (np.sin, np.arcsin, ...), whose last bits
    depend on the CPU's SIMD paths, so this hash differs between machines; the check is
    ``data_check`` / ``check_rows``."""
    Y = np.ascontiguousarray(Y, dtype=np.float64)
    h = hashlib.sha256(repr(Y.shape).encode())
    h.update(Y.tobytes())
    return h.hexdigest()


#: relative tolerance of ``check_rows``: rounding moves the fingerprints by ~N * 1e-16 of
#: their scale; a changed, dropped or reordered row by far more
ROWS_RTOL = 1e-9


def _row_weights(N: int) -> np.ndarray:
    """Fixed weights in [-0.5, 0.5) for row n, from integer arithmetic (the same bits on
    every machine): a weighted column sum changes when rows are reordered."""
    n = np.arange(N, dtype=np.int64)
    return ((n * 2654435761) % 1000).astype(np.float64) / 1000.0 - 0.5


def _fingerprints(Y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(column sums, row-weighted column sums, their scale sum_n |Y_nd|), each (D,)."""
    Y = np.asarray(Y, dtype=np.float64)
    return Y.sum(0), _row_weights(Y.shape[0]) @ Y, np.abs(Y).sum(0)


def data_check(Y: np.ndarray, source_sha256: dict | None = None) -> dict:
    """What a data-free model records of the rows it was fitted to, to recognise them on
    another machine: the raw files' sha256 (which the loaders verify), the shape, and
    column sums plain and row-weighted (values to a tolerance, not bits)."""
    total, weighted, _ = _fingerprints(Y)
    return {"shape": list(np.shape(Y)), "source_sha256": dict(source_sha256 or {}),
            "column_sums": total.tolist(), "weighted_column_sums": weighted.tolist(), "rtol": ROWS_RTOL}


def check_rows(Y: np.ndarray, check: dict, source_sha256: dict | None = None) -> str | None:
    """None when ``Y`` (and the raw files' ``source_sha256``, where both are known) match a
    ``data_check`` record; else what differs, in words."""
    want_src = check.get("source_sha256") or {}
    if want_src and source_sha256 is not None:
        bad = sorted(k for k in want_src if source_sha256.get(k) != want_src[k])
        if bad:
            return f"its raw files differ ({', '.join(bad)})"
    if list(np.shape(Y)) != list(check["shape"]):
        return f"shape {tuple(np.shape(Y))} != {tuple(check['shape'])}"
    total, weighted, scale = _fingerprints(Y)
    tol = float(check.get("rtol", ROWS_RTOL)) * (scale + 1e-300)
    for got, key in ((total, "column_sums"), (weighted, "weighted_column_sums")):
        off = np.abs(got - np.asarray(check[key], dtype=np.float64)) / tol
        if not np.all(off <= 1.0):  # NaN fails too
            d = int(np.nanargmax(np.where(np.isfinite(off), off, np.inf)))
            return f"values differ (column {d}: {key.replace('_', ' ')} {got[d]!r} != {check[key][d]!r})"
    return None


def get_spec(name: str) -> AssetSpec:
    try:
        return ASSETS[name]
    except KeyError:
        raise KeyError(f"unknown asset {name!r}; known: {', '.join(ASSETS)}") from None


def read_record(name: str) -> dict:
    spec = get_spec(name)
    try:
        return json.loads(spec.record_path.read_text())
    except (OSError, ValueError):
        return {}


def dataset_for(spec: AssetSpec, mirror=None, cache_dir=None):
    """The (row-selected) Dataset the asset was trained on; AssetUnavailable if it cannot be had."""
    import dataclasses

    from bgplvm.datasets import DatasetError, load

    try:
        ds = load(spec.dataset, split=spec.split, mirror=mirror, cache_dir=cache_dir, progress=False)
    except DatasetError as e:
        import re

        why = re.search(r"(\w+Error: [^\n]+)", str(e))
        why = why.group(1) if why else str(e).splitlines()[0]
        raise AssetUnavailable(
            f"the {spec.dataset!r} data set is not cached here and could not be downloaded or read from a "
            f"mirror ({why}). The pre-trained model ships without its data: run "
            f"`bgplvm datasets fetch {spec.dataset}` once while online, or set BGPLVM_DATA_MIRROR to an "
            f"offline mirror") from None
    ds = dataclasses.replace(ds, meta={**ds.meta, "fps": spec.fps, "time_unit": spec.time_unit})
    return ds if spec.rows is None else ds.rows(*spec.rows)


def strip_data(model_bytes: bytes, record: dict) -> bytes:
    """A saved model file (bytes) without its Y member, with ``record`` as asset.json."""
    with np.load(io.BytesIO(model_bytes), allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files if k != "Y"}
    arrays["asset.json"] = np.frombuffer(json.dumps(record).encode(), dtype=np.uint8)
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    return buf.getvalue()


def load_model_file(path: Path, Y: np.ndarray | None = None, source_sha256: dict | None = None,
                    check: bool = True):
    """A model from an asset file; ``Y`` fills in the data of a data-free asset, checked
    (unless ``check`` is False) against the recorded ``data_check`` (the raw files'
    ``source_sha256`` where given, shape, values to a tolerance); a record without one
    (older files) by its rows' sha256."""
    from bgplvm import BayesianGPLVM

    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    record = json.loads(arrays.pop("asset.json").tobytes().decode()) if "asset.json" in arrays else {}
    if "Y" not in arrays:
        if Y is None:
            raise AssetUnavailable(f"{path.name} holds no data: pass the data set it was fitted to")
        if not check:
            why = None
        elif "data_check" in record:
            why = check_rows(Y, record["data_check"], source_sha256)
        else:
            want, got = record.get("data_sha256"), sha256_rows(Y)
            why = f"sha256 {got[:12]} != {want[:12]}" if want and want != got else None
        if why:
            raise AssetUnavailable(
                f"{path.name} was fitted to other data than the {record.get('dataset')!r} rows found here "
                f"({why}); rebuild it with `python -m bgplvm.assets.make_assets {record.get('asset', '')}`")
        arrays["Y"] = np.ascontiguousarray(Y, dtype=np.float64)
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    buf.seek(0)
    return BayesianGPLVM.load(buf)


def load_asset(name: str, mirror=None, cache_dir=None):
    """(model, Dataset) of asset ``name``. Raises AssetUnavailable when its data cannot be
    loaded, FileNotFoundError when the asset file is missing (rebuild it)."""
    spec = get_spec(name)
    if not spec.path.is_file():
        raise FileNotFoundError(f"{spec.path} is missing: run `python -m bgplvm.assets.make_assets {name}`")
    if spec.embedded_data:
        from bgplvm.datasets import load

        ds = load(spec.dataset, progress=False)
        return load_model_file(spec.path), ds
    ds = dataset_for(spec, mirror=mirror, cache_dir=cache_dir)
    return load_model_file(spec.path, ds.Y, (ds.meta or {}).get("sha256")), ds


__all__ = ["ASSETS", "ASSETS_DIR", "AssetSpec", "AssetUnavailable", "DEFAULT_ASSET", "FALLBACK_ASSET",
           "check_rows", "data_check", "get_spec", "load_asset", "load_model_file", "read_record",
           "sha256_rows", "strip_data"]
