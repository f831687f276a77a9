"""Reading data sets and models for the explorer: per-process caches of the shipped data
sets and pre-trained models (shared read-only by every session), and the data set a
saved model belongs to (``dataset_for_model``)."""

from __future__ import annotations

import functools
import logging

import numpy as np

from bgplvm.datasets import Dataset, load
from bgplvm.datasets.record import VectorRenderer

from .userdata import dataset_from_drawing

log = logging.getLogger(__name__)


def read_only(ds: Dataset) -> Dataset:
    """``ds`` with its arrays made read-only in place: a record shared by every session
    (the caches below) must not be changed by one of them (an attempt raises at once)."""
    for attr in ("Y", "labels", "sequence", "times"):
        v = getattr(ds, attr)
        if isinstance(v, np.ndarray):
            v.flags.writeable = False
    return ds


@functools.lru_cache(maxsize=8)
def load_cached(name: str) -> Dataset:
    """``bgplvm.datasets.load`` once per process: every session opening the same data
    set shares the (read-only) record, so a new page does not re-read it."""
    return read_only(load(name))


@functools.lru_cache(maxsize=8)
def load_cached_split(name: str, split: str) -> Dataset:
    return read_only(load(name, split=split))


@functools.lru_cache(maxsize=4)
def load_asset_cached(name: str):
    """(model, dataset) of a shipped pre-trained model (``bgplvm.assets``), read once per
    process: sessions only read it (training and uploads make new model objects).
    ``AssetUnavailable`` (its data cannot be loaded here) propagates."""
    from bgplvm.assets import load_asset
    from bgplvm._threads import single_threaded_blas

    with single_threaded_blas():
        m, ds = load_asset(name)
        m.latent_mean  # q(X) and the posterior once, here, not in the first session
        m.predict(m.latent_mean[:1])
    return m, read_only(ds)


#: what a saved model records of its (shipped) data set beyond the name, under "data": the
#: split, the rows cut from it (a window of a video) and how its sequences play
DATA_META = ("split", "rows", "fps", "time_unit")


def data_meta(ds: Dataset) -> dict:
    """``DATA_META`` of ``ds``, for a saved model's metadata (``_named_dataset`` reads it)."""
    return {k: ds.meta[k] for k in DATA_META if (ds.meta or {}).get(k) is not None}


def _named_dataset(name: str, meta: dict) -> Dataset:
    """The shipped data set ``name`` as a saved model's metadata describes it: its split and
    rows (``data_meta``), or, for a file saved before that was recorded, those of the
    pre-trained model it came from."""
    import dataclasses

    how = meta.get("data")
    if how is None and meta.get("asset"):
        from bgplvm.assets import dataset_for, get_spec

        return dataset_for(get_spec(meta["asset"]))
    how = how or {}
    ds = load_cached_split(name, how["split"]) if how.get("split") else load_cached(name)
    if how.get("rows"):
        ds = ds.rows(*how["rows"])
    play = {k: how[k] for k in ("fps", "time_unit") if k in how}
    return dataclasses.replace(ds, meta={**ds.meta, **play}) if play else ds


def asset_message(title: str, model) -> str:
    """The page's line for an opened pre-trained model (its title says static or dynamical)."""
    return f"{title} (pre-trained: Q={model.latent_dim}, M={model.num_inducing})."


def dataset_for_model(model) -> Dataset:
    """The data set a loaded model was trained on: the named one from its metadata when
    it loads and has the same shape, else the model's own Y drawn as vectors."""
    meta = getattr(model, "metadata", None) or {}
    name = meta.get("dataset")
    Y = np.asarray(model.Y)
    drawing = meta.get("drawing")
    if drawing:  # an uploaded data set: drawn as it was (explorer.userdata.drawing_of)
        try:
            return dataset_from_drawing(name or "model data", Y, drawing)
        except Exception:  # noqa: BLE001 - an unreadable description: the rows as vectors
            log.warning("could not rebuild the drawing of %s from the model file", name, exc_info=True)
    if name:
        try:
            ds = _named_dataset(name, meta)
            if ds.Y.shape == Y.shape:
                return ds
        except Exception:  # the named data set may be unavailable here: fall back
            pass
    where = (f"data referenced by the model file, read from {model.data_file}" if getattr(model, "data_file", None)
             else "data stored in the model file")
    return Dataset(name=name or "model data", Y=Y, renderer=VectorRenderer(),
                   meta={"title": f"{name or 'model'} ({where})"})


def same_data(Y_model, Y) -> bool:
    """The model's training outputs are the data set's (a model keeps its own copy)."""
    Y_model, Y = np.asarray(Y_model), np.asarray(Y)
    return Y_model.shape == Y.shape and np.array_equal(Y_model, Y, equal_nan=True)  # NaN: missing


def label_text(ds: Dataset, n: int) -> str:
    lab = int(ds.labels[n])
    if ds.label_names is not None and 0 <= lab < len(ds.label_names):
        return str(ds.label_names[lab])
    return str(lab)
