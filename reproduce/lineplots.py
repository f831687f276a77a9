"""Line plots for the uncertain-input reproductions (curves, 2-sd bands, error bars), drawn
with ``bgplvm.explorer.figures`` (Pillow; no matplotlib)."""

from __future__ import annotations

import numpy as np

from bgplvm.explorer.figures import Axes, PngCanvas

COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"]
TRUTH = "#222222"


def padded(lo: float, hi: float, frac: float = 0.05) -> tuple[float, float]:
    span = hi - lo if hi > lo else max(abs(hi), 1.0)
    return lo - frac * span, hi + frac * span


def band(ax: Axes, x, lo, hi, colour: str, opacity: float = 0.2) -> None:
    """A filled band between the curves lo and hi over x."""
    x, lo, hi = (np.asarray(v, dtype=float) for v in (x, lo, hi))
    pts = ax.pts(np.c_[x, hi]) + ax.pts(np.c_[x[::-1], lo[::-1]])
    ax.c.polygon(pts, colour, opacity=opacity)


def line(ax: Axes, x, y, colour: str, width: float = 1.5, dash: bool = False) -> None:
    ax.c.polyline(ax.pts(np.c_[np.asarray(x, float), np.asarray(y, float)]), colour, width=width, dash=dash)


def vline(ax: Axes, x: float, colour: str = "#888888") -> None:
    X = float(ax.px(x))
    ax.c.polyline([(X, ax.y), (X, ax.y + ax.h)], colour, width=1.0)


def errorbars(ax: Axes, x, mean, sd, colour: str, cap: float = 4.0) -> None:
    """Mean +- sd bars with caps and a marker at the mean."""
    for xi, m, s in zip(np.asarray(x, float), np.asarray(mean, float), np.asarray(sd, float)):
        X = float(ax.px(xi))
        y0, y1 = float(ax.py(m - s)), float(ax.py(m + s))
        ax.c.polyline([(X, y0), (X, y1)], colour, width=1.2)
        ax.c.polyline([(X - cap, y0), (X + cap, y0)], colour, width=1.2)
        ax.c.polyline([(X - cap, y1), (X + cap, y1)], colour, width=1.2)
        ax.c.circle(X, float(ax.py(m)), 3.0, fill=colour, stroke="white", width=0.6)


def canvas(width: int, height: int) -> PngCanvas:
    return PngCanvas(width, height)
