"""Per-session state of the explorer: data set, model, training job, view choices.

Plain ``param.Parameterized`` with no Panel import, so it is testable headless. Views
watch these parameters and render; stream callbacks (Tap, PointerXY, ARD bar clicks)
only call the small setters here (``hover``, ``click``, ``assign_axis``, ...).

Training runs in a background thread (``TrainingJob``); the thread never touches
parameters. The page calls ``ExplorerState.poll()`` periodically on the session's own
thread, which copies the job's progress into parameters and installs the finished model.
"""

from __future__ import annotations

import functools
import io
import os
import tempfile
import threading
import time

import numpy as np
import param

from bgplvm_datasets import Dataset, DatasetError, load, load_array
from bgplvm_datasets.record import VectorRenderer
from model.io import ACTIVE_FRACTION

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


class UserError(ValueError):
    """A problem caused by user input; its message is shown in the page."""


# --------------------------------------------------------------------------- helpers
@functools.lru_cache(maxsize=8)
def load_cached(name: str) -> Dataset:
    """``bgplvm_datasets.load`` once per process: every session opening the same data
    set shares the (read-only) record, so a new page does not re-read it."""
    return load(name)


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
    """(J,) spread (one standard deviation) of each joint's position.

    Exact for marker renderers (``positions`` is a reshape, so per-joint variances are
    the reshaped output variances); for other renderers (e.g. forward kinematics from
    joint angles) estimated from ``n_samples`` draws of the output with a fixed seed,
    so the display does not flicker.
    """
    from bgplvm_datasets.record import StickFigureRenderer

    var = np.maximum(np.asarray(var, dtype=np.float64), 0.0)
    if isinstance(renderer, StickFigureRenderer):
        return np.sqrt(renderer.positions(var).mean(axis=1))
    rng = np.random.default_rng(0)
    draws = mean + np.sqrt(var) * rng.standard_normal((n_samples, mean.size))
    P = np.stack([renderer.positions(y) for y in draws])  # (n, J, 3)
    return np.sqrt(P.var(axis=0).mean(axis=1))


def dataset_for_model(model) -> Dataset:
    """The data set a loaded model was trained on: the named one from its metadata when
    it loads and has the same shape, else the model's own Y drawn as vectors."""
    meta = getattr(model, "metadata", None) or {}
    name = meta.get("dataset")
    Y = np.asarray(model.Y)
    if name:
        try:
            ds = load_cached(name)
            if ds.Y.shape == Y.shape:
                return ds
        except Exception:  # the named data set may be unavailable here: fall back
            pass
    return Dataset(name=name or "model data", Y=Y, renderer=VectorRenderer(),
                   meta={"title": f"{name or 'model'} (data stored in the model file)"})


def _check_upload(data: bytes) -> None:
    if len(data) > MAX_UPLOAD_BYTES:
        raise UserError(f"file is {len(data) / 2**20:.1f} MB; the limit is {MAX_UPLOAD_MB} MB")
    if len(data) == 0:
        raise UserError("file is empty")


