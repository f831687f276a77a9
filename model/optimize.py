"""Fit driver: progress bar, callback hook (live progress / stop), non-finite guard,
restarts, around the L-BFGS of ``_lbfgs`` (L-BFGS-B's steps without its bounds code).

The objective handed to the optimiser is the negative bound. An evaluation that fails (a Cholesky
that does not factor, a non-finite value) returns a huge finite value so that the line
search backs off; only iterates whose bound is finite are ever kept (``best``), so a bad
step never reaches the model.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from . import _lbfgs
from ._threads import blas_single_threaded
from .linalg import CholeskyError
from .progress import ProgressBar

#: value returned to the optimiser for a failed evaluation (it then shortens the step)
_BAD_VALUE = 1e300
#: restarts of L-BFGS (memory cleared, from the best point) after it stops early: a
#: step that gains almost nothing (its ftol test) or a failed line search
MAX_RESTARTS = 20
#: a restart counts as useful when the bound grew by this much relative to its size
RESTART_GAIN = 1e-9
#: L-BFGS memory (the number of correction pairs; scipy's L-BFGS-B default is 10). Measured with
#: bench/bench_fit.py (default fit(), 3 seeds, median bound after 500 / 1000 / 2000 / 3000
#: evaluations). Synthetic 3-dim set: memory 10 (noise held 300 iterations): -1,443 / 56 /
#: 416 / 458; 30: -109 / 400 / 455 / 464; 50: -130 / 424 / 483 / 487 (GPy -290 / 294 / 423 /
#: 473). Digits after 500: 30: -35,632, 50: -34,652 (GPy -34,757). Oil: 30: 6,849 / 8,558 /
#: 9,195 / 9,533; 50: 6,868 / 8,649 / 9,473 / 9,897. Its cost is ~5 ns per parameter and
#: correction pair per evaluation: 1.3 ms of synth3's 2.9 ms per evaluation, 5 of oil's 11;
#: ``_lbfgs``'s two-loop recursion costs 0.3 ms there (synth3: 1.9 ms per evaluation).
MEMORY = 50


def _minimize(objective, x0, maxiter, maxfun, memory, ftol, gtol, callback):
    """``_lbfgs.minimize_lbfgs``, or scipy's L-BFGS-B (the same steps, slower) where this
    scipy lacks the line search it borrows."""
    if _lbfgs.AVAILABLE:
        return _lbfgs.minimize_lbfgs(objective, x0, maxiter, maxfun, memory, ftol, gtol, callback)
    from scipy.optimize import minimize

    return minimize(objective, x0, jac=True, method="L-BFGS-B", callback=callback,
                    options=dict(maxiter=maxiter, maxfun=maxfun, maxcor=memory, ftol=ftol, gtol=gtol))


#: ``fit_info``'s keys after every fit, in process and on Dask (``distributed.training``):
#: counts, how it ended (reason: converged, stalled, max_iters, callback, interrupted or
#: error; message: the optimiser's word when it stalled), the best bound, the bound after
#: each iteration, the iterations with the noise held, seconds, and on Dask the workers'
#: losses recovered and the blocks moved to workers that joined (empty in process)
FIT_INFO_KEYS = ("iterations", "evaluations", "rejected_steps", "stopped", "reason", "message", "bound", "history",
                 "held_iterations", "seconds", "recoveries", "rebalances")


@dataclass(frozen=True)
class FitProgress:
    """Passed to the fit callback after every optimiser iteration."""

    iteration: int  # iterations done so far (all phases)
    max_iters: int
    n_evals: int  # bound + gradient evaluations so far
    bound: float  # bound at the current iterate
    phase: str  # "init" (noise held fixed) or "main"
    elapsed: float  # seconds since the fit started


class _Stop(Exception):
    pass


class Optimisation:
    """State of one fit across its phases (iteration and evaluation counts, best point)."""

    def __init__(self, max_iters: int, callback: Callable | None, progress: bool | None):
        self.max_iters = int(max_iters)
        self.callback = callback
        self.iteration = 0
        self.n_evals = 0
        self.n_rejected = 0
        self.stopped = False
        self.best_x: np.ndarray | None = None
        self.best_f = -np.inf
        self.t0 = time.perf_counter()
        self.bar = ProgressBar(max_iters, "fit", enabled=progress)
        self.history: list[float] = []
        self.phase_iterations: dict[str, int] = {}
        #: an ``_interrupt.InterruptRequest`` polled after every iteration (Ctrl-C)
        self.interrupt = None
        self.interrupted = False
        #: called with each accepted iterate (full x) before the callback, so that a callback
        #: reading or saving the model sees the fit as it is (the fit sets the model's x)
        self.on_iterate: Callable | None = None
        #: how the last L-BFGS run ended: (status, message); status 0 converged, 1 its
        #: iteration limit, 2 its line search failed (None: stopped by the fit itself)
        self.last_status: tuple[int, str] | None = None

    # BLAS on one thread for the optimiser too, not only inside the bound: L-BFGS-B's own
    # small products on OpenBLAS's threads cost 3-5 ms per iteration on 2 cores (N=300,
    # Q=8, M=30: 6-8 ms per evaluation in a fit against 2.5-3 ms with one thread)
    @blas_single_threaded
    def run(self, fun_and_grad: Callable, x0: np.ndarray, free: np.ndarray, iters: int,
            phase: str) -> np.ndarray:
        """Maximise fun_and_grad over the ``free`` entries of x for ``iters`` iterations.

        fun_and_grad(x_full) -> (bound, gradient (size of x_full)); may raise CholeskyError /
        ArithmeticError (FloatingPointError; ZeroDivisionError when a trial step underflows the
        noise variance to 0). Returns the best full vector seen (also in ``best_x``).
        """
        x_full = x0.copy()
        sel = slice(None) if free.all() else free  # a slice: no masked copies when all are free

        def objective(xf):
            self.n_evals += 1
            x_full[sel] = xf
            try:
                with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                    f, g = fun_and_grad(x_full)
            except (CholeskyError, ArithmeticError, np.linalg.LinAlgError, ValueError):
                f, g = np.nan, None
            if not np.isfinite(f) or g is None or not np.all(np.isfinite(g)):
                self.n_rejected += 1
                return _BAD_VALUE, np.zeros_like(xf)
            return -f, -g[sel]

        def on_iteration(intermediate_result):
            xk = intermediate_result.x
            x = x_full.copy()
            x[free] = xk
            f = -float(intermediate_result.fun)
            if np.isfinite(f) and f > -_BAD_VALUE / 2 and f >= self.best_f:
                self.best_f, self.best_x = f, x  # accepted iterates only
            self.iteration += 1
            self.phase_iterations[phase] = self.phase_iterations.get(phase, 0) + 1
            self.history.append(f)
            self.bar.update(self.iteration, f"bound {f: .6g} [{phase}]")
            if self.callback is not None:
                if self.on_iterate is not None and np.all(np.isfinite(x)):
                    self.on_iterate(x)
                p = FitProgress(self.iteration, self.max_iters, self.n_evals, f, phase,
                                time.perf_counter() - self.t0)
                if self.callback(p):
                    self.stopped = True
                    raise _Stop
            if self.interrupt is not None and self.interrupt.requested:
                self.interrupted = True
                raise _Stop
            if iters_left() <= 0:
                raise _Stop

        start_iter = self.iteration
        iters_left = lambda: iters - (self.iteration - start_iter)  # noqa: E731
        f0, _ = objective(x0[free])
        if f0 < _BAD_VALUE:
            self.best_f, self.best_x = -f0, x0.copy()
        if iters <= 0:
            return self.best_x if self.best_x is not None else x0
        x_start = x0
        for _ in range(MAX_RESTARTS + 1):
            before = self.best_f
            try:
                res = _minimize(objective, x_start[free], maxiter=iters_left() + 1,
                                maxfun=10 * iters_left() + 20, memory=MEMORY, ftol=1e-12, gtol=1e-8,
                                callback=on_iteration)
            except _Stop:
                self.last_status = None
                break
            self.last_status = (int(res.status), str(res.message))
            # L-BFGS also stops when a step gains almost nothing (ftol) or its line search
            # fails, which a stiff direction (a periodic kernel's period) causes long before
            # an optimum: its curvature memory is spoiled. Start it again from the best point,
            # memory cleared, for as long as that gains something.
            gained = self.best_f - before > RESTART_GAIN * max(1.0, abs(before))
            if res.status not in (0, 2) or self.best_x is None or not gained or iters_left() <= 0:
                break
            x_start = self.best_x
        return self.best_x if self.best_x is not None else x0
