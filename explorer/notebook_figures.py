"""Small static figures for notebooks and the user guide, as PNG bytes (Pillow, no matplotlib).

Each function returns a ``PNG``: ``bytes`` that a notebook shows as an image when it is a
cell's value (it has ``_repr_png_``), that ``IPython.display.Image(data=png)`` shows too,
and that can be written to a file (``open("f.png", "wb").write(png)``). They are drawn with
the explorer's figure code (``bgplvm.explorer.figures``), like its exports.

- ``ard_bars(weights)``: the ARD weights alpha_q = 1 / lengthscale_q^2, one bar per latent
  dimension;
- ``latent_scatter(X, labels)``: two latent dimensions of q(X)'s means (by default the two
  of largest ARD weight when ``ard=`` is given), coloured by class;
- ``line_band(x, mean, sd, truth=...)``: a curve with its +- k sd band (a forecast, a
  latent coordinate against time), optionally the truth and a vertical marker;
- ``image_row(images, shape)``: images (e.g. frames and their reconstructions) side by side.
"""

from __future__ import annotations

import numpy as np

from .figures import Axes, PngCanvas, colormap

#: class colours (Bokeh's Category10, as the explorer's latent view)
COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf"]


class PNG(bytes):
    """PNG file bytes that show as an image in a notebook."""

    def _repr_png_(self) -> bytes:
        return bytes(self)

    def __repr__(self) -> str:
        w, h = int.from_bytes(self[16:20], "big"), int.from_bytes(self[20:24], "big")
        return f"<PNG {w} x {h} px, {len(self) / 1024:.0f} KiB>"


def _padded(lo: float, hi: float, frac: float = 0.06) -> tuple[float, float]:
    span = hi - lo if hi > lo else max(abs(hi), 1.0)
    return lo - frac * span, hi + frac * span


def ard_bars(weights, title: str = "ARD weights", ylabel: str = "alpha_q", width: int = 520,
             height: int = 280) -> PNG:
    """A bar per latent dimension q of ``weights`` (Q,), labelled 0..Q-1 as ``summary()``
    and the explorer number them."""
    w = np.asarray(weights, dtype=float).ravel()
    if w.size == 0 or not np.all(np.isfinite(w)):
        raise ValueError(f"ard_bars needs finite weights, got {w!r}")
    c = PngCanvas(width, height)
    top = float(w.max()) * 1.08 or 1.0
    ax = Axes(c, (70, 36, width - 90, height - 96), (-0.6, w.size - 0.4), (0.0, top))
    for q, v in enumerate(w):
        x0, x1 = float(ax.px(q - 0.35)), float(ax.px(q + 0.35))
        y0 = float(ax.py(v))
        c.rect(x0, y0, x1 - x0, float(ax.py(0.0)) - y0, fill=COLOURS[0], stroke="#1f4e79", width=0.6)
    step = max(1, int(np.ceil(w.size / 20)))
    ax.frame(title=title, xlabel="latent dimension q", ylabel=ylabel,
             xcats=[(q, str(q)) for q in range(0, w.size, step)])
    return PNG(c.to_bytes())


def latent_scatter(X, labels=None, label_names=None, dims=None, ard=None, variance=None,
                   title: str = "latent space", size: int = 460, max_points: int = 5000) -> PNG:
    """Two columns of ``X`` (N, Q) as points, coloured by ``labels`` (N,) when given.

    ``dims``: the two columns (default: the two of largest ``ard`` weight when ``ard`` (Q,)
    is given, else 0 and 1). ``variance`` (N, Q): each point's q(x_n) variance, drawn as a
    faint circle of 2 sd (the mean of the two dimensions' variances). ``label_names`` maps a
    label to its legend text (a list indexed by label, or a dict). At most ``max_points``
    points are drawn (an even subsample).
    """
    X = np.asarray(X, dtype=float)
    if X.ndim != 2 or X.shape[1] < 1:
        raise ValueError(f"latent_scatter needs X of shape (N, Q), got {X.shape}")
    if dims is None:
        dims = tuple(np.argsort(np.asarray(ard, float))[::-1][:2]) if ard is not None else (0, 1)
    dims = tuple(int(d) for d in dims)
    if X.shape[1] == 1:
        X, dims = np.c_[X, np.zeros(len(X))], (0, 1)
    sel = np.arange(len(X))
    if len(X) > max_points:
        sel = np.linspace(0, len(X) - 1, max_points).round().astype(int)
    P = X[sel][:, list(dims)]
    legend_w = 0
    cats, colour_of = [], {}
    if labels is not None:
        lab = np.asarray(labels)[sel]
        cats = list(dict.fromkeys(np.unique(lab).tolist()))
        colour_of = {v: COLOURS[i % len(COLOURS)] for i, v in enumerate(cats)}

        def name(v):
            if label_names is None:
                return str(v)
            try:
                return str(label_names[v])
            except (KeyError, IndexError, TypeError):
                return str(v)

        items = [(name(v), colour_of[v]) for v in cats]
        legend_w = Axes.legend_width(items) + 16
    c = PngCanvas(size + legend_w, size)
    xlim, ylim = _padded(*np.nanpercentile(P[:, 0], [0, 100])), _padded(*np.nanpercentile(P[:, 1], [0, 100]))
    ax = Axes(c, (66, 36, size - 90, size - 96), xlim, ylim, equal=True)
    ax.clip()
    if variance is not None:
        sd = np.sqrt(np.asarray(variance, float)[sel][:, list(dims)].mean(axis=1))
        scale = ax.w / (ax.xlim[1] - ax.xlim[0])
        for (x, y), s in zip(ax.pts(P), sd):
            c.circle(x, y, 2 * s * scale, stroke="#bbbbbb", width=0.5, opacity=0.4)
    for i, (x, y) in enumerate(ax.pts(P)):
        col = colour_of[lab[i]] if labels is not None else COLOURS[0]
        c.circle(x, y, 2.6, fill=col, opacity=0.85)
    ax.unclip()
    ax.frame(title=title, xlabel=f"latent dimension {dims[0]}", ylabel=f"latent dimension {dims[1]}")
    if labels is not None:
        ax.legend(items, x=ax.x + ax.w + 14, y=ax.y)
    return PNG(c.to_bytes())


