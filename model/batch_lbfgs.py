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
coordinate by more than xtol (below that the objective's rounding noise wins), when a line search along steepest descent
fails (one along an L-BFGS direction clears the memory and retries), or at max_iters.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

C1 = 1e-4


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


def _two_loop(g, S, Y, rho):
    """-H g for every problem: g (k, p); S, Y (k, m, p) oldest..newest (zero rows where the
    memory is not filled, which contribute nothing); rho (k, m) = 1 / s.y (0 if empty)."""
    k, m, p = S.shape
    q = g.copy()
    alpha = np.zeros((k, m))
    for j in range(m - 1, -1, -1):
        a = rho[:, j] * np.einsum("kp,kp->k", S[:, j], q)
        q -= a[:, None] * Y[:, j]
        alpha[:, j] = a
    yy = np.einsum("kp,kp->k", Y[:, -1], Y[:, -1])
    sy = np.where(rho[:, -1] > 0, 1.0 / np.where(rho[:, -1] > 0, rho[:, -1], 1.0), 0.0)
    gamma = np.where((rho[:, -1] > 0) & (yy > 0), sy / np.where(yy > 0, yy, 1.0), 1.0)
    r = gamma[:, None] * q
    for j in range(m):
        b = rho[:, j] * np.einsum("kp,kp->k", Y[:, j], r)
        r += (alpha[:, j] - b)[:, None] * S[:, j]
    return -r


def minimize_batch(fun, x0, max_iters: int = 200, memory: int = 10, gtol: float = 1e-5,
                   ftol: float = 2.2e-9, xtol: float = 0.0, max_ls: int = 25) -> BatchResult:
    """Minimise n independent problems. ``fun(X (k, p), idx (k,)) -> (f (k,), G (k, p))``
    evaluates problems ``idx`` at the rows of X (non-finite f marks a failed evaluation)."""
    x = np.array(x0, dtype=np.float64, copy=True)
    n, p = x.shape
    m = int(memory)
    f, g = fun(x, np.arange(n))
    f = np.asarray(f, dtype=np.float64).copy()
    g = np.asarray(g, dtype=np.float64).copy()
    n_calls, n_evals = 1, n
    if not np.all(np.isfinite(f)):
        bad = np.flatnonzero(~np.isfinite(f))
        raise FloatingPointError(f"the objective is not finite at the starting points of problems "
                                 f"{bad[:5].tolist()}")
    S = np.zeros((n, m, p))
    Y = np.zeros((n, m, p))
    rho = np.zeros((n, m))
    iters = np.zeros(n, dtype=np.int64)
    status = np.full(n, "max_iters", dtype=object)
    active = np.max(np.abs(g), axis=1) > gtol
    status[~active] = "gtol"
    for _ in range(int(max_iters)):
        idx = np.flatnonzero(active)
        if idx.size == 0:
            break
        gi = g[idx]
        d = _two_loop(gi, S[idx], Y[idx], rho[idx])
        gd = np.einsum("kp,kp->k", gi, d)
        fresh = (rho[idx, -1] == 0) | ~(gd < 0) | ~np.all(np.isfinite(d), axis=1)
        if fresh.any():  # steepest descent with a unit-length first step
            gn = np.linalg.norm(gi[fresh], axis=1)
            d[fresh] = -gi[fresh] / np.maximum(gn, 1e-300)[:, None]
            rho[idx[fresh]] = 0.0
            S[idx[fresh]] = 0.0
            Y[idx[fresh]] = 0.0
            gd[fresh] = -gn
        # backtracking line search, all pending problems evaluated together
        t = np.ones(idx.size)
        xdone = np.zeros(idx.size, dtype=bool)
        f_new = np.full(idx.size, np.nan)
        g_new = np.zeros_like(gi)
        pending = np.arange(idx.size)
        for _ls in range(max_ls):
            xt = x[idx[pending]] + t[pending, None] * d[pending]
            ft, gt = fun(xt, idx[pending])
            n_calls += 1
            n_evals += pending.size
            ft = np.asarray(ft, dtype=np.float64)
            ok = np.isfinite(ft) & np.all(np.isfinite(gt), axis=1)
            armijo = ok & (ft <= f[idx[pending]] + C1 * t[pending] * gd[pending])
            acc = pending[armijo]
            f_new[acc] = ft[armijo]
            g_new[acc] = gt[armijo]
            rej = ~armijo
            # steps below xtol (max |t d|) count as converged: the objective's rounding
            # noise is then larger than any decrease left
            tiny = rej & (t[pending] * np.max(np.abs(d[pending]), axis=1) <= xtol)
            if tiny.any():
                xdone[pending[tiny]] = True
                rej &= ~tiny
            if not rej.any():
                pending = pending[:0]
                break
            pr = pending[rej]
            tr = t[pr]
            fr = ft[rej]
            fin = np.isfinite(fr)
            # minimiser of the quadratic through f(0), f'(0) = gd and f(t)
            den = 2.0 * (fr - f[idx[pr]] - gd[pr] * tr)
            tq = np.where(fin & (den > 0), -gd[pr] * tr * tr / np.where(den > 0, den, 1.0), 0.1 * tr)
            t[pr] = np.where(fin, np.clip(tq, 0.1 * tr, 0.5 * tr), 0.1 * tr)
            pending = pr
        failed = np.zeros(idx.size, dtype=bool)
        failed[pending] = True
        status[idx[xdone]] = "xtol"
        active[idx[xdone]] = False
        okk = ~failed & ~xdone
        ii = idx[okk]
        s_new = t[okk, None] * d[okk]
        y_new = g_new[okk] - g[ii]
        sy = np.einsum("kp,kp->k", s_new, y_new)
        good = sy > 1e-10 * np.linalg.norm(s_new, axis=1) * np.linalg.norm(y_new, axis=1)
        upd = ii[good]
        S[upd] = np.roll(S[upd], -1, axis=1)
        Y[upd] = np.roll(Y[upd], -1, axis=1)
        rho[upd] = np.roll(rho[upd], -1, axis=1)
        S[upd, -1] = s_new[good]
        Y[upd, -1] = y_new[good]
        rho[upd, -1] = 1.0 / sy[good]
        f_old = f[ii].copy()
        x[ii] += s_new
        f[ii] = f_new[okk]
        g[ii] = g_new[okk]
        iters[idx] += 1
        # a failed search from an L-BFGS direction retries from steepest descent
        retry = failed & ~fresh
        rho[idx[retry]] = 0.0
        S[idx[retry]] = 0.0
        Y[idx[retry]] = 0.0
        stop = failed & fresh
        status[idx[stop]] = "line search"
        active[idx[stop]] = False
        done_x = np.max(np.abs(s_new), axis=1) <= xtol
        status[ii[done_x]] = "xtol"
        active[ii[done_x]] = False
        done_g = np.max(np.abs(g[ii]), axis=1) <= gtol
        done_f = (f_old - f[ii]) <= ftol * np.maximum(np.maximum(np.abs(f_old), np.abs(f[ii])), 1.0)
        status[ii[done_f]] = "ftol"
        status[ii[done_g]] = "gtol"
        active[ii[done_g | done_f]] = False
    return BatchResult(x=x, f=f, g=g, iterations=iters, status=status.astype(str),
                       n_calls=n_calls, n_evals=n_evals)
