"""bgplvm's data layer (imported as ``bgplvm.datasets``; the folder is ``datasets/``).

    from bgplvm.datasets import load, list_datasets, load_array, fetch, Dataset, DatasetError
    ds = load("oil")                          # split="train" | "test" | "validation"
    ds = load("usps", split="test", mirror="../shared/datasets", cache_dir="/tmp/c")
    ds = load(DEFAULT_DATASET)                # embedded: no network, no cache
    for info in list_datasets(): print(info.name, info.n_rows, info.cached)
    paths = fetch("frey_faces")               # {file name: local Path}
    scale, bias = cmu35_taylor_scale_bias()   # (59,) each: the CMU table's SC error
    Y = load_array("my_data.csv")             # (N, D) float64, validated

Files are downloaded from their public URLs on first use into the user cache
(``cache_dir=`` / ``$BGPLVM_CACHE_DIR`` / ``~/.cache/bgplvm/datasets``), verified by
sha256 and written atomically. An offline mirror (``mirror=`` / ``$BGPLVM_DATA_MIRROR``:
a directory laid out like ``../shared/datasets``, or a file:// or http(s):// URL) is used
instead of the network when set. See ``download.py`` and ``datasets/README.md``.
"""

from __future__ import annotations

from dataclasses import dataclass

from .download import cache_root, fetch, get_spec, is_available, is_cached, resolve_mirror
from .errors import ChecksumError, DatasetError, DownloadError, ParseError, UnknownDatasetError
from .loaders import LOADERS
from .record import Dataset, ImageRenderer, StickFigureRenderer, VectorRenderer
from .registry import DEFAULT_DATASET, REGISTRY
from .userdata import load_array, numpy_header_problem, validate_array

__all__ = [
    "load", "list_datasets", "load_array", "validate_array", "numpy_header_problem", "fetch", "info",
    "Dataset", "DatasetInfo", "DatasetError", "UnknownDatasetError", "DownloadError",
    "ChecksumError", "ParseError", "DEFAULT_DATASET", "REGISTRY", "ImageRenderer",
    "StickFigureRenderer", "VectorRenderer", "cache_root", "cmu35_taylor_scale_bias", "is_available",
    "resolve_mirror",
]


@dataclass(frozen=True)
class DatasetInfo:
    """One line of ``list_datasets()``. ``n_rows`` is the row count of the default
    ("train") split as loaded; ``cached`` means all files are present locally (always
    True for embedded data sets, which ship inside the package)."""

    name: str
    title: str
    kind: str  # "pose" | "image" | "vector"
    n_rows: int
    size_bytes: int
    cached: bool
    embedded: bool
    licence: str
    splits: tuple[str, ...]
    citation: str


def info(name: str, cache_dir=None) -> DatasetInfo:
    """Registry facts about one data set (no download)."""
    spec = get_spec(name)
    size = spec.size_bytes
    if spec.embedded:
        from .download import EMBEDDED_DIR

        size = sum((EMBEDDED_DIR / f.name).stat().st_size for f in spec.files if (EMBEDDED_DIR / f.name).is_file())
    return DatasetInfo(
        name=spec.name, title=spec.title, kind=spec.kind, n_rows=spec.n_rows[spec.splits[0]],
        size_bytes=size, cached=is_cached(name, cache_dir), embedded=spec.embedded,
        licence=spec.licence, splits=spec.splits, citation=spec.citation,
    )


def list_datasets(cache_dir=None) -> list[DatasetInfo]:
    """Every registered data set, embedded ones first."""
    return [info(name, cache_dir) for name in REGISTRY]


def load(name: str, split: str = "train", mirror=None, cache_dir=None, progress: bool = True) -> Dataset:
    """Load data set ``name`` (fetching its files if needed) as one ``Dataset``.

    ``split`` is "train" (default) or, where the data set has them, "test" /
    "validation" (``info(name).splits``). ``mirror`` / ``cache_dir`` override
    ``$BGPLVM_DATA_MIRROR`` / ``$BGPLVM_CACHE_DIR``; ``mirror=False`` ignores the variable.
    """
    spec = get_spec(name)
    if split not in spec.splits:
        raise DatasetError(
            f"data set {name!r} has no split {split!r}; its splits are: {', '.join(spec.splits)}."
        )
    paths = fetch(name, mirror=mirror, cache_dir=cache_dir, progress=progress)
    return LOADERS[spec.loader](spec, paths, split)


def cmu35_taylor_scale_bias(mirror=None, cache_dir=None, progress: bool = True):
    """``(scale, bias)``, (59,) each, of ``cmu35TaylorScaleBias.mat`` (a file of "cmu35").

    Taylor et al.'s normalisation of their 59 CMU features (root position, sin/cos of the
    root angles, 50 joint angles in degrees); the paper's CMU table scales joint-angle
    errors in degrees by ``scale[c + 9]`` ("SC"). Fetched, verified and cached like every
    other file; ``mirror`` / ``cache_dir`` as in :func:`load`.
    """
    from .mocap.cmu35 import read_taylor_scale_bias

    path = fetch("cmu35", mirror=mirror, cache_dir=cache_dir, progress=progress)["cmu35TaylorScaleBias.mat"]
    return read_taylor_scale_bias(path)
