"""The variational (Bayesian) GP-LVM: q(X), inducing inputs, kernel, noise; fit and predict.

Bound: F(q(X)) = sum_j F_j(q(X)) - KL(q(X) || p(X))   (jensensSplit2, FdFinal).
q(X) and p(X) belong to a replaceable latent prior (``bgplvm.priors``: static N(0, I) here,
the dynamical one in ``DynamicalGPLVM``), which gives (mu, S) to the psi statistics, the KL
term and the chain rule back to its own parameters; everything else is shared.
Parameters live in one unconstrained vector (``ParamLayout``): the prior's blocks (mu, S for
the static prior), Z as it is, the kernel parameters and the noise variance through softplus.
"""

from __future__ import annotations

import copy
import time
import warnings
from numbers import Integral

import numpy as np

from .bound import posterior_from_stats, predictive_moments
from .calibration import Calibrated
from .init import init_params
from .kernels import Kernel, make_kernel
from .missing import MissingOutputs, as_outputs, check_training_outputs
from .outputs import SMALL_DATA_VARIANCE, Outputs  # noqa: F401  (SMALL_DATA_VARIANCE: where it was)
from ._interrupt import aborts, caused_by_interrupt, deferred_interrupt
from .optimize import Optimisation
from ._threads import blas_single_threaded, single_threaded_blas
from .params import Block, ParamLayout
from .priors import LatentPrior, StaticPrior
from .testbound import TrainingStats, check_test_outputs, infer_latent
from .transforms import IDENTITY, POSITIVE

#: default iterations of ``fit`` in all: oil (N=1000, Q=10, M=50) passes a bound of 9,200
#: with one latent dimension on for seeds 0-2 after 3,000 (9,562 / 9,594 / 9,961,
#: bench/bench_oil_seeds.py), not always after 2,000 (9,077-9,599); bench/bench_fit.py has
#: the curves against GPy's
FIT_ITERS = 3000
#: iterations of the initial phase with the noise held fixed (vargplvm's initVardistIters)
INIT_ITERS = 300
#: after this many held iterations the hold is kept only while the model wants less noise
#: than held (``_hold_helps``)
INIT_CHECK = 100


#: rows per batch of ``impute`` (its covFstar holds a (batch, M, M) array)
IMPUTE_BATCH = 512

def _check_Y(Y, mask=None, missing_ok: bool = False):
    """Y as a float64 (N, D) array; with ``missing_ok`` the pair (Y with NaN at the missing
    entries, observed (N, D) bool or None) of ``missing.check_training_outputs``."""
    if missing_ok:
        return check_training_outputs(Y, mask)
    Y = as_outputs(Y)
    bad = ~np.isfinite(Y)
    if bad.any():
        rows = np.unique(np.nonzero(bad)[0])
        raise ValueError(f"Y contains {int(bad.sum())} NaN/inf values (first rows: {rows[:5].tolist()}); "
                         "this model needs complete outputs: remove or impute those rows (BayesianGPLVM "
                         "and DynamicalGPLVM fit with missing values)")
    return np.ascontiguousarray(Y)


def _check_int(name: str, v, lo: int, hi: int | None = None, why: str = "") -> int:
    if isinstance(v, bool) or not isinstance(v, Integral):
        raise TypeError(f"{name} must be an integer, got {v!r}")
    v = int(v)
    if v < lo or (hi is not None and v > hi):
        rng = f">= {lo}" if hi is None else f"between {lo} and {hi}"
        raise ValueError(f"{name} must be {rng}{why}, got {v}")
    return v


def _infer_kw(n_init=1, max_iters=200, **rest) -> dict:
    """Test-time inference's options, checked (``testbound.infer_latent`` has the rest)."""
    return dict(n_init=_check_int("n_init", n_init, 1), max_iters=_check_int("max_iters", max_iters, 0), **rest)


def init_kernel(kernel: Kernel, init: dict) -> None:
    """Kernel parameters from the data (``init_params``' dict): signal variance = data
    variance; RBF inverse widths alpha_q = 5 / range(mu_q)^2 (vargplvm); linear ARD weights
    proportional to the PCA variance fractions. Values given to a kernel object's
    constructor (``RBF(Q, variance=...)``: its ``user_set``) are kept."""
    from .kernels import RBF, Linear, Sum

    parts = kernel.parts if isinstance(kernel, Sum) else [kernel]
    for k in parts:
        if isinstance(k, RBF):
            vals = dict(variance=np.asarray(init["data_var"]), lengthscale=1.0 / np.sqrt(init["alpha"]))
        elif isinstance(k, Linear):
            vals = dict(variances=init["fracs"] * init["data_var"])
        else:
            continue
        keep = getattr(k, "user_set", frozenset())
        k.set_params(**{n: v for n, v in vals.items() if n not in keep})


def signal_variance(k: Kernel) -> float:
    """The variance of kernel part ``k`` (RBF: its variance; linear: its largest variance)."""
    p = k.params
    return float(p["variance"]) if "variance" in p else float(np.max(p["variances"]))


