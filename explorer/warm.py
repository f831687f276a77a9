"""Process-wide warm-up: compile (or load from the on-disk cache) the Numba kernels, read
the default model and its data, import the plotting stack and render one throwaway page,
once, at server start (``panel serve --setup``, as ``bgplvm serve`` does), so that the
first page and the first mouse move do not wait.

What it is waiting for is said on the console: with an empty Numba cache the kernels are
compiled (about a minute on 2 cores, once per installation); afterwards they load in
well under a second.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from pathlib import Path

log = logging.getLogger("explorer")
#: seconds after which a load from the cache is taken to be a compile (a load takes < 1 s)
SLOW_LOAD_S = 5.0
_done = False
_lock = threading.Lock()
_seconds = 0.0


def _print(msg: str) -> None:
    print(f"[bgplvm explorer] {msg}", file=sys.stderr, flush=True)


def numba_cache_is_warm() -> bool:
    """True when the model's Numba kernels have cache files (index .nbi) on disk: beside the
    sources, or in ``NUMBA_CACHE_DIR`` when that is set (Numba then keeps every cache there,
    one folder ``<source folder>_<hash>`` per source folder)."""
    import bgplvm

    cache_dir = os.environ.get("NUMBA_CACHE_DIR")
    if cache_dir:
        return any(Path(cache_dir).glob("kernels_*/*.nbi"))
    root = Path(bgplvm.__file__).resolve().parent
    return any(root.rglob("__pycache__/*.nbi"))


def limit_server_blas() -> None:
    """One BLAS thread in the serving process: the sessions' small matrix products gain
    nothing from more, and a multi-threaded BLAS competing with Numba's threads and the
    other sessions for 2 cores made some calls ~70x slower (measured: q(X) of the CMU
    model 0.47 s single-threaded against 37 s under load)."""
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=1, user_api="blas")
    except Exception:  # an optimisation, never fatal
        log.exception("could not limit BLAS threads")


def compile_kernels() -> None:
    """Every Numba kernel the explorer runs: the model's (``bgplvm.warmup``: bound, gradient,
    predictions) and those of test-time inference (observe and infer: the test bound and
    its gradients, for a static and a dynamical model), on tiny problems."""
    import numpy as np

    from bgplvm import BayesianGPLVM, DynamicalGPLVM, warmup

    warmup()
    rng = np.random.default_rng(0)
    Y = rng.standard_normal((8, 3))
    Ys = Y[:3].copy()
    Ys[:, 0] = np.nan
    m = BayesianGPLVM(Y, latent_dim=2, num_inducing=3, seed=0)
    if hasattr(m, "infer_latent"):
        m.infer_latent(Ys, max_iters=2)
    d = DynamicalGPLVM(Y, np.arange(8.0), latent_dim=2, num_inducing=3, seed=0)
    d.infer_sequence(Ys, np.arange(3.0), max_iters=2)
    Ys[1, 1] = np.nan  # two missing patterns: the grouped path too
    d.infer_sequence(Ys, np.arange(3.0), max_iters=2)


def is_warm() -> bool:
    return _done


def ensure_warm(console=_print, make_page=None) -> float:
    """Idempotent; returns the seconds the first call took. ``console(msg)`` hears what
    it is waiting for (None: silent). ``make_page()`` builds the page that is rendered
    once to warm the plotting path (``app.create_app``; None: no page is rendered). It is
    passed in, not imported: the app imports this module to warm itself up."""
    with _lock:
        if not _done:
            _warm(console or (lambda msg: None), make_page)
    return _seconds


def _warm(say, make_page) -> None:
    global _done, _seconds
    t0 = time.perf_counter()
    limit_server_blas()
    try:
        cold = not numba_cache_is_warm()
        say("compiling the Numba kernels (empty compile cache: about a minute on 2 cores, once; "
            "later starts load them in about a second)..." if cold else "loading the compiled Numba kernels...")
        # cache files of older sources are recompiled too: say so if the load drags on
        slow = threading.Timer(SLOW_LOAD_S, say, ("the cached kernels are out of date: compiling "
                                                 "them (about a minute on 2 cores, once)...",))
        slow.daemon = True
        if not cold:
            slow.start()
        try:
            compile_kernels()
        finally:
            slow.cancel()
        say(f"kernels ready ({time.perf_counter() - t0:.1f} s)")
    except Exception:  # warm-up is an optimisation: never fatal
        log.exception("numba warm-up failed")
    import holoviews as hv

    hv.extension("bokeh", logo=False)
    large_start = False
    if make_page is not None:
        try:
            # build and render one throwaway page: imports the whole plotting path, reads the
            # start-up model and data set into their caches and runs every kernel the first
            # page needs (prediction, variance grid, the played sequence) with the real shapes
            t1 = time.perf_counter()
            say("loading the default model and its data (CMU motion capture) and rendering a first page...")
            from bokeh.document import Document
            from panel.io.state import set_curdoc, state

            # as the current document while it renders: Panel caches the stylesheet models per
            # current document, and a first session that is waiting for this warm-up must not
            # have its own repointed by this render (to cdn.holoviz.org: fetched, and failing,
            # offline)
            doc = Document()
            with set_curdoc(doc):
                page = make_page()
                page.get_root(doc)
            state._stylesheets.pop(doc, None)
            say(f"default page ready ({time.perf_counter() - t1:.1f} s): {page.state.dataset_name}")
            from .density import is_large

            large_start = page.state.model is not None and is_large(page.state.latent()[0].shape[0])
        except Exception:
            log.exception("explorer page warm-up failed")
    if large_start:
        # the start-up model is drawn through Datashader: its other colourings compile now,
        # not at the first change of the colour select (other processes compile when they
        # first open a large model, ~4 s, rather than at every server start)
        try:
            t2 = time.perf_counter()
            from .density import warm as warm_density

            warm_density()
            say(f"Datashader ready for large models ({time.perf_counter() - t2:.1f} s)")
        except Exception:
            log.exception("datashader warm-up failed")
    dt = time.perf_counter() - t0
    log.info("explorer warm-up took %.2f s", dt)
    say(f"warm-up done in {dt:.1f} s; serving")
    _seconds = dt
    _done = True
