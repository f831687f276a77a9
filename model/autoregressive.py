"""Autoregressive GP with uncertain inputs: iterative k-step forecasting that carries the
predictive uncertainty forward (paper section "Gaussian Process Inference with Uncertain
Inputs", following Girard et al. 2003).

A series y_1..y_T (each y_t in R^D) becomes pairs (z_hat_n, y_hat_n), n = 1..T - tau:

    z_hat_n = [y_n, y_{n+1}, ..., y_{n+tau-1}]  (tau D,)    y_hat_n = y_{n+tau}  (D,)

and an ``UncertainInputGPR`` with q(X) centred at the windows (means tied to Z, learned
variances around them) is fitted to them. Forecasting from the end of the series, each
step's predictive mean and variance of y (meanFstar / covFstar) enter the window as a
Gaussian input with that variance (a diagonal Gaussian: covariances between window
entries are dropped), so the variance propagates; the zero-variance variant (a standard GP
on the windows, ``propagate_uncertainty=False``) feeds back the means only.
``AutoregressiveGP.from_fixed_inputs(zero_variance_fit)`` starts the uncertain-input model
at the zero-variance model's fit (the same GP), from which it learns its input variances.
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
    series : (T,) or (T, D) equally spaced observations.
    window : tau, the number of past outputs the next one depends on; 1 <= tau <= T - 2.
    num_inducing : M <= T - tau;  kernel : as ``BayesianGPLVM``.
    propagate_uncertainty : True: q(X) N(z_hat_n, S_n) with learned S and Sigma_z, and
        forecasts carry their variance forward; False: a standard GP on (z_hat, y_hat)
        (inputs fixed) whose forecasts feed back means with zero variance.
    """

    def __init__(self, series, window: int = 16, num_inducing: int = 50, kernel="rbf",
                 propagate_uncertainty: bool = True, seed: int | None = 0):
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

    def forecast(self, steps: int = 180, propagate_uncertainty: bool | None = None,
                 include_noise: bool = True):
        """Iterated one-step predictions for ``steps`` steps after the end of the series.

        Each step predicts y_{T+k} from the window of the last tau values (observed ones
        exact, earlier predictions Gaussian with their predictive variance) and shifts it in.
        ``propagate_uncertainty`` (default: the model's) False feeds back means only and
        treats the window as exact. Returns (mean, var), each (steps,) for a 1-D series,
        else (steps, D).
        """
        _check_positive_int("steps", steps)
        prop = self.propagate_uncertainty if propagate_uncertainty is None else bool(propagate_uncertainty)
        D = self.series.shape[1]
        win_mean = self.series[-self.window:].ravel().copy()
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
        if self._series_ndim == 1:
            return mean[:, 0], var[:, 0]
        return mean, var

    def sample_forecast(self, steps: int = 180, n_samples: int = 1000, seed: int | None = 0,
                        include_noise: bool = True) -> np.ndarray:
        """Monte Carlo forecasting: ``n_samples`` trajectories of ``steps`` steps after the end
        of the series, each step drawn from the predictive N(mean, var) at that trajectory's
        own (exact) window. Unlike ``forecast``'s Gaussian with diagonal window covariance,
        the samples carry the whole distribution of the window (correlations, non-Gaussian
        shape), as far as independent draws per step allow (f is not sampled jointly across
        steps). ``include_noise=False`` draws f, not y, at every step (trajectories without
        observation noise). Returns (n_samples, steps) for a 1-D series, else
        (n_samples, steps, D)."""
        _check_positive_int("steps", steps)
        _check_positive_int("n_samples", n_samples)
        rng = np.random.default_rng(seed)
        D = self.series.shape[1]
        win = np.tile(self.series[-self.window:].ravel(), (n_samples, 1))
        out = np.empty((n_samples, steps, D))
        for k in range(steps):
            m, v = self.predict(win, None, include_noise=include_noise)  # Sigma_z on the window, as forecast
            out[:, k] = m + np.sqrt(v) * rng.standard_normal(m.shape)
            win = np.concatenate([win[:, D:], out[:, k]], axis=1)
        return out[:, :, 0] if self._series_ndim == 1 else out

    def _uncertain_twin(self) -> "AutoregressiveGP":
        series = self.series if self._series_ndim != 1 else self.series[:, 0]
        return type(self)(series, window=self.window, num_inducing=self.num_inducing, kernel=self.kernel,
                          propagate_uncertainty=True, seed=self.seed)

    # --- model files -------------------------------------------------------------------------
    def _file_args(self):
        return ({"window": self.window, "propagate_uncertainty": self.propagate_uncertainty},
                {"series": self.series if self._series_ndim != 1 else self.series[:, 0]})

    @classmethod
    def _from_file(cls, Y, common, args, arrays):
        return cls(arrays["model.series"], num_inducing=common["num_inducing"], kernel=common["kernel"],
                   seed=common["seed"], **args)

    def __repr__(self) -> str:
        T, D = self.series.shape
        return (f"AutoregressiveGP(T={T}, D={D}, window={self.window}, "
                f"propagate_uncertainty={self.propagate_uncertainty}, "
                f"num_inducing={self.num_inducing}, kernel={self.kernel!r})")