def shared_blocks(kernel: Kernel, M: int, Q: int) -> list[Block]:
    """Inducing inputs, kernel parameters and noise: the blocks every prior shares."""
    blocks = [Block("Z", (M, Q), IDENTITY)]
    blocks += [Block("kernel." + k, v.shape, POSITIVE) for k, v in kernel.params.items()]
    blocks.append(Block("noise_variance", (), POSITIVE))
    return blocks


def check_latent(X, Q: int, name: str) -> np.ndarray:
    """Latent (or input) points as a float64 (n, Q) array. A 1-D array is one point when
    Q > 1 and n points when Q == 1."""
    X = np.asarray(X, dtype=np.float64)
    if X.ndim == 1:
        X = X[:, None] if Q == 1 else X[None, :]
    if X.ndim != 2 or X.shape[1] != Q:
        raise ValueError(f"{name} must have shape (n, {Q}), got {X.shape}")
    if not np.all(np.isfinite(X)):
        raise ValueError(f"{name} contains NaN or inf")
    return np.ascontiguousarray(X)


def check_inputs(Xnew, Xnew_var, Q: int) -> tuple[np.ndarray, np.ndarray | None]:
    """(Xnew, Xnew_var) of ``predict``: points (n, Q) and None, or Gaussian inputs' means
    and variances (n, Q) each."""
    Xnew = check_latent(Xnew, Q, "Xnew")
    if Xnew_var is None:
        return Xnew, None
    S = check_latent(Xnew_var, Q, "Xnew_var")
    if S.shape != Xnew.shape or np.any(S < 0):
        raise ValueError("Xnew_var must be non-negative with the same shape as Xnew")
    return Xnew, S


#: the entry-point group of the viewers ``explore`` opens (pyproject.toml)
VIEWERS_GROUP = "bgplvm.viewers"


