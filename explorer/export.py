"""Exports for papers: the latent view, the ARD chart and the generated output as PNG
or SVG (drawn by ``figures.py``, no browser needed), and the latent coordinates as CSV
or NPZ. Everything is returned as bytes and delivered as a browser download; nothing is
written on the server.
"""

from __future__ import annotations

import csv
import io

import numpy as np
import panel as pn
import param

from . import plots
from . import sequences as seqs
from .density import categories, density_rgba, is_large
from .figures import Axes, PngCanvas, colormap, new_canvas, palette
from .latent import ard_off_mask, variance_grid
from .loading import label_text
from .masks import hidden_bones
from .sequences import pose_spread
from .state import ExplorerState
from .user_input import UserError


#: RGB of missing pixels in exported images (``plots.MISSING_COLOR``)
_MISSING_RGB = tuple(int(plots.MISSING_COLOR[k:k + 2], 16) for k in (1, 3, 5))


def _need_model(state: ExplorerState):
    if state.model is None:
        raise UserError("nothing to export yet: train or open a model first")
    return state.model


# --------------------------------------------------------------------------- figures
def _point_colours(mu, dims, ds, mode: str, sequence_names) -> tuple[list, list]:
    """(a colour per point, legend [(class, colour)]) as on screen (``plots.latent_points``)."""
    cols = plots.point_table(mu, dims, ds.labels, ds.label_names, ds.sequence, ds.times, mode, sequence_names)
    if mode == "time":
        rgb = colormap(np.asarray(cols["group"], dtype=float), "viridis")
        return ["#%02x%02x%02x" % tuple(v) for v in rgb], []
    if mode in ("label", "sequence"):
        cmap = plots.group_colors(cols["group"])  # the same colours as on screen
        # in the page legend's order (first appearance in the data), at most 12
        return [cmap[g] for g in cols["group"]], [(g, cmap[g]) for g in dict.fromkeys(cols["group"])][:12]
    return ["#1f77b4"] * mu.shape[0], []


def _class_legend(cats) -> list:
    """The legend of a density image's classes (``density.categories``), at most 12."""
    if cats is None:
        return []
    return [(g, plots.CATEGORY[i % len(plots.CATEGORY)]) for i, g in enumerate(cats[1])][:12]


