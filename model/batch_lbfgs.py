"""L-BFGS for many small independent problems at once (test-time inference of q(x*)).

Minimises f_i(x_i), i = 1..n, x_i in R^p, each problem with its own L-BFGS memory, step
and stopping test, in lockstep: every iteration evaluates the still-active problems in ONE
call ``fun(X, idx)``, so the compiled statistics run over all points together (all cores)
and nothing costs Python time per point. The iterates of problem i depend only on f_i and
its gradient, so solving a problem alone or among others gives the same result.

Per problem and iteration: direction d = -H g from the two-loop recursion (H0 = gamma I
with gamma = s.y / y.y of the newest pair; d = -g, scaled to unit length at the first
step or whenever d is not a descent direction), then a backtracking line search from the
step 1 with the Armijo condition f(x + t d) <= f(x) + c1 t g.d (quadratic interpolation,
t shrunk to [0.1 t, 0.5 t]; a non-finite value shrinks t by 10). A pair (s, y) enters the
memory only if s.y > 1e-10 |s| |y| (curvature), as in robust L-BFGS codes without a Wolfe
search. A problem stops when max |g| <= gtol, when an iteration lowers f by no more than
ftol * max(|f|, 1) (scipy's L-BFGS-B test), when a step (accepted or tried) moves no
coordinate by more than xtol (below that the objective's rounding noise wins), when a line
search along steepest descent fails (one along an L-BFGS direction clears the memory and
retries), or at max_iters. The bookkeeping per problem (two-loop recursion, memory, tests)
is compiled (Numba): with few points, Python overhead would otherwise dominate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from ._numba_config import CACHE

C1 = 1e-4
#: status codes (``BatchResult.status`` holds the names)
ACTIVE, GTOL, FTOL, XTOL, LINE_SEARCH, MAX_ITERS = 0, 1, 2, 3, 4, 5
STATUS_NAMES = np.array(["active", "gtol", "ftol", "xtol", "line search", "max_iters"])

_JIT = dict(cache=CACHE, nogil=True)


@dataclass
class BatchResult:
    """x (n, p), f (n,), g (n, p) at the returned points; iterations (n,) and the reason
    each problem stopped: "gtol", "ftol", "xtol", "line search", "max_iters"."""

    x: np.ndarray
    f: np.ndarray
    g: np.ndarray
    iterations: np.ndarray
    status: np.ndarray
    n_calls: int
    n_evals: int  # sum over problems of function evaluations

    @property
    def converged(self) -> np.ndarray:
        return np.isin(self.status, ("gtol", "ftol", "xtol"))


@njit(**_JIT)
def _directions(idx, g, S, Y, rho, count, head, d, gd, fresh):
    """d[j] = -H g for problem idx[j] (two-loop recursion over its count[i] newest pairs,
    stored circularly in S[i], Y[i], rho[i] with the newest at head[i]); gd[j] = g.d.
    Problems without memory, or whose d is not a descent direction, get d = -g / |g| and
    their memory cleared (fresh[j] = True). Fills d (k, p), gd (k,) and fresh (k,)."""
    m = S.shape[1]
    p = g.shape[1]
    alpha = np.empty(m)
    q = np.empty(p)
    for j in range(idx.shape[0]):
        i = idx[j]
        gi = g[i]
        c = count[i]
        ok = c > 0
        if ok:
            for a in range(p):
                q[a] = gi[a]
            for t in range(c):  # newest to oldest
                s = (head[i] - t) % m
                v = 0.0
                for a in range(p):
                    v += S[i, s, a] * q[a]
                v *= rho[i, s]
                alpha[t] = v
                for a in range(p):
                    q[a] -= v * Y[i, s, a]
            h = head[i]
            yy = 0.0
            for a in range(p):
                yy += Y[i, h, a] * Y[i, h, a]
            gamma = 1.0 / (rho[i, h] * yy) if yy > 0.0 else 1.0
            for a in range(p):
                q[a] *= gamma
            for t in range(c - 1, -1, -1):  # oldest to newest
                s = (head[i] - t) % m
                b = 0.0
                for a in range(p):
                    b += Y[i, s, a] * q[a]
                b = alpha[t] - rho[i, s] * b
                for a in range(p):
                    q[a] += b * S[i, s, a]
            v = 0.0
            for a in range(p):
                d[j, a] = -q[a]
                v -= gi[a] * q[a]
            ok = v < 0.0 and math.isfinite(v)
            gd[j] = v
        fresh[j] = not ok
        if not ok:  # steepest descent, unit length
            count[i] = 0
            nrm = 0.0
            for a in range(p):
                nrm += gi[a] * gi[a]
            nrm = math.sqrt(nrm)
            inv = 1.0 / nrm if nrm > 0.0 else 0.0
            for a in range(p):
                d[j, a] = -gi[a] * inv
            gd[j] = -nrm


@njit(**_JIT)
def _trial(x, idx, pending, t, d):
    """The trial points x + t d of the pending problems (positions into idx), (k, p)."""
    p = x.shape[1]
    X = np.empty((pending.shape[0], p))
    for a in range(pending.shape[0]):
        j = pending[a]
        i = idx[j]
        for c in range(p):
            X[a, c] = x[i, c] + t[j] * d[j, c]
    return X


@njit(**_JIT)
def _line_search_step(pending, idx, ft, gt, f, t, gd, dmax, xtol, f_new, g_new, done, tiny):
    """Armijo test of the pending problems at their trial steps: accepted ones keep
    (f_new, g_new) and are ``done``; rejected ones get t shrunk to the minimiser of the
    quadratic through f(0), f'(0) = g.d and f(t), kept in [0.1 t, 0.5 t] (0.1 t after a
    non-finite value), and are ``tiny`` once t max|d| <= xtol. Returns the still pending."""
    out = np.empty(pending.shape[0], np.int64)
    c = 0
    p = gt.shape[1]
    for a in range(pending.shape[0]):
        j = pending[a]
        fv = ft[a]
        f0 = f[idx[j]]
        tj = t[j]
        ok = math.isfinite(fv) and fv <= f0 + C1 * tj * gd[j]
        if ok:
            for q in range(p):
                if not math.isfinite(gt[a, q]):
                    ok = False
        if ok:
            f_new[j] = fv
            for q in range(p):
                g_new[j, q] = gt[a, q]
            done[j] = True
            continue
        tq = 0.1 * tj
        if math.isfinite(fv):
            den = 2.0 * (fv - f0 - gd[j] * tj)
            if den > 0.0:
                v = -gd[j] * tj * tj / den
                if math.isfinite(v):
                    tq = min(max(v, 0.1 * tj), 0.5 * tj)
        t[j] = tq
        if tq * dmax[j] <= xtol:
            tiny[j] = True
        else:
            out[c] = j
            c += 1
    return out[:c]


@njit(**_JIT)
def _finish(idx, done, tiny, fresh, x, f, g, t, d, f_new, g_new, S, Y, rho, count, head, status,
            iters, gtol, ftol, xtol):
    """End of an iteration for problems idx: accepted steps x += t d with their (s, y) pair
    pushed into the memory (curvature test) and the stopping tests; tiny steps converged
    ("xtol"); a failed search from steepest descent stops ("line search"), one from an
    L-BFGS direction clears the memory (the next iteration retries from steepest descent)."""
    m = S.shape[1]
    p = x.shape[1]
    for j in range(idx.shape[0]):
        i = idx[j]
        iters[i] += 1
        if not done[j]:
            if tiny[j]:
                status[i] = XTOL
            elif fresh[j]:
                status[i] = LINE_SEARCH
            else:
                count[i] = 0
            continue
        sy = 0.0
        ss = 0.0
        yy = 0.0
        smax = 0.0
        gmax = 0.0
        for a in range(p):
            s = t[j] * d[j, a]
            y = g_new[j, a] - g[i, a]
            sy += s * y
            ss += s * s
            yy += y * y
            smax = max(smax, abs(s))
            gmax = max(gmax, abs(g_new[j, a]))
        if sy > 1e-10 * math.sqrt(ss * yy):  # curvature: the pair enters the memory
            h = (head[i] + 1) % m
            for a in range(p):
                S[i, h, a] = t[j] * d[j, a]
                Y[i, h, a] = g_new[j, a] - g[i, a]
            rho[i, h] = 1.0 / sy
            head[i] = h
            count[i] = min(count[i] + 1, m)
        for a in range(p):
            x[i, a] += t[j] * d[j, a]
            g[i, a] = g_new[j, a]
        f_old = f[i]
        f[i] = f_new[j]
        scale = max(max(abs(f_old), abs(f_new[j])), 1.0)
        if gmax <= gtol:
            status[i] = GTOL
        elif smax <= xtol:
            status[i] = XTOL
        elif f_old - f_new[j] <= ftol * scale:
            status[i] = FTOL


def minimize_batch(fun, x0, max_iters: int = 200, memory: int = 10, gtol: float = 1e-5,
                   ftol: float = 2.2e-9, xtol: float = 0.0, max_ls: int = 25) -> BatchResult:
    """Minimise n independent problems. ``fun(X (k, p), idx (k,)) -> (f (k,), G (k, p))``
    evaluates problems ``idx`` at the rows of X (non-finite f marks a failed evaluation)."""
    x = np.array(x0, dtype=np.float64, copy=True)
    n, p = x.shape
    m = int(memory)
    f, g = fun(x, np.arange(n))
    f = np.array(f, dtype=np.float64)
    g = np.array(g, dtype=np.float64)
    n_calls, n_evals = 1, n
    if not np.all(np.isfinite(f)):
        bad = np.flatnonzero(~np.isfinite(f))
        raise FloatingPointError(f"the objective is not finite at the starting points of problems "
                                 f"{bad[:5].tolist()}")
    S = np.zeros((n, m, p))
    Y = np.zeros((n, m, p))
    rho = np.zeros((n, m))
    count = np.zeros(n, dtype=np.int64)
    head = np.zeros(n, dtype=np.int64)
    iters = np.zeros(n, dtype=np.int64)
    status = np.where(np.max(np.abs(g), axis=1) <= gtol, GTOL, ACTIVE).astype(np.int64)
    for _ in range(int(max_iters)):
        idx = np.flatnonzero(status == ACTIVE)
        if idx.size == 0:
            break
        k = idx.size
        d = np.empty((k, p))
        gd = np.empty(k)
        fresh = np.empty(k, dtype=np.bool_)
        _directions(idx, g, S, Y, rho, count, head, d, gd, fresh)
        # backtracking line search, all pending problems evaluated together
        t = np.ones(k)
        f_new = np.empty(k)
        g_new = np.empty((k, p))
        done = np.zeros(k, dtype=np.bool_)  # accepted
        tiny = np.zeros(k, dtype=np.bool_)  # step below xtol: converged
        dmax = np.max(np.abs(d), axis=1)
        pending = np.arange(k)
        for _ls in range(max_ls):
            ft, gt = fun(_trial(x, idx, pending, t, d), idx[pending])
            n_calls += 1
            n_evals += pending.size
            pending = _line_search_step(pending, idx, np.asarray(ft, dtype=np.float64),
                                        np.asarray(gt, dtype=np.float64), f, t, gd, dmax,
                                        float(xtol), f_new, g_new, done, tiny)
            if pending.size == 0:
                break
        _finish(idx, done, tiny, fresh, x, f, g, t, d, f_new, g_new, S, Y, rho, count, head,
                status, iters, float(gtol), float(ftol), float(xtol))
    status[status == ACTIVE] = MAX_ITERS
    return BatchResult(x=x, f=f, g=g, iterations=iters, status=STATUS_NAMES[status],
                       n_calls=n_calls, n_evals=n_evals)
