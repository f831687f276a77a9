"""Pure plot functions: arrays in, HoloViews elements out (no state, no Panel).

The latent view is an overlay of separately updating pieces (background, points,
trajectories, ellipses, cursor marker) so a mouse move only redraws the marker and the
generated output, never the 40 000-pixel background or the N points.
"""

from __future__ import annotations

import numpy as np
import holoviews as hv

from .latent import ard_off_mask, segmentation_roles
from .projection import project

# Colours (Bokeh Category10 and a few UI colours)
CATEGORY = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
            "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]
X_COLOR = "#d62728"    # ARD bar shown on the x axis
Y_COLOR = "#1f77b4"    # ARD bar shown on the y axis
ON_COLOR = "#7f9fbf"   # other active dimensions
OFF_COLOR = "#d9d9d9"  # switched-off dimensions
CURSOR_COLOR = "#e6194b"
INFERRED_COLOR = "#ff8c00"  # what observe-and-infer filled in (bones, reconstruction)
VARIANCE_CMAP = "Greys"  # light = confident, dark = uncertain
TIME_CMAP = "viridis"

LATENT_TITLE = "Latent space"
ARD_TITLE = "ARD relevance"
OUTPUT_TITLE = "Generated output"
TRAIN_TITLE = "Training point"


def _kd(q: int, name: str):
    return hv.Dimension(name, label=f"latent dimension {q}")


# --------------------------------------------------------------------------- ARD
def ard_bars(alpha: np.ndarray, x_dim: int, y_dim: int, sort: bool = False) -> hv.Bars:
    """One bar per latent dimension: alpha_q = 1 / lengthscale_q^2.

    Colour marks the role: x axis (red), y axis (blue), active (grey-blue), switched
    off (light grey, alpha_q below ARD_OFF_FRACTION of the largest; "off" in the
    tooltip). ``sort`` orders the bars by weight, largest first.
    """
    alpha = np.asarray(alpha, dtype=np.float64)
    off = ard_off_mask(alpha)
    order = np.argsort(-alpha, kind="stable") if sort else np.arange(alpha.size)
    rows = []
    for q in order:
        role = "x axis" if q == x_dim else ("y axis" if q == y_dim else ("off" if off[q] else "active"))
        color = {"x axis": X_COLOR, "y axis": Y_COLOR, "off": OFF_COLOR}.get(role, ON_COLOR)
        rows.append((ard_label(int(q), bool(off[q])), float(alpha[q]), role, color, int(q)))
    kd = hv.Dimension("dim", label="latent dimension q")
    return hv.Bars(rows, kdims=[kd],
                   vdims=[hv.Dimension("alpha", label="ARD weight alpha_q"), "role", "color", "q"]
                   ).opts(color="color", line_color="#555555", tools=["hover"], title=ARD_TITLE,
                          # what the bar says, not the columns behind it ("color: #1f77b4", q twice)
                          hover_tooltips=[("dimension", "@dim"), ("ARD weight", "@alpha{%0.3g}"), ("role", "@role")],
                          hover_formatters={"@alpha": "printf"},
                          xlabel="latent dimension q (off: switched off)", ylabel="ARD weight alpha_q")


SHARED_COLOR = "#2ca02c"   # a dimension shared by several views
PRIVATE_COLOR = "#ff7f0e"  # a dimension one view alone uses


