"""Per-session state of the explorer: data set, model, training job, view choices.

Plain ``param.Parameterized`` with no Panel import, so it is testable headless. Views
watch these parameters and render; stream callbacks (Tap, PointerXY, ARD bar clicks)
only call the small setters here (``hover``, ``click``, ``assign_axis``, ...).

Training runs in a worker process (``train_worker.WorkerTrainingJob``: lower priority,
capped threads, so that it cannot slow the sessions the server is serving); its
progress arrives on a thread that never touches parameters. The page calls
``ExplorerState.poll()`` periodically on the session's own thread, which copies the job's
progress into parameters and installs the finished model.
"""

from __future__ import annotations

import functools
import io
import logging
import time

import numpy as np
import param

from bgplvm.datasets import Dataset, DatasetError, load
from bgplvm.datasets.record import VectorRenderer
from bgplvm.io import ACTIVE_FRACTION

from . import sequences as seqs
from .inference import count
from .train_worker import WorkerTrainingJob

log = logging.getLogger(__name__)

#: Uploads (arrays and model files) larger than this are refused with a message.
MAX_UPLOAD_MB = 50
MAX_UPLOAD_BYTES = MAX_UPLOAD_MB * 1024 * 1024

#: An ARD weight at or below this fraction of the largest one counts as "switched off"
#: (its lengthscale is > 4.5x the shortest: the mapping barely varies along it); the same
#: threshold as ``bgplvm summary``.
ARD_OFF_FRACTION = ACTIVE_FRACTION

#: Training runs that are started from the page are capped at this many iterations.
MAX_TRAIN_ITERS = 20000

KERNELS = ["rbf", "rbf+bias+white", "rbf+white", "linear", "linear+bias+white"]
PRIORS = ["static", "dynamical"]
TIME_KERNELS = ["matern32", "rbf", "matern52", "rbf+white", "matern32+white", "periodic+white"]

#: Forecast steps past the end of a sequence the player offers at most.
MAX_FORECAST = 400


class UserError(ValueError):
    """A problem caused by user input; its message is shown in the page."""


# --------------------------------------------------------------------------- helpers
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


def ard_off_mask(alpha: np.ndarray) -> np.ndarray:
    """(Q,) bool: dimensions whose ARD weight alpha_q is negligible (switched off)."""
    alpha = np.asarray(alpha, dtype=np.float64)
    top = float(np.max(alpha)) if alpha.size else 0.0
    return alpha <= ARD_OFF_FRACTION * top


def top_two_dims(alpha: np.ndarray) -> tuple[int, int]:
    """Indices of the two largest ARD weights (x first); (0, 0) when Q == 1."""
    order = np.argsort(-np.asarray(alpha, dtype=np.float64), kind="stable")
    if order.size == 1:
        return int(order[0]), int(order[0])
    return int(order[0]), int(order[1])


def latent_bounds(mu: np.ndarray, S: np.ndarray | None, dims: tuple[int, int],
                  pad: float = 0.12) -> tuple[float, float, float, float]:
    """(x0, y0, x1, y1) box around the latent means of ``dims``, padded by ``pad`` of
    its size (and by two posterior standard deviations), never degenerate."""
    out = []
    for d in dims:
        lo, hi = float(np.min(mu[:, d])), float(np.max(mu[:, d]))
        if S is not None:
            sd = float(np.sqrt(np.median(S[:, d])))
            lo, hi = min(lo, float(np.min(mu[:, d])) - 2 * sd), max(hi, float(np.max(mu[:, d])) + 2 * sd)
        span = hi - lo
        if not np.isfinite(span) or span < 1e-9:
            span = max(abs(lo), 1.0)
        out.append((lo - pad * span, hi + pad * span))
    (x0, x1), (y0, y1) = out
    return x0, y0, x1, y1


#: a model whose signal sd is below this share of its noise sd has found no structure
NOISE_ONLY_SNR = 0.1


def noise_only_note(model) -> str:
    """" Note: ..." when ``model`` explains its data as noise (the latent view is then flat:
    every latent mean at the prior's, one predictive variance everywhere), else ""."""
    sf2, noise = float(model.kernel_variance), float(model.noise_variance)
    if not (noise > 0 and np.sqrt(sf2 / noise) < NOISE_ONLY_SNR):
        return ""
    return (f" Note: this model found almost no structure: it explains the data as noise (signal-to-noise "
            f"sd ratio {np.sqrt(sf2 / noise):.2g}), so every latent point sits at the prior mean and the latent "
            "view is flat. More rows, a longer fit or fewer latent dimensions may help.")


def grid_points(fixed: np.ndarray, dims: tuple[int, int], bounds, res: int) -> np.ndarray:
    """(res*res, Q) latent points: a res x res grid over ``bounds`` in ``dims``, the
    other coordinates at ``fixed``. Row-major with y varying slowest (image order)."""
    x0, y0, x1, y1 = bounds
    xs = np.linspace(x0, x1, res)
    ys = np.linspace(y0, y1, res)
    X = np.empty((res * res, fixed.size))
    X[:] = fixed
    gx, gy = np.meshgrid(xs, ys)
    X[:, dims[0]] = gx.ravel()
    X[:, dims[1]] = gy.ravel()
    return X


