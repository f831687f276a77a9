"""MRD (``bgplvm.MRD``) with its rows on Dask workers: ``DistributedMRD``.

The views are column groups of the same rows. They go to the workers side by side, one
(N, sum_v D_v) array dealt in blocks of rows as a single-view model's Y is (``blocks.Blocks``:
NumPy arrays scattered, dask arrays computed where their chunks are, blocks rebuilt after a
worker's loss), and each block (``_views.ViewsBlock``) keeps its rows of every view and q(X)
over them. One evaluation is the single-view model's two rounds with a sum over views:

1. forward: every block sends, per view, the sums of that view's bound (``outputs``:
   psi0, Psi1^T Yc (M, D_v), Psi2 (M, M), or per group of columns with missing values),
   computed with the view's kernel and inducing inputs, and the KL of its q(X) once;
2. the driver adds each view's sums over the blocks and forms that view's bound with its
   kernel, Z and noise (``outputs.OutputSums.bound``, the single-view model's reduction),
   F = sum_v F_hat_v - KL; it sends back each view's ``SumsGrads``, and every block adds the
   views' dF/dmu, dF/dS into its rows' gradient.

The driver holds every view's Z, kernel and noise (``MRD``'s parameter names); the fit,
checkpoints, ``resume`` and recovery from a lost worker are ``training.Training``'s (a
checkpoint also names its views and, when they were opened with ``open_rows``, their files).
Prediction and inference from observed views (``predict``, ``infer_latent``,
``predict_views``, ``reconstruct``, ``log_density``, ``infer_candidates``) run ``MRD``'s own
methods on each view's training statistics (``mrd_predict``): M x M and M x D_v sums, and a
sample of training rows to start new rows from, as a single-view model's. Static prior only.
"""

from __future__ import annotations

import copy

import numpy as np

from .._threads import single_threaded_blas
from ..mrd import INDUCING, INITS, MRD, SEGMENTATION_THRESHOLD, WIDTHS, _view_kernels, check_views, view_start
from ..mrd_calibration import ViewsCalibrated
from ..optimize import MEMORY
from .blocks import is_dask_array
from .data import source_of
from .faults import CALL_TIMEOUT
from .model import DistributedGPLVM
from .outputs import OutputSums, columns_of, gradients


def side_by_side(arrays: list):
    """The views (each (N, D_v)) as one (N, sum D_v) array: NumPy, or a dask array chunked
    by whole rows as the first dask view is when any view is one."""
    for a in arrays:
        if np.ndim(a) != 2:
            raise ValueError(f"each view must be a 2-D (rows x outputs) array, got shape {np.shape(a)}")
    lazy = [a for a in arrays if is_dask_array(a)]
    if not lazy:
        return np.hstack([np.asarray(a, dtype=np.float64) for a in arrays])
    import dask.array as da

    rows = lazy[0].chunks[0]
    parts = [(a if is_dask_array(a) else da.from_array(np.asarray(a, dtype=np.float64), chunks=(rows, -1)))
             .astype(np.float64).rechunk({0: rows, 1: -1}) for a in arrays]
    return da.concatenate(parts, axis=1).rechunk({1: -1})


