"""Model files of distributed models, with the rows left where they are.

``DistributedGPLVM.save(path)`` writes the same model file as ``BayesianGPLVM.save`` (npz +
JSON, ``bgplvm.io``): the class of the in-process model it equals (``BayesianGPLVM`` or
``DynamicalGPLVM``), its parameter vector in that model's layout (the rows' q(X) parameters
gathered from the workers, N x 2Q numbers) and, instead of Y, a reference to the file the
rows came from (``bgplvm.rowfile.reference``). So the file opens anywhere a model file opens:

- ``BayesianGPLVM.load(path)``: an in-process model, which reads the referenced rows (the
  explorer opens large models this way);
- ``BayesianGPLVM.load(path, client=...)``: a distributed model again, whose workers read
  their blocks of the referenced file themselves.
"""

from __future__ import annotations

import copy
import logging

import numpy as np

from ..params import ParamLayout
from ..priors import DynamicalPrior, StateSpacePrior, StaticPrior

log = logging.getLogger("bgplvm")


class _FileView:
    """What ``io.save_model`` reads of a model, for a distributed one (in the in-process
    layout of the model it equals); Y is referenced, not held."""

    Y = None

    def __init__(self, dm, prior, x: np.ndarray, layout: ParamLayout, file_class: str):
        self._file_class = file_class
        self.prior, self._x, self._layout = prior, x, layout
        self.kernel = dm.kernel
        self.latent_dim, self.num_inducing = dm.latent_dim, dm.num_inducing
        self.param_names = layout.names
        self.seed, self.metadata = dm.seed, dict(dm.metadata)
        self.fit_info = dict(dm.fit_info)
        self._calibration = dm.calibration  # written as the in-process model's (``io.save_model``)

    def _values(self) -> dict:
        return self._layout.unpack(self._x)


def file_prior(dm):
    """The in-process latent prior of the model ``dm`` equals (sizes and settings only)."""
    if not hasattr(dm, "time_kernel"):
        return StaticPrior(dm.N, dm.latent_dim)
    tk = copy.deepcopy(dm.time_kernel)
    if dm.time_prior == "state_space":
        return StateSpacePrior(dm.t, dm.sequences, dm.latent_dim, tk, dm._state_space_options)
    return DynamicalPrior(dm.t, dm.sequences, dm.latent_dim, tk)


def file_layout(dm, prior) -> ParamLayout:
    """The in-process model's parameter layout: the prior's blocks, then the model's own
    (``BayesianGPLVM``: the inducing inputs, kernel and noise; ``MRD``: each view's)."""
    return ParamLayout(prior.blocks() + dm._file_blocks())


def gather_x(dm, prior, layout: ParamLayout) -> np.ndarray:
    """The distributed model's unconstrained parameters in the in-process ``layout``: the
    rows' blocks (``prior.row_blocks``) from the workers, in Y's order; the globals from the
    driver."""
    names = prior.row_blocks
    Q = dm.latent_dim
    parts = dm._all("get_x")
    local = {n: [] for n in names}
    for xb, n_rows in zip(parts, dm.block_rows):
        for j, n in enumerate(names):
            local[n].append(xb[j * n_rows * Q:(j + 1) * n_rows * Q].reshape(n_rows, Q))
    x = np.empty(layout.size)
    for n in names:
        x[layout.slices[n]] = dm._to_y_order(np.concatenate(local[n])).ravel()
    for b in dm._glayout.blocks:
        x[layout.slices[b.name]] = dm._gpart.x[dm._glayout.slices[b.name]]
    return x