class BayesianGPLVM(Calibrated):
    """Bayesian GP-LVM with collapsed bound and psi statistics.

    Parameters
    ----------
    Y : (N, D) array or outputs.Outputs
        The data; centred inside the model (the mean is added back by ``predict``); or an
        ``outputs.Outputs`` (e.g. one view of an ``MRD`` model).
    latent_dim : int
        Q, latent dimensions (ARD switches unneeded ones off).
    num_inducing : int
        M inducing inputs, 1 <= M <= N.
    kernel : str or Kernel
        A kernel name ("rbf", "linear", "rbf+bias+white", ...) or a ``Kernel``.
    seed : int or None
        Seed of the initialisation (PCA means are deterministic; S, Z subset are drawn).
    mask : (N, D) bool, optional
        True = observed: entries to treat as missing beside NaN.
    client : None, dask.distributed.Client or str
        None (fit in this process) or a Dask cluster: a ``dask.distributed.Client``, a
        scheduler address ("tcp://host:8786") or "local" (a ``LocalCluster`` started and
        closed for the model). Then the model is a ``bgplvm.distributed.DistributedGPLVM``:
        Y (a NumPy array, or a ``dask.array.Array`` chunked by rows) and q(X) stay on the
        workers, in ``chunks`` blocks of rows (default: one per worker).

    Notes
    -----
    Missing values (NaN, or False in ``mask``): the bound is taken over the observed entries
    of each output (``bgplvm.missing``), the data are centred with each column's observed
    mean, and ``impute`` fills the missing entries from q(X).
    """

    def __new__(cls, *args, client=None, chunks=None, **kwargs):
        if client is None or cls is not BayesianGPLVM:
            if chunks is not None:
                raise ValueError("chunks= is for a distributed model: pass client= as well")
            return super().__new__(cls)
        from .distributed import DistributedGPLVM

        return DistributedGPLVM(*args, client=client, chunks=chunks, **kwargs)

    #: the training outputs (``bgplvm.outputs``): Y, its observed entries, centring, column
    #: groups and the statistics of the bound
    outputs: Outputs

    @property
    def Y(self) -> np.ndarray:
        """(N, D) the training outputs, NaN at the missing entries."""
        return self.outputs.Y

    @property
    def Y_mean(self) -> np.ndarray:
        """(D,) each output's observed mean (the model's centring; ``predict`` adds it back)."""
        return self.outputs.mean

    @property
    def _Yc(self) -> np.ndarray:
        return self.outputs.Yc

    @property
    def _missing(self) -> MissingOutputs | None:
        """The observation pattern of Y and its grouped bound (None: Y is complete)."""
        return self.outputs.missing

    def __init__(self, Y, latent_dim: int = 2, num_inducing: int = 20, kernel="rbf",
                 seed: int | None = 0, mask=None, client=None, chunks=None):
        # checked first: its errors come before the rest's (an ``Outputs`` is taken as it is)
        self.outputs = Y if isinstance(Y, Outputs) and mask is None else Outputs(Y, mask)
        N, D = self.outputs.shape
        Q = _check_int("latent_dim", latent_dim, 1)
        M = _check_int("num_inducing", num_inducing, 1, N, f" (the number of data points N={N})")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, Integral) or seed < 0):
            raise ValueError(f"seed must be a non-negative integer or None, got {seed!r} (it is saved "
                             "with the model)")
        # a Kernel object passed in is copied: the model's fit must not change the caller's
        # object (nor another model built from it)
        self.kernel: Kernel = make_kernel(kernel if isinstance(kernel, str) else copy.deepcopy(kernel), Q)
        self.seed = seed
        self.metadata: dict = {}
        self.fit_info: dict = {}
        self._Q = Q
        with single_threaded_blas():  # small matrices: BLAS threads only contend
            init = self._initial_state(Q, M, np.random.default_rng(seed))
            self.prior: LatentPrior = self._make_prior(N, Q, init)
            self._init_kernel(init)
            self._layout = ParamLayout(self.prior.blocks() + self._model_blocks(M, Q))
            self._x = self._layout.pack({**self.prior.initial_values(init["mu"], init["S"]),
                                         "Z": init["Z"],
                                         "noise_variance": np.asarray(init["noise_variance"]),
                                         **self._kernel_values()})
        self._cache: dict = {}

    #: True while ``fit`` runs: its evaluations skip the gradient work of frozen parameters
    _fitting: bool = False

    #: parameters held fixed in the initial phase of ``fit``
    _init_held: tuple[str, ...] = ("noise_variance",)

    def _hold_helps(self, x: np.ndarray) -> bool:
        """Whether to go on holding the noise variance at its start (signal-to-noise 100)
        after ``INIT_CHECK`` iterations: only while the bound at x would rather have less
        noise (dF/d noise < 0). The hold is an annealing: a large noise keeps q(X) from
        settling into fine detail before it is organised as a whole, and releasing the noise
        early loses that on oil (bounds 7,900-8,100 and 200 1-NN errors with 100 held
        iterations, against 9,300-9,700 with 300). Where the model wants more noise than
        held, the start is below what the data support and holding it only slows the fit:
        on the synthetic 3-dim set (bench/bench_fit.py, 3 seeds) the median bound after 500
        evaluations is -1,131 with 300 held iterations, 352 with none and -135 with this rule,
        which holds oil's noise for all 300."""
        if tuple(self._init_held) != ("noise_variance",) or "noise_variance" in self._layout.frozen:
            return True
        _, g = self._bound(x)
        return float(g[self._layout.slices["noise_variance"]][0]) < 0.0

    def _initial_state(self, Q: int, M: int, rng: np.random.Generator) -> dict:
        """Initial values (``init_params``'s keys) from the data (subclasses whose inputs
        are observed start from those instead)."""
        return init_params(self._Yc, Q, M, rng, observed=self._missing.observed if self._missing else None)

    def _make_prior(self, N: int, Q: int, init: dict) -> LatentPrior:
        """The latent prior owning q(X)'s parameters (subclasses replace it)."""
        return StaticPrior(N, Q)

    # --- construction helpers -------------------------------------------------------------
    def _init_kernel(self, init: dict) -> None:
        init_kernel(self.kernel, init)

    def _model_blocks(self, M: int, Q: int) -> list[Block]:
        return shared_blocks(self.kernel, M, Q)

    def _kernel_values(self) -> dict:
        return {"kernel." + k: v for k, v in self.kernel.params.items()}

    # --- parameters -------------------------------------------------------------------------
    @property
    def param_names(self) -> list[str]:
        return self._layout.names

    def get_param_vector(self) -> np.ndarray:
        """The free parameters, unconstrained (what the optimiser sees)."""
        return self._x[self._layout.free_mask()].copy()

    def set_param_vector(self, x_free: np.ndarray) -> None:
        x = self._x.copy()
        free = self._layout.free_mask()
        x_free = np.asarray(x_free, dtype=np.float64)
        if x_free.shape != (int(free.sum()),):
            raise ValueError(f"x_free must have shape ({int(free.sum())},) (get_param_vector's), got {x_free.shape}")
        x[free] = x_free
        self._set_x(x)

    def _set_x(self, x: np.ndarray) -> None:
        if not np.all(np.isfinite(x)):
            raise ValueError("refusing to set non-finite parameters")
        self._x = x.copy()
        self._cache.clear()

    def _values(self, x: np.ndarray | None = None) -> dict:
        """Constrained parameter values (read-only); those of the current x are unpacked
        once and cached (a prediction reads them several times: ~1 ms each for CMU's
        N x Q blocks through softplus)."""
        if x is not None:
            return self._layout.unpack(x)
        cache = getattr(self, "_cache", None)
        if cache is None:
            return self._layout.unpack(self._x)
        if "values" not in cache:
            cache["values"] = self._layout.unpack(self._x)
        return cache["values"]

    def freeze(self, *names: str) -> None:
        """Hold parameters fixed during ``fit`` (names in ``param_names``: the prior's, e.g.
        "mu", "S", then "Z", "kernel.<name>", "noise_variance")."""
        self._layout.freeze(*names)

    def unfreeze(self, *names: str) -> None:
        self._layout.unfreeze(*names)

    def freeze_entries(self, name: str, mask) -> None:
        """Hold the entries of parameter ``name`` where the bool ``mask`` (the parameter's
        shape) is True, e.g. observed features of q(X); ``unfreeze_entries`` releases them."""
        self._layout.freeze_entries(name, mask)

    def unfreeze_entries(self, *names: str) -> None:
        self._layout.unfreeze_entries(*names)

    @property
    def latent_dim(self) -> int:
        return self._Q

    @property
    def num_inducing(self) -> int:
        return self._layout.blocks[self._layout.names.index("Z")].shape[0]

    @property
    def Y_observed(self) -> np.ndarray:
        """(N, D) bool: True where Y was observed (all True for complete data)."""
        return self.outputs.observed_mask

    @property
    def missing_fraction(self) -> float:
        """The fraction of Y's entries that are missing (0.0 for complete data)."""
        return self.outputs.missing_fraction

    def _qx(self):
        """q(X) at the current parameters (marginals and KL; no gradient)."""
        if "qx" not in self._cache:
            self._cache["qx"] = self.prior.q(self._values(), grad=False)
        return self._cache["qx"]

    @property
    def latent_mean(self) -> np.ndarray:
        """(N, Q) means of q(X) (a copy)."""
        return np.array(self._qx().mu)

    @property
    def latent_variance(self) -> np.ndarray:
        """(N, Q) marginal variances of q(X) (a copy)."""
        return np.array(self._qx().S)

    @property
    def inducing_inputs(self) -> np.ndarray:
        """(M, Q) inducing inputs (a copy)."""
        return np.array(self._values()["Z"])

    @property
    def noise_variance(self) -> float:
        """The Gaussian noise variance sigma^2 (beta^{-1} in the paper). Settable: e.g. hold
        it at a value of your choice with ``m.noise_variance = v; m.freeze("noise_variance")``
        before ``fit``."""
        return float(self._values()["noise_variance"])

    @noise_variance.setter
    def noise_variance(self, value: float) -> None:
        try:
            v = float(value)
        except (TypeError, ValueError):
            raise TypeError(f"noise_variance must be a positive number, got {value!r}") from None
        if not (np.isfinite(v) and v > 0.0):
            raise ValueError(f"noise_variance must be a positive, finite number, got {value!r}")
        self._set_x(self._layout.with_block(self._x, "noise_variance", v))

    @property
    def kernel_variance(self) -> float:
        """Signal variance of the ARD kernel part (RBF variance, else the first part's)."""
        self._sync_kernel()
        return signal_variance(self._ard_part())

    @property
    def ard_weights(self) -> np.ndarray:
        """(Q,) ARD weights alpha_q (1 / lengthscale_q^2 for RBF, the variances for linear)."""
        self._sync_kernel()
        w = self.kernel.ard_weights
        if w is None:
            raise AttributeError("this kernel has no ARD part (use rbf or linear)")
        return np.asarray(w, dtype=np.float64)

    def _ard_part(self) -> Kernel:
        from .kernels import RBF, Linear, Sum

        parts = self.kernel.parts if isinstance(self.kernel, Sum) else [self.kernel]
        for cls in (RBF, Linear):
            for k in parts:
                if isinstance(k, cls):
                    return k
        return parts[0]

    def _sync_kernel(self, values: dict | None = None) -> None:
        values = self._values() if values is None else values
        self.kernel.set_params(**{k[7:]: v for k, v in values.items() if k.startswith("kernel.")})

    # --- the bound -----------------------------------------------------------------------
    @blas_single_threaded
    def _bound(self, x: np.ndarray, grad: bool = True, free_only: bool = False):
        """Bound and (optionally) its gradient w.r.t. the full unconstrained vector x
        (``free_only``: the entries of frozen parameters may be left at 0, for callers that
        read the free ones only; the prior then skips their work)."""
        v = self._values(x)
        self._sync_kernel(v)
        free_only = free_only or self._fitting  # the fit reads the free entries only
        self.prior.skip_gradients = frozenset(self._layout.frozen) if free_only else frozenset()
        qx = self.prior.q(v, grad=grad)
        beta = 1.0 / float(v["noise_variance"])
        F_hat, d = self.outputs.bound(self.kernel, qx.mu, qx.S, v["Z"], beta, grad=grad)
        F = F_hat - qx.kl
        if not grad:
            return F, None
        grads = qx.chain(d.dmu, d.dS)
        grads.update({"Z": d.dZ, "noise_variance": -beta**2 * d.dbeta})
        grads.update({"kernel." + name: d.dtheta[name] for name in self.kernel.params})
        return F, self._layout.chain(x, grads)

    def elbo(self) -> float:
        """The full bound F(q(X)) at the current parameters (of the centred data)."""
        if "elbo" not in self._cache:
            self._cache["elbo"] = self._bound(self._x, grad=False)[0]
        return self._cache["elbo"]

    def elbo_and_gradient(self) -> tuple[float, np.ndarray]:
        """(bound, gradient w.r.t. the packed free unconstrained parameters)."""
        F, g = self._bound(self._x, grad=True, free_only=True)
        return F, g[self._layout.free_mask()]

    # --- training --------------------------------------------------------------------------
    def fit(self, max_iters: int = FIT_ITERS, init_iters: int | None = None, callback=None,
            progress: bool | None = None) -> "BayesianGPLVM":
        """Maximise the bound with L-BFGS (model/_lbfgs.py: L-BFGS-B's steps, no bounds).

        First up to ``init_iters`` iterations (default min(300, max_iters // 4); 0 where
        ``_init_held`` is empty) with the noise variance held fixed so that q(X) fits first
        (as the paper's code does; subclasses name what they hold in ``_init_held``): after
        ``INIT_CHECK`` of them the hold goes on only while the model wants less noise than
        held (``_hold_helps``).
        Then all free parameters, for ``max_iters`` iterations in all. ``callback(FitProgress)``
        is called after each iteration, with the model at that iterate (it may predict or
        save); returning True stops the fit. Ctrl-C stops it after the iteration. The model
        keeps the best accepted point; a non-finite step is never written. A second Ctrl-C,
        or an exception in the callback, also keeps the best point, then raises
        (KeyboardInterrupt: a loop of fits stops too). ``fit_info["reason"]``: converged,
        stalled (the line search found no better point; ``fit_info["message"]``), max_iters,
        callback, interrupted or error.

        Parameters
        ----------
        max_iters : int
            Iterations in all, the held phase included (default 3000).
        init_iters : int, optional
            Iterations of the held phase (see above).
        callback : callable, optional
            ``callback(FitProgress)`` after every iteration; returning True stops the fit.
        progress : bool, optional
            Show a progress bar (default: when running in a terminal).

        Returns
        -------
        BayesianGPLVM
            The model itself, fitted in place (``fit_info`` says how the fit ended).
        """
        max_iters = _check_int("max_iters", max_iters, 0)
        if callback is not None and not callable(callback):
            raise TypeError(f"callback must be a function of a FitProgress, got {callback!r}")
        if init_iters is None:
            init_iters = min(INIT_ITERS, max_iters // 4) if self._init_held else 0
        init_iters = _check_int("init_iters", init_iters, 0, max_iters)
        self._check_start()
        opt = Optimisation(max_iters, callback, progress)
        opt.on_iterate = self._set_x
        fun = self._bound
        layout = self._layout
        x = self._x
        error = None
        check = min(INIT_CHECK, init_iters)
        # (phase, iterations, hold): the held phase in two parts, the second only while
        # holding helps; the main phase gets whatever the held phase left of max_iters
        phases = [("init", check, True), ("init", init_iters - check, True), ("main", None, False)]
        self._fitting = True
        try:
            with opt.bar, deferred_interrupt() as opt.interrupt:
                try:
                    for k, (phase, iters, hold) in enumerate(phases):
                        iters = max_iters - opt.iteration if iters is None else iters
                        if (iters <= 0 or opt.stopped or opt.interrupted
                                or (k == 1 and not self._hold_helps(x))):
                            continue
                        held = [n for n in self._init_held if n in layout.slices and n not in layout.frozen]
                        held = held if hold else []
                        layout.freeze(*held)
                        try:
                            x = opt.run(fun, x, layout.free_mask(), iters, phase)
                        finally:
                            layout.unfreeze(*held)
                except BaseException as e:  # a second Ctrl-C (Numba: SystemError), a callback's error
                    error = e
                    x = opt.best_x if opt.best_x is not None else x
        finally:
            self._fitting = False
        aborted = error is not None and caused_by_interrupt(error)
        interrupted = aborted or opt.interrupted
        self._set_x(x)  # the best point, whatever ended the fit
        self._sync_kernel()  # the kernel object followed the trial points of the last evaluations
        self.fit_info = dict(iterations=opt.iteration, evaluations=opt.n_evals,
                             rejected_steps=opt.n_rejected, stopped=opt.stopped or interrupted,
                             reason=self._end_reason(opt, error, interrupted, max_iters),
                             bound=float(opt.best_f) if np.isfinite(opt.best_f) else float(self.elbo()),
                             history=opt.history, held_iterations=opt.phase_iterations.get("init", 0),
                             message=opt.last_status[1] if opt.last_status is not None and opt.last_status[0] == 2
                             else "", seconds=time.perf_counter() - opt.t0, recoveries=[], rebalances=[])
        if aborted:  # Ctrl-C twice: stop whatever runs the fit (a loop of fits) as well
            raise KeyboardInterrupt("fit interrupted (Ctrl-C twice): the model keeps the best point "
                                    "reached") from error
        if error is not None:
            raise error
        if interrupted:
            warnings.warn("fit interrupted: the model keeps the best point reached (Ctrl-C again "
                          "stops at once)", stacklevel=2)
            if aborts():
                raise KeyboardInterrupt("fit interrupted (Ctrl-C)")
        return self

    @staticmethod
    def _end_reason(opt, error, interrupted: bool, max_iters: int) -> str:
        """fit_info["reason"]: interrupted / error / callback / max_iters, else converged, or
        stalled when the optimiser's line search found no better point (a stiff or noisy
        direction: the gradient is not small there; fitting again may go on)."""
        if interrupted:
            return "interrupted"
        if error is not None:
            return "error"
        if opt.stopped:
            return "callback"
        if opt.iteration >= max_iters:
            return "max_iters"
        status = opt.last_status[0] if opt.last_status is not None else 0
        return {0: "converged", 2: "stalled"}.get(status, "max_iters")  # 1: its evaluation limit

    def _check_start(self) -> None:
        """A fit needs a finite bound and gradient where it starts: else a ValueError that
        says so (the optimiser would reject every step and return without a word)."""
        try:
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                F, g = self._bound(self._x, grad=True)
        except (np.linalg.LinAlgError, ArithmeticError) as e:
            raise ValueError(f"cannot fit: the bound cannot be evaluated at the current parameters "
                             f"({type(e).__name__}: {e})") from e
        if not np.isfinite(F) or not np.all(np.isfinite(g)):
            what = "bound" if not np.isfinite(F) else "gradient of the bound"
            raise ValueError(f"cannot fit: the {what} is not finite at the current parameters "
                             "(an extreme kernel parameter, noise variance or latent value?); "
                             "set them to sensible values first")

    # --- predictions ------------------------------------------------------------------------
    @blas_single_threaded
    def _posterior_stats(self) -> tuple:
        """What q(u) depends on, from the training data: (Kuu (M, M), Psi2 (M, M), beta,
        PsiY = Psi1^T Yc (M, D)), the arguments of ``bound.posterior_from_stats``."""
        if "posterior_stats" not in self._cache:
            v = self._values()
            self._sync_kernel(v)
            k, mu, S, Z = self.kernel, self.latent_mean, self.latent_variance, v["Z"]
            beta = 1.0 / float(v["noise_variance"])
            self._cache["posterior_stats"] = (k.K(Z), k.psi2(mu, S, Z), beta,
                                              k.psi1(mu, S, Z).T @ self._Yc)
        return self._cache["posterior_stats"]

    @blas_single_threaded
    def _column_stats(self) -> tuple:
        """(Kuu, beta, Psi2g (G, M, M), col_group (D,), PsiY (M, D)): the statistics of each
        output's q(u): output j's are Psi2g[col_group[j]] and PsiY[:, j] = Psi1_g^T y_j over
        the rows of its group (one group, all rows, for complete data)."""
        if self._missing is None:
            Kuu, Psi2, beta, PsiY = self._posterior_stats()
            return Kuu, beta, Psi2[None], np.zeros(self.Y.shape[1], dtype=np.int64), PsiY
        if "column_stats" not in self._cache:
            v = self._values()
            self._sync_kernel(v)
            Psi2g, col_group, PsiY = self.outputs.column_stats(self.kernel, self.latent_mean, self.latent_variance,
                                                               v["Z"])
            self._cache["column_stats"] = (self.kernel.K(v["Z"]), 1.0 / float(v["noise_variance"]), Psi2g,
                                           col_group, PsiY)
        return self._cache["column_stats"]

    @blas_single_threaded
    def _posterior(self):
        if self._missing:
            raise NotImplementedError("a model fitted with missing values has one q(u) per group of "
                                      "outputs observed on the same rows: use _posteriors()")
        if "posterior" not in self._cache:
            self._cache["posterior"] = posterior_from_stats(*self._posterior_stats())
        return self._cache["posterior"]

    @blas_single_threaded
    def _posteriors(self) -> list:
        """[(columns, Posterior)]: the q(u) algebra of each group of outputs, one group
        (``slice(None)``) for complete data, one per set of observed rows otherwise
        (``MissingOutputs.posteriors``)."""
        if "posteriors" not in self._cache:
            if self._missing is None:
                self._cache["posteriors"] = [(slice(None), self._posterior())]
            else:
                Kuu, beta, Psi2g, _, PsiY = self._column_stats()
                self._cache["posteriors"] = [(g.cols, posterior_from_stats(Kuu, Psi2g[i], beta, PsiY[:, g.cols]))
                                             for i, g in enumerate(self._missing.groups)]
        return self._cache["posteriors"]

    def _check_latent(self, X, name: str) -> np.ndarray:
        return check_latent(X, self.latent_dim, name)

    @blas_single_threaded
    def predictive_variance(self, Xnew) -> np.ndarray:
        """(n,) variance of f at deterministic latent points (eq:testPosteriorF), the same
        for every output: k(x,x) - k_u^T (Kuu^{-1} - (Kuu + beta Psi2)^{-1}) k_u. (Fitted
        with missing values, each group of outputs has its own: their mean over the outputs.)"""
        Xnew = self._check_latent(Xnew, "Xnew")
        self._sync_kernel()
        kd, Kxu = self.kernel.Kdiag(Xnew), self.kernel.K(Xnew, self.inducing_inputs)
        if self._missing is None:
            return np.maximum(self._posterior().projected_variance(kd, Kxu), 0.0)
        D = self.Y.shape[1]
        return sum(np.maximum(post.projected_variance(kd, Kxu), 0.0) * (len(cols) / D)
                   for cols, post in self._posteriors())

    @blas_single_threaded
    def predict(self, Xnew, Xnew_var=None, include_noise: bool = True, calibrated: bool = True):
        """Predictive mean (n, D) and variance (n, D) of y* at latent points.

        Parameters
        ----------
        Xnew : (n, Q) array
            Latent points (deterministic), or the means of Gaussian ones.
        Xnew_var : (n, Q) array, optional
            None: deterministic points, the projected-process predictive
            (eq:testPosteriorF). Else the points are Gaussian N(Xnew, diag Xnew_var):
            meanFstar / covFstar.
        include_noise : bool
            Add the noise variance (predicting y rather than f).
        calibrated : bool
            If the model was calibrated (``calibrate``), scale the variance of f and of y
            alike by the calibration's per-output factor (``bgplvm.calibration``).

        Returns
        -------
        mean, variance : (n, D) arrays
        """
        Xnew, S = check_inputs(Xnew, Xnew_var, self.latent_dim)
        self._sync_kernel()  # e.g. called from a fit's callback, while the bound moves it
        mean, var = predictive_moments(self.kernel, self.inducing_inputs, self._posteriors(), self.Y.shape[1],
                                       Xnew, S)
        var = var + self.noise_variance if include_noise else var
        return mean + self.Y_mean, self._calibrated(var, calibrated)

    # --- calibration (model/calibration.py; the property and the scaling: ``Calibrated``) ------
    def calibrate(self, rows: int = 1000, hide=None, folds: int = 5, level: float = 0.95,
                  method: str = "quantile", per_output: bool | None = None, seed: int = 0,
                  path: str = "reconstruct", groups=None, adaptive: bool = True):
        """Learn a per-output scale of the predictive sd from the training data itself
        (``bgplvm.calibration``): ``rows`` training rows lose a fraction ``hide`` (default
        0.5) of their observed entries (or their entries in the columns ``hide``: match what
        the predictions will miss), which are predicted as a new row's would be (``reconstruct``) from
        q(u) without their fold's rows (``folds``; with ``groups``, one label per training
        row such as its sequence, the folds are whole groups and leave all their rows out:
        use it when the predictions are of new sequences); with ``adaptive`` (default) a
        row that fits worse than the training rows (its observed entries' residuals) gets
        wider intervals, in proportion; the scale matches a nominal ``level``
        interval (``method`` "quantile", split-conformal) or the mean squared normalised
        residual ("variance"). ``path="impute"`` calibrates for the training rows' missing
        entries instead (the rows stay in q(u) without their held entries, which are by
        default the model's own fraction of missing entries). Afterwards ``predict``,
        ``impute`` and ``reconstruct`` scale their variances (``calibrated=False`` turns it off per call; set
        ``m.calibration = None`` to drop it); ``save`` keeps it. Returns the
        ``Calibration``, whose ``before`` / ``after`` give the scores on held-out entries
        whose scales did not see them (cross-fitted). Refuses fewer than 50 held-out entries."""
        from .calibration import calibrate

        if self._not_calibrated_because:
            raise TypeError(f"{type(self).__name__}.calibrate is not available: {self._not_calibrated_because}")
        self._calibration = calibrate(self, rows=rows, hide=hide, folds=folds, level=level, method=method,
                                      per_output=per_output, seed=seed, path=path, groups=groups,
                                      adaptive=adaptive)
        return self._calibration

    @blas_single_threaded
    def impute(self, calibrated: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """Y with its missing training entries filled in.

        A missing entry gets meanFstar / covFstar (eqs. meanFstar, covFstar) at the row's
        q(x_n) plus the noise variance (when ``calibrated`` and the model was calibrated,
        scaled as ``predict`` does and by the row's misfit in its observed entries,
        ``Calibration.row_factor``); an observed one is passed through, variance 0.

        Returns
        -------
        mean, variance : (N, D) arrays
        """
        mean = np.array(self.Y)
        var = np.zeros(self.Y.shape)
        if self._missing is None:
            return mean, var
        self._baseline_warning()
        obs = self._missing.observed
        rows = np.flatnonzero(~obs.all(axis=1))
        for start in range(0, rows.size, IMPUTE_BATCH):  # psi2n_centred: (batch, M, M)
            r = rows[start:start + IMPUTE_BATCH]
            m_r, v_r = self.predict(self.latent_mean[r], self.latent_variance[r], calibrated=False)
            v_r = self._calibrated(v_r, calibrated, rows=(m_r, self.Y[r], obs[r]))
            hole = ~obs[r]
            mean[r] = np.where(hole, m_r, mean[r])
            var[r] = np.where(hole, v_r, 0.0)
        return mean, var

    # --- new outputs: q(x*), reconstruction, density (model/testbound.py) ----------------------
    def _test_stats(self):
        """Training statistics of the test-time bound, computed once per parameter setting."""
        if "test_stats" not in self._cache:
            self._sync_kernel()
            self._cache["test_stats"] = TrainingStats.from_model(self)
        return self._cache["test_stats"]

    def infer_latent(self, Y_star, n_init: int = 1, max_iters: int = 200, return_fit: bool = False):
        """q(x*) = N(mu_s, diag S_s) of new outputs (eq:predictive1, app:partialtestBound).

        The model and q(X) are held fixed; every row is optimised, all together, from the
        q(x_n) of the nearest of ``n_init`` training rows in its observed dims.

        Parameters
        ----------
        Y_star : (n*, D) array
            New outputs; NaN = missing (any pattern per row).
        n_init : int
            Training rows tried as starts of each q(x*).
        max_iters : int
            Iterations of the optimisation of q(x*).
        return_fit : bool
            Return the whole ``testbound.LatentFit`` (log densities, iterations).

        Returns
        -------
        mu_s, S_s : (n*, Q) arrays
            The means and variances of q(x*) (or the ``LatentFit`` with ``return_fit``).
        """
        Ys, observed = check_test_outputs(Y_star, self.Y.shape[1])
        fit = infer_latent(self._test_stats(), Ys, observed, **_infer_kw(n_init=n_init, max_iters=max_iters))
        return fit if return_fit else (fit.mu, fit.S)

    def reconstruct(self, Y_star, calibrated: bool = True, **infer_kw):
        """Mean and variance of y* given its observed entries.

        meanFstar / covFstar at the inferred q(x*) plus the noise variance (when
        ``calibrated`` and the model was calibrated, scaled as ``predict`` does and by the
        row's misfit in its observed entries, ``Calibration.row_factor``); observed entries
        are passed through with variance 0.

        Parameters
        ----------
        Y_star : (n*, D) array
            New outputs; NaN = missing.
        calibrated : bool
            Use the model's calibration, if it has one.
        **infer_kw
            Go to ``infer_latent`` (``n_init``, ``max_iters``).

        Returns
        -------
        mean, variance : (n*, D) arrays
        """
        Ys, observed = check_test_outputs(Y_star, self.Y.shape[1])
        self._baseline_warning()
        fit = infer_latent(self._test_stats(), Ys, observed, **_infer_kw(**infer_kw))
        mean, var = self.predict(fit.mu, fit.S, calibrated=False)
        var = self._calibrated(var, calibrated, rows=(mean, Ys, observed))
        return np.where(observed, Ys, mean), np.where(observed, 0.0, var)

    def log_density(self, Y_star, **infer_kw) -> np.ndarray:
        """log p(y*_O | Y) ~ F(q(X), q(x*)) - F(q(X)) over the observed dims O of each row
        (eq:predictive1), at the q(x*) of ``infer_latent``.

        Parameters
        ----------
        Y_star : (n*, D) array
            New outputs; NaN = missing.
        **infer_kw
            Go to ``infer_latent``.

        Returns
        -------
        (n*,) array
        """
        Ys, observed = check_test_outputs(Y_star, self.Y.shape[1])
        return infer_latent(self._test_stats(), Ys, observed, **_infer_kw(**infer_kw)).log_density

    # --- persistence ---------------------------------------------------------------------------
    #: the file the training outputs were read from when the model was opened from a file
    #: that refers to them (``save(..., data=...)``); saving again refers to it again
    data_file: str | None = None

    def save(self, path, data=None) -> None:
        """Save to ``path`` (a file name or a binary file object): npz + JSON metadata, no pickle.
        Writing to a file name is atomic (temp file + rename). ``data``: a .npy, .npz, .h5
        or .zarr file holding Y, referred to instead of copying Y into the model file (its
        shape and a hash of sampled rows are recorded and checked at ``load``); by default
        Y is stored, unless the model was opened from a file that referred to it."""
        from .io import save_model

        save_model(self, path, data=data)

    @classmethod
    def resume(cls, folder, Y=None, client="local", memory: int | None = None, timeout: float | None = None):
        """The distributed model of the last checkpoint of a fit on Dask (``fit(checkpoint=
        folder)``), ready to fit on: see ``bgplvm.distributed.checkpoint.resume``. ``Y``:
        the same rows, needed when the model was built from an array rather than a file."""
        from .distributed.checkpoint import resume

        return resume(folder, Y, client, memory, timeout)

    @classmethod
    def load(cls, path, data=None, client=None, chunks: int | None = None):
        """A model saved by ``save``; the file must hold this class (or a subclass of it).
        ``data``: where the training outputs are now, for a file that refers to them
        (default: where they were, or the same place relative to the model file).
        ``client`` (a Dask client, address or "local"): the model on Dask workers, which
        read the referenced rows themselves (``bgplvm.distributed``)."""
        if client is not None:
            from .distributed.persist import load_distributed

            return load_distributed(path, data=data, client=client, chunks=chunks, expected=cls)
        from .io import load_model

        return load_model(path, expected=cls, data=data)

    # --- looking at it ---------------------------------------------------------------------
    def explore(self, **kw):
        """The explorer's page for this model as a Panel object (``bgplvm.explorer.notebook``):
        shown inline in a notebook, ``.show()`` in a browser tab, ``.servable()`` in a served
        app. ``dataset=`` (a ``bgplvm.datasets.Dataset``) or ``image_shape=(h, w)`` say how to
        draw the outputs. Found through the ``bgplvm.viewers`` entry point: the model never
        imports the explorer."""
        from importlib.metadata import entry_points

        found = {ep.name: ep for ep in entry_points(group=VIEWERS_GROUP)}
        if "explorer" not in found:
            raise RuntimeError("the explorer is not installed with this bgplvm (no 'bgplvm.viewers' entry point): "
                               "reinstall the package (pip install -e . or pip install bgplvm)")
        return found["explorer"].load()(self, **kw)

    # --- summary -------------------------------------------------------------------------
    def summary(self) -> str:
        from .io import summary_text

        return summary_text(self)

    def __repr__(self) -> str:
        N, D = self.Y.shape
        return (f"BayesianGPLVM(N={N}, D={D}, latent_dim={self.latent_dim}, "
                f"num_inducing={self.num_inducing}, kernel={self.kernel!r})")
