"""GP regression with uncertain (noisy) observed inputs (paper section "Gaussian Process
Inference with Uncertain Inputs").

The observed inputs Z are noisy versions of the latent inputs X (uncertainInputsX), so
p(X | Z) = prod N(x_n | z_n, Sigma_z) (uncertainInputsPX, ``UncertainInputPrior``) replaces
the GP-LVM's N(0, I); the bound, psi statistics, fitting, saving and the predictions at
Gaussian inputs (meanFstar / covFstar) are ``BayesianGPLVM``'s.
"""

from __future__ import annotations

import numpy as np

from .gplvm import BayesianGPLVM, _check_Y
from .io import register_model_class
from .priors import LatentPrior, UncertainInputPrior

#: q(X) variance of inputs held at their observed values (the appendix algorithm's epsilon)
FIXED_INPUT_VARIANCE = 1e-9
#: default initial q(X) and Sigma_z variances, relative to each input's variance
#: (``UncertainInputGPR``'s docstring says what it rests on)
INPUT_VARIANCE = 1e-2


def check_inputs(Z, name: str = "Z", allow_nan: bool = False) -> np.ndarray:
    """Observed inputs as a float64 (N, Q) array; NaN only where ``allow_nan``."""
    try:
        Z = np.array(Z, dtype=np.float64)  # a copy: the model must not change with the caller's array
    except (TypeError, ValueError) as e:
        raise ValueError(f"{name} must be a numeric (N, Q) array: {e}") from None
    if Z.ndim == 1:
        Z = Z[:, None]
    if Z.ndim != 2 or Z.shape[1] < 1:
        raise ValueError(f"{name} must be 2-D (N points x Q input dimensions), got shape {Z.shape}")
    if np.any(np.isinf(Z)) or (not allow_nan and np.any(np.isnan(Z))):
        rows = np.unique(np.nonzero(~np.isfinite(Z))[0])
        hint = "; for missing input features use SemiSupervisedGPR" if not allow_nan else ""
        raise ValueError(f"{name} contains NaN/inf values (first rows: {rows[:5].tolist()}){hint}")
    return np.ascontiguousarray(Z)


def check_pairs(Z: np.ndarray, Y: np.ndarray) -> None:
    if Z.shape[0] != Y.shape[0]:
        raise ValueError(f"inputs and outputs must have the same number of rows: "
                         f"{Z.shape[0]} input rows, {Y.shape[0]} output rows")


def regression_init(X: np.ndarray, S: np.ndarray, Yc: np.ndarray, M: int, rng: np.random.Generator) -> dict:
    """Initial values (``init_params``'s keys) when q(X) starts at known inputs X (N, Q) with
    variances S: Z a jittered subset of X, RBF inverse widths 5 / range(X_q)^2 (vargplvm),
    signal variance the output variance, noise 1/100 of it, linear weights equal."""
    N, Q = X.shape
    Z = X[rng.permutation(N)[:M]].copy()
    span = np.ptp(X, axis=0)
    span = np.where(span > 0, span, 1.0)
    Z += 1e-3 * span * rng.standard_normal(Z.shape)  # break ties between duplicated rows
    data_var = float(np.mean(Yc.var(0)))
    data_var = data_var if data_var > 0 else 1.0
    return dict(mu=X.copy(), S=np.asarray(S, dtype=np.float64).copy(), Z=Z, fracs=np.ones(Q),
                alpha=5.0 / span**2, data_var=data_var, noise_variance=data_var / 100.0)


def _check_input_variance(v, Q: int) -> np.ndarray:
    """A positive, finite scalar or one per input dimension (Q,)."""
    try:
        a = np.asarray(v, dtype=np.float64)
    except (TypeError, ValueError):
        a = np.array([np.nan])
    if a.ndim > 1 or (a.ndim == 1 and a.size != Q) or not np.all(np.isfinite(a)) or np.any(a <= 0):
        raise ValueError(f"input_variance must be a positive number or {Q} positive numbers (one per "
                         f"input dimension), got {v!r}")
    return a


def not_for_regression(self, *args, **kwargs):
    """The GP-LVM's test-time inference (``infer_latent``, ``reconstruct``, ``log_density``)
    is not a regression model's: it puts the N(0, I) prior on x*, not this model's prior on
    its inputs, and it works in the model's internal units. Regression models refuse it."""
    raise TypeError(f"{type(self).__name__} is a regression model: predict outputs from inputs with "
                    f"predict(...). Inferring inputs from outputs (infer_latent, reconstruct, log_density) "
                    f"is the GP-LVM's (BayesianGPLVM): here it would use the GP-LVM's N(0, I) prior on "
                    f"the inputs, not this model's")