def ard_view_bars(relevance: dict, segmentation, x_dim: int, y_dim: int) -> hv.Overlay:
    """One group of bars per view of a multi-view model (``bgplvm.MRD``): each view's
    relative ARD weight alpha_vq / max_q alpha_vq (``MRD.segmentation``'s relevance), the
    fill saying whether dimension q is shared with another view (green), private to this
    view (orange) or off for it (grey), the outline whether it is on the x (red) or y
    (blue) axis; the dashed line is the segmentation's threshold. Bar categories are
    "q view" (a click's category names the dimension first, as ``ard_label``'s)."""
    users = segmentation_roles(segmentation, len(next(iter(relevance.values()))))
    rows = []
    for view, rel in relevance.items():
        on = set(int(q) for q in segmentation.on[view])
        for q, r in enumerate(np.asarray(rel, dtype=np.float64)):
            status = users[q] if q in on else "off for this view"
            fill = OFF_COLOR if q not in on else (SHARED_COLOR if status.startswith("shared") else PRIVATE_COLOR)
            axis = "x axis" if q == x_dim else ("y axis" if q == y_dim else "")
            line = {"x axis": X_COLOR, "y axis": Y_COLOR}.get(axis, "#555555")
            rows.append((f"{q} {view}", float(r), view, status, axis, fill, line, 3.0 if axis else 1.0))
    kd = hv.Dimension("dim", label="latent dimension q, view")
    bars = hv.Bars(rows, kdims=[kd], vdims=[hv.Dimension("relevance", label="alpha / view's largest"), "view",
                                            "status", "axis", "color", "line", "width"]).opts(
        color="color", line_color="line", line_width="width", tools=["hover"], title="ARD relevance per view",
        hover_tooltips=[("dimension, view", "@dim"), ("relative ARD weight", "@relevance{%0.3g}"),
                        ("role", "@status"), ("axis", "@axis")],
        hover_formatters={"@relevance": "printf"}, xrotation=90, ylim=(0, 1.05),
        xlabel="latent dimension q, view",
        ylabel="alpha_q / largest")
    return bars * hv.HLine(segmentation.threshold).opts(color="#444444", line_dash="dashed", line_width=1)


def ard_label(q: int, off: bool) -> str:
    """Category label of bar q: "3", or "3 off" for a switched-off dimension."""
    return f"{q} off" if off else str(q)


# --------------------------------------------------------------------------- latent
def variance_image(var: np.ndarray, bounds, dims: tuple[int, int]) -> hv.Image:
    """The (res, res) predictive-variance grid as an image (row 0 at the bottom)."""
    x0, y0, x1, y1 = bounds
    var = np.maximum(var, np.finfo(float).tiny)  # log colour scale
    lo, hi = float(np.nanmin(var)), float(np.nanmax(var))
    # one value everywhere (a model that explains its data as noise): a decade either side,
    # not a colour scale from v to v (BokehJS drew nothing and warned)
    clim = (lo / 10, hi * 10) if hi <= lo * (1 + 1e-9) else (None, None)
    # hv.Image wants row 0 at the top
    return hv.Image(np.ascontiguousarray(var[::-1]), bounds=(x0, y0, x1, y1),
                    kdims=[_kd(dims[0], "lx"), _kd(dims[1], "ly")],
                    vdims=[hv.Dimension("variance", label="predictive variance")]).opts(
        cmap=VARIANCE_CMAP, colorbar=True, colorbar_position="bottom", alpha=0.85, logz=True, clim=clim,
        colorbar_opts={"title": "variance of f (log scale)"}, tools=[])


def empty_image(bounds, dims) -> hv.Image:
    x0, y0, x1, y1 = bounds
    return hv.Image(np.full((2, 2), np.nan), bounds=(x0, y0, x1, y1),
                    kdims=[_kd(dims[0], "lx"), _kd(dims[1], "ly")],
                    vdims=["variance"]).opts(colorbar=False, tools=[])


def point_table(mu: np.ndarray, dims: tuple[int, int], labels=None, label_names=None,
                sequence=None, times=None, color_mode: str = "none", sequence_names=None) -> dict:
    """Columns for the latent points: lx, ly, index, label (text), group (colour key);
    ``sequence_names`` {id: name} names the sequences (trial names) in the colour key."""
    N = mu.shape[0]
    idx = np.arange(N)
    if labels is not None:
        names = [str(label_names[int(l)]) if label_names is not None and 0 <= int(l) < len(label_names)
                 else str(l) for l in labels]
    else:
        names = ["-"] * N
    if color_mode == "label" and labels is not None:
        group = names
    elif color_mode == "sequence" and sequence is not None:
        seq_names = sequence_names or {}
        group = [seq_names.get(s, f"sequence {s}") for s in np.asarray(sequence).tolist()]  # int or str ids
    elif color_mode == "time" and times is not None:
        group = np.asarray(times, dtype=np.float64)
    else:
        group = ["data"] * N
    return {"lx": mu[:, dims[0]], "ly": mu[:, dims[1]], "index": idx, "label": names, "group": group}


def group_colors(groups) -> dict:
    """{group: colour} for categorical groups, in a stable order (first appearance for
    labels follows the label index because rows are mapped through label_names)."""
    order = sorted(dict.fromkeys(groups), key=_natural_key)
    return {g: CATEGORY[i % len(CATEGORY)] for i, g in enumerate(order)}


def _natural_key(g):
    import re

    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(g))]


