"""Autoregressive GP with uncertain inputs: iterative k-step forecasting that carries the
predictive uncertainty forward (paper section "Gaussian Process Inference with Uncertain
Inputs", following Girard et al. 2003).

A series y_1..y_T (each y_t in R^D) becomes pairs (z_hat_n, y_hat_n), n = 1..T - tau:

    z_hat_n = [y_n, y_{n+1}, ..., y_{n+tau-1}]  (tau D,)    y_hat_n = y_{n+tau}  (D,)

and an ``UncertainInputGPR`` with q(X) centred at the windows (means tied to Z, learned
variances around them) is fitted to them. Forecasting from the end of the series, each
step's predictive mean and variance of y (meanFstar / covFstar) enter the window as a
Gaussian input with that variance (a diagonal Gaussian: covariances between window
entries are dropped), so the variance propagates (``forecast(method="moments")``); the
zero-variance variant (a standard GP on the windows, ``propagate_uncertainty=False``) feeds
back the means only. ``AutoregressiveGP.from_fixed_inputs(zero_variance_fit)`` starts the
uncertain-input model at the zero-variance model's fit (the same GP), from which it learns
its input variances.

Two choices keep forecasts far from the end of the series sane (issue 44, measured on
Mackey-Glass with delays 17 and 30, 150 steps, window 12, M = 40, 100 steps ahead):

- **The signal variance is tied to the series' variance** (``tie_signal_variance``, on for
  the RBF kernel). The prior variance of y_t given nothing about its past must be the
  series' own marginal variance for a stationary series. Learned, it ran to 17-19x the
  series variance (the bound gains ~60 nats from it, so a log-normal hyperprior of width
  0.5 around the series variance left it there), and a noise floor made it worse (a floor
  of 1e-3 of the series variance: 300x). Whatever the window, a stationary GP's forecast
  can then reach signal + noise, far more than the series ever varies.
- **Propagated moments are those of sampled trajectories** (``method="samples"``, the
  default): each trajectory's window is exact, so the trajectories stay on the dynamics
  the model learned, and their spread tends to that of the series. Gaussian windows
  (``method="moments"``, the paper's; also with their full covariance, tried) put mass
  off the series' attractor, where the nearly noise-free fit's mean function swings
  widely: the propagated variance settles at a fixed point of 5.4x the series variance
  with the tied signal variance (5.2x at delay 17; it peaks at 7.9x on the way, so the
  moments forecast warns, see below), 38-40x without.

With both choices, 100 steps ahead the variance stays at 0.84-1.02x (delay 17) and 2.6-3.2x
(delay 30) the series variance and the 95 % intervals hold 91-100 % of the truth (5
seeds); 1,000 steps ahead the trajectories' spread levels off at ~1.1x and ~4.8x. A noise
floor of 1e-3 of the series variance would bring the latter to 1.5x, at the price of a
100-step RMSE 2.4x larger at delay 17: not the default. Either way a forecast's variance
is below ``forecast_variance_bound``, what an RBF kernel allows: sf2 (1 + |m|_H^2) + noise.
(Those figures are of trajectories that drew each step's f on its own.)

Measured from 20 origins after the training series (``bgplvm reproduce calibration``), the
trajectories' intervals were too narrow in their first steps while each step's f was drawn
on its own (delay 30: 54 / 76 / 95 % of the truth inside the 95 % intervals in steps 1-10 /
11-30 / 31-100): the model's errors at the windows of one path are correlated. Each
trajectory now draws u ~ q(u) once (``bgplvm.trajectories``; ``joint=False``: the old
draws): delay 30 62 / 88 / 100 %, 93.7 % in all (was 87.2 %), the variance at most 4.9x
the series'; delay 17 98.7 % (was 98.0 %). ``calibrate`` scales the sd per horizon from
held-out stretches of the series (``bgplvm.forecast_calibration``): on 600 training steps
delay 17 100 -> 98.7 %, delay 30 99.3 -> 96.2 %; on 150 it is unreliable and warns.

The fit takes the noise to ~2e-5 of the series' variance. A floor, measured with the joint
draws (the noise held at 1e-4 of the series' variance: ``m.noise_variance = 1e-4 *
series.var(); m.freeze("noise_variance")`` before ``fit``; 150 steps, 5 seeds, 20
origins): delay 30 93.6-93.9 -> 95.8-96.2 %, the largest variance 4.9-5.2x -> 3.8-3.9x
the series', RMSE 0.290-0.292 -> 0.278-0.280; but delay 17 98.4-99.1 -> 100 % (wider
where it was already too wide) and RMSE 0.101-0.112 -> 0.122-0.125, and on 600 steps the
RMSE doubles at delay 17 (0.051 -> 0.112) and grows at delay 30 (0.260 -> 0.304). A floor
trades the accuracy of series the model has learned well for the spread of chaotic ones,
so the default keeps the fitted noise; ``bgplvm reproduce calibration`` scores both.
A log-normal hyperprior on the noise instead (log N(log noise; log(c x series variance),
s^2) added to the bound; (c, s) = (1e-4, 0.5), (1e-4, 1), (1e-4, 2) and (1e-3, 1); seed 0,
20 origins) moves the fitted noise by at most 15 % (2.5e-5 -> 2.6-2.9e-5 of the series'
variance at delay 30: the bound's pull towards the data is far stronger) and changes
nothing that matters (delay 30 on 150 steps: 93.8-94.2 %, largest variance 5.0-5.1x;
delay 17 on 600 steps: RMSE 0.052-0.057): not kept.

Why delay 17's intervals are too wide where the model has learned the series (100 % on 600
steps, ``bgplvm reproduce calibration``): the fitted noise is larger than the model's
error. On the 470 steps after 600 training steps, with each true window fed in, the
one-step predictive variance is 4.6x the squared one-step error (noise 1.5e-5 of the
series' variance, the residual k(x, x) - Q(x, x) 8.6e-6, the squared error 5.4e-6): the
variational bound puts what the inducing inputs cannot express into the noise, the
sparse bound's known overestimate of it (Bauer, van der Wilk and Rasmussen, 2016), and
every step of a trajectory adds it again. More inducing inputs shrink it but not the ratio
(M = 80: noise 8.3e-6, 4.3x; M = 120: 6.7e-6, 3.8x, the RMSE 0.054 -> 0.036), and the 95 %
intervals hold 100 % at every M (on 150 steps, M = 80: 99.3 %). ``calibrate`` narrows them
on a long series (98.7 %).

What is left is a check: ``forecast`` warns (``ForecastSpreadWarning``, ``check_spread``)
when a variance passes (max - min)^2 / 4 of the training series, the largest variance a
distribution inside the series' range can have (Popoviciu's inequality; 3.6-4.1x the
variance of these Mackey-Glass series, so about the issue's "4x"): such a forecast puts
mass where the series has never been. As fitted, delay 30 on 150 steps passes it from 11
of seed 0's 20 origins (largest variances 3.3-4.9x); delay 17 and the longer series stay
below.
"""