def variance_grid(model, fixed: np.ndarray, dims: tuple[int, int], bounds, res: int = 200) -> np.ndarray:
    """(res, res) predictive variance of f over the grid, row 0 at y = bounds' y0."""
    X = grid_points(np.asarray(fixed, dtype=np.float64), dims, bounds, res)
    return np.asarray(model.predictive_variance(X), dtype=np.float64).reshape(res, res)


def pose_spread(renderer, mean: np.ndarray, var: np.ndarray, n_samples: int = 16) -> np.ndarray:
    """(J,) spread (one standard deviation) of each joint's position: exact for marker
    renderers, else from ``n_samples`` output draws with fixed draws (no flicker), pushed
    through the renderer in one batched call (``sequences.joint_spread``)."""
    return seqs.joint_spread(renderer, np.asarray(mean)[None], np.asarray(var)[None], n_samples=n_samples)[0]


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
        from .userdata import dataset_from_drawing

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
    return Dataset(name=name or "model data", Y=Y, renderer=VectorRenderer(),
                   meta={"title": f"{name or 'model'} (data stored in the model file)"})


#: An uploaded .npz (a zip archive) may unpack to at most this many MB: a small compressed
#: upload must not make the server allocate gigabytes.
MAX_UNPACKED_MB = 200


def check_upload(data: bytes, name: str = "file") -> None:
    """Size limits of an upload: the file, and what a zip archive (.npz) unpacks to."""
    if len(data) > MAX_UPLOAD_BYTES:
        raise UserError(f"{name} is {len(data) / 2**20:.1f} MB; the limit is {MAX_UPLOAD_MB} MB")
    if len(data) == 0:
        raise UserError(f"{name} is empty")
    if data[:4] == b"PK\x03\x04":
        import zipfile

        try:
            with zipfile.ZipFile(io.BytesIO(data)) as z:
                unpacked = sum(i.file_size for i in z.infolist())
        except zipfile.BadZipFile:
            return  # the reader says what is wrong with it
        if unpacked > MAX_UNPACKED_MB * 2**20:
            raise UserError(f"{name} unpacks to {unpacked / 2**20:.0f} MB; the limit is {MAX_UNPACKED_MB} MB")


