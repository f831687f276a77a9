"""The latent points of a large model, drawn through Datashader.

Above ``RASTER_ABOVE`` points a scatter of glyphs is too much for the browser (1e5 points
are ~8 MB of columns sent to the page and a seconds-long repaint at each pan; 1e6 do not
draw at all). ``latent_density`` aggregates them into an image of the view's pixels
instead (HoloViews' ``rasterize``, re-aggregated on the server at each zoom or pan): a
count per pixel, per class (``count_cat``: one colour per class, mixed where they overlap)
or the mean time stamp per pixel. What the page receives no longer grows with N.

Pure: arrays in, a HoloViews object out (like ``plots``).
"""

from __future__ import annotations

import numpy as np
import holoviews as hv

from .plots import CATEGORY, TIME_CMAP, _kd, _natural_key

#: more latent points than this are rasterised (a few tens of thousands: the scatter
#: still pans smoothly at 2e4 points in Chromium; at 5e4 a pan took > 1 s)
RASTER_ABOVE = 20_000

#: the count image's colours: light for few points, dark for many (on the grey variance
#: background; zero counts are transparent)
COUNT_CMAP = ["#c6dbef", "#6baed6", "#2171b5", "#08306b"]


def is_large(n_points: int) -> bool:
    return int(n_points) > RASTER_ABOVE


def categories(color_mode: str, labels=None, label_names=None, sequence=None,
               sequence_names=None) -> tuple[np.ndarray, list[str]] | None:
    """(codes (N,), names) of the points' classes (labels or sequences), vectorised (a
    name per row, as ``plots.point_table`` makes them, takes seconds at 1e6 rows); None
    when the points are not coloured by a class."""
    if color_mode == "label" and labels is not None:
        keys, codes = np.unique(np.asarray(labels), return_inverse=True)
        names = [str(label_names[int(k)]) if label_names is not None and 0 <= int(k) < len(label_names)
                 else str(k) for k in keys]
    elif color_mode == "sequence" and sequence is not None:
        keys, codes = np.unique(np.asarray(sequence), return_inverse=True)
        sn = sequence_names or {}
        names = [str(sn.get(k.item() if hasattr(k, "item") else k, f"sequence {k}")) for k in keys]
    else:
        return None
    order = sorted(range(len(names)), key=lambda i: _natural_key(names[i]))  # as the scatter's key
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return rank[codes.ravel()], [names[i] for i in order]


#: classes named in the legend of a per-class density image (the first ones, in key order)
KEY_CLASSES = 20


def class_key(names, dims: tuple[int, int]) -> hv.Overlay:
    """The legend of a per-class density image (an ``ImageStack`` draws none): one point
    per class, in its colour, at NaN (drawn nowhere; an empty element left its legend entry
    without a swatch)."""
    kdims = [_kd(dims[0], "lx"), _kd(dims[1], "ly")]
    return hv.Overlay([hv.Points([(np.nan, np.nan)], kdims=kdims, label=str(n)).opts(color=CATEGORY[i % len(CATEGORY)], size=8,
                                                                      tools=[])
                       for i, n in enumerate(list(names)[:KEY_CLASSES])])


def latent_density(mu: np.ndarray, dims: tuple[int, int], labels=None, label_names=None,
                   sequence=None, times=None, color_mode: str = "none", time_unit: str = "s",
                   sequence_names=None):
    """The latent means of ``dims`` rasterised (a DynamicMap re-aggregated at each zoom):
    per class with one colour each, by mean time, or as counts (module docstring)."""
    import datashader as ds
    import pandas as pd
    from holoviews.operation.datashader import rasterize

    kdims = [_kd(dims[0], "lx"), _kd(dims[1], "ly")]
    cols = {"lx": np.ascontiguousarray(mu[:, dims[0]]), "ly": np.ascontiguousarray(mu[:, dims[1]])}
    cats = categories(color_mode, labels, label_names, sequence, sequence_names)
    if cats is not None:
        codes, names = cats
        cols["group"] = pd.Categorical.from_codes(codes, categories=names)
        pts = hv.Points(pd.DataFrame(cols), kdims=kdims, vdims=["group"])
        img = rasterize(pts, aggregator=ds.count_cat("group"), dynamic=True)
        return img.opts(cmap=[CATEGORY[i % len(CATEGORY)] for i in range(len(names))], tools=["hover"],
                        legend_position="right")
    if color_mode == "time" and times is not None:
        cols["time"] = np.asarray(times, dtype=np.float64)
        pts = hv.Points(pd.DataFrame(cols), kdims=kdims, vdims=[hv.Dimension("time", label=f"time ({time_unit})")])
        img = rasterize(pts, aggregator=ds.mean("time"), dynamic=True)
        return img.opts(cmap=TIME_CMAP, colorbar=True, colorbar_position="right", clabel=f"mean time ({time_unit})",
                        colorbar_opts={"width": 10}, tools=["hover"])
    pts = hv.Points(pd.DataFrame(cols), kdims=kdims)
    img = rasterize(pts, aggregator=ds.count(), dynamic=True)
    return img.opts(cmap=COUNT_CMAP, cnorm="eq_hist", colorbar=True, colorbar_position="right",
                    clabel="latent means per pixel", colorbar_opts={"width": 10}, tools=["hover"], clipping_colors={"min": "transparent"})


