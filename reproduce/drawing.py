"""Figures of the reproductions, drawn with ``bgplvm.explorer.figures`` (Pillow, no browser):
grids of image frames (video) and strips of skeletons over time (motion capture)."""

from __future__ import annotations

import numpy as np

from bgplvm.explorer.figures import Axes, PngCanvas, colormap

LABEL_W = 200   # px for the row labels on the left
TITLE_H = 34    # px above the first row


def image_grid(rows, col_titles, path, vmin: float, vmax: float, cell_h: int = 84,
               title: str = "", cmap: str = "gray") -> None:
    """Rows of equally sized images.

    rows : [(label, [image (H, W) or None, ...]), ...]; None leaves a cell empty;
           an image with NaN entries shows them white (e.g. the missing pixels).
    col_titles : one caption per column (e.g. the frame number).
    """
    n_cols = max(len(ims) for _, ims in rows)
    H, W = next(im.shape for _, ims in rows for im in ims if im is not None)
    cell_w = int(round(cell_h * W / H))
    gap = 6
    width = LABEL_W + n_cols * (cell_w + gap) + 10
    height = TITLE_H + 18 + len(rows) * (cell_h + gap) + 10
    c = PngCanvas(width, height)
    if title:
        c.text(width / 2, 22, title, size=14, anchor="middle", bold=True)
    for j, t in enumerate(col_titles):
        c.text(LABEL_W + j * (cell_w + gap) + cell_w / 2, TITLE_H + 10, str(t), size=10, anchor="middle")
    for i, (label, ims) in enumerate(rows):
        y = TITLE_H + 18 + i * (cell_h + gap)
        c.text(LABEL_W - 8, y + cell_h / 2, label, size=11, anchor="end", valign="middle")
        for j, im in enumerate(ims):
            if im is None:
                continue
            x = LABEL_W + j * (cell_w + gap)
            c.image(x, y, cell_w, cell_h, colormap(np.asarray(im, dtype=float), cmap, vmin, vmax))
            c.rect(x, y, cell_w, cell_h, stroke="#888888", width=0.6)
    with open(path, "wb") as f:
        f.write(c.to_bytes())


def _screen(P: np.ndarray, azimuth: float, elevation: float) -> np.ndarray:
    """(J, 3) z-up points -> (J, 2) orthographic screen coordinates (as the explorer)."""
    a, e = np.deg2rad(azimuth), np.deg2rad(elevation)
    right = np.array([np.cos(a), np.sin(a), 0.0])
    fwd = np.array([-np.sin(a), np.cos(a), 0.0])
    up = np.array([0.0, 0.0, np.cos(e)]) - np.sin(e) * fwd
    return P @ np.stack([right, up]).T


def pose_strip(rows, connections, col_titles, path, title: str = "", azimuth: float = 60.0,
               elevation: float = 10.0, cell: int = 120) -> None:
    """Rows of stick figures, one per time step.

    rows : [(label, colour, [(P (J, 3) z-up metres, spread (J,) or None), ...]), ...];
           ``spread`` draws a circle of 2 sd around each joint.
    Every pose is centred on the ground plane; one scale for the whole figure.
    """
    n_cols = max(len(p) for _, _, p in rows)
    uvs = []
    for _, _, poses in rows:
        for P, spread in poses:
            P = np.asarray(P, dtype=float)
            P = P - P.mean(axis=0) * np.array([1.0, 1.0, 0.0])
            uvs.append(_screen(P, azimuth, elevation))
    allp = np.concatenate(uvs)
    half = 0.55 * float(max(np.ptp(allp[:, 0]), np.ptp(allp[:, 1]))) or 1.0
    vc = 0.5 * float(allp[:, 1].min() + allp[:, 1].max())
    gap = 4
    width = LABEL_W + n_cols * (cell + gap) + 10
    height = TITLE_H + 18 + len(rows) * (cell + gap) + 10
    c = PngCanvas(width, height)
    if title:
        c.text(width / 2, 22, title, size=14, anchor="middle", bold=True)
    for j, t in enumerate(col_titles):
        c.text(LABEL_W + j * (cell + gap) + cell / 2, TITLE_H + 10, str(t), size=10, anchor="middle")
    k = 0
    t_circle = np.linspace(0, 2 * np.pi, 24)
    for i, (label, colour, poses) in enumerate(rows):
        y = TITLE_H + 18 + i * (cell + gap)
        c.text(LABEL_W - 8, y + cell / 2, label, size=11, anchor="end", valign="middle")
        for j, (P, spread) in enumerate(poses):
            uv = uvs[k]
            k += 1
            ax = Axes(c, (LABEL_W + j * (cell + gap), y, cell, cell), (-half, half), (vc - half, vc + half))
            c.rect(ax.x, ax.y, ax.w, ax.h, fill="#fafafa", stroke="#cccccc", width=0.6)
            ax.clip()
            if spread is not None:
                for (u, v), s in zip(uv, np.asarray(spread)):
                    ring = np.column_stack([u + 2 * s * np.cos(t_circle), v + 2 * s * np.sin(t_circle)])
                    c.polyline(ax.pts(ring), "#e07a5f", width=0.8, opacity=0.7)
            for a, b in connections:
                c.polyline(ax.pts(uv[[a, b]]), colour, width=1.8)
            ax.unclip()
    with open(path, "wb") as f:
        f.write(c.to_bytes())