def rows_at(dm, idx) -> np.ndarray:
    """Y's rows at Y-order indices ``idx`` (as given, NaN = missing), gathered from their
    blocks (one round)."""
    idx = np.asarray(idx, dtype=np.int64)
    pos = dm._to_y_order(np.arange(dm.N))[idx]  # where those rows are, in the blocks' order
    st = dm._blocks.starts
    inside = [(pos >= a) & (pos < b) for a, b in zip(st[:-1], st[1:])]
    got = dm._all("rows", per_block=[(pos[w] - a,) for w, a in zip(inside, st[:-1])])
    out = np.empty((idx.size, dm.D))
    for w, rows in zip(inside, got):
        out[w] = rows
    return out


#: bytes of Y gathered at a time to hash it (``data_record``)
HASH_BYTES = 64 << 20


def data_record(dm) -> tuple[int, str]:
    """(D, ``calibration.fingerprint`` of Y in its rows' order), Y streamed from the workers
    ``HASH_BYTES`` at a time (the driver never holds it whole): what a calibration made in
    process on the same rows records (``calibration.check_calibration``)."""
    from ..calibration import fingerprint_parts

    step = max(1, HASH_BYTES // (8 * max(dm.D, 1)))
    parts = (rows_at(dm, np.arange(a, min(a + step, dm.N))) for a in range(0, dm.N, step))
    return dm.D, fingerprint_parts((dm.N, dm.D), parts)


def params_fingerprint(dm) -> str:
    """``calibration.fingerprint`` of the distributed model's parameters in the in-process
    layout (``gather_x``): the in-process model's ``_x`` fingerprint at the same values."""
    from ..calibration import fingerprint

    prior = file_prior(dm)
    return fingerprint(gather_x(dm, prior, file_layout(dm, prior)))


def check_rows(dm, data) -> None:
    """ValueError unless the file ``data`` holds ``dm``'s rows: its shape, and its sampled
    rows (``rowfile.sample_index``) against the workers' copies of them."""
    from ..rowfile import read_rows, sample_index, shape_of

    shape = tuple(shape_of(data))
    if shape != (dm.N, dm.D):
        raise ValueError(f"{data} holds an array of shape {shape}, not this model's rows ({dm.N}, {dm.D})")
    idx = sample_index(dm.N)
    pos = dm._to_y_order(np.arange(dm.N))[idx]  # where those rows are, in the blocks' order
    st = dm._blocks.starts
    pv = dm._prior_values(dm._globals())
    got = dm._all("pool", per_block=[(pos[(pos >= a) & (pos < b)] - a, pv) for a, b in zip(st[:-1], st[1:])])
    theirs = np.empty((idx.size, dm.D))
    for (_, _, Yc, _), a, b in zip(got, st[:-1], st[1:]):
        theirs[np.nonzero((pos >= a) & (pos < b))[0]] = Yc
    mine = read_rows(data, idx)
    ok = np.where(np.isnan(mine), theirs == 0.0, np.isclose(mine - dm.Y_mean, theirs, rtol=1e-12, atol=1e-12 * (1 + np.abs(mine).max())))
    if not ok.all():
        raise ValueError(f"{data} does not hold this model's rows (sampled rows differ): name the file the model "
                         "was built from")


def save_distributed(dm, path, data=None) -> None:
    """Write ``dm`` to the model file ``path`` with its rows referenced (module docstring)."""
    from ..io import save_model

    data = data if data is not None else dm.data_source
    if data is None:
        raise ValueError("this model's rows were given as an array, so there is no file to refer to: write them "
                         "to one (np.save('rows.npy', Y)) and build the model from bgplvm.distributed.open_rows("
                         "'rows.npy'), or pass save(path, data='rows.npy') naming a file that holds them")
    check_rows(dm, data)
    save_model(file_view(dm), path, data=data)
    log.info("saved %s with its rows referenced, not copied: %s", path, data)


def file_view(dm) -> _FileView:
    """What ``io.save_model`` writes of ``dm``: the in-process model it equals, Y not held."""
    prior = file_prior(dm)
    layout = file_layout(dm, prior)
    layout.freeze(*sorted(dm.frozen))
    return _FileView(dm, prior, gather_x(dm, prior, layout), layout,
                     "DynamicalGPLVM" if hasattr(dm, "time_kernel") else "BayesianGPLVM")


def to_model(dm):
    """The in-process model ``dm`` equals (``BayesianGPLVM`` or ``DynamicalGPLVM``): Y and q(X)
    gathered from the workers (N-sized: for moderate N), written as a model file in memory
    with Y stored and opened by ``io.load_model``: the same parameters (bitwise), frozen
    ones, metadata, last fit's ``fit_info`` and calibration as ``save`` then ``load`` give."""
    import io

    from ..io import load_model, save_model

    view = file_view(dm)
    view.Y = rows_at(dm, np.arange(dm.N))
    buf = io.BytesIO()
    save_model(view, buf)
    buf.seek(0)
    return load_model(buf)


def load_distributed(path, data=None, client="local", chunks: int | None = None, expected=None):
    """A model file (``BayesianGPLVM.save`` or ``save_distributed``) as a distributed model
    on ``client``: the workers read the referenced rows (or get the stored ones)."""
    from ..io import ModelFileError, _read, _restore_calibration
    from ..rowfile import resolve
    from .data import open_rows

    meta, arrays = _read(path)
    cls_name = meta.get("model_class", "BayesianGPLVM")
    if cls_name == "MRD" and (expected is None or expected.__name__ in ("BayesianGPLVM", "MRD")):
        from .mrd import DistributedMRD

        return DistributedMRD.load(path, client=client, chunks=chunks)
    if cls_name not in ("BayesianGPLVM", "DynamicalGPLVM"):
        raise ModelFileError(f"{path!r} holds a {cls_name}: only BayesianGPLVM and DynamicalGPLVM models "
                             "run on Dask")
    if expected is not None and cls_name == "BayesianGPLVM" and expected.__name__ != "BayesianGPLVM":
        raise ModelFileError(f"model file {path!r} holds a BayesianGPLVM, not a {expected.__name__}")
    source = None
    if "data_ref" in meta:
        try:
            source = resolve(meta["data_ref"], path, data)
        except (OSError, ValueError) as e:
            raise ModelFileError(f"model file {path!r}: {e}") from None
        N = int(meta["data_ref"]["shape"][0])
        Y = open_rows(source, block_rows=-(-N // chunks) if chunks else None)  # its blocks: the model's
    else:
        Y = arrays["Y"]
    common = dict(latent_dim=int(meta["latent_dim"]), num_inducing=int(meta["num_inducing"]),
                  kernel=meta["kernel"], seed=meta.get("seed"), client=client, chunks=chunks, _init=False)
    if cls_name == "DynamicalGPLVM":
        from .dynamical import DistributedDynamicalGPLVM

        p = meta["prior"]
        dm = DistributedDynamicalGPLVM(Y, arrays["prior.t"], sequences=arrays["prior.sequences"],
                                       time_kernel=p["time_kernel"], time_prior=p.get("time_prior", "dense"),
                                       state_space_options=p.get("state_space_options"),
                                       learn_time_variance=True, **common)
    else:
        from .model import DistributedGPLVM

        dm = DistributedGPLVM(Y, **common)
    try:
        prior = file_prior(dm)
        layout = file_layout(dm, prior)
        x = np.asarray(arrays["x"], dtype=np.float64)
        if x.shape != (layout.size,) or layout.names != meta.get("param_names"):
            raise ModelFileError(f"model file {path!r}: its parameters do not fit a model of its data")
        layout.freeze(*meta.get("frozen", []))
        dm._set_parameters(x, layout, prior.row_blocks)
        dm.metadata = dict(meta.get("metadata") or {})
        dm.fit_info = dict(meta.get("fit_info") or {})
        dm.data_source = source
        if "calibration" in meta:  # as in process (checked against the rows the workers read)
            _restore_calibration(dm, meta["calibration"], arrays, path)
    except BaseException:
        dm.close()
        raise
    return dm
