"""Browser-free paper figures: one small drawing API, two backends.

``SvgCanvas`` writes vector SVG text; ``PngCanvas`` draws the same calls with Pillow
(always installed: Bokeh depends on it) at 2x and downsamples for smooth edges. No
webdriver, no matplotlib: exports work on a fresh machine and in CI, in ~0.1 s.
``Axes`` maps data to pixels and draws frames, ticks, labels, colour bars and legends.
"""

from __future__ import annotations

import base64
import io
import math
from xml.sax.saxutils import escape

import numpy as np
from PIL import Image, ImageDraw, ImageFont

FONT_FAMILY = "DejaVu Sans, Helvetica, Arial, sans-serif"


# --------------------------------------------------------------------------- colours
def _hex(c: str) -> tuple[int, int, int]:
    c = c.lstrip("#")
    if len(c) == 3:
        c = "".join(ch * 2 for ch in c)
    return int(c[0:2], 16), int(c[2:4], 16), int(c[4:6], 16)


def palette(name: str) -> np.ndarray:
    """(256, 3) uint8 colour table, low values first (matplotlib conventions)."""
    from bokeh import palettes

    table = {"Greys": palettes.Greys256[::-1] if palettes.Greys256[0] == "#000000" else palettes.Greys256,
             "gray": palettes.Greys256 if palettes.Greys256[0] == "#000000" else palettes.Greys256[::-1],
             "viridis": palettes.Viridis256, "magma": palettes.Magma256}[name]
    return np.array([_hex(c) for c in table], dtype=np.uint8)


def colormap(values: np.ndarray, name: str, vmin=None, vmax=None, nan_rgb=(255, 255, 255)) -> np.ndarray:
    """Values -> (..., 3) uint8 RGB; NaN -> ``nan_rgb`` (white)."""
    v = np.asarray(values, dtype=np.float64)
    if not np.isfinite(v).any():  # e.g. the latent view's background switched off
        return np.full(v.shape + (3,), 255, dtype=np.uint8)
    lo = np.nanmin(v) if vmin is None else vmin
    hi = np.nanmax(v) if vmax is None else vmax
    t = (v - lo) / (hi - lo) if hi > lo else np.zeros_like(v)
    idx = np.clip(np.nan_to_num(t, nan=0.0) * 255, 0, 255).astype(int)
    rgb = palette(name)[idx]
    rgb[~np.isfinite(v)] = nan_rgb
    return rgb


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if not (np.isfinite(lo) and np.isfinite(hi)) or hi <= lo:
        return [lo]
    raw = (hi - lo) / max(n, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = min((s * mag for s in (1, 2, 2.5, 5, 10) if s * mag >= raw), default=10 * mag)
    start = math.ceil(lo / step - 1e-9) * step
    ticks = []
    t = start
    while t <= hi + 1e-9 * step:
        ticks.append(0.0 if abs(t) < 1e-12 * step else t)
        t += step
    return ticks


def fmt_tick(t: float) -> str:
    if t == 0:
        return "0"
    if abs(t) >= 1e4 or abs(t) < 1e-3:
        return f"{t:.1e}"
    return f"{t:.6g}"


# --------------------------------------------------------------------------- canvases
class SvgCanvas:
    def __init__(self, width: int, height: int):
        self.width, self.height = width, height
        self._parts: list[str] = []
        self._nclip = 0

    def rect(self, x, y, w, h, fill="none", stroke=None, width=1.0, opacity=1.0):
        s = f' stroke="{stroke}" stroke-width="{width}"' if stroke else ""
        self._parts.append(f'<rect x="{x:.2f}" y="{y:.2f}" width="{w:.2f}" height="{h:.2f}" '
                           f'fill="{fill}" fill-opacity="{opacity}"{s}/>')

    def polyline(self, pts, color, width=1.0, opacity=1.0, dash=False):
        if len(pts) < 2:
            return
        d = " ".join(f"{x:.2f},{y:.2f}" for x, y in pts)
        da = ' stroke-dasharray="4,3"' if dash else ""
        self._parts.append(f'<polyline points="{d}" fill="none" stroke="{color}" stroke-width="{width}" '
                           f'stroke-opacity="{opacity}" stroke-linejoin="round" stroke-linecap="round"{da}/>')

    def polygon(self, pts, fill, opacity=1.0, stroke=None):
        d = " ".join(f"{x:.2f},{y:.2f}" for x, y in pts)
        s = f' stroke="{stroke}"' if stroke else ""
        self._parts.append(f'<polygon points="{d}" fill="{fill}" fill-opacity="{opacity}"{s}/>')

    def circle(self, cx, cy, r, fill="none", stroke=None, width=1.0, opacity=1.0):
        s = f' stroke="{stroke}" stroke-width="{width}"' if stroke else ""
        self._parts.append(f'<circle cx="{cx:.2f}" cy="{cy:.2f}" r="{r:.2f}" fill="{fill}" '
                           f'fill-opacity="{opacity}"{s}/>')

    def text(self, x, y, s, size=12, color="#222", anchor="start", rotate=0, bold=False, valign="baseline"):
        a = {"start": "start", "middle": "middle", "end": "end"}[anchor]
        dy = {"baseline": 0, "middle": 0.35 * size, "top": 0.8 * size}[valign]
        tr = f' transform="rotate({rotate} {x:.2f} {y:.2f})"' if rotate else ""
        w = ' font-weight="bold"' if bold else ""
        self._parts.append(f'<text x="{x:.2f}" y="{y + dy:.2f}" font-size="{size}" fill="{color}" '
                           f'text-anchor="{a}" font-family="{FONT_FAMILY}"{w}{tr}>{escape(str(s))}</text>')

    def image(self, x, y, w, h, rgb: np.ndarray):
        buf = io.BytesIO()
        Image.fromarray(np.ascontiguousarray(rgb, dtype=np.uint8)).save(buf, format="PNG")
        b64 = base64.b64encode(buf.getvalue()).decode()
        self._parts.append(f'<image x="{x:.2f}" y="{y:.2f}" width="{w:.2f}" height="{h:.2f}" '
                           f'preserveAspectRatio="none" style="image-rendering:pixelated" '
                           f'href="data:image/png;base64,{b64}"/>')

    def begin_clip(self, x, y, w, h):
        self._nclip += 1
        cid = f"clip{self._nclip}"
        self._parts.append(f'<clipPath id="{cid}"><rect x="{x:.2f}" y="{y:.2f}" width="{w:.2f}" '
                           f'height="{h:.2f}"/></clipPath><g clip-path="url(#{cid})">')

    def end_clip(self):
        self._parts.append("</g>")

    def to_bytes(self) -> bytes:
        head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.width}" height="{self.height}" '
                f'viewBox="0 0 {self.width} {self.height}" version="1.1">'
                f'<rect width="100%" height="100%" fill="white"/>')
        return (head + "".join(self._parts) + "</svg>\n").encode()


