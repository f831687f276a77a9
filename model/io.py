"""Model files: one ``.npz`` (numeric arrays, loaded with ``allow_pickle=False``) holding a
``meta.json`` member (format name and version, kernel spec, metadata). Never pickle.

The unconstrained parameter vector is stored as it is, so save -> load round-trips bit for
bit; the constrained values (mu, S, Z, kernel parameters, noise) are stored beside it for
other tools to read.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
import time
import zipfile
import zlib
from pathlib import Path

import numpy as np

FORMAT_NAME = "bgplvm-model"
#: 2: the latent prior is recorded ("model_class", "prior" and its arrays "prior.<name>");
#: version-1 files (static models) are still read. Optional members of version 2: per-entry
#: freeze masks ("frozen_entries" names, arrays "frozen_entries.<name>") and the settings of
#: registered model classes ("model_args", arrays "model.<name>").
#: 3: the training outputs may be referenced instead of stored: no array "Y", and "data_ref"
#: in meta.json (``bgplvm.rowfile.reference``). Files that store Y are still written as 2.
FORMAT_VERSION = 3

#: model classes registered by their modules (``register_model_class``): name -> class
MODEL_CLASSES: dict[str, type] = {}


def register_model_class(cls):
    """Make ``cls`` loadable from model files (usable as a class decorator). The class gives
    ``_file_args() -> (JSON-able settings, {name: array})`` and the classmethod
    ``_from_file(Y, common, args, arrays)`` returning a fresh model of the saved sizes
    (``common``: latent_dim, num_inducing, kernel, seed; ``arrays``: every array of the file
    by member name, e.g. "prior.inputs", "model.series")."""
    MODEL_CLASSES[cls.__name__] = cls
    return cls


class ModelFileError(ValueError):
    """A model file that cannot be read: missing, truncated, foreign or too new."""


def kernel_spec(kernel) -> str:
    """The kernel string ``make_kernel`` rebuilds the kernel from (e.g. "rbf+bias+white")."""
    from .kernels import Sum

    parts = kernel.parts if isinstance(kernel, Sum) else [kernel]
    return "+".join(p.name for p in parts)


def _new_file_mode() -> int:
    umask = os.umask(0)  # the only way to read it; once, at import (not thread-safe later)
    os.umask(umask)
    return 0o666 & ~umask


#: what ``open`` gives a new file (0o666 less the umask)
_NEW_FILE_MODE = _new_file_mode()


def file_mode(path: Path) -> int:
    """Permissions for a file about to be (re)written at ``path``: the existing file's, else
    what ``open`` would give (``mkstemp``'s temporary files are 0o600)."""
    try:
        return os.stat(path).st_mode & 0o777
    except OSError:
        return _NEW_FILE_MODE


def check_writable(path, directory: bool = False) -> Path:
    """Fail early, before hours of work, if ``path`` (a file, or a folder when ``directory``)
    cannot be written: it must not be a folder (a file when ``directory``), and its
    nearest existing ancestor must be a writable folder (missing folders are created
    later). Returns the path."""
    path = Path(path)
    if path.exists() and path.is_dir() != directory:
        raise ValueError(f"{path} is {'a file' if directory else 'a folder'}; give a "
                         f"{'folder' if directory else 'file name'}")
    parent = path if directory else path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise ValueError(f"cannot write {path}: {parent} is not a writable folder")
    return path


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder and a rename:
    an interrupted write never leaves a partial file. The file gets the permissions a
    plain write would give (``file_mode``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fchmod(f.fileno(), file_mode(path))
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def save_model(m, target, data=None) -> None:
    """Write model ``m`` to a path (atomically) or to a binary file object. ``data``: the
    file holding ``m``'s training outputs (.npy, .npz, .h5, .zarr), referred to instead of
    copying Y into the model file (checked to hold them); None: refer to the file the model
    was opened from if it was referenced (``m.data_file``), else store Y."""
    from . import __version__
    from .rowfile import reference

    if not hasattr(target, "write"):
        check_writable(target)  # a folder, or no writable folder: say so before the work
    outputs = m._file_outputs() if hasattr(m, "_file_outputs") else None  # several views: "Y.<name>"
    if outputs is not None and data is not None:
        raise ValueError(f"{type(m).__name__} stores its views in the model file: data= (a reference to "
                         "one file of outputs) does not apply")
    data = data if data is not None else getattr(m, "data_file", None)
    ref = None
    if data is not None:
        ref = reference(data, None if hasattr(target, "write") else target,
                        Y=None if getattr(m, "Y", None) is None else m.Y)
    values = m._values()
    meta = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION if ref else 2,
        "library_version": __version__,
        "saved_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "model_class": getattr(m, "_file_class", type(m).__name__),
        "prior": m.prior.spec(),
        "kernel": kernel_spec(m.kernel) if outputs is None else None,
        "latent_dim": m.latent_dim,
        "num_inducing": m.num_inducing,
        "param_names": m.param_names,
        "frozen": sorted(m._layout.frozen),
        "frozen_entries": sorted(m._layout.frozen_entries),
        "seed": m.seed,
        "metadata": m.metadata,
        "fit_info": {k: v for k, v in m.fit_info.items() if k != "history"},
        "bound_history": [float(h) for h in m.fit_info.get("history", [])],
    }
    model_args, model_arrays = m._file_args() if hasattr(m, "_file_args") else ({}, {})
    if model_args or model_arrays:
        meta["model_args"] = model_args
    if ref:
        meta["data_ref"] = ref
    cal = getattr(m, "_calibration", None)
    if cal is not None:
        meta["calibration"] = cal.meta()
    try:
        meta_bytes = json.dumps(meta, allow_nan=True).encode("utf-8")
    except TypeError as e:
        raise ValueError(f"model metadata must be JSON-serialisable: {e}") from None
    arrays = {"x": m._x, "meta.json": np.frombuffer(meta_bytes, dtype=np.uint8)}
    if outputs is not None:
        arrays.update(outputs)
    elif ref is None:
        arrays["Y"] = m.Y
    arrays.update({"value." + k: np.asarray(v) for k, v in values.items()})
    arrays.update({"prior." + k: np.asarray(v) for k, v in m.prior.arrays().items()})
    arrays.update({"model." + k: np.asarray(v) for k, v in model_arrays.items()})
    arrays.update({"frozen_entries." + k: v for k, v in m._layout.frozen_entries.items()})
    if cal is not None:
        arrays["calibration.scale"] = cal.scale
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    if hasattr(target, "write"):
        target.write(buf.getvalue())
    else:
        atomic_write_bytes(Path(target), buf.getvalue())


def _head(source, n: int = 6) -> bytes:
    """The first n bytes of a path or a seekable file-like object (left at its start)."""
    if hasattr(source, "read"):
        pos = source.tell()
        head = source.read(n)
        source.seek(pos)
        return head
    with open(source, "rb") as f:
        return f.read(n)


def _a(word: str) -> str:
    """'a BayesianGPLVM', 'an UncertainInputGPR' (by the written letter)."""
    return ("an " if word[:1].upper() in "AEIOU" else "a ") + word


def _read(source) -> tuple[dict, dict]:
    name = getattr(source, "name", None) or str(source)
    if not hasattr(source, "read") and not Path(source).is_file():
        raise ModelFileError(f"model file {name!r} " + ("is a folder, not a file" if Path(source).is_dir()
                                                         else "does not exist"))
    head = _head(source)
    if not head.startswith((b"PK", b"\x93NUMPY")):  # neither an .npz (zip) nor an .npy:
        # np.load would take it for a pickle and suggest unpickling it
        raise ModelFileError(f"{name!r} is not a bgplvm model file (not a NumPy .npz archive; model "
                             "files are written by save)")
    try:
        # the file opened here, so that it is closed when np.load fails on it (a truncated
        # archive left it open: ResourceWarning)
        with contextlib.ExitStack() as stack:
            f = source if hasattr(source, "read") else stack.enter_context(open(source, "rb"))
            z = np.load(f, allow_pickle=False)
            if not isinstance(z, np.lib.npyio.NpzFile):
                raise ModelFileError(f"{name!r} is a single numpy array, not a bgplvm model file "
                                     "(model files are .npz archives written by save)")
            with z:
                files = set(z.files)
                if "meta.json" not in files:
                    raise ModelFileError(f"{name!r} is not a bgplvm model file (no meta.json member); "
                                         "it may be a plain numpy archive: load data with "
                                         "bgplvm.datasets.load_array instead")
                arrays = {k: z[k] for k in files}
    except ModelFileError:
        raise
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, KeyError, TypeError) as e:
        raise ModelFileError(f"cannot read model file {name!r}: it is truncated or not a bgplvm "
                             f"model file ({type(e).__name__}: {e})") from None
    try:
        meta = json.loads(arrays.pop("meta.json").tobytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ModelFileError(f"model file {name!r} has corrupt metadata: {e}") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT_NAME:
        raise ModelFileError(f"{name!r} is not a bgplvm model file (format {meta.get('format')!r})")
    version = meta.get("format_version")
    if isinstance(version, int) and not isinstance(version, bool) and version > FORMAT_VERSION:
        raise ModelFileError(f"{name!r} was written in model format version {version}, newer than "
                             f"this bgplvm reads ({FORMAT_VERSION}); upgrade bgplvm to open it")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ModelFileError(f"{name!r} has an invalid model format version {version!r} (corrupt file)")
    if "Y" not in arrays and "asset.json" in arrays:
        try:
            asset = json.loads(arrays["asset.json"].tobytes().decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            asset = {}
        asset = asset if isinstance(asset, dict) else {}
        raise ModelFileError(
            f"{name!r} is one of the explorer's pre-trained models, shipped without its data "
            f"({asset.get('dataset', 'a data set')!r} is fetched when it is opened): open it with "
            f"`bgplvm serve`, or in Python with bgplvm.assets.load_asset("
            f"{asset.get('asset', 'NAME')!r}), which loads the data and checks it")
    args = meta.get("model_args")
    views = args.get("views") if isinstance(args, dict) else None  # a multi-view model's "Y.<name>"
    outputs = [f"Y.{n}" for n in views] if isinstance(views, list) else [] if "data_ref" in meta else ["Y"]
    for key in ["x"] + outputs:
        if key not in arrays:
            raise ModelFileError(f"model file {name!r} lacks the array {key!r}: truncated or corrupt")
    return meta, arrays


def _referenced_data(meta: dict, arrays: dict, source, data) -> str | None:
    """Read the training outputs a file refers to (``rowfile.resolve``) into arrays["Y"];
    their path, or None when the file stores them."""
    from .rowfile import read_rows, resolve

    if "data_ref" not in meta:
        return None
    try:
        path = resolve(meta["data_ref"], source, data)
    except (OSError, ValueError) as e:
        raise ModelFileError(f"model file {getattr(source, 'name', source)!r}: {e}") from None
    arrays["Y"] = read_rows(path)
    return path


def _construct(meta: dict, arrays: dict):
    """A fresh model of the saved class with the saved sizes (parameters set after)."""
    from .dynamical import DynamicalGPLVM
    from .gplvm import BayesianGPLVM

    cls_name = meta.get("model_class", "BayesianGPLVM")
    common = dict(latent_dim=int(meta["latent_dim"]), num_inducing=int(meta["num_inducing"]),
                  kernel=meta["kernel"], seed=meta.get("seed"))
    if cls_name == "BayesianGPLVM":
        return BayesianGPLVM(arrays["Y"], **common)
    if cls_name == "DynamicalGPLVM":
        # files written before the state-space form have no "time_prior": they are dense
        return DynamicalGPLVM(arrays["Y"], arrays["prior.t"], sequences=arrays["prior.sequences"],
                              time_kernel=meta["prior"]["time_kernel"],
                              time_prior=meta["prior"].get("time_prior", "dense"),
                              state_space_options=meta["prior"].get("state_space_options"), **common)
    if cls_name in MODEL_CLASSES:
        return MODEL_CLASSES[cls_name]._from_file(arrays.get("Y"), common, meta.get("model_args", {}), arrays)
    raise ModelFileError(f"model class {cls_name!r} is not known to this bgplvm; upgrade bgplvm")


def load_model(source, expected=None, data=None):
    """Read a model written by ``save_model`` (path or binary file object); the class
    (``BayesianGPLVM``, ``DynamicalGPLVM`` or a registered one) is the one that was saved.
    ``expected``: a class the saved one must be (or derive from), else ModelFileError.
    ``data``: where the training outputs are now, for a file that refers to them (default:
    where they were saved from, or the same place relative to the model file)."""
    from ._restore import restoring

    meta, arrays = _read(source)
    data_file = _referenced_data(meta, arrays, source, data)
    try:
        with restoring():
            m = _construct(meta, arrays)
    except (KeyError, ValueError, TypeError) as e:
        raise ModelFileError(f"model file {source!r} has inconsistent contents: {e}") from None
    if expected is not None and not isinstance(m, expected):
        raise ModelFileError(f"model file {source!r} holds {_a(type(m).__name__)}, not "
                             f"{_a(expected.__name__)}; open it with {type(m).__name__}.load or "
                             "BayesianGPLVM.load (any model class)")
    try:
        _restore_state(m, meta, arrays, source)
    except ModelFileError:
        raise
    except (KeyError, ValueError, TypeError, AttributeError) as e:
        raise ModelFileError(f"model file {source!r} has inconsistent contents: {e}") from None
    m.data_file = data_file
    return m


def _restore_state(m, meta: dict, arrays: dict, source) -> None:
    """Parameters, frozen sets, metadata and fit information of a loaded model."""
    x = np.asarray(arrays["x"], dtype=np.float64)
    if x.shape != m._x.shape or m.param_names != meta.get("param_names"):
        raise ModelFileError(f"model file {source!r}: parameter vector does not match its "
                             "metadata (corrupt file)")
    m._set_x(x)
    m.unfreeze(*m.param_names)  # exactly the saved set (constructors may freeze by default)
    m.unfreeze_entries(*m.param_names)
    for name in meta.get("frozen", []):
        m.freeze(name)
    for name in meta.get("frozen_entries", []):
        key = "frozen_entries." + name
        if key not in arrays:
            raise ModelFileError(f"model file {source!r} lacks the array {key!r}: truncated or corrupt")
        m.freeze_entries(name, np.asarray(arrays[key], dtype=bool))
    m.metadata = dict(meta.get("metadata") or {})
    m.fit_info = dict(meta.get("fit_info") or {})
    m.fit_info["history"] = [float(h) for h in meta.get("bound_history", [])]
    m._sync_kernel()
    if "calibration" in meta:
        _restore_calibration(m, meta["calibration"], arrays, source)


def _restore_calibration(m, cal_meta: dict, arrays: dict, source) -> None:
    """The saved calibration, refused (ModelFileError) if the outputs are not those it was made on."""
    from .calibration import Calibration

    if "calibration.scale" not in arrays:
        raise ModelFileError(f"model file {source!r} lacks the array 'calibration.scale': truncated or corrupt")
    try:
        read = getattr(type(m), "_calibration_from_file", Calibration.from_file)  # MRD: its views' calibrations
        m.calibration = read(cal_meta, arrays["calibration.scale"])
    except ValueError as e:
        raise ModelFileError(f"model file {source!r}: {e}") from None


def time_prior_text(prior) -> str:
    """How the dynamical prior is computed, e.g. "state_space (exact, d = 2)" or
    "state_space (rbf: Taylor order 6, kernel error <= 3.1e-03)" or "dense"."""
    if prior.form != "state_space":
        return "dense (Kt factorised per sequence)"
    ss = prior.state_space()
    if ss.exact:
        return f"state_space (exact, state dimension {ss.H.shape[0]})"
    return (f"state_space (approximate: order {ss.order}, state dimension {ss.H.shape[0]}, "
            f"max kernel error {ss.max_error:.2g})")


def summary_text(m) -> str:
    """Bound, noise, signal-to-noise, ARD weights sorted, dimensions switched on."""
    N, D = (m.N, m.D) if hasattr(m, "_out") else m.Y.shape  # a distributed model: the workers' sums
    lines = [f"{type(m).__name__}  N={N}  D={D}  Q={m.latent_dim}  M={m.num_inducing}  "
             f"kernel={kernel_spec(m.kernel)}",
             f"  bound (ELBO)      {m.elbo():.4f}",
             *([f"  data              referenced, not in the model file: {m.data_file}"]
               if getattr(m, "data_file", None) else []),
             *_missing_lines(m, N, D),
             f"  noise variance    {m.noise_variance:.6g}",
             f"  kernel variance   {m.kernel_variance:.6g}",
             f"  signal-to-noise   {m.kernel_variance / m.noise_variance:.4g}"]
    prior = _prior_of(m)
    if prior.kind == "dynamical":
        lines.append(f"  time kernel       {m.time_kernel!r}  "
                     f"({len(prior.sequence_ids)} sequence(s))")
        lines.append(f"  time prior        {time_prior_text(prior)}")
    if prior.kind == "uncertain":
        if m.fixed_inputs:
            lines.append("  inputs            fixed at the observations (GP regression)")
        else:
            sz = m.input_noise_variance
            lines.append(f"  input noise       Sigma_z in [{sz.min():.3g}, {sz.max():.3g}], q(X) means "
                         + ("tied to the inputs" if m.tie_mean else "free"))
    try:
        w = m.ard_weights
    except AttributeError:
        w = None
    if w is not None:
        order = np.argsort(w)[::-1]
        rel = w / w.max()
        on = [int(q) for q in order if rel[q] > ACTIVE_FRACTION]
        lines.append("  ARD weights (sorted; alpha_q, relative to the largest):")
        for q in order:
            mark = "on " if rel[q] > ACTIVE_FRACTION else "off"
            lines.append(f"    dim {q:2d}  {w[q]:12.6g}  {rel[q]:7.4f}  {mark}")
        lines.append(f"  dimensions switched on (> {ACTIVE_FRACTION:.0%} of the largest): "
                     f"{len(on)} -> {on}")
    if m.fit_info:
        fi = m.fit_info
        lines.append(f"  last fit: {fi.get('iterations', '?')} iterations, "
                     f"{fi.get('evaluations', '?')} evaluations"
                     + (f", ended: {fi['reason']}" if fi.get("reason")
                        else ", stopped early" if fi.get("stopped") else ""))
    cal = getattr(m, "_calibration", None)
    if cal is not None:
        lines.append(f"  intervals         {cal.describe()}")
        if cal.knn_better:
            lines.append(f"  baseline          k-NN (k = {cal.knn_k}) RMSE {cal.knn_rmse:.4g} < the model's "
                         f"{cal.model_rmse:.4g} on the held-out entries")
    return "\n".join(lines)


def _prior_of(m):
    """The model's latent prior; a distributed model's in-process one (``persist.file_prior``)."""
    if not hasattr(m, "_out"):
        return m.prior
    from .distributed.persist import file_prior

    m._sync_kernel(m._globals())  # the time kernel at the model's values
    return file_prior(m)


def _missing_lines(m, N: int, D: int) -> list[str]:
    """The summary's line on missing values (none for complete data)."""
    if not m.missing_fraction > 0:
        return []
    if hasattr(m, "_out"):  # distributed: the count and column groups of the workers' sums
        n_missing, groups = int(round(m.missing_fraction * N * D)), int(m._out.groups["G"])
    else:
        n_missing, groups = m._missing.n_missing, len(m._missing.groups)
    return [f"  missing values    {n_missing} of {N * D} entries ({100 * m.missing_fraction:.1f}%), "
            f"{groups} group(s) of outputs observed on the same rows"]


#: an ARD weight above this fraction of the largest counts as a dimension switched on
ACTIVE_FRACTION = 0.05
