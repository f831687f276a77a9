"""The Bayesian GP-LVM over rows spread across Dask workers (``BayesianGPLVM(..., client=)``).

The bound is a map-reduce over rows (``bound.DataSums``). Each block of rows lives on a
worker as a ``_rows.RowBlock`` actor with its q(X) parameters and its part of the
optimiser's vectors. One evaluation is two rounds:

1. forward: every block sends psi0_sum, E = Psi1^T Yc (M, D), Psi2 (M, M) and its KL;
2. the driver sums them, runs ``bound.bound_from_sums`` (the in-process bound's algebra)
   and sends back ``SumsGrads`` (M x D and M x M); every block forms its rows' gradient
   and keeps it, and returns dZ (M, Q), the kernel's gradients and two scalars.

The driver holds the global parameters (Z, kernel, noise) and their part of the vectors;
the fit is the vector-free L-BFGS of ``vlbfgs`` (one row of dot products per block per
iteration). So neither the driver's memory nor the bytes per iteration grow with N.
"""

from __future__ import annotations

import copy
import weakref

import numpy as np

from .._threads import single_threaded_blas
from ..calibration import Calibrated
from ..gplvm import _check_int, init_kernel, shared_blocks
from ..kernels import Kernel, make_kernel
from ..optimize import MEMORY
from ..params import ParamLayout
from .blocks import Blocks
from .client import Connection, close_anywhere, connect
from .faults import CALL_TIMEOUT
from .outputs import OutputSums, gradients
from .training import Training
from .vlbfgs import Part


