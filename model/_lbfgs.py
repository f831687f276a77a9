"""Unconstrained L-BFGS for the fit: the steps of scipy's L-BFGS-B without its bounds
machinery, which cost as much as the bound itself on small models.

The fit's parameters are unconstrained (transforms, not bounds), so L-BFGS-B's Cauchy
point and subspace minimisation reduce to the quasi-Newton step d = -H g with H the
L-BFGS inverse Hessian (H0 = s.y / y.y of the newest pair), which the two-loop recursion
gives in 4 m p flops (``_two_loop``, compiled, SIMD). L-BFGS-B with memory 50
spent ~5 ns per parameter and stored pair on it: 1.3 ms of a 2.9 ms evaluation at
N=300, Q=8, M=30 (bench/README.md, "Fit quality").

Everything else is L-BFGS-B's, so the iterates follow it: the first step has length 1
along -g, later steps start at 1; the line search is the same Moré-Thuente search
(scipy's ``DCSRCH``, ftol 1e-3, gtol 0.9, xtol 0.1, at most 20 evaluations); a pair is
stored only if s.y > eps * (-g.s); a failed line search with memory clears the memory
and tries again along -g, without memory it ends the run ("ABNORMAL", status 2); the run
converges (status 0) when max |g| <= gtol or when an iteration lowers f by at most
ftol * max(|f_old|, |f|, 1); it ends at maxiter / maxfun with status 1.

One addition, for a noisy f. The collapsed bound of a model with a small noise variance
and nearly redundant inducing inputs is a difference of terms ~10^4 times larger than
itself, and its rounding errors are amplified by beta / lambda_min(Kuu): on a USPS class
model (bound 5.8e5, beta 2.6e3, cond(Kuu) 1.9e7) parameters 1e-12 apart give bounds ~10
apart. A Moré-Thuente search cannot resolve its step there and fails while the bound is
still rising by ~20 per iteration. When it fails, the run estimates the noise eps_f of f
(the spread of f at ``NOISE_PROBES`` points 1e-10 away) and switches to a backtracking
search with the relaxed Armijo test f(x + a d) <= f(x) + c1 a g.d + 2 eps_f of Shi, Xie,
Byrd & Nocedal ("A noise-tolerant quasi-Newton algorithm for unconstrained optimization",
SIAM J. Optim. 2022), re-estimating eps_f every ``NOISE_EVERY`` iterations; such a step
skips the ftol test, so a noisy run ends at its budget or when even this search finds
no step. Until the first failure the iterates are L-BFGS-B's (on a smooth f the
Moré-Thuente search rarely fails).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Callable

import numpy as np
from numba import njit

from ._numba_config import CACHE

try:  # scipy's Python port of MINPACK-2's dcsrch (private; present in the scipy we test)
    from scipy.optimize._dcsrch import DCSRCH
except ImportError:  # pragma: no cover
    DCSRCH = None

#: False if this scipy lacks the line search: the fit then calls scipy's L-BFGS-B itself
AVAILABLE = DCSRCH is not None and hasattr(DCSRCH, "_iterate")

EPS = np.finfo(float).eps
LS_FTOL, LS_GTOL, LS_XTOL, LS_MAXFEV = 1e-3, 0.9, 0.1, 20
STPMAX = 1e10
#: the noise-tolerant search (module docstring): probes of f for eps_f, their distance
#: relative to 1 + |x_i|, iterations between estimates, Armijo constant, halvings of the step
NOISE_PROBES, NOISE_STEP, NOISE_EVERY = 4, 1e-10, 50
ARMIJO_C1, MAX_HALVINGS = 1e-4, 30
#: values at least this large are failed evaluations (the fit returns 1e300 for them)
HUGE = 1e299


@dataclass
class LbfgsResult:
    x: np.ndarray
    fun: float
    status: int  # 0 converged, 1 iteration / evaluation limit, 2 abnormal (line search)
    message: str
    nit: int
    nfev: int


@njit(cache=CACHE, fastmath=True, nogil=True)
def _two_loop(g, S, Y, rho, count, head, d):
    """d = -H g from the ``count`` newest pairs stored circularly in S, Y (m, p) with the
    newest at ``head`` (two-loop recursion, H0 = gamma I with gamma = s.y / y.y of the
    newest pair). Returns g.d."""
    m, p = S.shape
    alpha = np.empty(m)
    for a in range(p):
        d[a] = g[a]
    for t in range(count):  # newest to oldest
        k = (head - t) % m
        v = 0.0
        for a in range(p):
            v += S[k, a] * d[a]
        v *= rho[k]
        alpha[t] = v
        for a in range(p):
            d[a] -= v * Y[k, a]
    yy = 0.0
    for a in range(p):
        yy += Y[head, a] * Y[head, a]
    gamma = 1.0 / (rho[head] * yy)
    for a in range(p):
        d[a] *= gamma
    for t in range(count - 1, -1, -1):  # oldest to newest
        k = (head - t) % m
        b = 0.0
        for a in range(p):
            b += Y[k, a] * d[a]
        b = alpha[t] - rho[k] * b
        for a in range(p):
            d[a] += b * S[k, a]
    gd = 0.0
    for a in range(p):
        d[a] = -d[a]
        gd += g[a] * d[a]
    return gd


def warmup() -> None:
    """Compile (or load) ``_two_loop``."""
    mem = _Memory(2, 3)
    mem.add(np.ones(3), np.full(3, 2.0), -1.0)
    mem.direction(np.ones(3))


class _Memory:
    """The m newest (s, y) pairs, stored circularly."""

    def __init__(self, m: int, p: int):
        self.S = np.zeros((m, p))
        self.Y = np.zeros((m, p))
        self.rho = np.zeros(m)
        self.count = 0
        self.head = m - 1

    def direction(self, g: np.ndarray) -> tuple[np.ndarray, float]:
        """(d, g.d): -H g, or -g / |g| without memory (or if -H g is not a descent
        direction, which also clears the memory)."""
        if self.count:
            d = np.empty_like(g)
            gd = _two_loop(g, self.S, self.Y, self.rho, self.count, self.head, d)
            if gd < 0.0 and np.isfinite(gd):
                return d, float(gd)
            self.clear()
        nrm = float(np.sqrt(g @ g))
        return -g / nrm if nrm > 0.0 else np.zeros_like(g), -nrm

    def add(self, s: np.ndarray, y: np.ndarray, gs: float) -> None:
        sy = float(s @ y)
        if not sy > EPS * -gs:  # L-BFGS-B's curvature test: skip the pair
            return
        m = self.S.shape[0]
        h = (self.head + 1) % m
        self.S[h], self.Y[h], self.rho[h] = s, y, 1.0 / sy
        self.head = h
        self.count = min(self.count + 1, m)

    def clear(self) -> None:
        self.count = 0

    @property
    def empty(self) -> bool:
        return self.count == 0


def minimize_lbfgs(fun: Callable, x0: np.ndarray, maxiter: int, maxfun: int, memory: int = 50,
                   ftol: float = 1e-12, gtol: float = 1e-8,
                   callback: Callable | None = None) -> LbfgsResult:
    """Minimise fun(x) -> (f, gradient) from x0. ``callback(intermediate)`` gets an object
    with ``x`` and ``fun`` after every iteration (it may raise to stop the run)."""
    x = np.array(x0, dtype=np.float64)
    f, g = fun(x)
    nfev = 1
    mem = _Memory(memory, x.size)
    nit = 0
    noise = None  # (eps_f, iteration of the estimate) once the run is in its noisy mode

    def done(status, message):
        return LbfgsResult(x, float(f), status, message, nit, nfev)

    if np.max(np.abs(g), initial=0.0) <= gtol:
        return done(0, "CONVERGENCE: NORM OF PROJECTED GRADIENT <= PGTOL")
    while True:
        if nit >= maxiter or nfev >= maxfun:
            return done(1, "STOP: TOTAL NO. OF ITERATIONS OR EVALUATIONS REACHED LIMIT")
        d, gd = mem.direction(g)
        relaxed = noise is not None
        found = (None, None, 0) if relaxed else _line_search(fun, x, f, gd, d)
        nfev += found[2]
        if found[0] is None:
            if noise is None or nit - noise[1] >= NOISE_EVERY:
                eps_f, k = noise_level(fun, x, f)
                nfev += k
                noise = (eps_f, nit)
            found = _relaxed_line_search(fun, x, f, gd, d, noise[0])
            nfev += found[2]
            relaxed = True
        if found[0] is None:
            if mem.empty:
                return done(2, "ABNORMAL: LINE SEARCH FAILED")
            mem.clear()  # spoiled curvature memory: try again along -g
            continue
        stp, (f_new, g_new) = found[0], found[1]
        s = stp * d
        x_new = x + s
        mem.add(s, g_new - g, float(g @ s))
        f_old = f
        x, f, g = x_new, f_new, g_new
        nit += 1
        if callback is not None:
            callback(SimpleNamespace(x=x, fun=f))
        if not relaxed and (f_old - f) <= ftol * max(abs(f_old), abs(f), 1.0):
            return done(0, "CONVERGENCE: REL_REDUCTION_OF_F <= FACTR*EPSMCH")
        if np.max(np.abs(g)) <= gtol:
            return done(0, "CONVERGENCE: NORM OF PROJECTED GRADIENT <= PGTOL")


def _line_search(fun, x, f0, gd0, d):
    """L-BFGS-B's line search along d from step 1: (step, (f, g) there, evaluations), or
    (None, None, evaluations) if no step lowered f within ``LS_MAXFEV`` evaluations
    (``search_step``)."""
    def phi(stp):
        fg = fun(x + stp * d)
        return fg[0], float(fg[1] @ d), fg

    return search_step(phi, f0, gd0)


def search_step(phi, f0: float, gd0: float):
    """The Moré-Thuente search of L-BFGS-B on phi(step) -> (f, df/dstep, payload) from step
    1: (step, payload there, evaluations), or (None, None, evaluations) if no step lowered f
    within ``LS_MAXFEV`` evaluations. As in L-BFGS-B, a search that ends with a warning
    (rounding errors, the xtol test) keeps the last point it evaluated, here only if that
    point lowered f. (The distributed fit's line search too: ``distributed.vlbfgs``.)"""
    if not gd0 < 0.0:
        return None, None, 0
    search = DCSRCH(None, None, LS_FTOL, LS_GTOL, LS_XTOL, 0.0, STPMAX)
    stp, phi_v, dphi, task = 1.0, f0, gd0, b"START"
    last = None
    for n in range(1, LS_MAXFEV + 1):
        stp, phi_v, dphi, task = search._iterate(stp, phi_v, dphi, task)
        if task[:2] != b"FG":
            break
        f, dphi, payload = phi(stp)
        last = (stp, f, payload)
        phi_v = f
    else:
        n = LS_MAXFEV + 1
        task = b"WARNING: too many evaluations"
    evals = n - 1
    if last is None or not last[1] < f0:
        return None, None, evals
    if task[:4] == b"CONV" or task[:4] == b"WARN":
        return last[0], last[2], evals
    return None, None, evals


def noise_level(fun, x, f0) -> tuple[float, int]:
    """(eps_f, evaluations): the standard deviation of f at x and at ``NOISE_PROBES``
    points x + u, u_i = +-NOISE_STEP (1 + |x_i|) (fixed signs: the same x gives the same
    estimate). At that distance f's own change is far below its rounding noise. A probe
    that failed (the fit returns a huge value there) leaves eps_f infinite: no relaxed step."""
    rng = np.random.default_rng(x.size)
    vals = [f0]
    for _ in range(NOISE_PROBES):
        u = rng.choice((-1.0, 1.0), size=x.size) * NOISE_STEP * (1.0 + np.abs(x))
        vals.append(fun(x + u)[0])
    vals = np.asarray(vals, dtype=np.float64)
    if not np.all(np.abs(vals) < HUGE):
        return np.inf, NOISE_PROBES
    return float(np.std(vals)), NOISE_PROBES


def _relaxed_line_search(fun, x, f0, gd0, d, eps_f):
    """Backtracking from step 1 with the noise-tolerant Armijo test (module docstring):
    (step, (f, g) there, evaluations), or (None, None, evaluations)."""
    if not (gd0 < 0.0 and np.isfinite(eps_f)):
        return None, None, 0
    stp = 1.0
    for n in range(1, MAX_HALVINGS + 1):
        fg = fun(x + stp * d)
        if fg[0] <= f0 + ARMIJO_C1 * stp * gd0 + 2.0 * eps_f and np.all(np.isfinite(fg[1])):
            return stp, fg, n
        stp *= 0.5
    return None, None, MAX_HALVINGS