from __future__ import annotations

from numbers import Integral

import numpy as np

from .io import register_model_class
from .uncertain import UncertainInputGPR


def check_series(series) -> np.ndarray:
    """A (T, D) float64 series from (T,) or (T, D); finite values only."""
    try:
        y = np.array(series, dtype=np.float64)  # a copy: later edits of the caller's array do not leak in
    except (TypeError, ValueError) as e:
        raise ValueError(f"series must be a numeric (T,) or (T, D) array: {e}") from None
    if y.ndim == 1:
        y = y[:, None]
    if y.ndim != 2 or y.shape[1] < 1:
        raise ValueError(f"series must have shape (T,) or (T, D), got {y.shape}")
    if not np.all(np.isfinite(y)):
        bad = np.unique(np.nonzero(~np.isfinite(y))[0])
        raise ValueError(f"series contains NaN/inf at steps {bad[:5].tolist()}")
    return np.ascontiguousarray(y)


def _check_positive_int(name: str, v) -> None:
    if isinstance(v, bool) or not isinstance(v, Integral) or v < 1:
        raise ValueError(f"{name} must be a positive integer, got {v!r}")


class ForecastSpreadWarning(UserWarning):
    """A forecast's variance passes what the training series' range allows (``check_spread``)."""


def check_spread(series: np.ndarray, var: np.ndarray, stacklevel: int = 2) -> None:
    """Warn when a forecast's variance ``var`` (steps, D) passes ``(max - min)^2 / 4`` of the
    training ``series`` (T, D) for some output: by Popoviciu's inequality no distribution
    inside the series' range has a larger variance, so such a forecast puts mass where the
    series has never been (Mackey-Glass delay 30 on 150 steps: up to 4.9x the series'
    variance against a bound of 3.7x; the module docstring has the measurements)."""
    limit = np.ptp(series, axis=0) ** 2 / 4.0
    over = (var > limit) & (limit > 0)  # a constant output has no range to speak of
    if not over.any():
        return
    import warnings

    step, d = np.argwhere(over)[0]
    worst = float(var[:, d].max() / series[:, d].var())
    warnings.warn(f"the forecast's variance passes what a distribution inside the training series' range can have "
                  f"((max - min)^2 / 4 = {limit[d] / series[:, d].var():.1f}x the series' variance) from step "
                  f"{step + 1} on{f' for output {d}' if series.shape[1] > 1 else ''}, up to {worst:.1f}x: the "
                  "forecast puts mass outside the range the series has shown, and its intervals this far ahead are "
                  "wider than the series varies. Forecast fewer steps or fit on a longer series (the "
                  "bgplvm.autoregressive docstring has measurements)", ForecastSpreadWarning, stacklevel=stacklevel)


