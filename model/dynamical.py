"""The dynamical variational GP-LVM (VGPDS) for sequences: a temporal GP prior on X.

Paper sections "The Dynamical Variational GP-LVM for Sequence Data" and "Predictions in
the Dynamical Model". Only the latent prior differs from ``BayesianGPLVM``
(``bgplvm.priors.DynamicalPrior``): the bound, psi statistics, fitting, saving and the
uncertain-input predictions (meanFstar / covFstar) are the same code.
"""

from __future__ import annotations

import copy

import numpy as np
from scipy.linalg import solve_triangular

from ._restore import is_restoring, restoring
from .gplvm import BayesianGPLVM, _check_Y
from .priors import DynamicalPrior, LatentPrior
from .priors.dynamical import sequence_index
from .priors.state_space import StateSpacePrior
from .time_kernels import Matern32Time, make_time_kernel


def check_times(t, N: int, sequences=None, name: str = "t", rows: str = "Y") -> tuple[np.ndarray, np.ndarray]:
    """Validate time stamps t (N,) and sequence ids (N,) (None: one sequence, id 0);
    ``name`` is t's name in the errors.

    Within each sequence the rows must be in time order with distinct times."""
    try:
        t = np.asarray(t, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{name} must be a numeric array of N={N} time stamps: {e}") from None
    if t.ndim == 2 and t.shape[1] == 1:
        t = t[:, 0]
    if t.ndim != 1 or t.shape[0] != N:
        raise ValueError(f"{name} must hold one time stamp per row of {rows}: expected shape ({N},), got {t.shape}")
    if not np.all(np.isfinite(t)):
        bad = np.flatnonzero(~np.isfinite(t))
        raise ValueError(f"{name} contains NaN or inf at rows {bad[:5].tolist()}")
    single = sequences is None
    if sequences is None:
        sequences = np.zeros(N, dtype=np.int64)
    else:
        sequences = np.asarray(sequences)
        if sequences.ndim != 1 or sequences.shape[0] != N:
            raise ValueError(f"sequences must give one id per row of Y: expected shape ({N},), "
                             f"got {sequences.shape}")
        if sequences.dtype.kind not in "iub":
            if sequences.dtype.kind == "f" and np.all(np.isfinite(sequences)) and \
                    np.all(sequences == np.round(sequences)):
                sequences = sequences.astype(np.int64)
            elif sequences.dtype.kind == "O" and all(isinstance(v, str) for v in sequences):
                sequences = sequences.astype(str)  # e.g. a pandas column of strings
            elif sequences.dtype.kind not in "US":
                raise ValueError("sequences must be integer or string ids, one per row of Y")
    ids, index = sequence_index(sequences)
    for s, ix in zip(ids, index):
        dt = np.diff(t[ix])
        if np.any(dt <= 0):
            first = int(np.flatnonzero(dt <= 0)[0])
            row = int(ix[1:][first])
            what = "duplicated" if dt[first] == 0 else "unsorted"
            sid = s.item() if isinstance(s, np.generic) else s  # 0, not np.int64(0)
            where = f"{name}" if single else f"{name} of sequence {sid!r}"
            raise ValueError(f"time stamps {where} are {what} (first at row {row}): the "
                             "rows of each sequence must be in time order with distinct times")
    return t, sequences


#: grid of the initial-lengthscale search: lengthscales from the median spacing to the
#: longest span, and the fraction of each initial latent path's variance taken as noise
LENGTHSCALE_GRID = 24
NOISE_FRACTIONS = (0.01, 0.05, 0.1, 0.2, 0.35, 0.5, 0.7)
#: longer sequences are cut into windows of this many frames for the search (cost n^3)
SEARCH_WINDOW = 200
SEARCH_BLOCKS = 12


def _search_windows(index: list[np.ndarray]) -> list[np.ndarray]:
    """Row windows for the lengthscale search: the longest sequences, cut into windows of at
    most SEARCH_WINDOW frames, at most SEARCH_BLOCKS of them."""
    windows = [ix[i:i + SEARCH_WINDOW] for ix in index for i in range(0, len(ix), SEARCH_WINDOW)]
    windows = [w for w in windows if len(w) > 2]
    return sorted(windows, key=len, reverse=True)[:SEARCH_BLOCKS]


def initial_time_scale(t: np.ndarray, index: list[np.ndarray], mu0: np.ndarray, part) -> tuple[float, float]:
    """The time lengthscale and noise fraction f to start from: those under which the initial
    latent paths mu0 (N, Q; the PCA means), each column standardised, are most probable as
    draws of (1 - f) k(t, t') + f delta(t, t') (a grid search).

    A fixed rule (vargplvm's inverseWidth = 30 / span^2) starts video of a quickly moving
    face ~10x too smooth, and the fit then ends in a poor optimum with one latent dimension;
    the data's own time scale does not have that problem. ``part``: the smooth time-kernel
    part (its type is used, with variance 1)."""
    windows = _search_windows(index)
    if not windows:
        return 1.0, NOISE_FRACTIONS[0]
    steps = np.concatenate([np.diff(t[w]) for w in windows])
    spans = [t[w[-1]] - t[w[0]] for w in windows]
    grid = np.geomspace(max(float(np.median(steps)), 1e-6), max(spans), LENGTHSCALE_GRID)
    z = (mu0 - mu0.mean(0)) / np.maximum(mu0.std(0), 1e-12)
    k = copy.deepcopy(part)
    k.set_params(variance=1.0)
    best, best_ell, best_f = -np.inf, float(grid[-1]), NOISE_FRACTIONS[0]
    for ell in grid:
        k.set_params(lengthscale=float(ell))
        Ks = [k.K(t[w]) for w in windows]
        for f in NOISE_FRACTIONS:
            ll = sum(_log_likelihood((1.0 - f) * K + f * np.eye(len(w)), z[w]) for K, w in zip(Ks, windows))
            if ll > best:
                best, best_ell, best_f = ll, float(ell), f
    return best_ell, best_f


def _log_likelihood(C: np.ndarray, Z: np.ndarray) -> float:
    """sum over columns of log N(z | 0, C) up to a constant; C (n, n) SPD, Z (n, Q)."""
    L = np.linalg.cholesky(C)
    a = solve_triangular(L, Z, lower=True)
    return float(-0.5 * np.sum(a * a) - Z.shape[1] * np.sum(np.log(np.diag(L))))


#: time-kernel parts with a lengthscale (their variance trades off against the scale of X)
SMOOTH_TIME_KINDS = ("rbf", "matern12", "matern32", "matern52", "periodic")

#: the forms of the time prior (``DynamicalGPLVM(time_prior=...)``)
TIME_PRIORS = ("auto", "dense", "state_space")


def check_t_new(t_new) -> np.ndarray:
    """Times to forecast at as a float64 (n*,) array (an (n*, 1) column is accepted)."""
    t_new = np.asarray(t_new, dtype=np.float64)
    if t_new.ndim == 2 and t_new.shape[1] == 1:
        t_new = t_new[:, 0]
    if t_new.ndim > 1:
        raise ValueError(f"t_new must be a 1-D array of time stamps, got shape {t_new.shape}")
    t_new = t_new.reshape(-1)
    if t_new.size == 0 or not np.all(np.isfinite(t_new)):
        raise ValueError("t_new must be a non-empty array of finite time stamps")
    return t_new


def check_new_frames(t_star: np.ndarray, t_train: np.ndarray, sequence) -> None:
    """New frames of training sequence ``sequence`` (times t_train) need times of their own."""
    clash = np.intersect1d(t_star, t_train)
    if clash.size:
        raise ValueError(f"times {clash[:5].tolist()} are training frames of sequence "
                         f"{sequence!r}; new frames of a sequence need new times")


def resolve_time_prior(time_prior: str, time_kernel) -> str:
    """"dense" or "state_space" for ``time_prior`` ("auto": the state-space form where the
    time kernel has an exact one, Matern 1/2, 3/2, 5/2 with white and bias parts; else the
    dense form). "state_space" with a kernel that has no state-space form: an error naming
    it and the kinds that have one."""
    from .state_space import STATE_SPACE_KINDS, NoStateSpaceForm, has_exact_state_space, state_space

    if time_prior not in TIME_PRIORS:
        raise ValueError(f"time_prior must be one of {', '.join(map(repr, TIME_PRIORS))}, got {time_prior!r}")
    if time_prior == "auto":
        return "state_space" if has_exact_state_space(time_kernel) else "dense"
    if time_prior == "state_space":
        try:
            state_space(time_kernel)
        except NoStateSpaceForm as e:
            raise ValueError(f"time_prior='state_space': {e}. Kinds with a state-space form: "
                             f"{', '.join(STATE_SPACE_KINDS)}; or use time_prior='dense'") from None
    return time_prior


def _init_time_kernel(prior: DynamicalPrior, mu: np.ndarray) -> None:
    """Start the time kernel's scales from latent paths mu (N, Q): each smooth part's
    lengthscale from ``initial_time_scale`` (a periodic part's period = 5 Matern 3/2
    lengthscales), and a white part's variance from the paths' non-smooth share f."""
    parts = prior.time_kernel.parts
    smooth = [p for p in parts if p.name in SMOOTH_TIME_KINDS]
    f = None
    for part in smooth:
        if part.name == "periodic":  # the search as a Matern 3/2, then a few of its
            # lengthscales per period
            ell, f = initial_time_scale(prior.t, prior._index, mu, Matern32Time())
            part.set_params(period=5.0 * ell)
        else:
            ell, f = initial_time_scale(prior.t, prior._index, mu, part)
            part.set_params(lengthscale=ell)
    if smooth and f is not None:  # a white part takes the paths' non-smooth share
        for part in parts:
            if part.name == "white":
                part.set_params(variance=f / (1.0 - f) * float(np.mean([p.params["variance"] for p in smooth])))
    elif not smooth:  # white / bias alone: the prior N(0, I) of the static model, not 1e-3
        for part in parts:
            if part.name == "white":
                part.set_params(variance=1.0)


class DynamicalGPLVM(BayesianGPLVM):
    """Variational GP-LVM with a temporal GP prior p(X | t) = prod_q N(x_q | 0, Kt).

    Parameters
    ----------
    Y : (N, D) array
        Outputs (NaN = missing, as in ``BayesianGPLVM``).
    t : (N,) array
        Time stamps.
    sequences : (N,) array, optional
        Ids of independent sequences (rows of one id in time order), or None for one
        sequence. Kt is block-diagonal over them; the mapping is shared.
    time_kernel : str or bgplvm.time_kernels.TimeKernel
        "matern32" (default), "matern12", "matern52", "rbf", "periodic", "white", "bias" or
        sums such as "rbf+white+bias" (the paper's code default), or a
        ``bgplvm.time_kernels.TimeKernel``.
    learn_time_variance : bool
        Learn the variance of the smooth time-kernel parts (rbf, matern, periodic). Off by
        default, as in the paper's code: it trades off against the scale of X and the ARD
        weights, and the lengthscale compensates (white/bias variances are always learned).
        ``unfreeze`` also turns it on: ``m.unfreeze("time_kernel.variance")`` for a single
        kernel, ``"time_kernel.rbf.variance"`` for the rbf part of a sum (``m.param_names``
        lists them).
    time_prior : {"auto", "dense", "state_space"}
        How p(X | t) is computed. "dense" factorises Kt (sum over sequences of n_s^3 per
        latent dimension, the paper's way); "state_space" runs Kalman filters and smoothers
        over the time kernel's state-space form (linear in the number of frames;
        ``bgplvm.priors.state_space``), exact for Matern 1/2, 3/2, 5/2 and their sums with
        white and bias parts, an approximation of stated error for rbf and periodic
        (``state_space_options``: their ``order`` / ``max_error``). "auto" (default) takes
        the state-space form where it is exact. Both forms have the same parameters and
        q(X); ``with_time_prior`` switches.
    client, chunks
        A Dask cluster (as ``BayesianGPLVM``'s): the model is then a
        ``bgplvm.distributed.DistributedDynamicalGPLVM`` with whole sequences per block.

    Notes
    -----
    Other arguments as ``BayesianGPLVM``.
    """

    def __new__(cls, *args, client=None, chunks=None, **kwargs):
        if client is None or cls is not DynamicalGPLVM:
            return super().__new__(cls, chunks=chunks)
        from .distributed import DistributedDynamicalGPLVM

        return DistributedDynamicalGPLVM(*args, client=client, chunks=chunks, **kwargs)

    def __init__(self, Y, t, latent_dim: int = 2, num_inducing: int = 20, kernel="rbf",
                 time_kernel="matern32", sequences=None, seed: int | None = 0,
                 learn_time_variance: bool = False, time_prior: str = "auto",
                 state_space_options: dict | None = None, mask=None, client=None, chunks=None):
        Y, _ = _check_Y(Y, mask, missing_ok=True)  # the mask becomes NaN in Y
        self.t, self.sequences = check_times(t, Y.shape[0], sequences)
        self._time_kernel_arg = time_kernel
        # a kernel object is copied: the fit must not change the caller's object (or another
        # model built from it)
        self._time_kernel = make_time_kernel(copy.deepcopy(time_kernel))
        self._state_space_options = dict(state_space_options or {})
        self.time_prior = resolve_time_prior(time_prior, self._time_kernel)
        super().__init__(Y, latent_dim=latent_dim, num_inducing=num_inducing, kernel=kernel, seed=seed)
        if not learn_time_variance:
            self.freeze(*self.smooth_time_variances())

    def smooth_time_variances(self) -> list[str]:
        """Parameter names of the variances of the smooth time-kernel parts."""
        tk = self.prior.time_kernel
        return [f"time_kernel.{p.name}.variance" if len(tk.parts) > 1 else "time_kernel.variance"
                for p in tk.parts if p.name in SMOOTH_TIME_KINDS]

    def _new_prior(self, Q: int, time_kernel, form: str) -> DynamicalPrior:
        if form == "state_space":
            return StateSpacePrior(self.t, self.sequences, Q, time_kernel, self._state_space_options)
        return DynamicalPrior(self.t, self.sequences, Q, time_kernel)

    def _make_prior(self, N: int, Q: int, init: dict) -> LatentPrior:
        prior = self._new_prior(Q, self._time_kernel, self.time_prior)
        if not isinstance(self._time_kernel_arg, str) or is_restoring():
            return prior  # a kernel object keeps the parameters it was given; a loaded model, the saved ones
        _init_time_kernel(prior, init["mu"])
        return prior

    def with_time_prior(self, time_prior: str) -> "DynamicalGPLVM":
        """The same model with p(X | t) in another form ("dense", "state_space" or "auto"):
        a copy with the same parameter vector, frozen parameters and fit record, hence the
        same q(X) marginals and bound (to rounding where the state-space form is exact)."""
        self.prior.sync(self._values())
        form = resolve_time_prior(time_prior, self.prior.time_kernel)
        m = copy.deepcopy(self)
        m.time_prior = form
        m.prior = m._new_prior(self.latent_dim, m.prior.time_kernel, form)
        m._cache = {}
        return m

    @classmethod
    def from_static(cls, static: BayesianGPLVM, t, time_kernel="matern32", sequences=None,
                    learn_time_variance: bool = False, time_prior: str = "auto") -> "DynamicalGPLVM":
        """A dynamical model on the data of a fitted static ``BayesianGPLVM``, started from it:
        the same kernel, inducing inputs and noise, q(X) mapped to (mu_bar, lambda)
        (``DynamicalPrior.values_from_q``) and the time kernel's scale searched on the
        static latent means (as the default start does on the PCA means). Fit it as usual.

        Why: from the PCA start, the dynamical fits of CMU 35 ended at bounds below the
        static model's (288k against 301k), in a worse optimum rather than because the time
        prior costs that much: started from the static fit, the same model reached 317k.
        """
        if not isinstance(static, BayesianGPLVM) or isinstance(static, cls):
            raise TypeError("from_static needs a fitted static BayesianGPLVM")
        with restoring():  # no PCA-based searches: every parameter is set below
            m = cls(static.Y, t, latent_dim=static.latent_dim, num_inducing=static.num_inducing,
                    kernel=copy.deepcopy(static.kernel), time_kernel=time_kernel,
                    sequences=sequences, seed=static.seed, learn_time_variance=learn_time_variance,
                    time_prior=time_prior)
        if isinstance(time_kernel, str):
            _init_time_kernel(m.prior, static.latent_mean)
        sv = static._values()
        values = {**m._values(), **m.prior.time_values(),
                  **m.prior.values_from_q(static.latent_mean, static.latent_variance),
                  **{k: v for k, v in sv.items() if k.startswith("kernel.") or k in ("Z", "noise_variance")}}
        m._set_x(m._layout.pack(values))
        return m

    @property
    def time_kernel(self):
        self.prior.sync(self._values())
        return self.prior.time_kernel

    # --- forecasting -------------------------------------------------------------------------
    def latent_at(self, t_new, sequence=0) -> tuple[np.ndarray, np.ndarray]:
        """q(X*) at times t_new of training sequence ``sequence`` (qxstar): means and
        variances (n*, Q) from the GP conditional, no optimisation. ``sequence=None``: a
        new sequence (the prior)."""
        return self.prior.latent_at(self._values(), check_t_new(t_new), sequence)

    def forecast(self, t_new, sequence=0, include_noise: bool = True, calibrated: bool = True):
        """Predictive mean and variance (n*, D) of y at times t_new of ``sequence``: q(X*)
        from ``latent_at``, then the uncertain-input moments (meanFstar / covFstar); scaled
        by the calibration if there is one and ``calibrated`` (``calibrate(path="forecast")``)."""
        mu, S = self.latent_at(t_new, sequence)
        return self.predict(mu, S, include_noise=include_noise, calibrated=calibrated)

    # --- reconstruction of partially observed frames ----------------------------------------------
    def infer_sequence(self, Y_star, t_star, sequence=None, max_iters: int = 500, callback=None,
                       progress: bool | None = False):
        """q(X*) for frames Y_star (n*, D; NaN = missing) at times t_star (n*,), optimised
        jointly with the model fixed (``bgplvm.sequence_inference``). ``sequence``: None for a
        new sequence, or the id of the training sequence the frames belong to (coupled to its
        latent path through the time prior). Returns a ``SequenceFit`` (mu, S, bound, ...)."""
        from .sequence_inference import infer_sequence
        from .testbound import check_test_outputs

        Ys, observed = check_test_outputs(Y_star, self.Y.shape[1])
        t_star, _ = check_times(np.atleast_1d(t_star), Ys.shape[0], name="t_star", rows="Y_star")
        if sequence is not None:
            check_new_frames(t_star, self.prior.t[self.prior.rows_of(sequence)], sequence)
        return infer_sequence(self, Ys, observed, t_star, sequence, max_iters, callback, progress)

    def reconstruct(self, Y_star, t_star, sequence=None, max_iters: int = 500,
                    progress: bool | None = False, condition: bool = True, calibrated: bool = True):
        """Fill the NaN entries of frames Y_star (n*, D) at times t_star: predictive mean and
        variance (n*, D) from q(X*) (``infer_sequence``) through meanFstar / covFstar plus the
        noise; observed entries are passed through with variance 0 (``fill_missing``)."""
        self._baseline_warning()
        fit = self.infer_sequence(Y_star, t_star, sequence, max_iters=max_iters, progress=progress)
        return self.fill_missing(fit, Y_star, condition=condition, calibrated=calibrated)

    def fill_missing(self, fit, Y_star, condition: bool = True, include_noise: bool = True,
                     calibrated: bool = True):
        """Predictive mean and variance (n*, D) of frames Y_star (NaN = missing) at their
        inferred q(X*) (``fit``, from ``infer_sequence``), observed entries passed through
        with variance 0. ``condition``: q(u) of each output also conditions on that output's
        observed entries in Y_star (the joint bound's q(u), as the paper's code;
        ``sequence_inference.conditioned_predict``); False: the training data's q(u) alone.
        ``calibrated``: scaled by the calibration (``calibrate``) and each frame's misfit in its
        observed entries (``Calibration.row_factor``), if there is one."""
        from .sequence_inference import check_fill, conditioned_predict

        Ys, observed = check_fill(fit, Y_star, self.Y.shape[1])
        if condition:
            mean, var = conditioned_predict(self, fit.mu, fit.S, Ys, observed, include_noise)
        else:
            mean, var = self.predict(fit.mu, fit.S, include_noise=include_noise, calibrated=False)
        var = self._calibrated(var, calibrated, rows=(mean, Ys, observed))
        return np.where(observed, Ys, mean), np.where(observed, 0.0, var)

    def infer_latent(self, *args, **kwargs):
        """Not for sequences: frames are coupled through time; see ``infer_sequence``."""
        raise TypeError("DynamicalGPLVM couples frames through time: use "
                        "infer_sequence(Y_star, t_star, sequence=...) for q(X*) and "
                        "reconstruct(Y_star, t_star, sequence=...) for the outputs")

    log_density = infer_latent
    # --- calibration (model/calibration_sequences.py) -------------------------------------------
    #: its calibrations hold out stretches of frames (``Calibration.stretches``), not rows
    _calibration_kind = "sequences"

    def calibrate(self, rows: int = 1000, hide=None, folds: int = 5, level: float = 0.95,
                  method: str = "quantile", per_output: bool | None = None, seed: int = 0,
                  path: str = "reconstruct", groups=None, adaptive: bool = True, horizon: int | None = None,
                  max_iters: int = 300):
        """Learn a per-output scale of the predictive sd from held-out stretches of the
        training sequences, each predicted as the model predicts new frames
        (``bgplvm.calibration_sequences``): ``path="reconstruct"`` (default) for frames of a
        new sequence (``reconstruct(..., sequence=None)``: whole sequences held out, each
        losing ``hide`` of its entries, default half, or the columns ``hide``);
        ``path="forecast"`` for frames after a sequence's last known one (``forecast``; with
        ``hide`` a fraction or columns, ``reconstruct(..., sequence=s)`` of such frames):
        ``horizon`` frames after up to ``folds`` origins per sequence. ``rows`` bounds the
        held-out frames, ``max_iters`` each stretch's q(X*) optimisation; the rest as
        ``BayesianGPLVM.calibrate``. Afterwards ``forecast``, ``reconstruct``, ``predict``
        and ``impute`` scale their variances (``calibrated=False`` per call)."""
        from .calibration_sequences import calibrate_sequences

        self._calibration = calibrate_sequences(self, rows=rows, hide=hide, folds=folds, level=level,
                                                method=method, per_output=per_output, seed=seed, path=path,
                                                groups=groups, adaptive=adaptive, horizon=horizon,
                                                max_iters=max_iters)
        return self._calibration

    def __repr__(self) -> str:
        N, D = self.Y.shape
        return (f"DynamicalGPLVM(N={N}, D={D}, sequences={len(self.prior.sequence_ids)}, "
                f"latent_dim={self.latent_dim}, num_inducing={self.num_inducing}, "
                f"kernel={self.kernel!r}, time_kernel={self.prior.time_kernel!r}, "
                f"time_prior={self.time_prior!r})")