# --- exported figures (``export.latent_figure``): the same picture without Datashader ---------
def _hex_rgb(colours) -> np.ndarray:
    return np.array([[int(c[k:k + 2], 16) for k in (1, 3, 5)] for c in colours], dtype=np.float64)


def _ramp(t: np.ndarray, colours) -> np.ndarray:
    """(n, 3) colours along ``colours`` (hex) at t in [0, 1], linearly interpolated."""
    stops = _hex_rgb(colours)
    pos = np.clip(t, 0.0, 1.0) * (len(stops) - 1)
    i = np.minimum(pos.astype(np.int64), len(stops) - 2)
    f = (pos - i)[:, None]
    return stops[i] * (1 - f) + stops[i + 1] * f


def density_rgba(x: np.ndarray, y: np.ndarray, bounds, shape: tuple[int, int], codes=None,
                 values=None, values_palette=None) -> np.ndarray:
    """(h, w, 4) uint8 image of the points (x, y) in ``bounds`` (x0, y0, x1, y1), row 0 at
    the top; empty pixels transparent, opacity rising with the log count. Colour: the mix
    of the classes' colours (``codes`` (N,) into ``CATEGORY``, as ``count_cat``), the mean
    of ``values`` through ``values_palette`` ((256, 3), low values first), or a ramp of the
    count (``COUNT_CMAP``)."""
    x0, y0, x1, y1 = bounds
    h, w = shape
    ix = np.floor((np.asarray(x) - x0) / ((x1 - x0) or 1.0) * w).astype(np.int64)
    iy = np.floor((y1 - np.asarray(y)) / ((y1 - y0) or 1.0) * h).astype(np.int64)
    ok = (ix >= 0) & (ix < w) & (iy >= 0) & (iy < h)
    flat = iy[ok] * w + ix[ok]
    count = np.bincount(flat, minlength=h * w).astype(np.float64)
    has = count > 0
    rgb = np.zeros((h * w, 3))
    if codes is not None:
        palette = _hex_rgb(CATEGORY)[np.asarray(codes)[ok] % len(CATEGORY)]
        for k in range(3):
            rgb[has, k] = np.bincount(flat, weights=palette[:, k], minlength=h * w)[has] / count[has]
    elif values is not None:
        v = np.asarray(values, dtype=np.float64)
        lo, hi = float(np.min(v)), float(np.max(v))
        mean = np.bincount(flat, weights=v[ok], minlength=h * w)[has] / count[has]
        rgb[has] = np.asarray(values_palette)[np.clip(((mean - lo) / ((hi - lo) or 1.0) * 255).astype(int), 0, 255)]
    else:
        rgb[has] = _ramp(np.log1p(count[has]) / np.log1p(count.max()), COUNT_CMAP)
    alpha = np.zeros(h * w)
    alpha[has] = 0.45 + 0.55 * np.log1p(count[has]) / np.log1p(max(count.max(), 1.0))
    out = np.concatenate([rgb, 255 * alpha[:, None]], axis=1)
    return np.clip(np.round(out), 0, 255).astype(np.uint8).reshape(h, w, 4)


def warm() -> None:
    """Draw a small table once in each colouring: Datashader compiles its Numba kernels at
    their first use in a process (~4 s on 2 cores, import included), which would otherwise
    fall on the first large model's page (``explorer.warm`` calls this at server start)."""
    rng = np.random.default_rng(0)
    mu = rng.standard_normal((1000, 2))
    for mode, kw in (("none", {}), ("label", {"labels": np.arange(1000) % 3}), ("time", {"times": np.arange(1000.0)})):
        hv.render(latent_density(mu, (0, 1), color_mode=mode, **kw))