def array_from_upload(filename: str, data: bytes) -> np.ndarray:
    """Parse an uploaded .npy/.npz/.csv file into (N, D) float64, or raise UserError."""
    _check_upload(data)
    ext = os.path.splitext(filename)[1].lower()
    if ext not in (".npy", ".npz", ".csv", ".txt"):
        raise UserError(f"{filename}: unsupported file type {ext or '(none)'}; use .npy, .npz or .csv")
    fd, path = tempfile.mkstemp(suffix=ext, prefix="bgplvm-upload-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        try:
            Y = load_array(path)
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
    if not np.all(np.isfinite(Y)):
        raise UserError(f"{filename}: the array contains NaN or infinite values")
    if Y.shape[0] < 3 or Y.shape[1] < 1:
        raise UserError(f"{filename}: need at least 3 rows and 1 column, got shape {Y.shape}")
    return Y


# --------------------------------------------------------------------------- training
class TrainingJob:
    """One model fit in a daemon thread. Only ``snapshot()``/``stop()`` are called from
    other threads; results are read after ``done`` is set."""

    def __init__(self, dataset: Dataset, latent_dim: int, num_inducing: int, kernel: str,
                 max_iters: int, seed: int = 0):
        self.dataset = dataset
        self.config = dict(latent_dim=latent_dim, num_inducing=num_inducing, kernel=kernel, seed=seed)
        self.max_iters = max_iters
        self.model = None
        self.error: str | None = None
        self.stopped = False
        self.done = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._history: list[tuple[int, float, str]] = []
        self._n_evals = 0
        self.t_start = time.perf_counter()
        self.t_end: float | None = None
        self._thread = threading.Thread(target=self._run, daemon=True, name="bgplvm-train")

    def start(self) -> "TrainingJob":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _callback(self, p) -> bool:
        with self._lock:
            self._history.append((int(p.iteration), float(p.bound), str(getattr(p, "phase", ""))))
            self._n_evals = int(getattr(p, "n_evals", 0))
        return self._stop.is_set()

    def _run(self) -> None:
        try:
            from model import BayesianGPLVM

            m = BayesianGPLVM(self.dataset.Y, **self.config)
            m.metadata = dict(getattr(m, "metadata", None) or {}, dataset=self.dataset.name)
            m.fit(max_iters=self.max_iters, callback=self._callback, progress=False)
            self.model = m
            self.stopped = self._stop.is_set()
        except Exception as e:  # reported in the page; the session goes on
            self.error = f"{type(e).__name__}: {e}"
        finally:
            self.t_end = time.perf_counter()
            self.done.set()

    def snapshot(self) -> list[tuple[int, float, str]]:
        with self._lock:
            return list(self._history)

    def join(self, timeout: float | None = None) -> bool:
        return self.done.wait(timeout)


# --------------------------------------------------------------------------- state
class ExplorerState(param.Parameterized):
    """Everything one browser session sees and can change."""

    # data and model
    dataset = param.Parameter(default=None, doc="The loaded bgplvm_datasets.Dataset")
    model = param.Parameter(default=None, doc="The BayesianGPLVM being explored (or None)")
    model_version = param.Integer(default=0, doc="Bumped whenever the model changes")
    dataset_name = param.String(default="", doc="Name of the data set (for titles, files)")

    # training configuration
    latent_dim = param.Integer(default=5, bounds=(1, 30))
    num_inducing = param.Integer(default=25, bounds=(2, 500))
    kernel = param.Selector(default="rbf", objects=KERNELS)
    max_iters = param.Integer(default=300, bounds=(1, MAX_TRAIN_ITERS))

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

    def __init__(self, **params):
        super().__init__(**params)
        self._job: TrainingJob | None = None
        self._pred_cache: dict = {}

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
            if self.model is not None and np.asarray(self.model.Y).shape != ds.Y.shape:
                self.model = None
                self.model_version += 1
            self.latent_dim = min(self.latent_dim, max(1, ds.D))
            self.num_inducing = min(self.num_inducing, ds.N)
            self.selected_index = -1
            self.error = ""
            self.info = f"Loaded {ds.name}: {ds.N} rows x {ds.D} columns." + (
                "" if self.model is not None else " Press Train to fit a model.")

    def load_upload(self, filename: str, data: bytes) -> None:
        """An uploaded array becomes the data set (drawn as vectors)."""
        Y = array_from_upload(filename, data)
        name = os.path.splitext(os.path.basename(filename))[0] or "upload"
        self.set_dataset(Dataset(name=name, Y=Y, renderer=VectorRenderer(),
                                 meta={"title": f"{filename} (uploaded)"}))

    def load_model_bytes(self, filename: str, data: bytes) -> None:
        """Open an uploaded saved model (and the data set it names, when available)."""
        from model import BayesianGPLVM

        _check_upload(data)
        try:
            m = BayesianGPLVM.load(io.BytesIO(data))
        except Exception as e:
            raise UserError(f"{filename}: not a bgplvm model file ({type(e).__name__}: {e})") from None
        self.set_model(m, dataset_for_model(m))
        self.info = f"Opened model {filename}."

    def set_model(self, model, dataset: Dataset | None = None) -> None:
        """Install a (trained) model; resets the axes to its two most relevant dims."""
        ds = dataset if dataset is not None else self.dataset
        if ds is None or np.asarray(model.Y).shape != ds.Y.shape:
            ds = dataset_for_model(model)
        Q = int(model.latent_dim)
        x, y = top_two_dims(model.ard_weights)
        mu = np.asarray(model.latent_mean)
        with param.parameterized.batch_call_watchers(self):
            self.dataset = ds
            self.dataset_name = ds.name
            self.model = model
            self.param.x_dim.bounds = (0, Q - 1)
            self.param.y_dim.bounds = (0, Q - 1)
            self.x_dim, self.y_dim = x, y
            self.fixed = mu.mean(axis=0)
            self.cursor = (float(mu[:, x].mean()), float(mu[:, y].mean()))
            self.pinned = False
            self.selected_index = -1
            self._pred_cache.clear()
            self.model_version += 1
            self.latent_dim = Q
            self.num_inducing = int(model.num_inducing)

    def save_model_bytes(self) -> io.BytesIO:
        if self.model is None:
            raise UserError("no model to save yet: train or open one first")
        self.model.metadata = dict(getattr(self.model, "metadata", None) or {}, dataset=self.dataset_name)
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
    def start_training(self) -> TrainingJob:
        if self.dataset is None:
            raise UserError("load a data set first")
        if self._job is not None and not self._job.done.is_set():
            raise UserError("a model is already training; stop it first")
        ds = self.dataset
        Q = min(self.latent_dim, 30)
        M = min(self.num_inducing, ds.N)
        self._job = TrainingJob(ds, Q, M, self.kernel, int(self.max_iters)).start()
        with param.parameterized.batch_call_watchers(self):
            self.training = True
            self.bound_history = []
            self.error = ""
            self.train_status = f"Starting: Q={Q}, M={M}, kernel {self.kernel}, {self.max_iters} iterations..."
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
        if len(hist) != len(self.bound_history):
            it, bound, phase = hist[-1]
            with param.parameterized.batch_call_watchers(self):
                self.bound_history = hist
                self.train_status = (f"Iteration {it} / {job.max_iters} ({phase} phase), "
                                     f"bound {bound:,.2f}, {time.perf_counter() - job.t_start:.1f} s")
        if not job.done.is_set():
            return True
        self._job = None
        secs = (job.t_end or time.perf_counter()) - job.t_start
        if job.error:
            self.training = False
            self.train_status = "Training failed."
            self.error = f"Training failed: {job.error}"
            return False
        n = hist[-1][0] if hist else 0
        self.set_model(job.model, job.dataset)
        self.training = False
        self.train_status = (f"{'Stopped' if job.stopped else 'Finished'} after {n} iterations in "
                             f"{secs:.1f} s; bound {float(job.model.elbo()):,.2f}.")
        return False

    def shutdown(self) -> None:
        """Session closed: stop any training thread."""
        if self._job is not None:
            self._job.stop()

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
        with param.parameterized.batch_call_watchers(self):
            if axis == "x":
                if q == self.y_dim:
                    self.y_dim = self.x_dim
                self.x_dim = q
            else:
                if q == self.x_dim:
                    self.x_dim = self.y_dim
                self.y_dim = q
            self._recentre_cursor()

    def _recentre_cursor(self):
        vec = self.latent_vector()
        if vec is not None:
            # keep the generated point where it was in the full latent space
            self.cursor = (float(vec[self.x_dim]), float(vec[self.y_dim]))

    def set_fixed(self, q: int, value: float) -> None:
        fixed = np.array(self.fixed, dtype=np.float64)
        fixed[int(q)] = float(value)
        self.fixed = fixed

    def reset_fixed(self) -> None:
        if self.model is not None:
            self.fixed = np.asarray(self.model.latent_mean).mean(axis=0)

    def color_mode(self) -> str:
        """The colouring actually used ("auto" resolved against what the data has)."""
        ds = self.dataset
        have = {"label": ds is not None and ds.labels is not None,
                "sequence": ds is not None and ds.sequence is not None and len(np.unique(ds.sequence)) > 1,
                "time": ds is not None and ds.times is not None}
        if self.color_by == "none":
            return "none"
        if self.color_by != "auto":
            return self.color_by if have[self.color_by] else "none"
        for mode in ("label", "sequence", "time"):
            if have[mode]:
                return mode
        return "none"

    # ------------------------------------------------------------------ generation
    def hover(self, x, y) -> None:
        """PointerXY callback: follow the mouse when follow mode is on."""
        if x is None or y is None or not self.follow or self.model is None:
            return
        self.cursor = (float(x), float(y))

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

    def readout(self) -> str:
        if self.model is None:
            return "No model yet."
        x, y = self.cursor
        mode = "pinned (click)" if self.pinned else ("following the mouse" if self.follow else "fixed")
        text = f"latent point: x{self.x_dim} = {x:.3f}, x{self.y_dim} = {y:.3f} ({mode})"
        if self.selected_index >= 0:
            text += f"; training point #{self.selected_index}"
            ds = self.dataset
            if ds is not None and ds.labels is not None:
                text += f" ({label_text(ds, self.selected_index)})"
        return text


def label_text(ds: Dataset, n: int) -> str:
    lab = int(ds.labels[n])
    if ds.label_names is not None and 0 <= lab < len(ds.label_names):
        return str(ds.label_names[lab])
    return str(lab)