def latent_figure(state: ExplorerState, fmt: str = "png", res: int = 200) -> bytes:
    """Latent means in the shown dims over the predictive-variance background."""
    m = _need_model(state)
    ds = state.dataset
    dims = state.dims
    mu, S = state.latent()
    x0, y0, x1, y1 = state.bounds()
    mode = state.color_mode()
    large = is_large(mu.shape[0])
    names = seqs.sequence_names(ds) if mode == "sequence" else None
    cats = categories(mode, ds.labels, ds.label_names, ds.sequence, names) if large else None
    colours, legend = (None, _class_legend(cats)) if large else _point_colours(mu, dims, ds, mode, names)
    W, H = 640, 520
    box = (70, 40, 440, 420)  # the data area: x, y, width, height
    legend_x = box[0] + box[2] + (112 if state.show_variance else 16)
    if legend:  # right of the colour bar, outside the data, and just as wide as it needs
        W = legend_x + Axes.legend_width(legend) + 16
    elif mode == "time":
        W += 110  # the time colour bar beside the variance one (its labels were cut off)
    c = new_canvas(fmt, W, H)
    ax = Axes(c, box, (x0, x1), (y0, y1))
    ax.clip()
    var = None
    if state.show_variance:
        var = variance_grid(m, np.asarray(state.fixed), dims, (x0, y0, x1, y1), res)
        logv = np.log10(np.maximum(var, np.finfo(float).tiny))
        c.image(ax.x, ax.y, ax.w, ax.h, colormap(logv[::-1], "Greys"))
    if large:
        times = seqs.seconds(ds, ds.times) if mode == "time" else None
        c.image(ax.x, ax.y, ax.w, ax.h, density_rgba(
            mu[:, dims[0]], mu[:, dims[1]], (x0, y0, x1, y1), (2 * int(ax.h), 2 * int(ax.w)),
            codes=None if cats is None else cats[0], values=times, values_palette=palette("viridis")))
    if state.show_trajectories and ds.sequence is not None and not large:
        for s in np.unique(ds.sequence):
            sel = np.flatnonzero(ds.sequence == s)
            if ds.times is not None:
                sel = sel[np.argsort(ds.times[sel], kind="stable")]
            c.polyline(ax.pts(mu[sel][:, dims]), "#555555", width=1, opacity=0.45)
    if state.show_uncertainty and not large:
        for e in plots.ellipse_paths(mu, S, dims):
            c.polyline(ax.pts(e), "#1f77b4", width=0.8, opacity=0.35)
    if not large:
        px, py = ax.px(mu[:, dims[0]]), ax.py(mu[:, dims[1]])
        for X, Y, col in zip(px.tolist(), py.tolist(), colours):
            c.circle(X, Y, 3.5, fill=col, stroke="white", width=0.6, opacity=0.9)
    if state.selected_index >= 0:
        n = state.selected_index
        c.circle(float(ax.px(mu[n, dims[0]])), float(ax.py(mu[n, dims[1]])), 8, stroke="black", width=2)
    cx, cy = float(ax.px(state.cursor[0])), float(ax.py(state.cursor[1]))
    for d in (-1, 1):
        c.polyline([(cx - 7, cy - 7 * d), (cx + 7, cy + 7 * d)], plots.CURSOR_COLOR, width=3)
    ax.unclip()
    ax.frame(title=f"{plots.LATENT_TITLE}: {state.dataset_name}",
             xlabel=f"latent dimension {dims[0]}", ylabel=f"latent dimension {dims[1]}")
    if var is not None:
        ax.colorbar("Greys", float(logv.min()), float(logv.max()), "log10 predictive variance of f")
    if legend:
        ax.legend(legend, x=legend_x, y=ax.y)
    if mode == "time":
        ts = seqs.seconds(ds, ds.times)
        ax.colorbar("viridis", float(np.min(ts)), float(np.max(ts)), f"time ({seqs.time_unit(ds)})",
                    x=ax.x + ax.w + (96 if var is not None else 16))
    return c.to_bytes()


def ard_figure(state: ExplorerState, fmt: str = "png") -> bytes:
    """One bar per latent dimension; switched-off ones light grey and marked "off"."""
    m = _need_model(state)
    alpha = np.asarray(m.ard_weights, dtype=float)
    off = ard_off_mask(alpha)
    Q = alpha.size
    order = np.argsort(-alpha, kind="stable") if state.sort_ard else np.arange(Q)
    W, H = 120 + 40 * max(Q, 4), 340
    c = new_canvas(fmt, W, H)
    top = float(alpha.max()) * 1.08 or 1.0
    ax = Axes(c, (80, 40, W - 110, 230), (-0.5, Q - 0.5), (0.0, top))
    for pos, q in enumerate(order):
        col = (plots.X_COLOR if q == state.x_dim else plots.Y_COLOR if q == state.y_dim
               else plots.OFF_COLOR if off[q] else plots.ON_COLOR)
        X0, X1 = float(ax.px(pos - 0.38)), float(ax.px(pos + 0.38))
        Y0, Y1 = float(ax.py(alpha[q])), float(ax.py(0))
        c.rect(X0, Y0, X1 - X0, max(Y1 - Y0, 0.5), fill=col, stroke="#555555", width=0.8)
        if off[q]:
            c.text((X0 + X1) / 2, float(ax.py(0.04 * top)), "off", size=10, color="#888888", anchor="middle")
    ax.frame(title=plots.ARD_TITLE, xlabel="latent dimension q", ylabel="ARD weight alpha_q",
             xcats=[(pos, str(int(q))) for pos, q in enumerate(order)])
    return c.to_bytes()