class PngCanvas:
    """Same calls as SvgCanvas, drawn with Pillow at ``scale`` and downsampled."""

    def __init__(self, width: int, height: int, scale: int = 3, dpi: int = 150):
        self.width, self.height, self.s, self.dpi = width, height, scale, dpi
        self._img = Image.new("RGB", (width * scale, height * scale), "white")
        self._stack: list[tuple[Image.Image, tuple]] = []
        self._fonts: dict = {}

    @property
    def _draw(self):
        return ImageDraw.Draw(self._img, "RGBA")

    def _font(self, size, bold=False):
        key = (size, bold)
        if key not in self._fonts:
            px = int(round(size * self.s))
            font = None
            for name in (("DejaVuSans-Bold.ttf", "LiberationSans-Bold.ttf") if bold
                         else ("DejaVuSans.ttf", "LiberationSans-Regular.ttf")):
                try:
                    font = ImageFont.truetype(name, px)
                    break
                except OSError:
                    continue
            if font is None:
                font = ImageFont.load_default(size=px)
            self._fonts[key] = font
        return self._fonts[key]

    def _c(self, color, opacity=1.0):
        if color in (None, "none"):
            return None
        r, g, b = _hex(color) if color.startswith("#") else {"white": (255, 255, 255), "black": (0, 0, 0)}[color]
        return (r, g, b, int(round(255 * opacity)))

    def _p(self, pts):
        return [(x * self.s, y * self.s) for x, y in pts]

    def rect(self, x, y, w, h, fill="none", stroke=None, width=1.0, opacity=1.0):
        self._draw.rectangle([x * self.s, y * self.s, (x + w) * self.s, (y + h) * self.s],
                             fill=self._c(fill, opacity), outline=self._c(stroke),
                             width=max(1, int(round(width * self.s))) if stroke else 0)

    def polyline(self, pts, color, width=1.0, opacity=1.0, dash=False):
        if len(pts) < 2:
            return
        fill, w = self._c(color, opacity), max(1, int(round(width * self.s)))
        if not dash:
            self._draw.line(self._p(pts), fill=fill, width=w, joint="curve")
            return
        for piece in dashes(pts, DASH_ON, DASH_OFF):  # as the SVG canvas's stroke-dasharray="4,3"
            self._draw.line(self._p(piece), fill=fill, width=w)

    def polygon(self, pts, fill, opacity=1.0, stroke=None):
        self._draw.polygon(self._p(pts), fill=self._c(fill, opacity), outline=self._c(stroke))

    def circle(self, cx, cy, r, fill="none", stroke=None, width=1.0, opacity=1.0):
        s = self.s
        self._draw.ellipse([(cx - r) * s, (cy - r) * s, (cx + r) * s, (cy + r) * s],
                           fill=self._c(fill, opacity), outline=self._c(stroke),
                           width=max(1, int(round(width * s))) if stroke else 0)

    def text(self, x, y, s, size=12, color="#222", anchor="start", rotate=0, bold=False, valign="baseline"):
        font = self._font(size, bold)
        pa = {"start": "l", "middle": "m", "end": "r"}[anchor] + {"baseline": "s", "middle": "m", "top": "t"}[valign]
        if not rotate:
            self._draw.text((x * self.s, y * self.s), str(s), fill=self._c(color), font=font, anchor=pa)
            return
        # rotated: draw on a transparent tile, rotate it, paste centred at the anchor
        l, t, r, b = font.getbbox(str(s))
        tile = Image.new("RGBA", (r - l + 4, b - t + 4), (0, 0, 0, 0))
        ImageDraw.Draw(tile).text((2 - l, 2 - t), str(s), fill=self._c(color), font=font)
        tile = tile.rotate(-rotate, expand=True)
        self._img.paste(tile, (int(x * self.s - tile.width / 2), int(y * self.s - tile.height / 2)), tile)

    def image(self, x, y, w, h, rgb: np.ndarray):
        im = Image.fromarray(np.ascontiguousarray(rgb, dtype=np.uint8))  # RGB, or RGBA: blended
        im = im.resize((max(1, int(round(w * self.s))), max(1, int(round(h * self.s)))), Image.NEAREST)
        self._img.paste(im, (int(round(x * self.s)), int(round(y * self.s))), im if im.mode == "RGBA" else None)

    def begin_clip(self, x, y, w, h):
        box = tuple(int(round(v * self.s)) for v in (x, y, x + w, y + h))
        self._stack.append((self._img, box))
        self._img = self._img.copy()

    def end_clip(self):
        base, box = self._stack.pop()
        base.paste(self._img.crop(box), box[:2])
        self._img = base

    def to_bytes(self) -> bytes:
        out = self._img.resize((self.width * 2, self.height * 2), Image.LANCZOS) if self.s != 2 else self._img
        buf = io.BytesIO()
        out.save(buf, format="PNG", dpi=(self.dpi * 2, self.dpi * 2), optimize=False)
        return buf.getvalue()


