"""The data part of the explorer's state: the open data set, the page's messages, and
uploads (what an uploaded array is, and reading it again when those settings change).

``DataState`` is one of the parts ``ExplorerState`` (state.py) is composed of; opening a
data set also drops a model fitted to other data and resets the playback and inference
choices, which live in the other parts (``state_model``, ``state_playback``,
``state_inference``).
"""

from __future__ import annotations

import numpy as np
import param

from bgplvm.datasets import Dataset, DatasetError

from .loading import asset_message, load_asset_cached, load_cached, same_data
from .user_input import UserError
from .userdata import array_dataset, mocap_dataset


class DataState(param.Parameterized):
    """The data set, the messages shown at the top of the page, and the upload settings."""

    dataset = param.Parameter(default=None, doc="The loaded bgplvm.datasets.Dataset")
    dataset_name = param.String(default="", doc="Name of the data set (for titles, files)")
    asset_name = param.String(default="", doc="The shipped pre-trained model shown ('' : another model)")

    # messages
    error = param.String(default="", doc="Last user-facing error (shown in the page)")
    info = param.String(default="")

    # uploads: what an uploaded array is
    upload_kind = param.Selector(default="vectors", objects=["vectors", "image sequence"])
    image_height = param.Integer(default=0, bounds=(0, 4096), doc="Frame height H (0: from the width / square)")
    image_width = param.Integer(default=0, bounds=(0, 4096), doc="Frame width W (0: from the height / square)")
    image_order = param.Selector(default="C", objects=["C", "F"], doc="C: row-major pixels, F: column-major")
    rows_are_frames = param.Boolean(default=False, doc="Rows are frames in time order (t = row / fps)")
    upload_fps = param.Number(default=30.0, bounds=(0.1, 1000.0), doc="Frames per second of uploaded sequences")
    mocap_subsample = param.Integer(default=4, bounds=(1, 60), doc="Keep every k-th AMC frame (120 Hz / 4 = 30 Hz)")

    def __init__(self, **params):
        super().__init__(**params)
        self._last_upload: tuple | None = None  # (loader, args, the data set it made) of the last upload
        self.param.watch(self._reread_upload, ["upload_kind", "image_height", "image_width", "image_order",
                                               "rows_are_frames", "upload_fps", "mocap_subsample"])

    def load_dataset(self, name: str) -> None:
        """Load a named data set; the current model is dropped (it was fit to other data)."""
        try:
            ds = load_cached(name)
        except DatasetError as e:
            raise UserError(str(e)) from None
        self.set_dataset(ds)

    def set_dataset(self, ds: Dataset) -> None:
        with param.parameterized.batch_call_watchers(self):
            self.dataset = ds
            self.dataset_name = ds.name
            if self.model is not None and not same_data(self.model.Y, ds.Y):
                self.model = None  # fitted to other data (same shape is not enough)
                self.train_status, self.bound_history = "", []  # they were about that model
                self.model_version += 1
                self._cancel_inference()
            self.latent_dim = min(self.latent_dim, max(1, ds.D))
            self.num_inducing = min(self.num_inducing, ds.N)
            if ds.times is None and self.prior == "dynamical":
                self.prior = "static"
            self.selected_index = -1
            self._reset_sequence()
            self.error = ""
            self.info = f"Loaded {ds.name}: {ds.N} rows x {ds.D} columns." + missing_note(ds) + (
                "" if self.model is not None else " Press Train to fit a model" + (
                    "; meanwhile Play & forecast plays the data as recorded." if self.play_sequence is not None
                    else "."))

    def open_asset(self, name: str) -> None:
        """Open one of the shipped pre-trained models with its data set."""
        from bgplvm.assets import AssetUnavailable, get_spec

        try:
            spec = get_spec(name)
            m, ds = load_asset_cached(name)
        except (KeyError, AssetUnavailable, FileNotFoundError) as e:
            raise UserError(f"cannot open the pre-trained model {name!r}: {e}") from None
        self.set_model(m, ds)
        self.asset_name = name
        self.error = ""
        self.info = asset_message(spec.title, m)

    def _reread_upload(self, *events) -> None:
        """The upload settings apply to the open upload: it is read again with them (a box
        ticked after the drop did nothing, and nothing said so)."""
        last = self._last_upload
        if last is None or self.training or self.dataset is not last[2]:  # another data set is open
            return
        load, args, _ = last
        try:
            load(*args)
        except UserError as e:
            self.error = f"{e} (with the new settings; the data set is unchanged)"

    def load_upload(self, filename: str, data: bytes) -> None:
        """An uploaded array becomes the data set, drawn as declared (``upload_kind``:
        vectors or an image sequence), with its time stamps / sequence ids if it has them."""
        kind = "image" if self.upload_kind == "image sequence" else "vector"
        ds = array_dataset(filename, data, kind=kind, height=self.image_height, width=self.image_width,
                           order=self.image_order, rows_are_frames=self.rows_are_frames, fps=self.upload_fps)
        self.set_dataset(ds)
        self._last_upload = (self.load_upload, (filename, data), self.dataset)
        self.info += self._time_note(ds)

    def load_upload_files(self, files: dict[str, bytes]) -> bool:
        """Several uploaded files: an ASF skeleton with AMC motions becomes a motion-capture
        data set; a single array file goes to ``load_upload``. Returns False (and says what
        is missing in ``info``) while an ASF waits for its AMC files or vice versa."""
        if not files:
            return False
        names = [n.lower() for n in files]
        if any(n.endswith((".asf", ".amc")) for n in names):
            has_asf = any(n.endswith(".asf") for n in names)
            has_amc = any(n.endswith(".amc") for n in names)
            if not (has_asf and has_amc):
                self.info = ("Skeleton received: now add its .amc motion files (each becomes a sequence)." if has_asf
                             else "Motion received: now add the .asf skeleton it belongs to.")
                return False
            ds = mocap_dataset(files, subsample=self.mocap_subsample)
            self.set_dataset(ds)
            self._last_upload = (self.load_upload_files, (dict(files),), self.dataset)
            self.info += self._time_note(ds)
            return True
        name, data = list(files.items())[-1]  # the file dropped last
        self.load_upload(name, data)
        return True

    def _time_note(self, ds) -> str:
        if ds.times is None:
            return " No time stamps: static models only (tick 'rows are frames in time order' for a sequence)."
        n = len(np.unique(ds.sequence)) if ds.sequence is not None else 1
        what = ("the dynamical prior (chosen) models them in time" if self.prior == "dynamical"
                else "choose the dynamical prior to model them in time")
        meta = ds.meta or {}
        fps = meta.get("frame_rate_hz") or meta.get("fps")
        rate = ""
        if fps:  # where the playback rate comes from (the frames/s box is for rows without times)
            src = ("its own time stamps; the frames/s box is not used" if meta.get("own_times")
                   else "every k-th of the AMC's frames" if meta.get("frame_rate_hz") else "the frames/s box")
            rate = f" Plays at {float(fps):.3g} frames/s ({src})."
        return f" {n} sequence(s) with time stamps: {what}.{rate}"


def missing_note(ds) -> str:
    """" 120 of 3,000 entries (4.0%) are missing: ..." for a data set with NaN, else ""."""
    n = int(np.isnan(np.asarray(ds.Y, dtype=np.float64)).sum())
    if not n:
        return ""
    return (f" {n:,} of {ds.Y.size:,} entries ({100 * n / ds.Y.size:.1f}%) are missing: the model is "
            "fitted to the observed ones, and missing values are drawn as gaps (magenta in images).")
