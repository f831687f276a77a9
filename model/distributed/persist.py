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

from ..gplvm import shared_blocks
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
    """The in-process model's parameter layout (``BayesianGPLVM``: the prior's blocks, then
    the inducing inputs, kernel and noise)."""
    return ParamLayout(prior.blocks() + shared_blocks(dm.kernel, dm.num_inducing, dm.latent_dim))


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
    prior = file_prior(dm)
    layout = file_layout(dm, prior)
    layout.freeze(*sorted(dm.frozen))
    view = _FileView(dm, prior, gather_x(dm, prior, layout), layout,
                     "DynamicalGPLVM" if hasattr(dm, "time_kernel") else "BayesianGPLVM")
    save_model(view, path, data=data)
    log.info("saved %s with its rows referenced, not copied: %s", path, data)


def load_distributed(path, data=None, client="local", chunks: int | None = None, expected=None):
    """A model file (``BayesianGPLVM.save`` or ``save_distributed``) as a distributed model
    on ``client``: the workers read the referenced rows (or get the stored ones)."""
    from ..io import ModelFileError, _read
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
    except BaseException:
        dm.close()
        raise
    return dm