# --------------------------------------------------------------------------- axes
class Axes:
    """A data rectangle at pixel box (x, y, w, h) showing xlim x ylim."""

    def __init__(self, canvas, box, xlim, ylim, equal: bool = False):
        self.c = canvas
        self.x, self.y, self.w, self.h = box
        self.xlim, self.ylim = tuple(map(float, xlim)), tuple(map(float, ylim))
        if equal:  # same units per pixel on both axes, centred
            sx = (self.xlim[1] - self.xlim[0]) / self.w
            sy = (self.ylim[1] - self.ylim[0]) / self.h
            s = max(sx, sy)
            cx, cy = sum(self.xlim) / 2, sum(self.ylim) / 2
            self.xlim = (cx - s * self.w / 2, cx + s * self.w / 2)
            self.ylim = (cy - s * self.h / 2, cy + s * self.h / 2)

    def px(self, x):
        return self.x + (np.asarray(x, dtype=float) - self.xlim[0]) / (self.xlim[1] - self.xlim[0]) * self.w

    def py(self, y):
        return self.y + self.h - (np.asarray(y, dtype=float) - self.ylim[0]) / (self.ylim[1] - self.ylim[0]) * self.h

    def pts(self, xy):
        xy = np.asarray(xy, dtype=float)
        return list(zip(self.px(xy[:, 0]).tolist(), self.py(xy[:, 1]).tolist()))

    def clip(self):
        self.c.begin_clip(self.x, self.y, self.w, self.h)

    def unclip(self):
        self.c.end_clip()

    def frame(self, title=None, xlabel=None, ylabel=None, xticks=True, yticks=True, xcats=None):
        c = self.c
        c.rect(self.x, self.y, self.w, self.h, stroke="#444444", width=1)
        if xcats is not None:
            for pos, lab in xcats:
                c.text(float(self.px(pos)), self.y + self.h + 6, lab, size=11, anchor="middle", valign="top")
        elif xticks:
            for t in nice_ticks(*self.xlim):
                X = float(self.px(t))
                c.polyline([(X, self.y + self.h), (X, self.y + self.h + 4)], "#444444")
                c.text(X, self.y + self.h + 6, fmt_tick(t), size=11, anchor="middle", valign="top")
        if yticks:
            for t in nice_ticks(*self.ylim):
                Y = float(self.py(t))
                c.polyline([(self.x - 4, Y), (self.x, Y)], "#444444")
                c.text(self.x - 6, Y, fmt_tick(t), size=11, anchor="end", valign="middle")
        if title:
            c.text(self.x + self.w / 2, self.y - 10, title, size=14, anchor="middle", bold=True)
        if xlabel:
            c.text(self.x + self.w / 2, self.y + self.h + 36, xlabel, size=12, anchor="middle")
        if ylabel:
            c.text(self.x - 48, self.y + self.h / 2, ylabel, size=12, anchor="middle", rotate=-90, valign="middle")

    def colorbar(self, cmap, vmin, vmax, title, x=None, width=14):
        c = self.c
        x = self.x + self.w + 16 if x is None else x
        ramp = palette(cmap)[::-1][:, None, :].repeat(2, axis=1)
        c.image(x, self.y, width, self.h, ramp)
        c.rect(x, self.y, width, self.h, stroke="#444444")
        for t in nice_ticks(vmin, vmax, 5):
            Y = self.y + self.h - (t - vmin) / ((vmax - vmin) or 1) * self.h
            c.polyline([(x + width, Y), (x + width + 4, Y)], "#444444")
            c.text(x + width + 6, Y, fmt_tick(t), size=10, valign="middle")
        c.text(x + width + 52, self.y + self.h / 2, title, size=11, anchor="middle", rotate=-90, valign="middle")

    @staticmethod
    def legend_width(items) -> int:
        """Width of ``legend(items)``'s box."""
        return 24 + 7 * max(len(str(lab)) for lab, _ in items)

    def legend(self, items, x=None, y=None):
        """items: [(label, colour)] as filled circles in a boxed list."""
        if not items:
            return
        c = self.c
        x = self.x + 8 if x is None else x
        y = self.y + 8 if y is None else y
        wid = self.legend_width(items)
        c.rect(x, y, wid, 18 * len(items) + 6, fill="white", stroke="#999999", opacity=0.9)
        for i, (lab, col) in enumerate(items):
            cy = y + 12 + 18 * i
            c.circle(x + 10, cy, 5, fill=col, stroke="white", width=0.8)
            c.text(x + 20, cy, lab, size=11, valign="middle")


