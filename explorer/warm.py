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

        # says on the console when it compiles (empty Numba cache) and what waits for it
        warmup(verbose=True, waiting="the explorer answers when this is done")
    except Exception:  # warm-up is an optimisation: never fatal
        log.exception("numba warm-up failed")
    import holoviews as hv

    hv.extension("bokeh", logo=False)
    try:
        # build and render one throwaway page: imports the whole plotting path, reads the
        # start-up model and data set into their caches and runs every kernel the first
        # page needs (prediction, variance grid) with the real shapes
        from bokeh.document import Document

        from explorer.app import create_app

        create_app().get_root(Document())
    except Exception:
        log.exception("explorer page warm-up failed")
    dt = time.perf_counter() - t0
    log.info("explorer warm-up took %.2f s", dt)
    return dt
