"""Process-wide warm-up: compile the Numba kernels and import the plotting stack once,
at server start (``panel serve --setup``) so the first click does not wait."""

from __future__ import annotations

import functools
import logging
import time

log = logging.getLogger("explorer")


@functools.lru_cache(maxsize=None)
def ensure_warm() -> float:
    """Idempotent; returns the seconds the first call took."""
    t0 = time.perf_counter()
    try:
        from model import warmup

        warmup()
    except Exception:  # warm-up is an optimisation: never fatal
        log.exception("numba warm-up failed")
    import holoviews as hv

    hv.extension("bokeh", logo=False)
    dt = time.perf_counter() - t0
    log.info("explorer warm-up took %.2f s", dt)
    return dt