def lagged_pairs(y: np.ndarray, window: int) -> tuple[np.ndarray, np.ndarray]:
    """(Z_hat (T - tau, tau D), Y_hat (T - tau, D)) from a (T, D) series."""
    T, D = y.shape
    Z = np.stack([y[n:n + window].ravel() for n in range(T - window)])
    return Z, y[window:].copy()


@register_model_class
class AutoregressiveGP(UncertainInputGPR):
    """GP on windows of ``window`` past outputs with uncertain inputs.

    Parameters
    ----------
    series : array, (T,) or (T, D)
        Equally spaced observations.
    window : int
        tau, the number of past outputs the next one depends on; 1 <= tau <= T - 2.
    num_inducing : int
        M <= T - tau.
    kernel : str or Kernel
        As ``BayesianGPLVM``'s.
    propagate_uncertainty : bool
        True: q(X) N(z_hat_n, S_n) with learned S and Sigma_z, and forecasts carry their
        variance forward; False: a standard GP on (z_hat, y_hat) (inputs fixed) whose
        forecasts feed back means with zero variance.
    tie_signal_variance : bool, optional
        Hold the RBF kernel's signal variance at the variance of the training outputs
        (module docstring). None (default): for an RBF kernel whose variance was not given;
        True needs such a kernel; False learns it.
    """

    #: the windows are exact observations: q(X) starts at them (``UncertainInputGPR``'s
    #: docstring: 1e-4 left 3 of 5 Mackey-Glass fits below the plain GP's bound)
    _input_variance = 1e-6

    def __init__(self, series, window: int = 16, num_inducing: int = 50, kernel="rbf",
                 propagate_uncertainty: bool = True, seed: int | None = 0,
                 tie_signal_variance: bool | None = None):
        y = check_series(series)
        _check_positive_int("window", window)
        T = y.shape[0]
        if window > T - 2:
            hint = (f"; a (1, {y.shape[1]}) row is one step of {y.shape[1]} outputs: pass a series of T "
                    "steps as (T,) or (T, D)" if T == 1 and y.shape[1] > 2 else "")
            raise ValueError(f"window {window} is too long for a history of {T} steps: the "
                             f"window must be at most T - 2 = {T - 2} (at least 2 training pairs){hint}")
        self.series = y
        self.window = int(window)
        self.propagate_uncertainty = bool(propagate_uncertainty)
        self._series_ndim = np.ndim(series)
        Z, Y = lagged_pairs(y, self.window)
        super().__init__(Z, Y, num_inducing=num_inducing, kernel=kernel, tie_mean=True,
                         fixed_inputs=not propagate_uncertainty, seed=seed)
        self.tie_signal_variance = self._tie_signal_variance(tie_signal_variance)

    def _tie_signal_variance(self, tie: bool | None) -> bool:
        """Hold the RBF signal variance at the training outputs' variance (see the module
        docstring); returns whether it is held."""
        from .kernels import RBF

        rbf = isinstance(self.kernel, RBF) and "variance" not in getattr(self.kernel, "user_set", ())
        if tie is None:
            tie = rbf
        elif tie and not rbf:
            raise ValueError("tie_signal_variance=True holds the signal variance of an RBF kernel at the series' "
                             f"variance; this model's kernel is {self.kernel!r} (a single RBF without a given "
                             "variance is needed), or pass tie_signal_variance=False")
        if tie:
            values = self._values()
            values["kernel.variance"] = np.asarray(float(np.mean(np.var(self.Y, axis=0))))
            self._set_x(self._layout.pack(values))
            self.freeze("kernel.variance")
        return bool(tie)

    # --- calibration (model/forecast_calibration.py) --------------------------------------------
    _not_calibrated_because = ""

    def calibrate(self, horizon: int | None = None, stretches: int | None = None, level: float = 0.95,
                  method: str = "quantile", forecast: str = "samples", n_samples: int = 300,
                  seed: int = 0):
        """Learn a scale of the forecast's predictive sd per horizon from the training series
        itself (``bgplvm.forecast_calibration``): ``stretches`` held-out stretches of
        ``horizon`` steps (default: 100, at most a quarter of the training pairs), each
        forecast from the series before it with q(u) recomputed without the pairs that see
        it, by the model's forecast (``forecast`` "samples" or "moments"; a zero-variance
        model's means); ``method`` "quantile" (split-conformal, matching a nominal ``level``
        interval) or "variance". Afterwards ``forecast`` scales its variances by horizon
        (beyond ``horizon``: the last scale; ``calibrated=False`` turns it off per call,
        ``m.calibration = None`` drops it); ``save`` keeps it; ``sample_forecast``'s
        trajectories are not scaled. Returns the ``ForecastCalibration``, whose ``before`` /
        ``after`` score the held-out stretches (cross-fitted)."""
        from .forecast_calibration import calibrate_forecast

        self._calibration = calibrate_forecast(self, horizon=horizon, stretches=stretches, level=level,
                                               method=method, method_forecast=forecast, n_samples=n_samples,
                                               seed=seed)
        return self._calibration

    def _check_calibration(self, cal):
        from .forecast_calibration import check_forecast_calibration

        return check_forecast_calibration(self, cal)

    @classmethod
    def _calibration_from_file(cls, meta: dict, scale):
        from .forecast_calibration import ForecastCalibration

        return ForecastCalibration.from_file(meta, scale)

    def _calibrated(self, var, calibrated: bool = True, rows=None):
        """One-step ``predict`` is not scaled: the calibration is by horizon (``forecast``)."""
        return var

    def _forecast_calibrated(self, var: np.ndarray, kind: str, calibrated: bool) -> np.ndarray:
        """``var`` (steps, D) scaled by the calibration's squared sd factor of each horizon, if
        one is active (``_active_calibration``) and made for this ``kind`` of forecast."""
        active = self._active_calibration(calibrated)
        if active is None:
            return var
        cal = active[1]
        if cal.forecast != kind:
            import warnings

            warnings.warn(f"the model was calibrated for the '{cal.forecast}' forecast and this is the '{kind}' one: "
                          "its intervals are not calibrated (calibrate(forecast=...) for it)", stacklevel=3)
            return var
        return var * cal.factors(var.shape[0])[:, None] ** 2

    def forecast(self, steps: int = 180, propagate_uncertainty: bool | None = None,
                 include_noise: bool = True, method: str = "samples", n_samples: int = 1000,
                 seed: int | None = 0, history=None, calibrated: bool = True, joint: bool = True):
        """Iterated one-step predictions for ``steps`` steps after the end of the series
        (or of ``history``: observations (T', ) or (T', D), T' >= window, whose last
        ``window`` steps start the forecast, e.g. the series observed since the fit; the
        model is not refitted).

        ``propagate_uncertainty`` (default: the model's) True carries each step's
        uncertainty into the next:

        - ``method="samples"`` (default): the mean and variance over ``n_samples``
          trajectories of ``sample_forecast`` (seed ``seed``, ``joint``; relative error of
          the variance ~ sqrt(2 / n_samples));
        - ``method="moments"``: the paper's Gaussian propagation, each step predicting
          y_{T+k} from the window of the last tau values (observed ones exact, earlier
          predictions Gaussian with their predictive variance, a diagonal window).

        The module docstring says why samples are the default. False feeds back means
        only and treats the window as exact. ``calibrated`` (when the model was calibrated
        for this kind of forecast, ``calibrate``) scales each horizon's variance. A variance
        above ``(max - min)^2 / 4`` of the training series, more than any distribution
        inside the series' range can have (Popoviciu's inequality), warns: the forecast
        then puts mass outside the range the series has shown (``check_spread``). Returns
        (mean, var), each (steps,) for a 1-D series, else (steps, D).
        """
        _check_positive_int("steps", steps)
        if method not in ("samples", "moments"):
            raise ValueError(f"method must be 'samples' or 'moments', got {method!r}")
        prop = self.propagate_uncertainty if propagate_uncertainty is None else bool(propagate_uncertainty)
        kind = ("samples" if joint else "independent samples") if method == "samples" else method
        kind = kind if prop else "means"
        if prop and method == "samples":
            paths = self.sample_forecast(steps, n_samples=n_samples, seed=seed, history=history, joint=joint)
            mean, var = paths.mean(axis=0).reshape(steps, -1), paths.var(axis=0).reshape(steps, -1)
            var = var if include_noise else np.maximum(var - self.noise_variance, 0.0)
        else:
            mean, var = self._iterated_moments(steps, prop, include_noise, history)
        var = self._forecast_calibrated(var, kind, calibrated)
        check_spread(self.series, var, stacklevel=3)
        if self._series_ndim == 1:
            return mean[:, 0], var[:, 0]
        return mean, var

    def _iterated_moments(self, steps: int, prop: bool, include_noise: bool, history) -> tuple:
        """(mean, var), each (steps, D): ``forecast``'s one-step predictions iterated from the
        window, with each step's variance fed back (``prop``) or means only."""
        D = self.series.shape[1]
        win_mean = self._start_window(history)
        win_var = np.zeros_like(win_mean)
        mean = np.empty((steps, D))
        var = np.empty((steps, D))
        for k in range(steps):
            if prop:
                m, v = self.predict(win_mean[None], win_var[None], include_noise=True)
            else:
                m, v = self.predict(win_mean[None], None, include_noise=True, input_noise=False)
            # the window holds observations: what goes back is y's variance; only the
            # reported variance leaves the noise out when asked to
            mean[k], var[k] = m[0], v[0] if include_noise else np.maximum(v[0] - self.noise_variance, 0.0)
            win_mean = np.r_[win_mean[D:], m[0]]
            win_var = np.r_[win_var[D:], v[0] if prop else np.zeros(D)]
        return mean, var

    @property
    def forecast_variance_bound(self) -> np.ndarray:
        """(D,) the largest variance a forecast of this model can have, by either method:
        ``sf2 (1 + ||m||_H^2) + noise`` for the RBF kernel (signal variance sf2), where
        ``||m||_H^2 = b^T Kuu b`` is the RKHS norm of the posterior mean ``m(x) = k_u(x)^T b``
        (b the column of meanFstar's B for that output). Whatever the distribution of the
        window, ``m(x)^2 <= ||m||_H^2 k(x, x)`` and the projected-process variance is at most
        k(x, x), so ``Var[y] <= E[m^2] + E[var f] + noise`` stays below it."""
        from .kernels import RBF

        if not isinstance(self.kernel, RBF):
            raise TypeError(f"the bound is the RBF kernel's (sf2 = k(x, x) for every x); this model's kernel is "
                            f"{self.kernel!r}")
        self._sync_kernel()
        post = self._posteriors()[0][1]
        B = post.Bmat
        norm2 = np.einsum("md,mk,kd->d", B, self.kernel.K(self.inducing_inputs), B)
        return self.kernel.sf2 * (1.0 + norm2) + self.noise_variance

    def _start_window(self, history=None) -> np.ndarray:
        """(window * D,) the last ``window`` steps of ``history`` (default: the training
        series), checked to be a series of this model's outputs."""
        if history is None:
            return self.series[-self.window:].ravel().copy()
        h = check_series(history)
        if h.shape[1] != self.series.shape[1] or h.shape[0] < self.window:
            raise ValueError(f"history must be a series of {self.series.shape[1]} output(s) and at least window = "
                             f"{self.window} steps, got shape {np.shape(history)}")
        return h[-self.window:].ravel().copy()

    def sample_forecast(self, steps: int = 180, n_samples: int = 1000, seed: int | None = 0,
                        include_noise: bool = True, history=None, joint: bool = True) -> np.ndarray:
        """Monte Carlo forecasting: ``n_samples`` trajectories of ``steps`` steps after the end
        of the series (or of ``history``, as ``forecast``'s), each at its own exact window.
        Unlike ``forecast``'s Gaussian with diagonal window covariance, the samples carry
        the whole distribution of the window (correlations, non-Gaussian shape).

        ``joint=True`` (default) draws f jointly along each trajectory's path: one draw of
        u ~ q(u) per trajectory, and the residual the inducing inputs cannot express at
        each step (``bgplvm.trajectories``: the model's error at a window and at the next
        one are correlated, as they are for the series); ``joint=False``
        draws each step from the predictive N(mean, var) at its window alone (Sigma_z
        included), independently of the steps before. ``include_noise=False`` draws f, not
        y, at every step (trajectories without observation noise). Returns
        (n_samples, steps) for a 1-D series, else (n_samples, steps, D)."""
        _check_positive_int("steps", steps)
        _check_positive_int("n_samples", n_samples)
        rng = np.random.default_rng(seed)
        D = self.series.shape[1]
        if joint:
            from .trajectories import joint_trajectories

            self._sync_kernel()
            out = joint_trajectories(self.kernel, self.inducing_inputs, self._posteriors(), self.Y_mean,
                                     self.noise_variance, self._start_window(history), steps, n_samples, rng,
                                     include_noise)
            return out[:, :, 0] if self._series_ndim == 1 else out
        win = np.tile(self._start_window(history), (n_samples, 1))
        out = np.empty((n_samples, steps, D))
        for k in range(steps):
            m, v = self.predict(win, None, include_noise=include_noise)  # Sigma_z on the window, as forecast
            out[:, k] = m + np.sqrt(v) * rng.standard_normal(m.shape)
            win = np.concatenate([win[:, D:], out[:, k]], axis=1)
        return out[:, :, 0] if self._series_ndim == 1 else out

    def _uncertain_twin(self) -> "AutoregressiveGP":
        series = self.series if self._series_ndim != 1 else self.series[:, 0]
        return type(self)(series, window=self.window, num_inducing=self.num_inducing, kernel=self.kernel,
                          propagate_uncertainty=True, seed=self.seed, tie_signal_variance=self.tie_signal_variance)

    # --- model files -------------------------------------------------------------------------
    def _file_args(self):
        return ({"window": self.window, "propagate_uncertainty": self.propagate_uncertainty,
                 "tie_signal_variance": self.tie_signal_variance},
                {"series": self.series if self._series_ndim != 1 else self.series[:, 0]})

    @classmethod
    def _from_file(cls, Y, common, args, arrays):
        args = {"tie_signal_variance": False, **args}  # files from before the tie: learned
        return cls(arrays["model.series"], num_inducing=common["num_inducing"], kernel=common["kernel"],
                   seed=common["seed"], **args)

    def __repr__(self) -> str:
        T, D = self.series.shape
        return (f"AutoregressiveGP(T={T}, D={D}, window={self.window}, "
                f"propagate_uncertainty={self.propagate_uncertainty}, "
                f"num_inducing={self.num_inducing}, kernel={self.kernel!r})")