def latent_points(mu: np.ndarray, dims: tuple[int, int], labels=None, label_names=None,
                  sequence=None, times=None, color_mode: str = "none", time_unit: str = "s",
                  sequence_names=None) -> hv.Points:
    """Latent means of the two shown dims, coloured by label / sequence / time (``times``
    as shown, in ``time_unit``)."""
    cols = point_table(mu, dims, labels, label_names, sequence, times, color_mode, sequence_names)
    colors = group_colors(cols["group"]) if color_mode in ("label", "sequence") else None
    if colors is not None:
        # rows grouped in the colour key's order: Bokeh's legend lists groups in the order the
        # rows first show them (USPS read "6, 5, 4, 7, 3, 1, 0, 8, 2, 9"); "index" keeps each
        # row's number for the hover
        rank = {g: i for i, g in enumerate(colors)}
        order = np.argsort([rank[g] for g in cols["group"]], kind="stable")
        cols = {k: np.asarray(v)[order] for k, v in cols.items()}
    pts = hv.Points(cols, kdims=[_kd(dims[0], "lx"), _kd(dims[1], "ly")],
                    vdims=[hv.Dimension("index", label="index"), hv.Dimension("label", label="label"),
                           hv.Dimension("group", label={"time": "time", "sequence": "sequence"}.get(color_mode, "class"))])
    dense = mu.shape[0] > 1000  # smaller, lighter points: trajectories stay visible
    # the hover shows the colour key only when it is not the label again (it read
    # "label: run/jog" and "class: run/jog")
    tips = [("index", "@index"), ("label", "@label")] + (
        [("time" if color_mode == "time" else "sequence", "@group")] if color_mode in ("time", "sequence") else [])
    opts = dict(size=4 if dense else 7, line_color="white", line_width=0.3 if dense else 0.6, tools=["hover"],
                hover_tooltips=tips, fill_alpha=0.6 if dense else 0.9)
    if color_mode == "time":
        # on the right: a second colour bar at the bottom, beside the variance one, was
        # dropped by HoloViews (the time colours had no key)
        opts.update(color="group", cmap=TIME_CMAP, colorbar=True, colorbar_position="right",
                    clabel=f"time ({time_unit})", colorbar_opts={"width": 10})
    elif color_mode in ("label", "sequence"):
        opts.update(color="group", cmap=colors,
                    show_legend=True, legend_position="right")
    else:
        opts.update(color="#1f77b4")
    return pts.opts(**opts)


def trajectory_array(mu: np.ndarray, dims: tuple[int, int], sequence=None, times=None) -> np.ndarray:
    """(n, 2) the sequences' latent means in time order, one after the other with a NaN
    row between two sequences (a line breaks at NaN)."""
    parts = []
    if sequence is not None:
        for s in np.unique(sequence):
            sel = np.flatnonzero(sequence == s)
            if times is not None:
                sel = sel[np.argsort(np.asarray(times)[sel], kind="stable")]
            if sel.size > 1:
                parts += [np.column_stack([mu[sel, dims[0]], mu[sel, dims[1]]]), np.full((1, 2), np.nan)]
    return np.vstack(parts[:-1]) if parts else np.zeros((0, 2))


def trajectories(mu: np.ndarray, dims: tuple[int, int], sequence=None, times=None) -> hv.Path:
    """One line per sequence through its latent means, in time order: drawn as a single
    NaN-separated line (HoloViews splits a multi-path element path by path: ~0.5 s for
    CMU's 31 sequences on every new page)."""
    return hv.Path([trajectory_array(mu, dims, sequence, times)], kdims=[_kd(dims[0], "lx"), _kd(dims[1], "ly")]).opts(
        color="#555555", line_width=1, alpha=0.45)


def ellipse_paths(mu: np.ndarray, S: np.ndarray, dims: tuple[int, int], n_sd: float = 2.0,
                  n_vertices: int = 24) -> list[np.ndarray]:
    """Axis-aligned ellipses of q(x_n) (n_sd standard deviations) in the shown dims."""
    t = np.linspace(0, 2 * np.pi, n_vertices)
    c, s = np.cos(t), np.sin(t)
    ax = n_sd * np.sqrt(S[:, dims[0]])
    ay = n_sd * np.sqrt(S[:, dims[1]])
    xs = mu[:, dims[0], None] + ax[:, None] * c
    ys = mu[:, dims[1], None] + ay[:, None] * s
    return [np.column_stack([x, y]) for x, y in zip(xs, ys)]