class DistributedGPLVM(Calibrated, Training):
    """``BayesianGPLVM`` with its rows on Dask workers (module docstring).

    Parameters
    ----------
    Y : (N, D) numpy.ndarray or dask.array.Array
        A NumPy array (split into ``chunks`` blocks of rows, one per worker by default) or a
        dask array chunked by rows (its chunks are the blocks; no N-sized array reaches the
        driver).
    client : dask.distributed.Client, str
        A client, a scheduler address or "local".
    memory : int
        L-BFGS pairs kept (on the workers, 16 m bytes per local parameter).
    timeout : float
        Seconds one round of calls on the blocks may take with their workers alive before
        the cluster is taken to be stuck (``faults``: a worker that leaves is noticed within
        a second, whatever this is).

    Notes
    -----
    Other arguments as ``BayesianGPLVM``'s. Complete data and the static prior.

    Calibration: the in-process contract (``calibration.Calibrated``): ``calibration`` (set
    one made in process on the same rows and parameters: ``calibrate``), and ``predict`` /
    ``reconstruct`` with ``calibrated=`` scale as ``BayesianGPLVM``'s do; ``from_model``,
    ``to_model``, ``save`` and ``load`` keep it.
    """

    def __init__(self, Y, latent_dim: int = 2, num_inducing: int = 20, kernel="rbf",
                 seed: int | None = 0, mask=None, client="local", chunks: int | None = None,
                 memory: int = MEMORY, timeout: float = CALL_TIMEOUT, _init: bool = True,
                 _rows: tuple | None = None):
        if mask is not None:  # False = missing, as NaN
            Y = _apply_mask(Y, mask)
        Q = _check_int("latent_dim", latent_dim, 1)
        self._Q = Q
        self.memory = _check_int("memory", memory, 1)
        if not (isinstance(timeout, (int, float)) and timeout > 0):
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        self.timeout = float(timeout)
        self.seed = seed
        self._set_kernel(kernel, Q)
        self.fit_info: dict = {}
        self.metadata: dict = {}
        self._ops = []
        #: iterations of every fit so far (checkpoints are numbered by it)
        self.iterations = 0
        #: where Y comes from when it is a file (saved in checkpoints, for ``resume``)
        self.data_source: str | None = None
        self._checkpoint: tuple | None = None  # (folder, iteration) of the last checkpoint
        self._init_V: np.ndarray | None = None
        #: global parameters held fixed in every fit (a dynamical model's time variances)
        self.frozen: set[str] = set()
        self._conn: Connection = connect(client)
        if self._conn.owned:  # a cluster started for this model stops with it, closed or not
            weakref.finalize(self, close_anywhere, self._conn)
        try:
            self._load(Y, chunks, _rows)
            M = _check_int("num_inducing", num_inducing, 1, self.N, f" (the number of data points N={self.N})")
            self._glayout = ParamLayout(self._global_blocks(M, Q))
            self._gpart = Part(np.zeros(self._glayout.size), self.memory)
            if _init:
                self._initialise(M, seed)
        except BaseException:
            self.close()
            raise

    def _set_kernel(self, kernel, Q: int) -> None:
        """The kernel (a name or a ``Kernel``, copied)."""
        self.kernel: Kernel = make_kernel(kernel if isinstance(kernel, str) else copy.deepcopy(kernel), Q)

    def _global_blocks(self, M: int, Q: int) -> list:
        """The driver's parameters: Z (M, Q), the kernel's, the noise and the prior's own."""
        return shared_blocks(self.kernel, M, Q) + self._prior_blocks()

    def _file_blocks(self) -> list:
        """The in-process model's blocks after its prior's (``persist.file_layout``)."""
        return shared_blocks(self.kernel, self.num_inducing, self.latent_dim)

    # --- the rows on the workers ------------------------------------------------------------
    @property
    def client(self):
        return self._conn.client

    def _load(self, Y, chunks, rows) -> None:
        """Blocks of rows onto the workers (``blocks.Blocks``); then Y's column mean."""
        from .data import source_of

        self.data_source = self.data_source or source_of(Y)
        self._blocks = Blocks(self._conn, Y, chunks, self._make_block, rows=rows, timeout=self.timeout)
        info = self._all("describe")
        self.block_rows = list(self._blocks.rows)
        self.N, self.D = sum(self.block_rows), int(info[0]["D"])
        self._check_rows(info)
        self._set_outputs(info)
        self._centred(self._all("centre", self.Y_mean, self._groups_info))

    def _set_outputs(self, info: list) -> None:
        """The driver's side of Y (``outputs.OutputSums``) from the blocks' ``describe``:
        its column means, counts and groups (a block rebuilt after a worker's loss is
        centred with them too)."""
        self._out = OutputSums(self.N, info)
        self._refuse_thin(self._out.thin_columns())
        self.Y_mean, self._count = self._out.mean, self._out.count
        self.missing_fraction = self._out.missing_fraction
        self._groups_info = self._out.groups

    def _centred(self, cent: list) -> None:
        """The blocks' ``centre`` results: Yc^T Yc (D, D) and the columns' sums of squares."""
        self._out.centred(cent)
        self._YtY, self._colsq = self._out.YtY, self._out.colsq

    def _check_rows(self, info: list) -> None:
        """As ``missing.check_training_outputs``: no inf, no row without an observed entry
        (columns observed on fewer than 2 rows: ``_refuse_thin``)."""
        for key, what, fix in (("inf", "an infinite value", "mark missing entries with NaN"),
                               ("empty", "nothing observed", "drop them (there is nothing to place them by)")):
            bad = sum(i[f"{key}_rows"] for i in info)
            if bad:
                b = next(k for k, i in enumerate(info) if i[f"{key}_rows"])
                row = int(self._blocks.starts[b]) + info[b][f"first_{key}"][0]
                raise ValueError(f"{bad} row(s) of Y have {what} (e.g. row {row} in block order): {fix}")

    @staticmethod
    def _refuse_thin(thin: np.ndarray, name: str = "Y", offset: int = 0) -> None:
        if thin.size:
            raise ValueError(f"{thin.size} column(s) of {name} are observed on fewer than 2 rows (columns "
                             f"{(thin[:10] + offset).tolist()}): too little to learn them from; drop them")

    def _make_block(self, i: int, n: int, data) -> tuple:
        from ._rows import RowBlock

        return RowBlock, data, self.kernel, self._block_prior(i, n), self.memory

    # --- the latent prior: one per block of rows (hooks a dynamical model replaces) ----------
    def _block_prior(self, i: int, n: int):
        """The prior over block i's n rows."""
        from ..priors import StaticPrior

        return StaticPrior(n, self._Q)

    def _prior_blocks(self) -> list:
        """The prior's own parameters (global, on the driver): none for N(0, I)."""
        return []

    def _prior_values(self, v: dict) -> dict:
        """The prior's own values among the global values ``v`` (sent with each evaluation)."""
        return {n: v[n] for n in self._prior_names()}

    def _prior_names(self) -> list[str]:
        return [b.name for b in self._prior_blocks()]

    def _init_prior(self, V: np.ndarray) -> None:
        """Set the prior's own parameters from the PCA start (V: the scaled directions)."""

    @property
    def traffic(self) -> dict:
        """Array bytes sent to and received from the blocks, and calls, so far."""
        return self._blocks.traffic

    def _all(self, method: str, *args, per_block=None, only=None) -> list:
        return self._blocks.call(method, *args, per_block=per_block, only=only)

    def _initialise(self, M: int, seed) -> None:
        """``init.init_params``' start from the blocks' sums: PCA means from the second
        moment (``_pca_moment``), S ~ U(0.45, 0.55), Z a random subset of the means, noise
        and kernel from the data variance and the means' ranges (``_start_globals``)."""
        rng = np.random.default_rng(seed)
        N, Q = self.N, self._Q
        YtY, colscale = self._pca_moment()
        D = YtY.shape[0]
        w, V = np.linalg.eigh(YtY)
        w, V = w[::-1], V[:, ::-1]
        k = min(Q, D)
        scale = np.ones(Q)
        keep = w[:k] > max(w[0], 0.0) * 1e-12 if k else np.zeros(0, bool)
        Vq = np.zeros((D, Q))
        Vq[:, :k] = np.where(keep, V[:, :k], 0.0)
        scale[:k] = np.where(keep, 1.0 / np.sqrt(np.maximum(w[:k], 1e-300) / N), 1.0)  # unit variance
        self._init_V = colscale[:, None] * Vq * scale  # kept: a block rebuilt without a checkpoint starts here again
        self._init_prior(self._init_V)
        pv = self._prior_start()
        ranges = self._all("init_latent", per_block=[(self._init_V, seed, i, pv) for i in range(len(self._blocks))])
        lo = np.min([r["lo"] for r in ranges], axis=0)
        hi = np.max([r["hi"] for r in ranges], axis=0)
        span = np.where(hi - lo > 0, hi - lo, 1.0)
        var = np.maximum(w[:k], 0.0)
        fracs = np.full(Q, var[-1] if k else 1.0)
        fracs[:k] = var
        fracs = np.maximum(fracs / fracs.max() if fracs.max() > 0 else np.ones(Q), 1e-6)
        Z = self._pca_rows(np.sort(rng.permutation(N)[:M]))
        Z = Z + 1e-3 * rng.standard_normal(Z.shape)
        self._start_globals(Z, dict(alpha=5.0 / span**2, fracs=fracs))

    def _pca_moment(self) -> tuple[np.ndarray, np.ndarray]:
        """(the D x D second moment the PCA start diagonalises, (D,) the scale each column
        takes in it): Yc^T Yc as it is."""
        return self._YtY, np.ones(self._YtY.shape[0])

    def _start_globals(self, Z: np.ndarray, init: dict) -> None:
        """The kernel from the data variance and ``init`` (``gplvm.init_kernel``), Z, and the
        noise a hundredth of the data variance."""
        data_var = self._out.data_variance()  # mean column variance (observed)
        init_kernel(self.kernel, {**init, "data_var": data_var})
        self._set_globals(Z=Z, noise_variance=data_var / 100.0)

    def _pca_rows(self, idx: np.ndarray) -> np.ndarray:
        """The PCA means at block-order row indices (sorted), gathered from their blocks."""
        st = self._blocks.starts
        per = [(self._init_V, idx[(idx >= a) & (idx < b)] - a) for a, b in zip(st[:-1], st[1:])]
        return np.concatenate(self._all("pca_means", per_block=per), axis=0)

    def _prior_start(self) -> dict:
        """The prior's own values at the start (set by ``_init_prior``)."""
        return {}

    def _set_globals(self, Z, noise_variance) -> None:
        vals = {"Z": np.asarray(Z, dtype=np.float64), "noise_variance": np.asarray(float(noise_variance))}
        vals.update({"kernel." + n: v for n, v in self.kernel.params.items()})
        vals.update(self._prior_start())
        self._gpart.x = self._glayout.pack(vals)

    # --- parameters ----------------------------------------------------------------------
    def _globals(self, x: np.ndarray | None = None) -> dict:
        return self._glayout.unpack(self._gpart.x if x is None else x)

    def _sync_kernel(self, v: dict) -> dict:
        kp = {k[7:]: val for k, val in v.items() if k.startswith("kernel.")}
        self.kernel.set_params(**kp)
        return kp

    def _kernel_args(self, v: dict) -> tuple:
        """What the blocks' ``forward`` and ``totals`` compute with, from the global values
        ``v``: (Z, the kernel's values)."""
        return v["Z"], self._sync_kernel(v)

    @property
    def latent_dim(self) -> int:
        return self._Q

    @property
    def num_inducing(self) -> int:
        return self._glayout.blocks[0].shape[0]

    @property
    def inducing_inputs(self) -> np.ndarray:
        return np.array(self._globals()["Z"])

    @property
    def noise_variance(self) -> float:
        return float(self._globals()["noise_variance"])

    @property
    def ard_weights(self) -> np.ndarray:
        self._sync_kernel(self._globals())
        return np.asarray(self.kernel.ard_weights, dtype=np.float64)

    @property
    def kernel_variance(self) -> float:
        """Signal variance of the ARD kernel part (``BayesianGPLVM.kernel_variance``)."""
        from ..gplvm import BayesianGPLVM, signal_variance

        self._sync_kernel(self._globals())
        return signal_variance(BayesianGPLVM._ard_part(self))

    def explore(self, **kw):
        """The explorer's page (``BayesianGPLVM.explore``, the same arguments) of the
        in-process model this one equals (``to_model``: Y and q(X) gathered here, for
        moderate N; the page draws and infers in this process)."""
        return self.to_model().explore(**kw)

    def summary(self) -> str:
        """As ``BayesianGPLVM.summary`` (``io.summary_text``): sizes, bound, noise, signal,
        ARD weights, the last fit and the calibration, from the driver's values."""
        from ..io import summary_text

        return summary_text(self)

    def latent(self) -> tuple[np.ndarray, np.ndarray]:
        """(mu, S), each (N, Q), gathered from the workers (N-sized: for moderate N), in
        the rows' order of Y."""
        got = self._all("latent", self._prior_values(self._globals()))
        return self._to_y_order(np.concatenate([g[0] for g in got])), self._to_y_order(np.concatenate([g[1] for g in got]))

    def impute(self, calibrated: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """Y with its missing training entries filled in, (mean (N, D), variance (N, D)) in
        Y's row order, as ``BayesianGPLVM.impute`` (each row's q(x_n), the training
        statistics gathered from the workers; ``calibrated``: scaled by the calibration and
        the row's misfit in its observed entries). The rows and q(X) are gathered block by
        block (N-sized: for moderate N)."""
        from ..calibration import apply_calibration
        from .predict import predict_from_stats, training_stats

        self._baseline_warning()
        active = self._active_calibration(calibrated)
        stats = training_stats(self) if self.missing_fraction > 0 else None
        latent = self._all("latent", self._prior_values(self._globals()))
        means, variances = [], []
        for Y, (mu, S) in zip(self._all("rows"), latent):
            obs = ~np.isnan(Y)
            mean, var = np.array(Y), np.zeros(Y.shape)
            r = np.flatnonzero(~obs.all(axis=1))
            if r.size:
                m_r, v_r = predict_from_stats(stats, mu[r], S[r])
                v_r = apply_calibration(v_r, active, rows=(m_r, Y[r], obs[r]))
                mean[r] = np.where(obs[r], Y[r], m_r)
                var[r] = np.where(obs[r], 0.0, v_r)
            means.append(mean)
            variances.append(var)
        return self._to_y_order(np.concatenate(means)), self._to_y_order(np.concatenate(variances))

    def _to_y_order(self, a: np.ndarray) -> np.ndarray:
        """Rows in block order -> Y's order (the same for the static model)."""
        return a

    @property
    def latent_mean(self):
        """(N, Q) means of q(X) as a dask array (its blocks on the workers; ``.compute()``)."""
        from .predict import latent_arrays

        return latent_arrays(self, 0)

    @property
    def latent_variance(self):
        """(N, Q) variances of q(X) as a dask array (``.compute()`` gathers them)."""
        from .predict import latent_arrays

        return latent_arrays(self, 1)

    # --- new rows (``predict.py``): on the workers for a dask array --------------------------
    def infer_latent(self, Y_star, n_init: int = 1, max_iters: int = 200):
        """q(x*) = N(mu_s, diag S_s) for new rows Y_star (n*, D; NaN = missing), as
        ``BayesianGPLVM.infer_latent``: a NumPy array here, a dask array on the workers
        (lazy: dask arrays back). Returns (mu_s, S_s), each (n*, Q)."""
        from .predict import map_rows

        out = map_rows(self, Y_star, "infer", n_init, max_iters)
        Q = self.latent_dim
        return out[:, :Q], out[:, Q:2 * Q]

    def log_density(self, Y_star, n_init: int = 1, max_iters: int = 200):
        """(n*,) log p(y*_O | Y) of new rows (``BayesianGPLVM.log_density``)."""
        from .predict import map_rows

        return map_rows(self, Y_star, "infer", n_init, max_iters)[:, 2 * self.latent_dim]

    def reconstruct(self, Y_star, calibrated: bool = True, n_init: int = 1, max_iters: int = 200):
        """Mean and variance (n*, D) of new rows given their observed entries, as
        ``BayesianGPLVM.reconstruct`` (``calibrated``: scaled by the calibration and each
        row's misfit in its observed entries, where the rows are predicted: on the workers
        for a dask array)."""
        from .predict import map_rows

        self._baseline_warning()
        out = map_rows(self, Y_star, "reconstruct", n_init, max_iters, self._active_calibration(calibrated))
        return out[:, :self.D], out[:, self.D:]

    def predict(self, Xnew, Xnew_var=None, include_noise: bool = True, calibrated: bool = True):
        """Predictive mean and variance (n, D) of y* at latent points Xnew (n, Q), or at
        Gaussian inputs N(Xnew, diag Xnew_var), as ``BayesianGPLVM.predict`` (``calibrated``
        included), from the training statistics gathered from the workers (M x M and M x D
        sums)."""
        from ..gplvm import check_inputs
        from .predict import predict_from_stats, training_stats

        X, S = check_inputs(Xnew, Xnew_var, self.latent_dim)
        mean, var = predict_from_stats(training_stats(self), X, S, include_noise)
        return mean, self._calibrated(var, calibrated)

    def predictive_variance(self, Xnew) -> np.ndarray:
        """(n,) variance of f at deterministic latent points Xnew (n, Q), as
        ``BayesianGPLVM.predictive_variance`` (eq:testPosteriorF; fitted with missing values,
        the mean over the outputs of each group's), from the gathered training statistics."""
        from ..gplvm import check_latent
        from .predict import predict_from_stats, training_stats

        X = check_latent(Xnew, self.latent_dim, "Xnew")
        return predict_from_stats(training_stats(self), X, None, include_noise=False)[1].mean(axis=1)

    # --- held parameters: the driver's ----------------------------------------------------------
    def freeze(self, *names: str) -> None:
        """Hold global parameters fixed during ``fit``, as ``BayesianGPLVM.freeze``: "Z",
        "kernel.<name>", "noise_variance" and a dynamical prior's own (``frozen`` lists them;
        ``save``, ``to_model`` and checkpoints keep them). q(X)'s rows live on the workers and
        stay free here: hold them in process (``to_model``)."""
        self.frozen |= set(self._global_names(names))

    def unfreeze(self, *names: str) -> None:
        self.frozen -= set(self._global_names(names))

    def _global_names(self, names) -> tuple[str, ...]:
        known = list(self._glayout.slices)
        for n in names:
            if n not in known:
                raise KeyError(f"{n!r} is not a parameter this model on Dask can hold; those it can: {known} "
                               "(q(X)'s rows live on the workers and stay free: hold them in process, to_model())")
        return tuple(names)

    # --- calibration: the contract of ``calibration.Calibrated``, learned in process -----------
    #: the in-process class whose ``calibrate`` makes this model's calibrations
    _in_process = "BayesianGPLVM"

    def calibrate(self, *args, **kwargs):
        """Not on Dask: see the message (learn it on ``to_model()`` and assign it)."""
        if self._not_calibrated_because:
            raise TypeError(f"{type(self).__name__}.calibrate is not available: {self._not_calibrated_because}")
        raise NotImplementedError(
            f"{type(self).__name__}.calibrate does not run on Dask (each held-out fold needs q(u) recomputed "
            "without its rows, and the held-out rows inferred, in one process). Calibrate the in-process model "
            f"of the same rows and parameters and give it to this one: m = dm.to_model(); dm.calibration = "
            f"m.calibrate(...) (the arguments of {self._in_process}.calibrate; to_model gathers Y and q(X) into "
            "this process, N x (D + 2Q) numbers). A calibration of another model (e.g. of a subsample of the "
            "rows) is refused: it records the data and the parameters it was made on")

    def _data_record(self) -> tuple[int, str]:
        """(D, fingerprint of Y) as in process, Y streamed from the workers once (``persist.data_record``)."""
        if getattr(self, "_data_fp", None) is None:
            from .persist import data_record

            self._data_fp = data_record(self)
        return self._data_fp

    def _params_fingerprint(self) -> str:
        """The in-process model's parameter fingerprint at these values (``persist.params_fingerprint``:
        q(X)'s parameters gathered), again only after a fit or a change of the parameters."""
        key = (self.iterations, self._gpart.x.tobytes())
        if getattr(self, "_params_fp", (None, None))[0] != key:
            from .persist import params_fingerprint

            self._params_fp = (key, params_fingerprint(self))
        return self._params_fp[1]

    def to_model(self):
        """The in-process model this one equals (``BayesianGPLVM``; ``DynamicalGPLVM`` for the
        dynamical one): Y and q(X) gathered here (N-sized: for moderate N), the parameters
        bitwise, frozen ones, metadata, last fit's ``fit_info`` and the calibration
        (``persist.to_model``: as ``save`` then ``load``)."""
        from .persist import to_model

        return to_model(self)

    def _free_mask(self) -> np.ndarray:
        mask = np.ones(self._glayout.size, bool)
        for n in self.frozen:
            mask[self._glayout.slices[n]] = False
        return mask

    # --- the bound -------------------------------------------------------------------------
    def _evaluate(self, stp: float, grad: bool = True, need_rows: bool = False):
        """(F, dict) at x + stp d over every part: the bound F = F_hat - KL, and with
        ``grad`` the global gradient of f = -F ("g", kept in the driver's part as well),
        the summed g.d and max |g| ("gd", "gmax"), and with ``need_rows`` each block's."""
        with single_threaded_blas():
            xg = self._gpart.trial_x(stp)
            v = self._globals(xg)
            Z, kp = self._kernel_args(v)
            beta = 1.0 / float(v["noise_variance"])
            ops, self._ops = tuple(self._ops), []
            fw = self._all("forward", stp, Z, kp, self._prior_values(v), ops)
            kl = sum(r["kl"] for r in fw)
            t = self._out.bound(self.kernel.K(Z), fw, beta, grad=grad)
            F = t.F - kl
            if not grad:
                return F, None
            bw = self._all("backward", t, beta, Z, need_rows)
            grads = gradients(self.kernel, Z, beta, t, [r["dZ"] for r in bw], [r["dtheta"] for r in bw])
            return F, self._finish(xg, grads, bw, need_rows)

    def _finish(self, xg: np.ndarray, grads: dict, bw: list, need_rows: bool) -> dict:
        """``_evaluate``'s end: the global gradient ``grads`` (by name; the prior's own
        parameters' added from the blocks' ``bw``) as the gradient "g" of f = -F over the
        driver's unconstrained part (kept in it), g.d and max |g| over every part."""
        grads.update({n: sum(r["dprior"][n] for r in bw) for n in self._prior_names()})
        g = -self._glayout.chain(xg, grads)
        gd, gmax = self._gpart.set_trial(xg, g)
        out = dict(g=g, gd=gd + sum(r["gd"] for r in bw), gmax=max([gmax] + [r["gmax"] for r in bw]))
        if need_rows:
            out["rows"] = [r["g"] for r in bw]
        return out

    def elbo(self) -> float:
        """The bound F at the current parameters."""
        self._direction(np.zeros(self.memory), np.zeros(self.memory), 0.0)
        return float(self._evaluate(0.0, grad=False)[0])

    def _gradient(self) -> tuple[float, np.ndarray, list]:
        """(F, dF/d global unconstrained (the driver's part), [dF/d local unconstrained of
        each block]) at the current parameters; gathers N-sized arrays (tests)."""
        self._direction(np.zeros(self.memory), np.zeros(self.memory), 0.0)
        F, out = self._evaluate(0.0, need_rows=True)
        return F, -out["g"], [-g for g in out["rows"]]

    # --- life cycle ---------------------------------------------------------------------------
    def close(self) -> None:
        """Release the workers' blocks (and stop the cluster the model started)."""
        if getattr(self, "_blocks", None) is not None:
            self._blocks.close()
        conn = getattr(self, "_conn", None)
        if conn is not None:
            conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self) -> str:
        return (f"DistributedGPLVM(N={getattr(self, 'N', '?')}, D={getattr(self, 'D', '?')}, "
                f"latent_dim={self.latent_dim}, blocks={len(getattr(self, '_blocks', []))}, "
                f"kernel={self.kernel!r})")

    # --- from an in-process model ---------------------------------------------------------------
    @classmethod
    def from_model(cls, model, client="local", chunks: int | None = None, memory: int = MEMORY):
        """The in-process ``model``'s data and parameters (static prior, complete data) spread
        over the workers in ``chunks`` blocks of rows."""
        if model.prior.kind != "static":
            raise NotImplementedError("only the static and dynamical priors are distributed")
        model._sync_kernel()
        dm = cls(model.Y, model.latent_dim, model.num_inducing, copy.deepcopy(model.kernel), seed=model.seed,
                 client=client, chunks=chunks, memory=memory, _init=False)
        dm._copy_parameters(model)
        return dm

    def _copy_calibration(self, model) -> None:
        """The in-process ``model``'s calibration (checked as any: its data record is the
        model's, whose rows the workers hold bitwise)."""
        if model.calibration is not None:
            self._data_fp = model._data_record()
            self.calibration = model.calibration

    def _copy_parameters(self, model) -> None:
        """Take the in-process model's unconstrained parameters (the same transforms): the
        prior's row blocks into the blocks (in block order), the rest into the driver's part;
        its frozen global parameters stay frozen."""
        self._set_parameters(model._x, model._layout, model.prior.row_blocks)
        self._copy_calibration(model)

    def _set_parameters(self, x: np.ndarray, layout, names: tuple[str, ...]) -> None:
        """``_copy_parameters`` from an in-process model's vector ``x`` and ``layout``
        (``names``: its row blocks)."""
        sl, N, Q = layout.slices, self.N, self.latent_dim
        local = {n: self._from_y_order(x[sl[n]].reshape(N, Q)) for n in names}
        st = self._blocks.starts
        self._all("set_x", per_block=[(np.concatenate([local[n][a:b].ravel() for n in names]),)
                                      for a, b in zip(st[:-1], st[1:])])
        self._gpart.x = np.concatenate([x[sl[b.name]] for b in self._glayout.blocks])
        self.frozen = {n for n in layout.frozen if n in self._glayout.slices}
        self._params_fp = (None, None)  # q(X) set anew

    # --- model files: the rows referenced (``persist.py``) --------------------------------------
    def save(self, path, data=None) -> None:
        """Save to the model file ``path`` (as ``BayesianGPLVM.save``; opened by
        ``BayesianGPLVM.load``, in process or with ``client=``). Y stays where it is: the file
        refers to the rows' file (``data``, default: the file the model was built from with
        ``open_rows`` or the CLI) and records its shape and a hash of sampled rows."""
        from .persist import save_distributed

        save_distributed(self, path, data)

    def _from_y_order(self, a: np.ndarray) -> np.ndarray:
        """Rows in Y's order -> block order (the same for the static model)."""
        return a




def _apply_mask(Y, mask):
    """Y with NaN where ``mask`` (Y's shape, True = observed) is False."""
    from .blocks import is_dask_array

    if is_dask_array(Y) or is_dask_array(mask):
        import dask.array as da

        return da.where(mask, Y, np.nan)
    mask = np.asarray(mask)
    if mask.dtype != bool or mask.shape != np.shape(Y):
        raise ValueError(f"mask must be a bool array of Y's shape {np.shape(Y)} (True = observed)")
    return np.where(mask, np.asarray(Y, dtype=np.float64), np.nan)