def _pose_axes(c, box, P, connections, azimuth, elevation, spread, title, lim, colour):
    ax = Axes(c, box, (-lim, lim), (-lim, lim), equal=True)
    uv = plots.project(P, azimuth, elevation)
    ax.clip()
    if spread is not None:
        t = np.linspace(0, 2 * np.pi, 32)
        for (u, v), s in zip(uv, spread):
            c.polyline(ax.pts(np.column_stack([u + 2 * s * np.cos(t), v + 2 * s * np.sin(t)])),
                       plots.CURSOR_COLOR, width=1.2, opacity=0.6)
    for i, j in connections:
        c.polyline(ax.pts(uv[[i, j]]), colour, width=3.5)
    for X, Y in ax.pts(uv):
        c.circle(X, Y, 3, fill=colour)
    ax.unclip()
    ax.frame(title=title, xticks=False, yticks=False)


def output_figure(state: ExplorerState, fmt: str = "png") -> bytes:
    """The generated output at the cursor with its uncertainty (and the selected
    training point, if any)."""
    _need_model(state)
    ds = state.dataset
    r = ds.renderer
    mean, var = state.generate()
    std = np.sqrt(np.maximum(var, 0))
    x, y = state.cursor
    where = f"at x{state.x_dim}={x:.2f}, x{state.y_dim}={y:.2f}"
    n = state.selected_index
    kind = getattr(r, "kind", "vector")
    if kind == "pose":
        def centred(P):
            return P - np.array([P[:, 0].mean(), P[:, 1].mean(), zc])
        sub = ds.Y[:: max(1, len(ds.Y) // 300)]
        Ps = np.stack([r.positions(v) for v in sub])
        zc = 0.5 * (Ps[..., 2].min() + Ps[..., 2].max())
        C = Ps.copy()
        C[..., :2] -= Ps[..., :2].mean(axis=1, keepdims=True)
        C[..., 2] -= zc
        lim = float(np.sqrt((C ** 2).sum(-1)).max()) * 1.05
        panels = 2 if n >= 0 else 1
        c = new_canvas(fmt, 20 + 340 * panels, 400)
        _pose_axes(c, (20, 40, 320, 320), centred(r.positions(mean)), r.connections, state.azimuth,
                   state.elevation, pose_spread(r, mean, var), f"Generated {where}", lim, "#1f3b73")
        c.text(180, 385, "red circles: 2 sd of each joint", size=11, anchor="middle", color="#666666")
        if n >= 0:
            _pose_axes(c, (360, 40, 320, 320), centred(r.positions(ds.Y[n])), r.connections, state.azimuth,
                       state.elevation, None, f"Training point #{n}", lim, "#333333")
        return c.to_bytes()
    if kind == "image":
        img, sd = r.image(mean), r.image(seqs.f_sd(state.model, var))
        vmin, vmax = seqs.image_range(ds)
        Hh, Ww = img.shape
        ph = 300
        pw = ph * Ww / Hh
        lo, hi = np.log10(seqs.sd_range(state.model))
        panels = [(img, "gray", vmin, vmax, "Generated", "intensity"),  # where: below (a narrow panel)
                  (_log_sd(sd, lo), "magma", lo, hi, f"Per-pixel sd (max {sd.max():.3g})", "log10 sd of f")]
        if n >= 0:
            own = r.image(ds.Y[n])
            holes = int(np.isnan(own).sum())
            panels.append((own, "gray", vmin, vmax, f"Training point #{n}" + (f" ({holes} missing)" if holes else ""),
                           "intensity"))
        step = pw + 110
        c = new_canvas(fmt, int(20 + step * len(panels)), ph + 70)
        for i, (im, cm, lo, hi, title, lab) in enumerate(panels):
            ax = Axes(c, (20 + i * step, 40, pw, ph), (0, Ww), (0, Hh))
            # missing pixels of the data (NaN) in the page's colour for them
            c.image(ax.x, ax.y, ax.w, ax.h, colormap(im, cm, lo, hi, nan_rgb=_MISSING_RGB))
            ax.frame(title=title, xticks=False, yticks=False)
            ax.colorbar(cm, lo, hi, lab, x=ax.x + ax.w + 8, width=10)
        c.text(20 + pw / 2, 40 + ph + 20, where, size=11, anchor="middle", color="#333333")
        return c.to_bytes()
    D = mean.size
    lo = float(min(np.nanmin(ds.Y), (mean - 2 * std).min()))
    hi = float(max(np.nanmax(ds.Y), (mean + 2 * std).max()))
    pad = 0.05 * (hi - lo or 1)
    c = new_canvas(fmt, 900, 360)  # the legend right of the plot: inside, it covered the curve
    ax = Axes(c, (80, 40, 590, 250), (-0.5, D - 0.5), (lo - pad, hi + pad))
    d = np.arange(D)
    band = np.concatenate([np.column_stack([d, mean + 2 * std]), np.column_stack([d, mean - 2 * std])[::-1]])
    ax.clip()
    c.polygon(ax.pts(band), plots.CURSOR_COLOR, opacity=0.25)
    c.polyline(ax.pts(np.column_stack([d, mean])), plots.CURSOR_COLOR, width=2)
    legend = [("generated (+-2 sd band)", plots.CURSOR_COLOR)]
    if n >= 0:
        seen = np.isfinite(ds.Y[n])  # missing values: no mark
        for X, Y in ax.pts(np.column_stack([d[seen], ds.Y[n][seen]])):
            c.circle(X, Y, 3.5, fill="#000000")
        legend.append((f"training point #{n}", "#000000"))
    ax.unclip()
    ax.frame(title=f"Generated output {where}", xlabel="output dimension", ylabel="value")
    ax.legend(legend, x=ax.x + ax.w + 12, y=ax.y)
    return c.to_bytes()


# --------------------------------------------------------------------------- sequences
def _need_playback(state: ExplorerState, model: bool = True):
    """What the player plays (``model``: only a model's; else the data as recorded too)."""
    if model:
        _need_model(state)
    pb = state.playback()
    if pb is None:
        raise UserError("no sequence to export: this data set has no sequences (time stamps or sequence ids)")
    return pb


def trajectory_figure(state: ExplorerState, fmt: str = "png") -> bytes:
    """The played sequence: its latent trajectory in the shown dims (2-sd ellipses along
    it, the forecast in purple) over the training means, and its two coordinates against
    time with 2-sd bands."""
    pb = _need_playback(state)
    m = state.model
    xd, yd = state.dims
    mu = np.asarray(m.latent_mean)
    W, H = 1040, 470
    c = new_canvas(fmt, W, H)
    x0, y0, x1, y1 = state.bounds()
    ax = Axes(c, (70, 40, 400, 370), (x0, x1), (y0, y1))
    ax.clip()
    for X, Y in zip(ax.px(mu[:, xd]).tolist(), ax.py(mu[:, yd]).tolist()):
        c.circle(X, Y, 2.2, fill="#9aa9b8", opacity=0.5)
    n = pb.n_train
    t = np.linspace(0, 2 * np.pi, 32)
    step = max(1, pb.T // 30)
    for i in np.unique(np.r_[np.arange(0, pb.T, step), n - 1, pb.T - 1]):
        col = "#8e44ad" if i >= n else "#1f77b4"
        e = np.column_stack([pb.mu[i, xd] + 2 * np.sqrt(pb.S[i, xd]) * np.cos(t),
                             pb.mu[i, yd] + 2 * np.sqrt(pb.S[i, yd]) * np.sin(t)])
        if i < n:  # forecast ellipses as outlines only, as on screen: they pile up where
            c.polygon(ax.pts(e), col, opacity=0.08)  # q(x*) relaxes to the prior (a solid blob)
        c.polyline(ax.pts(e), col, width=0.8, opacity=0.5)
    c.polyline(ax.pts(pb.mu[:n][:, [xd, yd]]), "#222222", width=2.2)
    if pb.T > n:
        c.polyline(ax.pts(pb.mu[n - 1:][:, [xd, yd]]), "#8e44ad", width=2.2, dash=True)
    ax.unclip()
    ax.frame(title=f"Latent trajectory: {pb.label}", xlabel=f"latent dimension {xd}",
             ylabel=f"latent dimension {yd}")
    # coordinates against time
    lo = np.minimum(pb.mu[:, [xd, yd]] - 2 * np.sqrt(pb.S[:, [xd, yd]]), np.inf).min()
    hi = np.maximum(pb.mu[:, [xd, yd]] + 2 * np.sqrt(pb.S[:, [xd, yd]]), -np.inf).max()
    pad = 0.05 * (hi - lo or 1.0)
    ts = seqs.seconds(state.dataset, pb.t)
    tax = Axes(c, (570, 40, 430, 370), (float(ts[0]), float(ts[-1]) if pb.T > 1 else float(ts[0]) + 1),
               (float(lo - pad), float(hi + pad)))
    tax.clip()
    if pb.T > n:
        X0 = float(tax.px(ts[n - 1]))
        c.rect(X0, tax.y, tax.x + tax.w - X0, tax.h, fill="#8e44ad", opacity=0.08)
    for q, col in ((xd, plots.X_COLOR), (yd, plots.Y_COLOR)):
        sd = np.sqrt(pb.S[:, q])
        band = np.concatenate([np.column_stack([ts, pb.mu[:, q] + 2 * sd]),
                               np.column_stack([ts, pb.mu[:, q] - 2 * sd])[::-1]])
        c.polygon(tax.pts(band), col, opacity=0.18)
        c.polyline(tax.pts(np.column_stack([ts, pb.mu[:, q]])), col, width=2)
    tax.unclip()
    unit = seqs.time_unit(state.dataset)
    tax.frame(title="Latent coordinates over time (2 sd bands)", xlabel=f"time ({unit})", ylabel="latent coordinate")
    tax.legend([(f"x{xd}", plots.X_COLOR), (f"x{yd}", plots.Y_COLOR)]
               + ([("forecast", "#8e44ad")] if pb.T > n else []), x=tax.x + 8, y=tax.y + 8)
    return c.to_bytes()


#: the inferred bones' colour in the GIF, as RGB (``plots.INFERRED_COLOR``)
_INFERRED_RGB = tuple(int(plots.INFERRED_COLOR[k:k + 2], 16) for k in (1, 3, 5))


def _gif_pose_frame(uv, spread, conns, lim, forecast: bool, text: str, size: int = 260, ghost=None,
                    inferred=None):
    """One GIF frame of a pose: bones, 2-sd discs per joint and, for an inferred stretch,
    the truth ``ghost`` (J, 2) in grey underneath and the ``inferred`` bones ((B,) bool) in
    orange (as on screen)."""
    from PIL import Image, ImageDraw

    s = 2  # drawn at 2x, then halved: smooth edges
    img = Image.new("RGB", (size * s, size * s), "white")
    d = ImageDraw.Draw(img, "RGBA")

    def px(u, v):
        return ((u + lim) / (2 * lim) * size * s, (1 - (v + lim) / (2 * lim)) * size * s)

    if ghost is not None:
        for a, b in conns:
            d.line([px(*ghost[a]), px(*ghost[b])], fill=(184, 184, 184), width=7 * s)

    disc = (230, 25, 75, 55)
    for (u, v), r in zip(uv, spread):
        if r <= 0:  # the data as recorded: no spread
            continue
        R = 2 * r / (2 * lim) * size * s
        X, Y = px(u, v)
        d.ellipse([X - R, Y - R, X + R, Y + R], fill=disc, outline=(230, 25, 75, 140), width=s)
    col = (142, 68, 173) if forecast else (31, 59, 115)
    for k, (a, b) in enumerate(conns):
        fill = _INFERRED_RGB if inferred is not None and inferred[k] else col
        d.line([px(*uv[a]), px(*uv[b])], fill=fill, width=4 * s)
    for u, v in uv:
        X, Y = px(u, v)
        d.ellipse([X - 3 * s, Y - 3 * s, X + 3 * s, Y + 3 * s], fill=col)
    img = img.reduce(s)  # box filter: smooth edges, ~10x faster than resize
    ImageDraw.Draw(img).text((6, 4), text, fill=(142, 68, 173) if forecast else (40, 40, 40))
    return img


def _log_sd(sd: np.ndarray, lo: float) -> np.ndarray:
    """log10 of an sd image for a log colour scale from ``lo`` (log10; no -inf at 0)."""
    return np.log10(np.maximum(sd, 10.0 ** (lo - 1.0)))


def sequence_gif(state: ExplorerState, fps: float | None = None, size: int = 260) -> bytes:
    """The played sequence (with its forecast) as an animated GIF, at the data's frame rate:
    the data as recorded too, before a model (``Playback.preview``)."""
    from PIL import Image, ImageDraw

    pb = _need_playback(state, model=False)
    ds = state.dataset
    r = ds.renderer
    kind = getattr(r, "kind", "vector")
    fps = float(fps or seqs.frame_rate(ds))
    unit = seqs.time_unit(ds)
    frames = []
    t = seqs.seconds(ds, pb.t)

    def caption(i):
        fc = i >= pb.n_train
        extra = f"  forecast +{seqs.time_text(t[i] - t[pb.n_train - 1], unit)}" if fc else ""
        return f"{pb.label}  t={seqs.time_text(t[i], unit)}{extra}", fc

    if kind == "pose":
        zc, lim = seqs.pose_extent(r, ds.Y)
        d = seqs.pose_frames(r, pb.mean, pb.var, state.azimuth, state.elevation, zc)
        ghosts = (seqs.pose_frames(r, pb.truth, np.zeros_like(pb.truth), state.azimuth, state.elevation, zc)["uv"]
                  if pb.truth is not None else None)
        conns = np.asarray(r.connections, dtype=int).reshape(-1, 2)
        inferred = None
        if pb.hidden is not None and len(pb.hidden):
            inferred = hidden_bones(ds, pb.hidden)
        for i in range(pb.T):
            text, fc = caption(i)
            frames.append(_gif_pose_frame(d["uv"][i], d["spread"][i], conns, lim, fc,
                                          text + ("  (grey: truth, orange: inferred)" if ghosts is not None else ""),
                                          size, ghost=None if ghosts is None else ghosts[i], inferred=inferred))
    elif kind == "image":
        fr = seqs.image_frames(r, pb.mean, pb.var)
        vmin, vmax = seqs.image_range(ds)
        Hh, Ww = fr["img"].shape[1:]
        k = max(1, size // max(Hh, Ww))
        truth = None if pb.truth is None else np.stack([r.image(y) for y in pb.truth])
        right = "sd" if truth is None else "truth"
        if not pb.preview:
            lo, hi = np.log10(seqs.sd_range(state.model))
        for i in range(pb.T):
            a = colormap(fr["img"][i], "gray", vmin, vmax)
            if pb.preview:  # the data: no sd beside it
                both, note = a, "   (the data as recorded)"
            else:
                b = (colormap(_log_sd(fr["sd"][i], lo), "magma", lo, hi) if truth is None
                     else colormap(truth[i], "gray", vmin, vmax))
                both = np.concatenate([a, np.full((Hh, 2, 3), 255, np.uint8), b], axis=1)
                note = f"   (left: mean, right: {right})"
            im = Image.fromarray(both).resize((both.shape[1] * k, Hh * k), Image.NEAREST)
            canvas = Image.new("RGB", (max(im.width, 160), im.height + 16), "white")
            canvas.paste(im, (0, 16))
            text, fc = caption(i)
            ImageDraw.Draw(canvas).text((2, 2), text + note, fill=(142, 68, 173) if fc else (40, 40, 40))
            frames.append(canvas)
    else:
        sd = np.sqrt(pb.var)
        lo, hi = float((pb.mean - 2 * sd).min()), float((pb.mean + 2 * sd).max())
        if pb.truth is not None:  # an inferred stretch: its truth in grey, as on screen
            lo, hi = min(lo, float(pb.truth.min())), max(hi, float(pb.truth.max()))
        for i in range(pb.T):
            # drawn at 2x and halved, as the pose frames (setting the scale after the canvas
            # was made drew every frame into its top-left third)
            c = PngCanvas(480, 200, scale=2)  # wide enough for the caption
            ax = Axes(c, (40, 24, 420, 150), (-0.5, pb.mean.shape[1] - 0.5), (lo, hi))
            dd = np.arange(pb.mean.shape[1])
            band = np.concatenate([np.column_stack([dd, pb.mean[i] + 2 * sd[i]]),
                                   np.column_stack([dd, pb.mean[i] - 2 * sd[i]])[::-1]])
            c.polygon(ax.pts(band), plots.CURSOR_COLOR, opacity=0.25)
            if pb.truth is not None:
                c.polyline(ax.pts(np.column_stack([dd, pb.truth[i]])), "#555555", width=2)
            c.polyline(ax.pts(np.column_stack([dd, pb.mean[i]])), plots.CURSOR_COLOR, width=2)
            text, _ = caption(i)
            ax.frame(title=text + ("  (grey: truth)" if pb.truth is not None else ""), xticks=False)
            frames.append(Image.open(io.BytesIO(c.to_bytes())).convert("RGB").reduce(2))
    # palette per frame with the fast octree quantiser: Pillow's default (median cut on
    # every frame) took ~25 ms a frame, and the export runs on the server's event loop
    frames = [f.quantize(colors=64, method=Image.Quantize.FASTOCTREE) for f in frames]
    buf = io.BytesIO()
    frames[0].save(buf, format="GIF", save_all=True, append_images=frames[1:], loop=0,
                   duration=seqs.gif_durations(len(frames), fps), optimize=False)
    return buf.getvalue()


# --------------------------------------------------------------------------- data
def _time_name(ds) -> str:
    return "time_" + seqs.time_unit(ds)


def latent_csv(state: ExplorerState) -> bytes:
    """index, [label], [sequence], [time_<unit>], mu_0..mu_{Q-1}, var_0..var_{Q-1} per row."""
    m = _need_model(state)
    ds = state.dataset
    mu, S = np.asarray(m.latent_mean), np.asarray(m.latent_variance)
    Q = mu.shape[1]
    head = ["index"]
    extra = []
    if ds.labels is not None:
        head.append("label")
        extra.append([label_text(ds, i) for i in range(ds.N)])
    if ds.sequence is not None:
        head.append("sequence")
        extra.append([str(v) for v in np.asarray(ds.sequence).tolist()])  # integer or string ids
    if ds.times is not None:  # as the page shows them, the unit in the name
        head.append(_time_name(ds))
        extra.append([repr(float(v)) for v in seqs.seconds(ds, ds.times)])
    head += [f"mu_{q}" for q in range(Q)] + [f"var_{q}" for q in range(Q)]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(head)
    for i in range(mu.shape[0]):
        w.writerow([i] + [col[i] for col in extra] + [repr(float(v)) for v in mu[i]] + [repr(float(v)) for v in S[i]])
    return buf.getvalue().encode()


def latent_npz(state: ExplorerState) -> bytes:
    """mu (N, Q), S (N, Q), Z (M, Q), alpha (Q,) and labels (with label_names, the names
    the labels index, as an uploaded .npz gives them)/sequence/times if present:
    ``times`` the data set's stamps (the model's units), ``time_<unit>`` as the page shows
    them (CMU 35: seconds of the recording; its stamps are 0.05 per 30 Hz frame)."""
    m = _need_model(state)
    ds = state.dataset
    arrays = dict(mu=np.asarray(m.latent_mean), S=np.asarray(m.latent_variance),
                  Z=np.asarray(m.inducing_inputs), alpha=np.asarray(m.ard_weights))
    for k in ("labels", "sequence", "times"):
        v = getattr(ds, k)
        if v is not None:
            arrays[k] = np.asarray(v)
    if ds.labels is not None and ds.label_names is not None:  # label_names[labels[n]]: row n's class
        arrays["label_names"] = np.asarray([str(n) for n in ds.label_names], dtype=str)
    if ds.times is not None:
        arrays[_time_name(ds)] = seqs.seconds(ds, ds.times)
    arrays["about"] = np.asarray(_npz_about(ds, arrays))
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    return buf.getvalue()


def _npz_about(ds, arrays: dict) -> str:
    """What each array of the coordinates' .npz holds (its "about" entry): a reader of the
    file met ``times`` and ``time_s`` that disagree (CMU: 0.05 against 1/30 a frame)."""
    unit = seqs.time_unit(ds)
    say = {"mu": "mean of q(x_n), (N, Q)", "S": "variance of q(x_n), (N, Q)", "Z": "inducing inputs, (M, Q)",
           "alpha": "ARD weights 1 / lengthscale^2, (Q,)", "labels": "class index of each row",
           "label_names": "label_names[labels[n]] names row n's class", "sequence": "sequence id of each row",
           "times": "time stamps as the model uses them (its time kernel's units)",
           _time_name(ds): f"the same times in {unit} of the recording, as the explorer shows them"}
    return "\n".join(f"{k}: {say[k]}" for k in arrays if k in say)


EXPORTS = {
    "latent": latent_figure,
    "ard": ard_figure,
    "output": output_figure,
    "trajectory": trajectory_figure,
}


def export_bytes(state: ExplorerState, what: str, fmt: str) -> bytes:
    if what == "coords":
        return latent_csv(state) if fmt == "csv" else latent_npz(state)
    if what == "sequence":
        return sequence_gif(state)
    return EXPORTS[what](state, fmt)


# --------------------------------------------------------------------------- panel
class ExportPanel(pn.viewable.Viewer):
    """Download buttons: figures as PNG/SVG, latent coordinates as CSV/NPZ."""

    state = param.ClassSelector(class_=ExplorerState)

    def __init__(self, **params):
        super().__init__(**params)
        self._buttons = []
        for what, label in (("latent", "Latent view"), ("ard", "ARD chart"), ("output", "Generated output")):
            row = []
            for fmt in ("png", "svg"):
                row.append(self._button(what, fmt, f"{label} {fmt.upper()}"))
            self._buttons.append(row)
        self._sequence_buttons = [self._button("trajectory", "png", "Trajectory PNG"),
                                  self._button("trajectory", "svg", "Trajectory SVG"),
                                  self._button("sequence", "gif", "Played sequence GIF")]
        self._buttons.append(self._sequence_buttons[:2])
        self._buttons.append(self._sequence_buttons[2:])
        self._buttons.append([self._button("coords", "csv", "Latent coords CSV"),
                              self._button("coords", "npz", "Latent coords NPZ")])
        self.state.param.watch(self._enable, ["model_version", "play_sequence", "play_mode", "inference",
                                              "dataset"])
        self._enable()

    def _enable(self, *events):
        """No model, nothing to export: the buttons are off (a click answered with no file,
        which Panel logged as a traceback on the server), except the GIF of data played as
        recorded; the trajectory and the GIF also need a sequence in the player (a data set
        without time stamps or sequence ids has none)."""
        s = self.state
        playable = s.play_sequence is not None or (s.play_mode == "inferred" and s.inference is not None)
        gif = self._sequence_buttons[2]
        for row in self._buttons:
            for btn in row:
                seq = any(btn is b for b in self._sequence_buttons)
                btn.disabled = (s.model is None and btn is not gif) or (seq and not playable)

    def _filename(self, what, fmt):
        base = {"coords": "latent"}.get(what, what)
        s = self.state
        if what in ("trajectory", "sequence"):
            if s.play_mode == "inferred" and s.inference is not None:  # what the player plays
                inf = s.inference
                base += "-inferred-" + inf.frames.replace(" ", "_")
            elif s.play_sequence is not None:
                base += f"-{s.play_sequence}"
        return f"bgplvm-{self.state.dataset_name or 'data'}-{base}.{fmt}"

    def _button(self, what, fmt, label):
        btn = pn.widgets.FileDownload(label=label, filename=self._filename(what, fmt), width=120,
                                      callback=lambda: self._make(what, fmt, btn), color="default",
                                      css_classes=[f"export-{what}-{fmt}"])
        return btn

    def _make(self, what, fmt, btn):
        btn.filename = self._filename(what, fmt)
        try:
            return io.BytesIO(export_bytes(self.state, what, fmt))
        except UserError as e:
            self.state.error = str(e)
        except Exception as e:  # noqa: BLE001
            self.state.error = f"Export failed ({type(e).__name__}: {e})"
        return None

    def __panel__(self):
        note = pn.pane.Markdown(
            "Figures are redrawn for print (PNG at 2x, vector SVG) from the current view; the GIF is the "
            "played sequence (with its forecast, for a dynamical model); the plots' own save icon downloads "
            "exactly what is on screen.",
            styles={"font-size": "12px"}, width=260)
        return pn.Card(*[pn.Row(*row) for row in self._buttons], note, title="4. Export", width=280)