@register_model_class
class UncertainInputGPR(BayesianGPLVM):
    """GP regression y = f(x) + noise whose inputs are observed with noise: z = x + e,
    e ~ N(0, Sigma_z) with diagonal Sigma_z learned (uncertainInputsX, uncertainInputsPX).

    Parameters
    ----------
    Z : (N, Q) array
        Observed inputs.
    Y : (N, D) array
        Outputs (centred inside; NaN = missing, as ``BayesianGPLVM``).
    num_inducing : int
        M inducing inputs, 1 <= M <= N.
    kernel : str or Kernel
        As ``BayesianGPLVM``.
    tie_mean : bool
        q(X)'s means held at Z (the paper's cheaper choice) instead of learned.
    fixed_inputs : bool
        q(X) = N(Z, 1e-9) held fixed and no input noise: plain (sparse variational) GP
        regression on (Z, Y), the standard GP the paper compares with.
    input_variance : float or (Q,) array, optional
        Initial q(X) variances; Sigma_z starts at the same values. Default
        ``INPUT_VARIANCE`` (1e-2) of each input's variance (the class attribute
        ``_input_variance``): the first phase of ``fit`` is a GP regression fit at the
        inputs with these variances held, then they move where the bound wants them.
        Measured on sin(2x) with inputs observed with noise sd 0.3 (200 rows, 5 seeds,
        1000 iterations): from 1e-6 every fit kept Sigma_z at ~3e-6 and explained the input
        noise as output noise (a plain GP's predictions); from 1e-2 (or 1e-3) Sigma_z reached
        0.055-0.089 (the truth 0.09) at bounds 20-30 nats higher, with the same test RMSE.
        With exact inputs both starts end at the same bound. ``AutoregressiveGP`` starts at
        1e-6 (its windows are exact observations; there 1e-4 left the fit below the plain
        GP's bound in 3 of 5 starts).

    Notes
    -----
    The optimiser is not scale invariant: give inputs of comparable, roughly unit scale
    (e.g. time stamps 1..96 as t / 96), as for any GP regression.
    """

    #: default initial q(X) and Sigma_z variances relative to each input's (``input_variance``)
    _input_variance = INPUT_VARIANCE
    #: the initial phase of ``fit`` holds q(X) and Sigma_z at their starting values (q(X)
    #: at the inputs): the mapping fits first, as a GP regression would
    _init_held = ("mu", "S", "Sigma_z")

    def __init__(self, Z, Y, num_inducing: int = 30, kernel="rbf", tie_mean: bool = False,
                 fixed_inputs: bool = False, input_variance=None, seed: int | None = 0, mask=None):
        Z = check_inputs(Z, "Z")
        Y, _ = _check_Y(Y, mask, missing_ok=True)  # the mask becomes NaN in Y
        check_pairs(Z, Y)
        self.inputs = Z
        self.tie_mean = bool(tie_mean) or bool(fixed_inputs)
        self.fixed_inputs = bool(fixed_inputs)
        if fixed_inputs:
            S0 = np.full(Z.shape, FIXED_INPUT_VARIANCE)
        else:
            v = (self._input_variance * Z.var(0) if input_variance is None
                 else _check_input_variance(input_variance, Z.shape[1]))
            S0 = np.broadcast_to(np.maximum(np.asarray(v, dtype=np.float64), 1e-9), Z.shape)
        self._S0 = S0
        super().__init__(Y, latent_dim=Z.shape[1], num_inducing=num_inducing, kernel=kernel, seed=seed)
        if self.fixed_inputs:
            self.freeze("S", "Sigma_z")

    def _initial_state(self, Q, M, rng):
        return regression_init(self.inputs, self._S0, self._Yc, M, rng)

    def _make_prior(self, N: int, Q: int, init: dict) -> LatentPrior:
        return UncertainInputPrior(self.inputs, tie_mean=self.tie_mean)

    @classmethod
    def from_fixed_inputs(cls, gp: "UncertainInputGPR") -> "UncertainInputGPR":
        """The uncertain-input model of a fitted ``fixed_inputs=True`` one (GP regression on
        the same data), started from it: its kernel, inducing inputs and noise, q(X) at the
        inputs with its variances (``FIXED_INPUT_VARIANCE``, Sigma_z likewise). The two are
        then the same GP, so the fit starts at the regression's optimum and learns how
        uncertain the inputs are from there; it holds nothing in its first phase (the mapping
        is fitted already). Fit it as usual.

        Why: fitted from their own starts, the two models end in different optima (which
        rounding alone can decide), so their forecasts differ by more than the propagated
        variance. On Mackey-Glass (reproduce/mackey_glass.py, 5 seeds), started from the
        zero-variance autoregressive GP the uncertain-input model's 180-step RMSE was below
        that model's in every seed (0.89-1.31 against 1.27-17.7).
        """
        if not isinstance(gp, cls) or not gp.fixed_inputs:
            raise TypeError(f"from_fixed_inputs needs a fitted {cls.__name__} with fixed_inputs=True, "
                            f"got {gp!r}")
        m = gp._uncertain_twin()
        m._init_held = ()
        values = m._values()
        values.update({k: v for k, v in gp._values().items()
                       if k.startswith("kernel.") or k in ("Z", "noise_variance")})
        # the fixed model's input variances, not the default start's: on a nearly noise-free
        # fit (Mackey-Glass, noise 1.5e-6) variances of 1e-6 cost the bound 40-80 at once
        values.update(S=np.full_like(values["S"], FIXED_INPUT_VARIANCE),
                      Sigma_z=np.full_like(values["Sigma_z"], FIXED_INPUT_VARIANCE))
        m._set_x(m._layout.pack(values))
        return m

    def _uncertain_twin(self) -> "UncertainInputGPR":
        """A new model of this one's data and options with uncertain inputs (for
        ``from_fixed_inputs``): q(X) means tied to the inputs, as the fixed model's are."""
        return type(self)(self.inputs, self.Y, num_inducing=self.num_inducing, kernel=self.kernel,
                          tie_mean=True, seed=self.seed)

    @property
    def input_noise_variance(self) -> np.ndarray:
        """(Q,) the diagonal of Sigma_z (zeros for ``fixed_inputs``: no input noise)."""
        if self.fixed_inputs:
            return np.zeros(self.latent_dim)
        return np.asarray(self._values()["Sigma_z"], dtype=np.float64).copy()

    def predict(self, Z_star, Z_star_var=None, include_noise: bool = True, input_noise: bool = True,
                calibrated: bool = True):
        """Predictive mean and variance (n, D) of y* at observed test inputs Z_star (n, Q).

        The latent test input is x* ~ N(Z_star, diag(Z_star_var + Sigma_z)): the test input
        is a noisy observation like the training ones (``input_noise=False`` leaves Sigma_z
        out), and Z_star_var (n, Q) is any further uncertainty of Z_star itself (None: 0).
        Gaussian x* go through meanFstar / covFstar; with no variance at all the standard
        projected-process predictive (eq:testPosteriorF) is used. ``calibrated``: scale the
        variance by the calibration's per-output factor, if the model was calibrated
        (``calibrate``).
        """
        Z_star, var = self._test_inputs(Z_star, Z_star_var, input_noise)
        return super().predict(Z_star, var, include_noise=include_noise, calibrated=calibrated)

    def calibrate(self, rows: int = 1000, folds: int = 5, level: float = 0.95, method: str = "quantile",
                  per_output: bool | None = None, seed: int = 0):
        """Learn a per-output scale of the predictive sd from the training rows themselves
        (``bgplvm.regression_calibration``): ``rows`` of them (at random, seed ``seed``), in
        ``folds``, each predicted at its observed input with q(u) from the other folds' rows,
        as a new row is; ``method`` "quantile" (split-conformal, matching a nominal
        ``level`` interval) or "variance". Afterwards ``predict`` scales its variances
        (``calibrated=False`` turns it off per call; ``m.calibration = None`` drops it);
        ``save`` keeps it. Returns the ``Calibration`` (``before`` / ``after``: the held-out
        outputs' scores, cross-fitted). Refuses fewer than 50 held-out outputs."""
        from .regression_calibration import calibrate_regression

        self._calibration = calibrate_regression(self, rows=rows, folds=folds, level=level, method=method,
                                                 per_output=per_output, seed=seed)
        return self._calibration

    def _test_inputs(self, Z_star, Z_star_var, input_noise: bool):
        """(Z_star (n, Q), the variances (n, Q) of x* ~ N(Z_star, Z_star_var + Sigma_z), or
        None when all are 0) for ``predict``: checked, broadcast, Sigma_z added with
        ``input_noise``."""
        Z_star = self._check_latent(Z_star, "Z_star")
        var = np.zeros_like(Z_star)
        if Z_star_var is not None:
            v = np.asarray(Z_star_var, dtype=np.float64)
            if v.ndim == 1 and self.latent_dim == 1 and v.shape[0] == Z_star.shape[0]:
                v = v[:, None]  # one variance per point, as a 1-D Z_star is one value per point
            try:
                v = np.broadcast_to(v, Z_star.shape)
            except ValueError:
                raise ValueError(f"Z_star_var must have Z_star's shape {Z_star.shape} or broadcast "
                                 f"to it, got {v.shape}") from None
            v = self._check_latent(v, "Z_star_var")
            if np.any(v < 0):
                raise ValueError("Z_star_var must be non-negative")
            var = var + v
        if input_noise:
            var = var + self.input_noise_variance
        return Z_star, (var if np.any(var > 0) else None)

    # --- model files -------------------------------------------------------------------------
    def _file_args(self):
        return {"tie_mean": self.tie_mean, "fixed_inputs": self.fixed_inputs}, {}

    @classmethod
    def _from_file(cls, Y, common, args, arrays):
        return cls(arrays["prior.inputs"], Y, num_inducing=common["num_inducing"], kernel=common["kernel"],
                   seed=common["seed"], **args)

    infer_latent = reconstruct = log_density = not_for_regression

    def __repr__(self) -> str:
        N, D = self.Y.shape
        kind = "fixed" if self.fixed_inputs else ("tied" if self.tie_mean else "free")
        return (f"{type(self).__name__}(N={N}, Q={self.latent_dim}, D={D}, q(X) means {kind}, "
                f"num_inducing={self.num_inducing}, kernel={self.kernel!r})")