def latent_ellipses(mu, S, dims) -> hv.Path:
    """All ellipses as one path broken by NaN rows: one Bokeh line. A path per ellipse took
    HoloViews ~4 s to render for CMU's 2,613 points (7 s until drawn in the page)."""
    paths = ellipse_paths(mu, S, dims)
    gap = np.full((1, 2), np.nan)
    one = np.vstack([x for e in paths for x in (e, gap)][:-1]) if paths else np.zeros((0, 2))
    return hv.Path([one], kdims=[_kd(dims[0], "lx"), _kd(dims[1], "ly")]).opts(
        color="#1f77b4", line_width=0.8, alpha=0.35)


def cursor_marker(x: float, y: float, dims) -> hv.Points:
    """The latent point being generated from (a cross)."""
    return hv.Points([(x, y)], kdims=[_kd(dims[0], "lx"), _kd(dims[1], "ly")]).opts(
        marker="x", size=18, color=CURSOR_COLOR, line_width=3, tools=[])


def selected_marker(xy, dims) -> hv.Points:
    """A ring around the selected training point (empty when none)."""
    return hv.Points([xy] if xy is not None else [], kdims=[_kd(dims[0], "lx"), _kd(dims[1], "ly")]).opts(
        marker="circle", size=16, fill_alpha=0, line_color="black", line_width=2.5, tools=[])


# --------------------------------------------------------------------------- outputs
def circle_segments(centres: np.ndarray, radii: np.ndarray, n: int = 20) -> np.ndarray:
    """(len(centres) * n, 4) segments (x0, y0, x1, y1) drawing a circle around each centre."""
    t = np.linspace(0, 2 * np.pi, n + 1)
    c, s = np.cos(t), np.sin(t)
    xs = centres[:, 0, None] + radii[:, None] * c
    ys = centres[:, 1, None] + radii[:, None] * s
    return np.column_stack([xs[:, :-1].ravel(), ys[:, :-1].ravel(), xs[:, 1:].ravel(), ys[:, 1:].ravel()])


def pose_data(P: np.ndarray, connections, azimuth: float, elevation: float, spread=None) -> dict:
    """Screen-space arrays of a stick figure: ``bones`` (B, 4) segments, ``joints``
    (J, 2) and ``circles`` (J * 20, 4) segments of 2-sd circles (empty without spread)."""
    P = np.asarray(P, dtype=np.float64).reshape(-1, 3)
    if len(P):
        P = P - P.mean(axis=0) * np.array([1, 1, 0])  # centre on the ground plane
    uv = project(P, azimuth, elevation)
    idx = np.asarray(connections, dtype=int).reshape(-1, 2)
    bones = np.column_stack([uv[idx[:, 0]], uv[idx[:, 1]]]) if len(uv) else np.zeros((0, 4))
    circles = circle_segments(uv, 2 * np.asarray(spread)) if spread is not None else np.zeros((0, 4))
    return {"bones": bones, "joints": uv, "circles": circles}


def segments_columns(seg: np.ndarray) -> dict:
    """Bokeh data-source columns of a Segments element with kdims u, v, u1, v1."""
    return {"u": seg[:, 0], "v": seg[:, 1], "u1": seg[:, 2], "v1": seg[:, 3]}


def pose_plot(P: np.ndarray, connections, azimuth: float, elevation: float, spread=None,
              limits=None, title: str = OUTPUT_TITLE, color: str = "#1f3b73") -> hv.Overlay:
    """Stick figure of (J, 3) z-up positions, projected at the view angle; ``spread``
    (J,) draws a 2-sd circle around each joint (its predictive spread). Layers, in
    order: circles, bones, joints (all single elements, cheap to update)."""
    d = pose_data(P, connections, azimuth, elevation, spread)
    kd = [hv.Dimension("u", label="screen x"), hv.Dimension("v", label="screen z")]
    seg_kd = kd + ["u1", "v1"]
    # circles as one Segments element (a multi-path Path is ~50x slower to update)
    circles = hv.Segments(d["circles"], kdims=seg_kd).opts(color="#e6194b", alpha=0.6, line_width=1.5)
    bones = hv.Segments(d["bones"], kdims=seg_kd).opts(color=color, line_width=4)
    joints = hv.Points(d["joints"], kdims=kd).opts(color=color, size=6)
    opts = dict(title=title)
    if limits is not None:
        x0, y0, x1, y1 = limits
        opts.update(xlim=(x0, x1), ylim=(y0, y1))
    return hv.Overlay([circles, bones, joints]).opts(**opts)


