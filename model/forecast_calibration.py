"""Calibrated forecast intervals without new data: ``AutoregressiveGP.calibrate``.

An autoregressive forecast is scored by the series itself, and the fitted model cannot see
its own error there: on a chaotic series the fit drives the noise to ~1e-6 (issue 44), the
one-step predictive variance then leaves out the model's own one-step error (Mackey-Glass,
delay 30: 54 % of the truth inside a nominal 95 % interval in the first 10 steps), while
further ahead the trajectories' spread can exceed the error (delay 17: 100 % in steps
31-100). The error depends on how far ahead, so the scale of the predictive sd is learned
per horizon, from the training series, exactly as a forecast is made:

1. ``stretches`` origins o (evenly spaced in [window, T - horizon]) each start a held-out
   stretch y_o .. y_{o+H-1} (H = ``horizon``).
2. For each origin, q(u) is recomputed without the training pairs that see the stretch:
   those whose target is in the stretch and those whose window holds one of its values
   (targets o .. o + H + window - 1), the kernel, inducing inputs, noise and q(X) of the
   other pairs fixed (``TrainingStats.from_arrays``). The forecast from the series up to o
   (``forecast(history=y[:o])``, the model's own method) is scored against the stretch:
   z_{o,h} = (y_{o+h-1} - mean_h) / sd_h.
3. Horizons are pooled in bins of doubling width (1, 2, 3-4, 5-8, 9-16, ...; each bin has
   ``stretches`` x its width values of z per output), and each bin's scale is the
   split-conformal quantile of abs(z) (``calibration.fit_scale``, ``method``); a horizon past
   H takes the last bin's scale.
4. Cross-fitting reports what the scales do: the origins are split in two (alternately),
   each half scored with the scales learned on the other (``after``).

Leaving H + window pairs out of q(u) makes the held-out forecasts worse than the full
model's, and the more so the larger their share of the pairs (a warning above
``MAX_LEFT_OUT``). Mackey-Glass, window 12, M = 40, forecasts 100 steps ahead from 20
origins after the training series (``bgplvm reproduce calibration``):

- 600 training steps (31 stretches of 100 steps, a fifth of the pairs out each): the
  95 % intervals held 100 % -> 98.7 % (delay 17) and 99.3 % -> 96.2 % (delay 30), the
  variance at most 0.4x and 4.1x the series';
- 150 training steps (21 stretches of 34 steps, a third of the pairs out each): the
  held-out forecasts held 85 % where the model's own held 99 % (delay 17), and the scales
  (up to 8 at delay 30) took the variance to 240x the series': 98.7 -> 99.6 % and
  93.7 -> 96.0 %. Too short a series to calibrate by, and a shorter horizon does not help:
  with H = 22 (a quarter of the pairs out) and H = 16 the far steps take the scale of a
  short horizon's bin (1.9-3.3), and the 95 % intervals held 100 % (delay 17) and 99.1-99.3 %
  (delay 30), the variance up to 100x the series'.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np

from .autoregressive import ForecastSpreadWarning
from .calibration import MIN_ENTRIES, ScaleRecord, _usable, check_method_level, fingerprint, fit_scale, rows_left_out
from .metrics import gaussian_scores, interval_z

#: default held-out stretch length (steps ahead), at most a quarter of the training pairs
HORIZON = 100
#: fewest origins a forecast calibration accepts (the quantile of a bin rests on them)
MIN_STRETCHES = 6
#: the largest fraction of the training pairs one held-out stretch may take out of q(u)
#: without a warning (module docstring: Mackey-Glass on 150 steps took a third)
MAX_LEFT_OUT = 0.25
#: the most held-out stretches calibrate() makes by default (each a forecast of n_samples trajectories)
MAX_STRETCHES = 50


@dataclass(frozen=True)
class ForecastCalibration(ScaleRecord):
    """Per-horizon scales of a forecast's predictive sd (module docstring).

    scale : (H,) sd multipliers for 1 .. H steps ahead (beyond H: ``scale[-1]``)
    level, method : what was matched;  horizon, stretches : H and the number of origins
    forecast : the forecast they were made for ("samples", "moments" or "means")
    n_entries : held-out values (stretches x H x D)
    before, after : ``Scores.as_dict()`` of the held-out values, uncalibrated and
    calibrated by cross-fitting;  by_horizon : {"a-b": [before, after]} 95 % coverage
    (at ``level``) per horizon bin, cross-fitted;  data, params : fingerprints of the series
    and of the parameter vector it was made on
    """

    scale: np.ndarray
    level: float
    method: str
    horizon: int
    stretches: int
    forecast: str
    n_samples: int
    seed: int
    n_entries: int = 0
    before: dict = field(default_factory=dict)
    after: dict = field(default_factory=dict)
    by_horizon: dict = field(default_factory=dict)
    data: str = ""
    params: str = ""
    kind: str = "forecast"

    def factors(self, steps: int) -> np.ndarray:
        """(steps,) the sd scale of 1 .. ``steps`` steps ahead."""
        h = np.minimum(np.arange(steps), self.scale.size - 1)
        return self.scale[h]

    def describe(self) -> str:
        key = f"{self.level:g}"
        b, a = self.before["coverage"][key], self.after["coverage"][key]
        return (f"calibrated ({self.method}, sd x {self.scale.min():.3g}-{self.scale.max():.3g} by horizon, "
                f"{self.stretches} held-out stretches of {self.horizon} steps, the '{self.forecast}' forecast): a "
                f"nominal {100 * self.level:g} % interval held {100 * b:.1f} % -> {100 * a:.1f} % of "
                f"{self.after['n']} held-out values (cross-fitted)")

    def baseline_warning(self) -> None:
        return None  # no k-NN forecast to compare with


def horizon_bins(H: int) -> list[tuple[int, int]]:
    """[(a, b)] 0-based half-open bins of doubling width covering 0 .. H - 1."""
    bins, a, w = [], 0, 1
    while a < H:
        bins.append((a, min(H, a + w)))
        a += w
        w = w if a < 2 else 2 * w
    return bins


def origins(T: int, window: int, horizon: int, stretches: int | None) -> np.ndarray:
    """The held-out stretches' first steps: ``stretches`` (default: one every
    max(1, horizon // 6) steps, at most ``MAX_STRETCHES``) evenly spaced in [window, T - horizon]."""
    last = T - horizon
    if last < window:
        raise ValueError(f"a held-out stretch of {horizon} steps after a first window of {window} needs a series of "
                         f"{window + horizon} steps or more, this one has {T}: pass a smaller horizon=")
    if stretches is None:
        stretches = min(MAX_STRETCHES, (last - window) // max(1, horizon // 6) + 1)
    n = min(int(stretches), last - window + 1)
    if n < MIN_STRETCHES:
        raise ValueError(f"forecast calibration needs at least {MIN_STRETCHES} held-out stretches; a series of {T} "
                         f"steps with window {window} and horizon {horizon} has room for {last - window + 1}: pass a "
                         "smaller horizon= or calibrate on a longer series")
    return np.unique(np.round(np.linspace(window, last, n)).astype(int))


def held_out_forecasts(m, starts: np.ndarray, horizon: int, forecast: dict) -> tuple[np.ndarray, np.ndarray]:
    """(mean, var), each (stretches, horizon, D): the forecast of each stretch from the series
    before it, with q(u) from the training pairs that do not see it (module docstring, step 2)."""
    m._sync_kernel()
    w, y = m.window, m.series
    target = np.arange(m.Y.shape[0]) + w  # the series index of each pair's target
    mean = np.empty((starts.size, horizon, y.shape[1]))
    var = np.empty_like(mean)
    for i, o in enumerate(starts):
        with rows_left_out(m, (target >= o) & (target < o + horizon + w)), warnings.catch_warnings():
            warnings.simplefilter("ignore", ForecastSpreadWarning)  # the scales measure it
            mu, v = m.forecast(horizon, history=y[:o], calibrated=False, **forecast)
        mean[i], var[i] = mu.reshape(horizon, -1), v.reshape(horizon, -1)
    return mean, var


def bin_scales(z: np.ndarray, bins, level: float, method: str, H: int) -> np.ndarray:
    """(H,) each horizon's scale: its bin's (step 3) from z (stretches, H, D)."""
    out = np.empty(H)
    for a, b in bins:
        zb = z[:, a:b].reshape(-1, z.shape[2])
        out[a:b] = fit_scale(zb, np.ones(zb.shape, dtype=bool), level, method, per_output=False)[0]
    return _usable(out)


def calibrate_forecast(m, horizon: int | None = None, stretches: int | None = None, level: float = 0.95,
                       method: str = "quantile", method_forecast: str = "samples", n_samples: int = 300,
                       seed: int = 0) -> ForecastCalibration:
    """``AutoregressiveGP.calibrate`` (module docstring)."""
    check_method_level(method, level)
    T, w = m.series.shape[0], m.window
    H = min(HORIZON, max(1, (T - w) // 4)) if horizon is None else int(horizon)
    if H < 1:
        raise ValueError(f"horizon must be a positive number of steps, got {horizon!r}")
    starts = origins(T, w, H, stretches)
    n_entries = starts.size * H * m.series.shape[1]
    if n_entries < MIN_ENTRIES:
        raise ValueError(f"calibration needs at least {MIN_ENTRIES} held-out values; {starts.size} stretches of {H} "
                         f"steps hold {n_entries}: pass a longer horizon= or more stretches=")
    forecast, kind = _forecast_kwargs(m, method_forecast, n_samples, seed)
    _warn_if_short(T - w, H + w)
    mean, var = held_out_forecasts(m, starts, H, forecast)
    truth = np.stack([m.series[o:o + H] for o in starts])
    z = (truth - mean) / np.sqrt(var)
    bins = horizon_bins(H)
    scale = bin_scales(z, bins, level, method, H)
    half = np.arange(starts.size) % 2 == 0
    crossed = np.where(half[:, None], bin_scales(z[~half], bins, level, method, H)[None, :],
                       bin_scales(z[half], bins, level, method, H)[None, :]) ** 2
    var_after = var * crossed[:, :, None]
    inside = lambda v: np.abs(truth - mean) <= interval_z(level) * np.sqrt(v)  # noqa: E731
    ib, ia = inside(var), inside(var_after)
    by_h = {f"{a + 1}-{b}": [float(ib[:, a:b].mean()), float(ia[:, a:b].mean())] for a, b in bins}
    return ForecastCalibration(
        scale=scale, level=float(level), method=method, horizon=H, stretches=int(starts.size), forecast=kind,
        n_samples=int(n_samples), seed=int(seed), n_entries=int(n_entries),
        before=gaussian_scores(mean, var, truth).as_dict(), after=gaussian_scores(mean, var_after, truth).as_dict(),
        by_horizon=by_h, data=fingerprint(m.Y), params=fingerprint(m._x))


def _warn_if_short(N: int, left_out: int) -> None:
    if left_out <= MAX_LEFT_OUT * N:
        return
    warnings.warn(f"each held-out stretch takes {left_out} of the {N} training pairs out of q(u) "
                  f"({100 * left_out / N:.0f} %, more than {100 * MAX_LEFT_OUT:g} %): its forecasts come from a "
                  "weaker model than this one and the scales may be far off (Mackey-Glass on 150 steps: scales of "
                  "up to 8 and 96 % where the model held 94 %); calibrate on a longer series or pass a shorter "
                  "horizon=", stacklevel=3)


def _forecast_kwargs(m, method: str, n_samples: int, seed: int) -> tuple[dict, str]:
    """``forecast``'s keywords for the model's forecast by ``method`` and its name ("means":
    a zero-variance model's)."""
    if method not in ("samples", "moments"):
        raise ValueError(f"method_forecast must be 'samples' or 'moments', got {method!r}")
    if not m.propagate_uncertainty:
        return {}, "means"
    return dict(method=method, n_samples=int(n_samples), seed=seed), method


def check_forecast_calibration(m, cal) -> ForecastCalibration:
    """``cal`` if it was made on this model's series, else an error."""
    if not isinstance(cal, ForecastCalibration):
        raise TypeError(f"an AutoregressiveGP's calibration is a ForecastCalibration (from calibrate()), got "
                        f"{type(cal).__name__}")
    if cal.data != fingerprint(m.Y):
        raise ValueError("this calibration was made on another series than this model's: call calibrate() on it")
    return cal

