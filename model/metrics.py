"""How well a Gaussian predictive distribution holds the truth: interval coverage, negative
log predictive density, CRPS and the PIT histogram, for any (mean, variance, truth).

A predictive variance is a claim: a nominal p interval mean +- z_p sd, z_p = Phi^-1((1 + p)
/ 2), should hold a fraction p of held-out values. ``gaussian_scores`` measures that at
``LEVELS`` and the proper scores a forecaster is judged by (Gneiting & Raftery 2007):

- NLPD, the mean of -log N(y | m, v) = 0.5 log(2 pi v) + (y - m)^2 / (2 v);
- CRPS, the mean of sd [z (2 Phi(z) - 1) + 2 phi(z) - 1 / sqrt(pi)], z = (y - m) / sd, in
  the units of y (its mean absolute error when v -> 0);
- PIT, Phi(z): uniform on [0, 1] for a calibrated forecast; its histogram over ``bins``
  equal bins (fractions), a U shape for intervals too narrow, a hump for too wide.

Entries where the truth is NaN (or ``mask`` is False) are left out: pass a whole output
matrix and mark what was held out.

A coverage is itself an estimate: ``coverage_interval`` gives its sampling interval by a
moving-block bootstrap over the rows (Kuensch 1989), since the errors of neighbouring
frames or steps of a sequence are correlated (62 frames of one motion-capture trial are
not 62 independent draws, let alone 1860).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.special import ndtr, ndtri

#: nominal central interval levels reported
LEVELS = (0.5, 0.8, 0.9, 0.95, 0.99)


@dataclass(frozen=True)
class Scores:
    """The scores of one set of predictions (``gaussian_scores``)."""

    n: int  # entries scored
    coverage: dict = field(default_factory=dict)  # nominal level -> fraction inside
    nlpd: float = np.nan
    crps: float = np.nan
    rmse: float = np.nan
    pit: np.ndarray = field(default_factory=lambda: np.zeros(0))  # (bins,) fractions

    def as_dict(self) -> dict:
        """Plain numbers (JSON): coverage keyed by the level as text ("0.95")."""
        return dict(n=self.n, coverage={f"{p:g}": float(c) for p, c in self.coverage.items()},
                    nlpd=float(self.nlpd), crps=float(self.crps), rmse=float(self.rmse),
                    pit=[float(v) for v in self.pit])


def _scored(truth: np.ndarray, mask) -> np.ndarray:
    """Where the truth is scored: finite, and True in ``mask`` (of the truth's shape) if given."""
    keep = np.isfinite(truth)
    if mask is not None:
        mask = np.asarray(mask, dtype=bool)
        if mask.shape != truth.shape:
            raise ValueError(f"mask must have the truth's shape {truth.shape}, got {mask.shape}")
        keep &= mask
    return keep


def _checked(mean, var, truth, mask):
    mean, var, truth = (np.asarray(a, dtype=np.float64) for a in (mean, var, truth))
    if not (mean.shape == var.shape == truth.shape):
        raise ValueError(f"mean, var and truth must have one shape, got {mean.shape}, {var.shape} and {truth.shape}")
    keep = _scored(truth, mask)
    if not keep.any():
        raise ValueError("nothing to score: the truth is NaN (or masked) everywhere")
    m, v, y = mean[keep], var[keep], truth[keep]
    if not (np.all(np.isfinite(m)) and np.all(np.isfinite(v))):
        raise ValueError("the predictive mean and variance must be finite where the truth is scored")
    if np.any(v <= 0):
        raise ValueError(f"the predictive variance must be positive where the truth is scored (smallest {v.min():.3g}): "
                         "include the noise variance (predict(..., include_noise=True))")
    return m, v, y


def gaussian_scores(mean, var, truth, mask=None, levels=LEVELS, bins: int = 10) -> Scores:
    """Scores (module docstring) of N(mean, var) against ``truth`` (any one shape; NaN in
    ``truth`` or False in ``mask``: not scored)."""
    m, v, y = _checked(mean, var, truth, mask)
    sd = np.sqrt(v)
    z = (y - m) / sd
    cover = {float(p): float(np.mean(np.abs(z) <= ndtri(0.5 + 0.5 * p))) for p in levels}
    nlpd = float(np.mean(0.5 * np.log(2 * np.pi * v) + 0.5 * z * z))
    phi = np.exp(-0.5 * z * z) / np.sqrt(2 * np.pi)
    crps = float(np.mean(sd * (z * (2 * ndtr(z) - 1) + 2 * phi - 1 / np.sqrt(np.pi))))
    pit = np.histogram(ndtr(z), bins=bins, range=(0.0, 1.0))[0] / z.size
    return Scores(n=int(z.size), coverage=cover, nlpd=nlpd, crps=crps, rmse=float(np.sqrt(np.mean((y - m) ** 2))),
                  pit=pit)


def coverage_interval(mean, var, truth, level: float = 0.95, mask=None, block: int | None = None,
                      ci: float = 0.9, n_boot: int = 2000, seed: int = 0) -> tuple[float, float]:
    """The ``ci`` percentile interval of the coverage of the nominal ``level`` intervals, by
    a moving-block bootstrap over axis 0 (rows, frames or steps in their order; every
    entry of a row goes with it): ``n_boot`` series of ceil(rows / block) blocks of
    ``block`` consecutive rows (default ceil(rows^(1/3)), the rate of Hall, Horowitz & Jing
    1995), each block starting anywhere, cut to the rows' number. ``block=1`` treats the
    rows as independent. Arrays as ``gaussian_scores``'s, at least one dimension."""
    mean, var, truth = (np.asarray(a, dtype=np.float64) for a in (mean, var, truth))
    _checked(mean, var, truth, mask)  # the same checks as the scores'
    if truth.ndim == 0:
        raise ValueError("coverage_interval needs rows (axis 0) to resample, got a scalar")
    keep = _scored(truth, mask)
    with np.errstate(invalid="ignore", divide="ignore"):
        inside = keep & (np.abs(truth - mean) <= interval_z(level) * np.sqrt(var))
    rows = truth.shape[0]
    hits = inside.reshape(rows, -1).sum(axis=1)
    counts = keep.reshape(rows, -1).sum(axis=1)
    block = int(np.ceil(rows ** (1.0 / 3.0))) if block is None else block
    if not (isinstance(block, (int, np.integer)) and 1 <= block <= rows):
        raise ValueError(f"block must be an integer from 1 to the number of rows {rows}, got {block!r}")
    if not 0 < ci < 1:
        raise ValueError(f"ci must be in (0, 1), got {ci!r}")
    if not (isinstance(n_boot, (int, np.integer)) and n_boot >= 1):
        raise ValueError(f"n_boot must be a positive integer, got {n_boot!r}")
    rng = np.random.default_rng(seed)
    n_blocks = -(-rows // block)
    starts = rng.integers(0, rows - block + 1, size=(n_boot, n_blocks))
    idx = (starts[:, :, None] + np.arange(block)).reshape(n_boot, -1)[:, :rows]
    with np.errstate(invalid="ignore", divide="ignore"):
        boot = hits[idx].sum(axis=1) / counts[idx].sum(axis=1)
    lo, hi = np.nanquantile(boot, [0.5 - 0.5 * ci, 0.5 + 0.5 * ci])
    return float(lo), float(hi)


def interval_z(level: float) -> float:
    """z_p of the central interval of nominal ``level`` (0.95 -> 1.96)."""
    if not 0 < level < 1:
        raise ValueError(f"an interval's level must be in (0, 1), got {level!r}")
    return float(ndtri(0.5 + 0.5 * level))


def table(rows: dict[str, Scores], levels=LEVELS) -> str:
    """A markdown table of several ``Scores`` (row name -> scores)."""
    head = "| path | n | " + " | ".join(f"{100 * p:g} %" for p in levels) + " | NLPD | CRPS | RMSE |"
    sep = "|---|---:|" + "---:|" * (len(levels) + 3)
    lines = [head, sep]
    for name, s in rows.items():
        cov = " | ".join(f"{100 * s.coverage.get(float(p), np.nan):.1f}" for p in levels)
        lines.append(f"| {name} | {s.n} | {cov} | {s.nlpd:.3f} | {s.crps:.4g} | {s.rmse:.4g} |")
    return "\n".join(lines)
