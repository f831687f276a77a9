"""A small console progress bar (stderr), shown in a terminal or a Jupyter notebook and
silent otherwise (a log file or a pipe would collect every redraw)."""

from __future__ import annotations

import sys
import time


def _live(stream) -> bool:
    """A terminal, or a Jupyter kernel's own stream (it draws the carriage returns in place)."""
    if stream.isatty():
        return True
    kernel = sys.modules.get("ipykernel.iostream")
    return kernel is not None and isinstance(stream, getattr(kernel, "OutStream", ()))


class ProgressBar:
    """``with ProgressBar(total, "fit") as bar: bar.update(i, "bound 123.4")``."""

    def __init__(self, total: int, label: str = "", enabled: bool | None = None,
                 stream=None, width: int = 28, min_interval: float = 0.1):
        self.total = max(int(total), 1)
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = _live(self.stream) if enabled is None else bool(enabled)
        self.width = width
        self.min_interval = min_interval
        self._last = 0.0
        self._t0 = time.perf_counter()
        self._state: tuple[int, str] | None = None  # the last update, drawn or not

    def update(self, done: int, info: str = "", force: bool = False) -> None:
        if not self.enabled:
            return
        self._state = (done, info)
        now = time.perf_counter()
        if not force and now - self._last < self.min_interval:
            return
        self._last = now
        frac = min(max(done / self.total, 0.0), 1.0)
        fill = int(round(frac * self.width))
        bar = "#" * fill + "-" * (self.width - fill)
        elapsed = now - self._t0
        self.stream.write(f"\r{self.label} [{bar}] {done}/{self.total} {info} {elapsed:5.1f}s ")
        self.stream.flush()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.enabled:
            if self._state is not None:
                self.update(*self._state, force=True)  # the final state, not the last one drawn
            self.stream.write("\n")
            self.stream.flush()
        return False