def new_canvas(fmt: str, width: int, height: int):
    if fmt == "svg":
        return SvgCanvas(width, height)
    if fmt == "png":
        return PngCanvas(width, height)
    raise ValueError(f"unknown figure format {fmt!r} (png or svg)")


#: dash and gap lengths (px) of a dashed line, as the SVG canvas's stroke-dasharray
DASH_ON, DASH_OFF = 4.0, 3.0


def dashes(pts, on: float, off: float) -> list:
    """The pieces [(start, end) points] of the polyline ``pts`` drawn as dashes ``on`` long
    with gaps ``off`` long, the pattern running on across its corners."""
    pts = [(float(x), float(y)) for x, y in pts]
    out, pos, period = [], 0.0, on + off
    for (x0, y0), (x1, y1) in zip(pts[:-1], pts[1:]):
        length = math.hypot(x1 - x0, y1 - y0)
        if length == 0:
            continue
        t = 0.0
        while t < length:
            phase = pos % period
            step = min((on - phase) if phase < on else (period - phase), length - t)
            if phase < on:
                a, b = t / length, (t + step) / length
                out.append([(x0 + a * (x1 - x0), y0 + a * (y1 - y0)), (x0 + b * (x1 - x0), y0 + b * (y1 - y0))])
            t += step
            pos += step
    return out