def spread_columns(d: np.ndarray, mean: np.ndarray, half_width: np.ndarray) -> dict:
    """Bokeh data-source columns (a closed patch) of a Spread element."""
    return {"x": np.concatenate([d, d[::-1]]),
            "y": np.concatenate([mean + half_width, (mean - half_width)[::-1]])}


#: colour of missing pixels (NaN) in a data set's own images: not a grey of the scale
MISSING_COLOR = "#e000a0"


def image_plot(img: np.ndarray, title: str, vmin=None, vmax=None, cmap: str = "gray",
               label: str = "intensity", log: bool = False, missing_color: str | None = None) -> hv.Image:
    """An (H, W) upright image with pixel bounds, fixed colour range when given (``log``: a
    log colour scale). NaN pixels are transparent, or ``missing_color`` (missing data)."""
    H, W = img.shape
    im = hv.Image(np.ascontiguousarray(img), bounds=(0, 0, W, H),
                  kdims=[hv.Dimension("col", label="column"), hv.Dimension("row", label="row")],
                  vdims=[hv.Dimension("value", label=label)])
    clim = (vmin, vmax) if vmin is not None and vmax is not None else (None, None)
    extra = {}
    if log and vmin is not None and vmax is not None and 0 < vmin < vmax:
        # ticks at the decades in range (Bokeh's own log ticks on a short bar were "10, 5")
        from bokeh.models import FixedTicker, PrintfTickFormatter

        dec = 10.0 ** np.arange(np.ceil(np.log10(vmin)), np.floor(np.log10(vmax)) + 1)
        # "0.01", "0.001" ("1.000e-2" by default)
        extra["colorbar_opts"] = {"ticker": FixedTicker(ticks=[float(v) for v in dec]),
                                  "formatter": PrintfTickFormatter(format="%g")}
    if missing_color is not None:
        extra["clipping_colors"] = {"NaN": missing_color}
    return im.opts(cmap=cmap, clim=clim, title=title, xaxis=None, yaxis=None, logz=log,
                   colorbar=True, tools=["hover"], **extra)


def vector_plot(mean: np.ndarray, std=None, train=None, title: str = OUTPUT_TITLE, ylim=None) -> hv.Overlay:
    """Output vector (D,) against its index, with a +-2 sd band and the selected training
    row (NaN when none). Layers, in order: band, mean, training row."""
    d = np.arange(mean.size)
    kd = hv.Dimension("d", label="output dimension")
    vd = hv.Dimension("y", label="value")
    std = np.zeros_like(mean) if std is None else np.asarray(std)
    train = np.full_like(mean, np.nan) if train is None else np.asarray(train)
    # short labels: the legend is one row over a 270-px figure ("generated +-2 sd",
    # "generated", "training point" were cut to "tra" beside the player's figure)
    layers = [
        hv.Spread((d, mean, 2 * std), kdims=[kd], vdims=[vd, "err"],
                  label="\u00b12 sd").opts(color="#e6194b", alpha=0.25),
        hv.Curve((d, mean), kdims=[kd], vdims=[vd], label="mean").opts(color="#e6194b", line_width=2),
        hv.Scatter((d, train), kdims=[kd], vdims=[vd], label="training point").opts(
            color="black", size=6, marker="diamond"),
    ]
    # one row above the plot: inside it, the legend sat on the curve (oil, uploads)
    from bokeh.models import BasicTicker

    opts = dict(title=title, legend_position="top", legend_cols=3,
                legend_opts={"label_text_font_size": "8pt", "glyph_height": 12, "padding": 2,
                             "margin": 0, "border_line_alpha": 0},
                xticks=BasicTicker(min_interval=1))  # whole dimensions (5 outputs had ticks at 0.5)
    if ylim is not None:
        opts.update(ylim=tuple(ylim))
    return hv.Overlay(layers).opts(**opts)


def bound_curve(history) -> hv.Curve:
    """Bound (ELBO) against iteration for a fit in progress."""
    data = [(it, b) for it, b, _ in history] if history else []
    return hv.Curve(data, kdims=[hv.Dimension("iteration")], vdims=[hv.Dimension("bound", label="lower bound")]).opts(
        color="#1f77b4", line_width=2, title="Training progress", framewise=True)