# --------------------------------------------------------------------------- state
class ExplorerState(param.Parameterized):
    """Everything one browser session sees and can change."""

    # data and model
    dataset = param.Parameter(default=None, doc="The loaded bgplvm.datasets.Dataset")
    model = param.Parameter(default=None, doc="The BayesianGPLVM being explored (or None)")
    model_version = param.Integer(default=0, doc="Bumped whenever the model changes")
    dataset_name = param.String(default="", doc="Name of the data set (for titles, files)")
    asset_name = param.String(default="", doc="The shipped pre-trained model shown ('' : another model)")

    # training configuration
    latent_dim = param.Integer(default=5, bounds=(1, 30))
    num_inducing = param.Integer(default=25, bounds=(2, 500))
    kernel = param.Selector(default="rbf", objects=KERNELS)
    max_iters = param.Integer(default=300, bounds=(1, MAX_TRAIN_ITERS))
    prior = param.Selector(default="static", objects=PRIORS,
                           doc="static: p(X) = N(0, I); dynamical: a GP prior over time (needs time stamps)")
    time_kernel = param.Selector(default="matern32", objects=TIME_KERNELS)

    # training status
    training = param.Boolean(default=False)
    bound_history = param.List(default=[], doc="[(iteration, bound, phase), ...] of the current/last fit")
    train_status = param.String(default="")

    # messages
    error = param.String(default="", doc="Last user-facing error (shown in the page)")
    info = param.String(default="")

    # latent view
    x_dim = param.Integer(default=0, bounds=(0, None))
    y_dim = param.Integer(default=1, bounds=(0, None))
    fixed = param.Array(default=np.zeros(0), doc="(Q,) values of the dimensions not shown")
    color_by = param.Selector(default="auto", objects=["auto", "label", "sequence", "time", "none"])
    show_uncertainty = param.Boolean(default=False, doc="Draw 2-sd ellipses of q(x_n)")
    show_trajectories = param.Boolean(default=True, doc="Join sequence points in time order")
    show_variance = param.Boolean(default=True, doc="Predictive-variance background")
    sort_ard = param.Boolean(default=False, doc="Sort the ARD bars by weight")
    grid_res = param.Integer(default=200, bounds=(20, 400))

    # generation
    follow = param.Boolean(default=True, doc="Generate under the mouse (else only on click)")
    cursor = param.NumericTuple(default=(0.0, 0.0), length=2, doc="Latent (x, y) being generated")
    pinned = param.Boolean(default=False, doc="Cursor set by a click")
    selected_index = param.Integer(default=-1, doc="Training point clicked (-1: none)")
    azimuth = param.Number(default=-60.0, bounds=(-180, 180), doc="Pose view angle around z (deg)")
    elevation = param.Number(default=10.0, bounds=(-90, 90), doc="Pose view elevation (deg)")

    # observe and infer
    infer_source = param.String(default="", doc="Where the test frames come from (a key of infer_sources())")
    infer_frame = param.Integer(default=70, bounds=(0, None), doc="First frame of the stretch to infer")
    infer_length = param.Integer(default=1, bounds=(1, 200), doc="Frames in the stretch (1: one frame)")
    mask_part = param.String(default="legs", doc="What to hide: a body part, a region, or 'joints I click'")
    mask_joints = param.List(default=[], doc="Joints hidden by clicking them")
    mask_fraction = param.Number(default=0.5, bounds=(0.05, 0.95), doc="Share of pixels for 'random pixels'")
    inference = param.Parameter(default=None, doc="The last explorer.inference.Inference (or None)")
    infer_status = param.String(default="")
    infer_running = param.Boolean(default=False)
    play_mode = param.Selector(default="sequence", objects=["sequence", "inferred"],
                               doc="What the player plays: a training sequence or the inferred stretch")

    # uploads: what an uploaded array is
    upload_kind = param.Selector(default="vectors", objects=["vectors", "image sequence"])
    image_height = param.Integer(default=0, bounds=(0, 4096), doc="Frame height H (0: from the width / square)")
    image_width = param.Integer(default=0, bounds=(0, 4096), doc="Frame width W (0: from the height / square)")
    image_order = param.Selector(default="C", objects=["C", "F"], doc="C: row-major pixels, F: column-major")
    rows_are_frames = param.Boolean(default=False, doc="Rows are frames in time order (t = row / fps)")
    upload_fps = param.Number(default=30.0, bounds=(0.1, 1000.0), doc="Frames per second of uploaded sequences")
    mocap_subsample = param.Integer(default=4, bounds=(1, 60), doc="Keep every k-th AMC frame (120 Hz / 4 = 30 Hz)")

    # sequences: playback and forecasting
    play_sequence = param.Parameter(default=None, doc="Id of the sequence the player plays (None: none)")
    forecast_steps = param.Integer(default=60, bounds=(0, MAX_FORECAST),
                                   doc="Time steps generated past the sequence's last training frame")

    def __init__(self, **params):
        super().__init__(**params)
        self._job: WorkerTrainingJob | None = None
        self._pred_cache: dict = {}
        self._play_cache: dict = {}
        self._sources_cache: tuple = (None, {})
        self._infer_job: dict | None = None
        self._last_upload: tuple | None = None  # (loader, args, the data set it made) of the last upload
        self.param.watch(self._reread_upload, ["upload_kind", "image_height", "image_width", "image_order",
                                               "rows_are_frames", "upload_fps", "mocap_subsample"])

    # ------------------------------------------------------------------ data / model
    @property
    def has_model(self) -> bool:
        return self.model is not None

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
            if self.model is not None and not _same_data(self.model.Y, ds.Y):
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
            self.info = f"Loaded {ds.name}: {ds.N} rows x {ds.D} columns." + (
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
        from .userdata import array_dataset

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
        from .userdata import mocap_dataset

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

    def load_model_bytes(self, filename: str, data: bytes) -> None:
        """Open an uploaded saved model (and the data set it names, when available)."""
        from bgplvm import BayesianGPLVM, ModelFileError

        check_upload(data, filename)
        buf = io.BytesIO(data)
        buf.name = filename  # the loader's messages name their source: the upload, not "<_io.BytesIO ...>"
        try:
            m = BayesianGPLVM.load(buf)
        except Exception as e:
            raise UserError(f"{filename}: not a bgplvm model file ({e})" if not isinstance(e, ModelFileError)
                            else str(e)) from None
        self.set_model(m, dataset_for_model(m))
        self.info = f"Opened model {filename}." + noise_only_note(m)

    def set_model(self, model, dataset: Dataset | None = None, trained_here: bool = False) -> None:
        """Install a (trained) model; resets the axes to its two most relevant dims. The Train
        section's message and curve stay only for the model this page's training made
        (``trained_here``): another model opened or loaded clears them."""
        ds = dataset if dataset is not None else self.dataset
        if ds is None or np.asarray(model.Y).shape != ds.Y.shape:
            ds = dataset_for_model(model)
        Q = int(model.latent_dim)
        x, y = top_two_dims(model.ard_weights)
        mu = np.asarray(model.latent_mean)
        new_data = ds is not self.dataset
        with param.parameterized.batch_call_watchers(self):
            self.dataset = ds
            self.dataset_name = ds.name
            self.asset_name = ""
            self.model = model
            self.param.x_dim.bounds = (0, Q - 1)
            self.param.y_dim.bounds = (0, Q - 1)
            self.x_dim, self.y_dim = x, y
            self.fixed = mu.mean(axis=0)
            self.cursor = (float(mu[:, x].mean()), float(mu[:, y].mean()))
            self.pinned = False
            self.selected_index = -1
            self._pred_cache.clear()
            self._play_cache.clear()
            # the next training's settings (a saved model may be bigger than the page offers)
            self.latent_dim = int(np.clip(Q, *self.param.latent_dim.bounds))
            self.num_inducing = int(np.clip(model.num_inducing, *self.param.num_inducing.bounds))
            self.prior = "dynamical" if seqs.is_dynamical(model) else "static"
            tk = getattr(getattr(getattr(model, "prior", None), "time_kernel", None), "spec", None)
            if tk in TIME_KERNELS:
                self.time_kernel = tk
            self._reset_sequence()
            if not trained_here:
                self.train_status = ""
                self.bound_history = []
            self.inference = None
            self.play_mode = "sequence"
            self.infer_status = ""
            self.model_version += 1
            self._cancel_inference()
            self._reset_inference_choice(new_data)

    def save_model_bytes(self) -> io.BytesIO:
        if self.model is None:
            raise UserError("no model to save yet: train or open one first")
        from .userdata import drawing_of

        meta = dict(getattr(self.model, "metadata", None) or {}, dataset=self.dataset_name)
        drawing = drawing_of(self.dataset) if self.dataset is not None else None
        if drawing:
            meta["drawing"] = drawing
            meta.pop("data", None)
        else:
            meta.pop("drawing", None)
            meta["data"] = data_meta(self.dataset) if self.dataset is not None else {}
        self.model.metadata = meta
        buf = io.BytesIO()
        self.model.save(buf)
        buf.seek(0)
        return buf

    def summary(self) -> dict:
        """Bound, noise variance, signal-to-noise and sizes of the current model."""
        m = self.model
        if m is None:
            return {}
        sf2 = float(m.kernel_variance)
        noise = float(m.noise_variance)
        off = ard_off_mask(m.ard_weights)
        return dict(bound=float(m.elbo()), noise_variance=noise, kernel_variance=sf2,
                    snr=float(np.sqrt(sf2 / noise)) if noise > 0 else float("inf"),
                    N=int(np.asarray(m.Y).shape[0]), D=int(np.asarray(m.Y).shape[1]),
                    Q=int(m.latent_dim), M=int(m.num_inducing),
                    active=int((~off).sum()), kernel=str(getattr(m, "kernel", "") or ""))

    # ------------------------------------------------------------------ training
    def start_training(self) -> WorkerTrainingJob:
        if self.dataset is None:
            raise UserError("load a data set first")
        if self._job is not None and not self._job.done.is_set():
            raise UserError("a model is already training; stop it first")
        ds = self.dataset
        dynamical = self.prior == "dynamical"
        if dynamical and ds.times is None:
            raise UserError("a dynamical model needs time stamps: this data set has none "
                            "(upload an .npz with a 't' array, or choose the static prior)")
        Q = min(self.latent_dim, 30)
        M = min(self.num_inducing, ds.N)
        config = dict(latent_dim=Q, num_inducing=M, kernel=self.kernel, seed=0)
        self._job = WorkerTrainingJob(ds, config, int(self.max_iters), dynamical=dynamical,
                                      time_kernel=self.time_kernel).start()
        what = f"dynamical ({self.time_kernel} in time)" if dynamical else "static"
        with param.parameterized.batch_call_watchers(self):
            self.training = True
            self.bound_history = []
            self.error = ""
            self.train_status = (f"Starting a worker: {what} model, Q={Q}, M={M}, kernel {self.kernel}, "
                                 f"{self.max_iters} iterations...")
            # the line at the top said how the previous fit ended, as if of this one
            self.info = f"Training a {what} model on {ds.name} (progress in 2. Train)."
        return self._job

    def stop_training(self) -> None:
        if self._job is not None:
            self._job.stop()
            self.train_status = "Stopping after the current iteration..."

    def poll(self) -> bool:
        """Copy training progress into parameters (call on the session's thread).
        Returns True while a job is running."""
        job = self._job
        if job is None:
            return False
        hist = job.snapshot()
        if job.queued and not job.done.is_set():
            msg = "Queued: other sessions are training; this fit starts when a trainer is free..."
            if self.train_status != msg:
                self.train_status = msg
            return True
        if len(hist) != len(self.bound_history):
            it, bound, phase = hist[-1]
            with param.parameterized.batch_call_watchers(self):
                self.bound_history = hist
                self.train_status = (f"Iteration {it} / {job.max_iters} ({phase} phase), "
                                     f"bound {bound:,.2f}, {time.perf_counter() - job.t_start:.1f} s")
        if job.starved():
            done = f"iteration {hist[-1][0]} so far" if hist else "no iteration yet"
            msg = (f"Waiting for CPU ({done}): other programs keep every core busy and the fit "
                   f"runs below them ({job.priority} priority); it goes on when a core is free.")
            if self.train_status != msg:
                self.train_status = msg
        if not job.done.is_set():
            return True
        self._job = None
        secs = (job.t_end or time.perf_counter()) - job.t_start
        if job.error:
            self.training = False
            self.train_status = "Training failed."
            self.error = f"Training failed: {job.error}"
            return False
        if job.model is None:  # stopped while it waited for a trainer: nothing to install
            with param.parameterized.batch_call_watchers(self):
                self.training = False
                self.train_status = "Stopped before training started."
                self.info = f"Training stopped before it started; {self._shown_model()}"
            return False
        n = hist[-1][0] if hist else 0
        self.set_model(job.model, job.dataset, trained_here=True)
        self.training = False
        self.train_status = (f"{'Stopped' if job.stopped else 'Finished'} after {count(n, 'iteration')} in "
                             f"{secs:.1f} s; bound {float(job.model.elbo()):,.2f}."
                             # Stop keeps the fit so far, in place of the model shown before
                             + (" The page shows this partly trained model; the one before can be opened "
                                "again in 1. Data." if job.stopped else ""))
        kind = "dynamical" if self.is_dynamical else "static"
        self.info = f"Trained a {kind} model on {self.dataset_name}: {self.train_status}" + noise_only_note(job.model)
        return False

    def _shown_model(self) -> str:
        """What the page shows, for a message: "the model shown is unchanged." or that there is none."""
        return "the model shown is unchanged." if self.model is not None else "there is no model yet."

    def shutdown(self) -> None:
        """Session closed: end any training worker now."""
        if self._job is not None:
            self._job.kill()

    # ------------------------------------------------------------------ latent view
    @property
    def dims(self) -> tuple[int, int]:
        return int(self.x_dim), int(self.y_dim)

    def bounds(self) -> tuple[float, float, float, float]:
        m = self.model
        return latent_bounds(np.asarray(m.latent_mean), np.asarray(m.latent_variance), self.dims)

    def assign_axis(self, q: int, axis: str = "x") -> None:
        """Show latent dimension q on the given axis ("x" or "y"); swaps if needed."""
        if self.model is None:
            return
        q = int(q)
        if not 0 <= q < self.model.latent_dim:
            return
        vec = self.latent_vector()  # the point in the full latent space, before the axes change
        with param.parameterized.batch_call_watchers(self):
            if axis == "x":
                if q == self.y_dim:
                    self.y_dim = self.x_dim
                self.x_dim = q
            else:
                if q == self.x_dim:
                    self.x_dim = self.y_dim
                self.y_dim = q
            if vec is not None:
                # the generated point stays where it was: the dimension that leaves an axis
                # keeps its coordinate on its slider (it used to take the other dimension's)
                self.fixed = vec
                self.cursor = (float(vec[self.x_dim]), float(vec[self.y_dim]))

    def set_fixed(self, q: int, value: float) -> None:
        fixed = np.array(self.fixed, dtype=np.float64)
        fixed[int(q)] = float(value)
        self.fixed = fixed

    def reset_fixed(self) -> None:
        if self.model is not None:
            self.fixed = np.asarray(self.model.latent_mean).mean(axis=0)

    def color_modes(self) -> list[str]:
        """The colourings the data set can give, of "label", "sequence", "time" (in that order)."""
        ds = self.dataset
        have = {"label": ds is not None and ds.labels is not None,
                "sequence": ds is not None and ds.sequence is not None and len(np.unique(ds.sequence)) > 1,
                "time": ds is not None and ds.times is not None}
        return [mode for mode in ("label", "sequence", "time") if have[mode]]

    @param.depends("dataset", watch=True)
    def _color_choice_follows_data(self):
        """A colouring the new data set lacks falls back to auto (its select offers only
        what the data has)."""
        if self.color_by not in ("auto", "none", *self.color_modes()):
            self.color_by = "auto"

    def color_mode(self) -> str:
        """The colouring actually used ("auto" resolved against what the data has)."""
        modes = self.color_modes()
        if self.color_by == "none":
            return "none"
        if self.color_by != "auto":
            return self.color_by if self.color_by in modes else "none"
        return modes[0] if modes else "none"

    # ------------------------------------------------------------------ generation
    def hover(self, x, y) -> None:
        """PointerXY callback: follow the mouse when follow mode is on."""
        if x is None or y is None or not self.follow or self.model is None:
            return
        self.cursor = (float(x), float(y))

    @param.depends("follow", watch=True)
    def _unpin_when_following(self):
        """Follow mode on: the point follows the mouse again, it is no longer pinned (the
        readout said "pinned (click)" while the coordinates followed the mouse)."""
        if self.follow:
            self.pinned = False

    def click(self, x, y) -> None:
        """Tap callback: pin the generated point there (follow mode switches off) and
        select the training point under the click, if any."""
        if x is None or y is None or self.model is None:
            return
        with param.parameterized.batch_call_watchers(self):
            self.follow = False
            self.pinned = True
            self.cursor = (float(x), float(y))
            self.selected_index = self.nearest_training_point(x, y)

    def nearest_training_point(self, x, y, radius: float = 0.015) -> int:
        """Index of the training point within ``radius`` (fraction of the view's
        diagonal) of (x, y) in the shown dims, or -1."""
        mu = np.asarray(self.model.latent_mean)
        x0, y0, x1, y1 = self.bounds()
        sx, sy = (x1 - x0) or 1.0, (y1 - y0) or 1.0
        d2 = ((mu[:, self.x_dim] - x) / sx) ** 2 + ((mu[:, self.y_dim] - y) / sy) ** 2
        n = int(np.argmin(d2))
        return n if d2[n] <= radius ** 2 else -1

    def latent_vector(self, x=None, y=None) -> np.ndarray | None:
        """(Q,) latent point: the fixed values with the shown dims at (x, y) (default:
        the cursor)."""
        if self.model is None:
            return None
        if x is None:
            x, y = self.cursor
        vec = np.array(self.fixed, dtype=np.float64)
        if vec.size != self.model.latent_dim:
            vec = np.asarray(self.model.latent_mean).mean(axis=0)
        vec[self.x_dim] = x
        vec[self.y_dim] = y
        return vec

    def generate(self, x=None, y=None) -> tuple[np.ndarray, np.ndarray] | None:
        """(mean (D,), var (D,)) of the output at the latent point (noise included)."""
        vec = self.latent_vector(x, y)
        if vec is None:
            return None
        key = (self.model_version, vec.tobytes())
        hit = self._pred_cache.get(key)
        if hit is None:
            mean, var = self.model.predict(vec[None, :])
            hit = (np.asarray(mean)[0], np.asarray(var)[0])
            if len(self._pred_cache) > 256:
                self._pred_cache.clear()
            self._pred_cache[key] = hit
        return hit

    # ------------------------------------------------------------------ sequences
    @property
    def is_dynamical(self) -> bool:
        return self.model is not None and seqs.is_dynamical(self.model)

    def sequence_options(self) -> dict:
        """{label: id} of the sequences the player can play (empty: none): the model's, or
        before any model the data set's own (played as recorded, ``playback``)."""
        if self.dataset is None:
            return {}
        ids = seqs.sequence_ids(self.dataset, self.model)
        return {f"{i}: {seqs.sequence_label(self.dataset, s)}": s for i, s in enumerate(ids)}

    def _reset_sequence(self) -> None:
        opts = self.sequence_options()
        cur = self.play_sequence
        if not opts:
            self.play_sequence = None
        elif cur is None or cur not in opts.values():
            self.play_sequence = next(iter(opts.values()))

    def set_play_sequence(self, s) -> None:
        if s is not None and s not in self.sequence_options().values():
            raise UserError(f"no sequence {s!r} in this data set")
        self.play_sequence = s

    def playback(self) -> seqs.Playback | None:
        """What the player plays: the chosen sequence (with ``forecast_steps`` forecast
        frames for a dynamical model), computed once per (model, sequence, horizon), or the
        inferred stretch against its truth (``play_mode`` "inferred")."""
        if self.play_mode == "inferred" and self.inference is not None:
            from .inference import as_playback

            inf = self.inference
            key = ("inferred", id(inf))
            hit = self._play_cache.get(key)
            if hit is None:
                hit = self._play_cache[key] = as_playback(
                    inf, f"inferred, {inf.frames}",
                    float(self.model.noise_variance))
            return hit
        if self.play_sequence is None:
            return None
        if self.model is None:
            return self._data_playback()
        H = int(self.forecast_steps) if self.is_dynamical else 0
        key = (self.model_version, repr(self.play_sequence), H)
        hit = self._play_cache.get(key)
        if hit is None:
            from .shared import shared

            model, ds, seq = self.model, self.dataset, self.play_sequence
            try:  # the same for every session showing this model: computed once per process
                hit = shared(model, ("playback", id(ds), repr(seq), H), lambda: seqs.playback(model, ds, seq, H))
            except ValueError as e:
                raise UserError(f"cannot play sequence {self.play_sequence!r}: {e}") from None
            if len(self._play_cache) > 8:
                self._play_cache.clear()
            self._play_cache[key] = hit
        return hit

    def _data_playback(self) -> seqs.Playback:
        """The chosen sequence of the data set as recorded (no model yet), its coordinates
        against time on the data's first two principal axes (computed once per data set)."""
        from .shared import shared

        ds, seq = self.dataset, self.play_sequence
        key = ("preview", repr(seq))
        hit = self._play_cache.get(key)
        if hit is None or hit[0] is not ds:  # held with its data set: an id can be reused
            coords = shared(ds, "principal_coords", lambda: seqs.principal_coords(ds.Y))
            try:
                hit = (ds, seqs.data_playback(ds, seq, coords))
            except ValueError as e:
                raise UserError(f"cannot play sequence {seq!r}: {e}") from None
            if len(self._play_cache) > 8:
                self._play_cache.clear()
            self._play_cache[key] = hit
        return hit[1]

    # ------------------------------------------------------------------ observe and infer
    def infer_sources(self) -> dict:
        """{name: inference.Source} of the frames observe-and-infer can use (cached per model)."""
        from . import inference as inf

        if self.model is None or self.dataset is None:
            return {}
        key, cached = self._sources_cache
        # the data set can change under a model (same model_version)
        if key is not None and key[0] == self.model_version and key[1] is self.dataset:
            return cached
        ds = self.dataset
        test = None
        try:
            from bgplvm.datasets import info as ds_info

            meta = ds.meta or {}
            # a shipped data set's test split, not for a subset or an upload that shares its name
            if "test" in ds_info(ds.name).splits and not meta.get("rows") and not meta.get("uploaded"):
                test = load_cached_split(ds.name, "test")
        except Exception:  # no test split here (or its files are unavailable): other sources
            test = None
        heldout = None
        rows = (ds.meta or {}).get("rows")
        if rows and self.is_dynamical:
            try:
                full = load_cached(ds.name)
                a, b = rows
                c = min(full.N, b + 100)
                if c > b:
                    seq = seqs.sequence_ids(ds, self.model)[0]
                    heldout = (full.Y[b:c], full.times[b:c] - full.times[a], seq,
                               f"held-out frames {b}-{c - 1} (after the training window; continue its sequence)", b)
            except Exception:
                heldout = None
        out = inf.sources_for(self.model, ds, test, heldout)
        self._sources_cache = ((self.model_version, self.dataset), out)
        return out

    def _reset_inference_choice(self, new_data: bool = False) -> None:
        """Keep the test frames chosen where the new model still offers them; with new data
        start again from its first source (its test set where it has one) at the default
        frame (70: in the CMU test trial's second half, where the paper hides legs or body)."""
        srcs = self.infer_sources()
        if srcs and (new_data or self.infer_source not in srcs):
            self.infer_source = next(iter(srcs))
        if new_data:  # and as many rows as the page starts with (6 digits were 6 CMU frames)
            self.infer_frame = self.param.infer_frame.default
            self.infer_length = self.param.infer_length.default
        opts = self.mask_options()
        if opts and self.mask_part not in opts:
            self.mask_part = opts[0]
        self.mask_joints = []
        src = srcs.get(self.infer_source)
        if src is not None:
            self.infer_frame = min(self.infer_frame, src.Y.shape[0] - 1)

    def mask_options(self) -> list[str]:
        from . import masks as M

        ds = self.dataset
        kind = getattr(getattr(ds, "renderer", None), "kind", "vector") if ds is not None else "vector"
        if kind == "pose":
            opts = list(M.PARTS)
            if ds.D == 59 and not hasattr(ds.renderer, "kept") and hasattr(ds.renderer, "skeleton"):
                opts += list(M.CMU_PROTOCOLS)
            return opts + ["joints I click"]
        if kind == "image":
            return list(M.REGIONS)
        return ["first half of the columns", "second half of the columns", "random columns"]

    def hidden_columns(self) -> np.ndarray:
        """The output columns the current mask hides (may be empty)."""
        from . import masks as M

        ds = self.dataset
        if ds is None:
            return np.zeros(0, dtype=int)
        part = self.mask_part
        kind = getattr(ds.renderer, "kind", "vector")
        if part == "joints I click":
            return M.columns_of_joints(ds, self.mask_joints)
        if kind == "image":
            return M.region_columns(ds.renderer, part, self.mask_fraction)
        if kind == "pose":
            return M.part_columns(ds, part)
        D = ds.D
        if part == "first half of the columns":
            return np.arange(D // 2)
        if part == "second half of the columns":
            return np.arange(D // 2, D)
        return np.sort(np.random.default_rng(0).choice(D, max(1, int(round(self.mask_fraction * D))), replace=False))

    def toggle_joint(self, j: int) -> None:
        """A click on joint j of the observed figure hides it (or shows it again)."""
        joints = [int(v) for v in self.mask_joints]
        j = int(j)
        joints = [v for v in joints if v != j] if j in joints else joints + [j]
        with param.parameterized.batch_call_watchers(self):
            self.mask_joints = sorted(joints)
            self.mask_part = "joints I click"

    def infer_frames(self):
        """(source, first frame, number of frames) of the stretch to infer: at most
        ``stretch_room`` frames (a stretch of training rows stays in its sequence)."""
        src = self.infer_sources().get(self.infer_source)
        if src is None:
            return None
        a = int(min(self.infer_frame, src.Y.shape[0] - 1))
        n = int(min(self.infer_length, self.stretch_room(src, a)))
        return src, a, n

    def stretch_room(self, src, a: int) -> int:
        """How many frames a stretch starting at frame ``a`` of ``src`` can have: to the end
        of the source, and for training rows to the end of a's sequence (in time order): a
        stretch across two sequences is not a stretch in time (the dynamical model refused
        its unsorted times; a static one played it backwards)."""
        N = src.Y.shape[0]
        end = N
        if src.rows is not None and self.dataset is not None and self.dataset.sequence is not None:
            seq = np.asarray(self.dataset.sequence)[src.rows]
            t = np.asarray(src.t) if src.t is not None else None
            end = a + 1
            while end < N and seq[end] == seq[a] and (t is None or t[end] > t[end - 1]):
                end += 1
        return max(1, end - a)

    def start_inference(self) -> None:
        """Infer the hidden part of the chosen frame(s) in a background thread (the page
        polls ``poll_inference``)."""
        import threading

        from . import inference as inf

        if self.model is None:
            raise UserError("no model yet: train or open one first")
        if self._infer_job is not None and not self._infer_job["done"].is_set():
            raise UserError("an inference is already running")
        got = self.infer_frames()
        if got is None:
            raise UserError(f"no test {inf.noun(self.dataset)}s for this data set")
        src, a, n = got
        cols = self.hidden_columns()
        if cols.size == 0:
            raise UserError("Nothing is hidden: choose a body part (or region), or click joints on the figure "
                            "to hide them, then press Infer.")
        if cols.size >= self.dataset.D:
            raise UserError(f"Everything is hidden: leave part of the {inf.noun(self.dataset)} observed to infer "
                            "from.")
        model, ds = self.model, self.dataset
        job = {"done": threading.Event(), "result": None, "error": None, "iter": 0, "n": n, "t0": time.perf_counter(),
               "noun": inf.noun(ds)}

        def progress(p):
            job["iter"] = int(p.iteration)
            return job.get("cancel", False)

        def run():
            try:
                job["result"] = inf.infer(model, ds, src, a, n, cols, callback=progress)
            except (ValueError, np.linalg.LinAlgError) as e:
                job["error"] = str(e)
            except Exception as e:  # noqa: BLE001 - reported in the page
                job["error"] = f"{type(e).__name__}: {e}"
            finally:
                job["done"].set()

        self._infer_job = job
        threading.Thread(target=run, daemon=True, name="bgplvm-infer").start()
        with param.parameterized.batch_call_watchers(self):
            self.infer_running = True
            self.error = ""
            self.infer_status = f"Inferring q(x*) for {inf.count(n, job['noun'])} from what is left..."

    def _cancel_inference(self) -> None:
        """Stop and forget a running inference (the model it works on has been replaced)."""
        job, self._infer_job = self._infer_job, None
        if job is not None:
            job["cancel"] = True
            self.infer_running = False

    def stop_inference(self) -> None:
        """The Stop button of Observe & infer: the running inference is stopped and dropped
        at once (a dynamical model's optimiser ends at its next iteration; a static model's
        ``infer_latent`` cannot be interrupted and finishes unseen in its thread). The
        previous result, if any, stays; Infer can be pressed again."""
        job = self._infer_job
        if job is None or job["done"].is_set():
            return  # finished meanwhile: the next poll reports it
        done = f"{count(job['iter'], 'iteration')}, " if job["iter"] else ""  # a static model reports none
        with param.parameterized.batch_call_watchers(self):
            self._cancel_inference()
            # also on the page's top line: the tab's readout says "press Infer" instead when
            # the frames or mask were changed since the last result
            self.infer_status = self.info = (
                f"Inference stopped after {done}{_duration(time.perf_counter() - job['t0'])}: nothing inferred "
                f"for the {count(job['n'], job['noun'])}. Press Infer to start again.")

    def poll_inference(self) -> bool:
        """Copy an inference's progress / result into parameters; True while it runs."""
        job = self._infer_job
        if job is None:
            return False
        if not job["done"].is_set():
            self.infer_status = (f"Inferring q(x*) for {count(job['n'], job['noun'])}: iteration {job['iter']}, "
                                 f"{time.perf_counter() - job['t0']:.1f} s...")
            return True
        self._infer_job = None
        with param.parameterized.batch_call_watchers(self):
            self.infer_running = False
            if job["error"]:
                self.infer_status = "Inference failed."
                self.error = f"Inference failed: {job['error']}"
                return False
            r = job["result"]
            self.inference = r
            e, nn = r.error, r.nn_error
            unit = "\u00b0" if e["unit"] == "deg" else ""
            self.infer_status = (f"{e['name']}: {e['value']:.3g}{unit} (nearest neighbour: {nn['value']:.3g}{unit}) "
                                 f"over {e['n']} hidden values; {count(r.n, r.noun)}, {_duration(r.seconds)}.")
            if r.n > 1 and r.noun == "frame":
                self.play_mode = "inferred"
        return False

    def readout(self) -> str:
        if self.model is None:
            return "No model yet."
        x, y = self.cursor
        mode = "pinned" if self.pinned else ("following the mouse" if self.follow else "fixed")
        text = f"latent point: x{self.x_dim} = {x:.3f}, x{self.y_dim} = {y:.3f} ({mode})"
        if self.selected_index >= 0:
            text += f"; training #{self.selected_index}"
            ds = self.dataset
            if ds is not None and ds.labels is not None:
                text += f" ({label_text(ds, self.selected_index)})"
        return text


def _duration(seconds: float) -> str:
    """'0.35 s', '12 ms' (a fast inference read '0.0 s')."""
    if seconds < 0.001:
        return "<1 ms"
    return f"{1000 * seconds:.0f} ms" if seconds < 0.1 else f"{seconds:.2g} s" if seconds < 10 else f"{seconds:.0f} s"


def _same_data(Y_model, Y) -> bool:
    """The model's training outputs are the data set's (a model keeps its own copy)."""
    Y_model, Y = np.asarray(Y_model), np.asarray(Y)
    return Y_model.shape == Y.shape and np.array_equal(Y_model, Y)


def label_text(ds: Dataset, n: int) -> str:
    lab = int(ds.labels[n])
    if ds.label_names is not None and 0 <= lab < len(ds.label_names):
        return str(ds.label_names[lab])
    return str(lab)