def line_band(x, mean, sd=None, truth=None, k: float = 2.0, marker=None, title: str = "",
              xlabel: str = "", ylabel: str = "", labels=("mean", "truth"), width: int = 620,
              height: int = 300) -> PNG:
    """``mean`` (n,) against ``x`` (n,) with a band of +- ``k`` x ``sd`` (n,) when given.

    ``truth`` (n,) is drawn as dark dots (NaN: not drawn); ``marker`` an x position with a
    vertical grey line (e.g. where the training data end and a forecast begins).
    """
    x, mean = np.asarray(x, float).ravel(), np.asarray(mean, float).ravel()
    if x.shape != mean.shape:
        raise ValueError(f"x and mean differ in shape: {x.shape} and {mean.shape}")
    lo = hi = mean
    if sd is not None:
        sd = np.asarray(sd, float).ravel()
        lo, hi = mean - k * sd, mean + k * sd
    ys = [lo, hi] + ([np.asarray(truth, float).ravel()] if truth is not None else [])
    yall = np.concatenate(ys)
    yall = yall[np.isfinite(yall)]
    c = PngCanvas(width, height)
    ax = Axes(c, (72, 36, width - 96, height - 96), _padded(x.min(), x.max(), 0.02),
              _padded(float(yall.min()), float(yall.max())))
    ax.clip()
    if sd is not None:
        pts = ax.pts(np.c_[x, hi]) + ax.pts(np.c_[x[::-1], lo[::-1]])
        c.polygon(pts, COLOURS[0], opacity=0.2)
    c.polyline(ax.pts(np.c_[x, mean]), COLOURS[0], width=1.6)
    items = [(labels[0] + (f" +- {k:g} sd" if sd is not None else ""), COLOURS[0])]
    if truth is not None:
        tr = np.asarray(truth, float).ravel()
        ok = np.isfinite(tr)
        for px, py in ax.pts(np.c_[x[ok], tr[ok]]):
            c.circle(px, py, 2.0, fill="#222222")
        items.append((labels[1], "#222222"))
    if marker is not None:
        X = float(ax.px(marker))
        c.polyline([(X, ax.y), (X, ax.y + ax.h)], "#888888", width=1.0)
    ax.unclip()
    ax.frame(title=title or None, xlabel=xlabel or None, ylabel=ylabel or None)
    ax.legend(items, x=ax.x + ax.w - Axes.legend_width(items) - 8)
    return PNG(c.to_bytes())


def image_row(images, shape, titles=None, cmap: str = "gray", vmin=None, vmax=None,
              cell_h: int = 110, order: str = "C") -> PNG:
    """Rows of pixel values ``images`` (n, H * W) (or (n, H, W)) side by side, each
    reshaped to ``shape`` (H, W) in ``order`` ("C": row-major, "F": column-major); NaN
    pixels are drawn magenta, as in the explorer. One grey scale for all (``vmin``/``vmax``,
    default their range)."""
    ims = [np.asarray(im, float).reshape(shape, order=order) for im in images]
    if not ims:
        raise ValueError("image_row needs at least one image")
    finite = np.concatenate([im[np.isfinite(im)] for im in ims] + [np.zeros(0)])
    lo = float(vmin) if vmin is not None else (float(finite.min()) if finite.size else 0.0)
    hi = float(vmax) if vmax is not None else (float(finite.max()) if finite.size else 1.0)
    H, W = shape
    cell_w = int(round(cell_h * W / H))
    gap, top = 8, 26 if titles else 6
    c = PngCanvas(len(ims) * (cell_w + gap) + gap, cell_h + top + 8)
    for j, im in enumerate(ims):
        x = gap + j * (cell_w + gap)
        rgb = colormap(im, cmap, lo, hi, nan_rgb=(255, 0, 255))
        c.image(x, top, cell_w, cell_h, rgb)
        c.rect(x, top, cell_w, cell_h, stroke="#888888", width=0.6)
        if titles:
            c.text(x + cell_w / 2, 16, str(titles[j]), size=11, anchor="middle")
    return PNG(c.to_bytes())
