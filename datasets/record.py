"""The one typed record every loader returns, and the row renderers.

A renderer turns one row y (D,) of Y -- a training row or a row the model generated --
into something drawable. Three kinds exist, matching how the explorer draws them:

- ``"pose"``: ``positions(y) -> (J, 3)`` joint/marker positions, z up, plus
  ``connections`` (pairs of indices into the J points) -- a stick figure
  (``StickFigureRenderer`` here; the CMU skeleton renderer does forward kinematics);
- ``"image"``: ``image(y) -> (H, W)`` an upright image (row 0 at the top);
- ``"vector"``: the row itself, drawn as a line/bar plot.

Renderers are small frozen dataclasses of plain numbers; a saved model records the name of
its data set, and the renderer comes back by loading that data set again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Renderer(Protocol):
    kind: str  # "pose" | "image" | "vector"


@dataclass(frozen=True)
class VectorRenderer:
    """Plain vector: the explorer draws the D values of a row."""

    kind: str = field(default="vector", init=False)
    labels: tuple[str, ...] | None = None  # optional name of each of the D columns


@dataclass(frozen=True)
class ImageRenderer:
    """Row -> (height, width) image, upright.

    ``order`` is the numpy reshape order of the row ("C": row-major, "F": column-major);
    ``transpose``/``flipud``/``fliplr`` are applied after the reshape, in that order.
    """

    height: int
    width: int
    order: str = "C"
    transpose: bool = False
    flipud: bool = False
    fliplr: bool = False
    vmin: float | None = None  # natural display range of a pixel, if known
    vmax: float | None = None
    kind: str = field(default="image", init=False)

    def image(self, y: np.ndarray) -> np.ndarray:
        y = np.asarray(y, dtype=np.float64)
        shape = (self.width, self.height) if self.transpose else (self.height, self.width)
        img = y.reshape(shape, order=self.order)
        if self.transpose:
            img = img.T
        if self.flipud:
            img = img[::-1]
        if self.fliplr:
            img = img[:, ::-1]
        return img


@dataclass(frozen=True)
class StickFigureRenderer:
    """Row of J marker positions ``[x0, y0, z0, x1, y1, z1, ...]`` (or, with
    ``layout="blocks"``, ``[x0..xJ, y0..yJ, z0..zJ]``) -> (J, 3) points joined by
    ``connections``. ``up_axis`` says which coordinate points up (0, 1 or 2);
    ``positions`` always returns points with z up (x, y ground plane).
    """

    connections: tuple[tuple[int, int], ...]
    names: tuple[str, ...] | None = None
    layout: str = "interleaved"  # or "blocks"
    up_axis: int = 2
    up_sign: float = 1.0  # -1: the up coordinate grows downwards
    kind: str = field(default="pose", init=False)

    def positions(self, y: np.ndarray) -> np.ndarray:
        y = np.asarray(y, dtype=np.float64)
        J = y.size // 3
        P = y.reshape(J, 3) if self.layout == "interleaved" else y.reshape(3, J).T
        if self.up_axis != 2:
            P = P[:, [a for a in range(3) if a != self.up_axis] + [self.up_axis]]
        if self.up_sign < 0:
            P = P * np.array([1.0, 1.0, -1.0])
        return P


@dataclass(frozen=True)
class Dataset:
    """A loaded data set.

    Y : (N, D) float64, finite or NaN (a missing value: a user's upload may have them).
    labels : (N,) int class index per row, or None; ``label_names[labels[n]]`` names it.
    sequence : (N,) int sequence id per row (motion trials, video), or None.
    times : (N,) float64 time stamp of each row within its sequence, or None.
    renderer : how a row is drawn (see module docstring).
    meta : name, title, licence, citation, urls, description, ... (JSON-able dict).
    views, view_renderers : several views of the same rows (name -> (N, D_v) array, name ->
    renderer), for a multi-view model (``bgplvm.MRD``); Y is one of them. None otherwise.
    """

    name: str
    Y: np.ndarray
    renderer: Any
    labels: np.ndarray | None = None
    label_names: tuple[str, ...] | None = None
    sequence: np.ndarray | None = None
    times: np.ndarray | None = None
    meta: dict = field(default_factory=dict)
    #: several views of the same rows (``bgplvm.MRD``): name -> (N, D_v), and how each is drawn
    views: dict | None = None
    view_renderers: dict | None = None

    def __post_init__(self):
        Y = np.ascontiguousarray(self.Y, dtype=np.float64)
        if Y.ndim != 2:
            raise ValueError(f"Dataset {self.name!r}: Y must be 2-D (N, D), got shape {Y.shape}")
        if np.isinf(Y).any():
            raise ValueError(f"Dataset {self.name!r}: Y contains inf (NaN marks a missing value)")
        object.__setattr__(self, "Y", Y)
        N = Y.shape[0]
        for name, V in (self.views or {}).items():
            if np.shape(V)[0] != N:
                raise ValueError(f"Dataset {self.name!r}: view {name!r} has {np.shape(V)[0]} rows, Y {N}")
        for attr in ("labels", "sequence", "times"):
            v = getattr(self, attr)
            if v is not None:
                v = np.asarray(v)
                if v.shape != (N,):
                    raise ValueError(f"Dataset {self.name!r}: {attr} must have shape ({N},), got {v.shape}")
                object.__setattr__(self, attr, v)

    @property
    def N(self) -> int:
        return self.Y.shape[0]

    @property
    def D(self) -> int:
        return self.Y.shape[1]

    def rows(self, a: int, b: int) -> "Dataset":
        """Rows a..b-1 as a data set of their own (a contiguous window of a video, say):
        labels, sequence ids and times cut alike, times counted from row a, and
        ``meta["rows"] = [a, b]`` recording the cut so that it can be made again."""
        import dataclasses

        sel = slice(int(a), int(b))
        if not 0 <= sel.start < sel.stop <= self.N:
            raise ValueError(f"Dataset {self.name!r}: rows {a}..{b - 1} are not within its {self.N} rows")
        cut = lambda v: None if v is None else v[sel]  # noqa: E731
        return dataclasses.replace(
            self, Y=self.Y[sel], labels=cut(self.labels), sequence=cut(self.sequence),
            times=None if self.times is None else self.times[sel] - self.times[sel.start],
            meta={**self.meta, "rows": [sel.start, sel.stop],
                  "title": f"{self.meta.get('title', self.name)}, frames {sel.start}-{sel.stop - 1}"})
