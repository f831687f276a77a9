"""L-BFGS-B driver: progress bar, callback hook (live progress / stop), non-finite guard,
per-block scaling and a test that stops when the bound stops moving.

The objective handed to scipy is the negative bound. An evaluation that fails (a Cholesky
that does not factor, a non-finite value) returns a huge finite value so that the line
search backs off; only iterates whose bound is finite are ever kept (``best``), so a bad
step never reaches the model.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import numpy as np
from scipy.optimize import minimize

from .linalg import CholeskyError
from .progress import ProgressBar

#: value returned to the optimiser for a failed evaluation (it then shortens the step)
_BAD_VALUE = 1e300

#: L-BFGS memory (pairs of steps). scipy's default is 10; on the oil and synthetic sets 30
#: pairs reached a given bound in fewer evaluations (bench/README.md, "Fit quality").
#: The cost per iteration, O(MAXCOR x parameters), is small beside one evaluation.
MAXCOR = 30


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


def block_scales(fun_and_grad: Callable, x: np.ndarray, free: np.ndarray, blocks: list[slice],
                 rng: np.random.Generator, eps: float = 1e-4) -> tuple[np.ndarray, int]:
    """Per-block scales of the free entries of x that even out the curvature of the blocks.

    For each block (a slice of x) the curvature along a random unit direction v inside the
    block, c_b = v^T (g(x + eps v) - g(x)) / eps, estimates the mean diagonal of the Hessian
    over the block; the block's entries get the scale 1 / sqrt(|c_b|), so that the optimiser
    (which works on x / scale) sees curvature ~1 in every block. One gradient per block.
    Returns (scale for the free entries, evaluations used).
    """
    f0, g0 = fun_and_grad(x)
    n_evals = 1
    scale = np.ones(x.size)
    if not (np.isfinite(f0) and np.all(np.isfinite(g0))):
        return scale[free], n_evals
    for sl in blocks:
        idx = np.arange(x.size)[sl]
        idx = idx[free[idx]]
        if idx.size == 0:
            continue
        v = rng.standard_normal(idx.size)
        v /= np.linalg.norm(v)
        x1 = x.copy()
        x1[idx] += eps * v
        try:
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                f1, g1 = fun_and_grad(x1)
        except (CholeskyError, ArithmeticError, np.linalg.LinAlgError, ValueError):
            continue
        finally:
            n_evals += 1
        c = abs(float(v @ (g1[idx] - g0[idx]))) / eps
        if np.isfinite(c) and c > 0:
            scale[idx] = 1.0 / np.sqrt(c)
    s = scale[free]
    return s / np.exp(np.mean(np.log(s))), n_evals  # geometric mean 1: only ratios matter


class Optimisation:
    """State of one fit across its phases (iteration and evaluation counts, best point)."""

    def __init__(self, max_iters: int, callback: Callable | None, progress: bool | None):
        self.max_iters = int(max_iters)
        self.callback = callback
        self.iteration = 0
        self.n_evals = 0
        self.n_rejected = 0
        self.stopped = False
        self.converged = False
        self.best_x: np.ndarray | None = None
        self.best_f = -np.inf
        self.t0 = time.perf_counter()
        self.bar = ProgressBar(max_iters, "fit", enabled=progress)
        self.history: list[float] = []

    def run(self, fun_and_grad: Callable, x0: np.ndarray, free: np.ndarray, iters: int,
            phase: str, scale: np.ndarray | None = None, window: int = 0,
            min_gain: float = 0.0) -> np.ndarray:
        """Maximise fun_and_grad over the ``free`` entries of x for ``iters`` iterations.

        fun_and_grad(x_full) -> (bound, gradient (size of x_full)); may raise CholeskyError /
        ArithmeticError (FloatingPointError; ZeroDivisionError when a trial step underflows the
        noise variance to 0). ``scale`` (one per free entry): the optimiser works on
        x_free / scale. Convergence test: with ``window`` > 0, the phase ends once the best
        bound has grown by less than ``min_gain`` over the last ``window`` iterations.
        Returns the best full vector seen (also in ``best_x``).
        """
        x_full = x0.copy()
        scale = np.ones(int(free.sum())) if scale is None else np.asarray(scale, dtype=np.float64)

        def objective(y):
            self.n_evals += 1
            x_full[free] = y * scale
            try:
                with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                    f, g = fun_and_grad(x_full)
            except (CholeskyError, ArithmeticError, np.linalg.LinAlgError, ValueError):
                f, g = np.nan, None
            if not np.isfinite(f) or g is None or not np.all(np.isfinite(g)):
                self.n_rejected += 1
                return _BAD_VALUE, np.zeros_like(y)
            return -f, -g[free] * scale

        start_iter = self.iteration
        best_trace: list[float] = []  # best bound after each iteration of this phase

        def on_iteration(intermediate_result):
            x = x_full.copy()
            x[free] = intermediate_result.x * scale
            f = -float(intermediate_result.fun)
            if np.isfinite(f) and f > -_BAD_VALUE / 2 and f >= self.best_f:
                self.best_f, self.best_x = f, x  # accepted iterates only
            self.iteration += 1
            self.history.append(f)
            best_trace.append(self.best_f)
            self.bar.update(self.iteration, f"bound {f: .6g} [{phase}]")
            if self.callback is not None:
                p = FitProgress(self.iteration, self.max_iters, self.n_evals, f, phase,
                                time.perf_counter() - self.t0)
                if self.callback(p):
                    self.stopped = True
                    raise _Stop
            if self.iteration - start_iter >= iters:
                raise _Stop
            if window > 0 and len(best_trace) > window and \
                    best_trace[-1] - best_trace[-1 - window] < min_gain:
                self.converged = True
                raise _Stop

        f0, _ = objective(x0[free] / scale)
        if f0 < _BAD_VALUE:
            self.best_f, self.best_x = -f0, x0.copy()
        if iters <= 0:
            return self.best_x if self.best_x is not None else x0
        try:
            minimize(objective, x0[free] / scale, jac=True, method="L-BFGS-B", callback=on_iteration,
                     options=dict(maxiter=iters + 1, maxfun=10 * iters + 20, maxcor=MAXCOR,
                                  ftol=1e-12, gtol=1e-8))
        except _Stop:
            pass
        return self.best_x if self.best_x is not None else x0