class DistributedMRD(ViewsCalibrated, DistributedGPLVM):
    """``MRD`` with its rows on Dask workers (module docstring).

    Parameters
    ----------
    views : dict or list
        name -> (N, D_v) array (NaN = missing; a row may miss a whole view but must be
        observed in some view), or a list of arrays (view0, view1, ...); NumPy arrays or
        dask arrays (chunked by rows: the first dask view's row chunks are the blocks).
    client, chunks, memory, timeout
        As ``DistributedGPLVM``'s.

    Other arguments are ``MRD``'s. The start is ``MRD``'s from the blocks' sums (the scaled
    PCA of the views side by side, or of the first view, with missing entries at the column
    mean), as ``DistributedGPLVM``'s start is ``BayesianGPLVM``'s.
    """

    #: its cross-view calibration is made in process: dm.calibration = dm.to_model().calibrate(...)
    _in_process = "MRD"

    def __init__(self, views, latent_dim: int = 2, num_inducing: int = 20, kernel="rbf",
                 seed: int | None = 0, inducing: str = "per_view", init: str = "scaled_pca",
                 client="local", chunks: int | None = None, memory: int = MEMORY,
                 timeout: float = CALL_TIMEOUT, _init: bool = True, _rows: tuple | None = None,
                 widths: str = "vargplvm"):
        names, arrays = check_views(views)
        if widths not in WIDTHS:
            raise ValueError(f"widths must be one of {WIDTHS}, got {widths!r}")
        self.widths = widths
        if inducing not in INDUCING:
            raise ValueError(f"inducing must be one of {INDUCING}, got {inducing!r}")
        if init not in INITS:
            raise ValueError(f"init must be one of {INITS}, got {init!r}")
        self.view_names, self.inducing, self.init = names, inducing, init
        #: the file each view was opened from by ``open_rows`` (None: an array), for ``resume``
        self.view_sources = {n: source_of(a) for n, a in zip(names, arrays)}
        Y = side_by_side(arrays)
        #: view v's columns in the blocks' rows: cuts[v]:cuts[v + 1]
        self._cuts = np.concatenate([[0], np.cumsum([int(np.shape(a)[1]) for a in arrays])]).astype(np.int64)
        super().__init__(Y, latent_dim, num_inducing, kernel, seed=seed, client=client, chunks=chunks,
                         memory=memory, timeout=timeout, _init=_init, _rows=_rows)

    # --- set-up: hooks of ``DistributedGPLVM`` ---------------------------------------------------
    def _set_kernel(self, kernel, Q: int) -> None:
        self.kernels = _view_kernels(kernel, self.view_names, Q)
        self.kernel = None  # no single kernel: each view's is in ``kernels``

    _z_name = MRD._z_name

    def _global_blocks(self, M: int, Q: int) -> list:
        """``MRD``'s global parameters: Z (shared, or each view's), each view's kernel and noise."""
        return MRD._model_blocks(self, M, Q)

    def _file_blocks(self) -> list:
        return MRD._model_blocks(self, self.num_inducing, self.latent_dim)

    def _make_block(self, i: int, n: int, data) -> tuple:
        from ._views import ViewsBlock

        kernels = [copy.deepcopy(self.kernels[v]) for v in self.view_names]
        return ViewsBlock, data, self._cuts, kernels, self._block_prior(i, n), self.memory

    def _spans(self):
        return zip(self.view_names, self._cuts[:-1], self._cuts[1:])

    def _set_outputs(self, info: list) -> None:
        """Each view's ``outputs.OutputSums`` from its columns of the blocks' ``describe``."""
        self._outs = {}
        for n, a, b in self._spans():
            out = OutputSums(self.N, [columns_of(i, a, b) for i in info])
            self._refuse_thin(out.thin_columns(), f"view {n!r}")
            self._outs[n] = out
        outs = list(self._outs.values())
        self.Y_mean = np.concatenate([o.mean for o in outs])
        self._count = np.concatenate([o.count for o in outs])
        self.missing_fraction = float(1.0 - self._count.sum() / (self.N * self.D))
        self._groups_info = [o.groups for o in outs]

    def _centred(self, cent: list) -> None:
        for j, out in enumerate(self._outs.values()):
            out.centred([c["views"][j] for c in cent])
        self._YtY = sum(c["YtY"] for c in cent)
        self._colsq = sum(c["colsq"] for c in cent)

    def _pca_moment(self) -> tuple[np.ndarray, np.ndarray]:
        """``MRD._initial_state``'s PCA: the views side by side, each scaled to unit total
        variance ("scaled_pca"), or the first view alone ("first_view": the others scaled
        by 0)."""
        scale = np.zeros(self.D)
        for k, (n, a, b) in enumerate(self._spans()):
            if self.init == "first_view" and k > 0:
                break
            o = self._outs[n]
            total = float(np.sum(o.colsq / np.maximum(o.count, 1)))
            scale[a:b] = 1.0 / np.sqrt(total) if total > 0 else 1.0
        return self._YtY * np.outer(scale, scale), scale

    def _start_globals(self, Z: np.ndarray, init: dict) -> None:
        """``MRD``'s start of the views' parameters (``mrd.view_start``) at inducing inputs Z."""
        var = {n: self._outs[n].data_variance() for n in self.view_names}
        self._gpart.x = self._glayout.pack(view_start(self.kernels, self.inducing, self.widths, {**init, "Z": Z}, var))

    def _noise_names(self) -> list[str]:
        return [f"{n}.noise_variance" for n in self.view_names]

    # --- parameters ----------------------------------------------------------------------------
    def _sync_kernel(self, v: dict | None = None) -> list[dict]:
        """Each view's kernel set from the global values ``v`` (default: the current ones);
        returns their parameters, in the views' order."""
        v = self._globals() if v is None else v
        out = []
        for n in self.view_names:
            pre = f"{n}.kernel."
            kp = {k[len(pre):]: val for k, val in v.items() if k.startswith(pre)}
            self.kernels[n].set_params(**kp)
            out.append(kp)
        return out

    def _kernel_args(self, v: dict) -> tuple[list, list]:
        """What the blocks' ``forward`` and ``totals`` compute with: each view's Z and kernel
        values (lists in the views' order)."""
        kps = self._sync_kernel(v)
        return [v[self._z_name(n)] for n in self.view_names], kps

    @property
    def num_inducing(self) -> int:
        return self._glayout.blocks[self._glayout.names.index(self._z_name(self.view_names[0]))].shape[0]

    @property
    def inducing_inputs(self) -> dict[str, np.ndarray]:
        """{view: (M, Q) inducing inputs}."""
        v = self._globals()
        return {n: np.array(v[self._z_name(n)]) for n in self.view_names}

    @property
    def noise_variance(self) -> dict[str, float]:
        """{view: noise variance}."""
        v = self._globals()
        return {n: float(v[f"{n}.noise_variance"]) for n in self.view_names}

    ard_weights = MRD.ard_weights  # {view: (Q,) ARD weights}, from the kernels synced here

    def segmentation(self, threshold: float = SEGMENTATION_THRESHOLD):
        """The latent dimensions each view switches on (``MRD.segmentation``)."""
        return MRD.segmentation(self, threshold)

    # --- the bound -----------------------------------------------------------------------------
    def _evaluate(self, stp: float, grad: bool = True, need_rows: bool = False):
        """(F, dict) at x + stp d as ``DistributedGPLVM._evaluate``, with F = sum_v F_hat_v - KL
        (module docstring)."""
        with single_threaded_blas():
            xg = self._gpart.trial_x(stp)
            v = self._globals(xg)
            Zs, kps = self._kernel_args(v)
            betas = [1.0 / float(v[f"{n}.noise_variance"]) for n in self.view_names]
            ops, self._ops = tuple(self._ops), []
            fw = self._all("forward", stp, Zs, kps, self._prior_values(v), ops)
            F, ts = -sum(r["kl"] for r in fw), []
            for j, n in enumerate(self.view_names):
                t = self._outs[n].bound(self.kernels[n].K(Zs[j]), [r["views"][j] for r in fw], betas[j], grad=grad)
                F += t.F
                ts.append(t)
            if not grad:
                return F, None
            bw = self._all("backward", ts, betas, Zs, need_rows)
            grads: dict = {}
            for j, n in enumerate(self.view_names):
                gv = gradients(self.kernels[n], Zs[j], betas[j], ts[j], [r["dZ"][j] for r in bw],
                               [r["dtheta"][j] for r in bw])
                z = self._z_name(n)
                grads[z] = grads.get(z, 0.0) + gv.pop("Z")
                grads.update({f"{n}.{k}": val for k, val in gv.items()})
            return F, self._finish(xg, grads, bw, need_rows)

    # --- in process and model files ------------------------------------------------------------
    @classmethod
    def from_model(cls, model, client="local", chunks: int | None = None, memory: int = MEMORY):
        """The in-process ``MRD`` ``model``'s views and parameters (static prior) spread over the
        workers in ``chunks`` blocks of rows."""
        if type(model) is not MRD or model.prior.kind != "static":
            raise NotImplementedError(f"only an MRD with the static prior runs on Dask, got {type(model).__name__}")
        model._sync_kernel()
        views = {n: model.views[n].Y for n in model.view_names}
        kernels = [copy.deepcopy(model.kernels[n]) for n in model.view_names]
        dm = cls(views, model.latent_dim, model.num_inducing, kernels, seed=model.seed, inducing=model.inducing,
                 init=model.init, client=client, chunks=chunks, memory=memory, _init=False,
                 widths=getattr(model, "widths", "vargplvm"))
        try:
            dm._copy_parameters(model)
            dm.metadata, dm.fit_info = dict(model.metadata), dict(model.fit_info)
        except BaseException:
            dm.close()
            raise
        return dm

    def to_model(self) -> MRD:
        """The in-process ``MRD`` this model equals: its views gathered from the workers (N-sized:
        for moderate N), its parameters, frozen ones, metadata and last fit's ``fit_info``."""
        from .persist import gather_x

        Y = np.concatenate(self._all("rows"), axis=0)
        views = {n: Y[:, a:b] for n, a, b in self._spans()}
        m = MRD(views, self.latent_dim, self.num_inducing, [copy.deepcopy(self.kernels[n]) for n in self.view_names],
                seed=self.seed, inducing=self.inducing, init=self.init, widths=self.widths)
        m._set_x(gather_x(self, m.prior, m._layout))
        m._sync_kernel()
        m.freeze(*sorted(self.frozen))
        m.metadata, m.fit_info = dict(self.metadata), dict(self.fit_info)
        if self._calibration is not None:
            m.calibration = self._calibration
        return m

    def save(self, path, data=None) -> None:
        """Save to an ``MRD`` model file (``MRD.save``; opened by ``bgplvm.load`` / ``MRD.load``,
        or again on Dask by ``DistributedMRD.load`` / ``MRD.load(path, client=...)``). Unlike
        a single-view model's, the file holds the views themselves (``to_model``)."""
        if data is not None:
            raise ValueError("an MRD model file holds its views: data= (a referenced rows file) is not taken")
        self.to_model().save(path)

    @classmethod
    def load(cls, path, client="local", chunks: int | None = None, memory: int = MEMORY) -> "DistributedMRD":
        """An ``MRD`` model file as a distributed model on ``client``."""
        return cls.from_model(MRD.load(path), client=client, chunks=chunks, memory=memory)

    # --- checkpoints (``checkpoint.py``): written as a single-view model's, resumed --------------
    def _identity(self) -> dict:
        from ..io import kernel_spec

        return dict(N=int(self.N), D=int(self.D), Q=int(self._Q), M=int(self.num_inducing),
                    views=list(self.view_names), widths=np.diff(self._cuts).tolist(),
                    kernels=[kernel_spec(self.kernels[n]) for n in self.view_names], inducing=self.inducing,
                    rows=[int(r) for r in self.block_rows])

    def _checkpoint_meta(self) -> dict:
        """What ``resume`` builds the model with besides ``_identity``: its start ("init")
        and the files its views were opened from (``open_rows``; None unless all were)."""
        files = self.view_sources if all(self.view_sources.values()) else None
        return {"model": "mrd", "init": self.init, "view_files": files}

    @classmethod
    def resume(cls, folder, views=None, client="local", memory: int | None = None,
               timeout: float | None = None) -> "DistributedMRD":
        """The model of the last checkpoint in ``folder`` (``fit(checkpoint=folder)``), its
        rows dealt to the workers in the checkpoint's blocks and its parameters (q(X) of each
        block, every view's Z, kernel and noise) read back; ``fit`` goes on from there as a
        single-view model's does (``checkpoint.resume``). ``views``: the same views (dict or
        list), needed unless they were opened from files with ``open_rows`` (or by ``bgplvm
        fit --view NAME=FILE --scheduler ...``), which the checkpoint names."""
        from .checkpoint import read_meta, resume

        if read_meta(str(folder)).get("model") != "mrd":
            raise ValueError(f"{folder} holds a checkpoint of a single-view model: resume it with "
                             "DistributedGPLVM.resume (BayesianGPLVM.resume)")
        return resume(folder, views, client, memory, timeout)

    # --- predictions (``mrd_predict``): the views' statistics, the rows staying on the workers ---
    def _views_view(self):
        from .mrd_predict import views_view

        return views_view(self)

    def predict(self, Xnew, Xnew_var=None, include_noise: bool = True, view: str | None = None):
        """{view: (mean, variance) (n, D_v)} at latent points Xnew (n, Q), or at Gaussian inputs
        N(Xnew, diag Xnew_var), or that of one ``view``: ``MRD.predict``, from each view's
        training statistics (M x M and M x D_v sums gathered from the workers)."""
        return self._views_view().predict(Xnew, Xnew_var, include_noise=include_noise, view=view)

    def predictive_variance(self, Xnew):
        """Not of the views together: each view has its own (``MRD`` has none either)."""
        raise TypeError("an MRD's variance of f is each view's: dm.view(name).predictive_variance(Xnew), or "
                        "dm.predict(Xnew, include_noise=False, view=name)")

    def infer_latent(self, observed: dict, max_iters: int = 200, return_fit: bool = False):
        """q(x*) of new rows from the views observed (``MRD.infer_latent``): the views'
        statistics and the q(x_n) and rows of a sample of ``predict.POOL_ROWS`` training rows
        to start from (all of them when there are fewer: then as in process). ``observed``:
        view name -> (n*, D_v) array, NaN = missing (a dask array is computed here)."""
        return self._views_view().infer_latent(observed, max_iters=max_iters, return_fit=return_fit)

    def infer_candidates(self, observed: dict, n_starts: int = 10, max_iters: int = 200, distinct: float = 1.0):
        """The distinct local optima of each new row's q(x*) (``MRD.infer_candidates``; its
        starts from the sample of training rows, as ``infer_latent``'s)."""
        return self._views_view().infer_candidates(observed, n_starts=n_starts, max_iters=max_iters,
                                                   distinct=distinct)

    def log_density(self, observed: dict, max_iters: int = 200) -> np.ndarray:
        """(n*,) log p(y*_O | Y) of new rows' observed views (``MRD.log_density``)."""
        return self._views_view().log_density(observed, max_iters=max_iters)

    def predict_views(self, observed: dict, target=None, max_iters: int = 200, undetermined: str = "prior",
                      threshold: float = SEGMENTATION_THRESHOLD, calibrated: bool = True) -> dict:
        """{view: (mean, variance)} of the views not observed (or ``target``) at the q(x*)
        inferred from the observed ones (``MRD.predict_views``; "nearest": the sampled
        training row a new row started from, as ``infer_latent``; scaled by a calibration
        made in process, as there)."""
        return self._views_view().predict_views(observed, target=target, max_iters=max_iters,
                                                undetermined=undetermined, threshold=threshold, calibrated=calibrated)

    def reconstruct(self, observed: dict, target: str, max_iters: int = 200, undetermined: str = "prior",
                    threshold: float = SEGMENTATION_THRESHOLD, calibrated: bool = True):
        """(mean, variance) (n*, D_target) of view ``target`` given the observed views
        (``MRD.reconstruct``)."""
        return self._views_view().reconstruct(observed, target, max_iters=max_iters, undetermined=undetermined,
                                              threshold=threshold, calibrated=calibrated)

    def _view_dims(self) -> dict:
        return {n: int(b - a) for n, a, b in self._spans()}

    def view(self, name: str):
        """The single-view model of view ``name`` at this model's q(X) (``MRD.view``), in
        process: from ``to_model`` (the views and q(X) gathered here, for moderate N)."""
        if name not in self.view_names:
            raise KeyError(f"no view {name!r}; the views are {self.view_names}")
        return self.to_model().view(name)

    def __repr__(self) -> str:
        dims = ", ".join(f"{n}: {int(b - a)}" for n, a, b in self._spans())
        return (f"DistributedMRD(N={getattr(self, 'N', '?')}, views=({dims}), latent_dim={self.latent_dim}, "
                f"blocks={len(getattr(self, '_blocks', []))}, inducing={self.inducing!r})")

