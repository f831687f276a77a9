"""Vector-free L-BFGS: the fit's L-BFGS with its vectors split into parts kept apart.

The parameters of a distributed model are split into parts: one part per block of rows,
held by a Dask worker (the rows' q(X) parameters), and the global part on the driver (Z,
the kernel, the noise). L-BFGS's two-loop recursion needs its vectors only through dot
products (Chen, Wang, Zhou & Zhang, "Large-scale L-BFGS using MapReduce", NIPS 2014): with
the stored pairs (s_k, y_k) and the gradient g as a basis, every vector of the recursion
is a combination of the basis, and its coefficients follow from the (2m + 1)^2 dot
products of the basis (the Gram matrix, held here). Each part keeps its own pieces of x,
g, the direction d and the m pairs; per iteration it sends one row of dot products
(``Part.accept``) and receives the coefficients of the next direction (``Part.direction``).

The iterates are those of ``bgplvm._lbfgs.minimize_lbfgs`` (L-BFGS-B's steps: the same
first step, line search, curvature test and ends), up to the rounding of the dot products
(``tests/test_distributed.py`` checks them against it), its noise-tolerant search
included: when the Moré-Thuente search fails, f's noise eps_f is estimated from probes at
x + u (each part perturbs its own entries, ``Part.perturb``: with x in one part the probes
are ``_lbfgs.noise_level``'s) and the relaxed backtracking search takes over.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol

import numpy as np

from .._lbfgs import ARMIJO_C1, EPS, HUGE, MAX_HALVINGS, NOISE_EVERY, NOISE_PROBES, NOISE_STEP, search_step

#: rows of ``Part.accept``'s dot products: the new s, y and g
S_ROW, Y_ROW, G_ROW = 0, 1, 2


class Part:
    """One part of the optimiser's vectors (unconstrained parameters of size p), numpy.

    x, g : the iterate and the gradient there (of the minimised f); d : the direction;
    ``trial_x(stp)`` is x + stp d, whose gradient the owner hands to ``set_trial``; the m
    stored pairs are the rows of ``hist`` (2m, p): s_k in row k, y_k in row m + k.
    ``mask``: a bool (p,) of the free entries (frozen ones get gradient 0), or None.
    The pairs' rows (16 m p bytes) are allocated when the first pair is stored; ``best``
    (8 p bytes) is the iterate ``keep`` remembered.
    """

    def __init__(self, x: np.ndarray, memory: int):
        self.x = np.array(x, dtype=np.float64).ravel()
        p = self.x.size
        self.m = int(memory)
        self.hist: np.ndarray | None = None
        self.g = np.zeros(p)
        self.d = np.zeros(p)
        self.mask: np.ndarray | None = None
        self._trial: tuple | None = None  # (x, g) at the last trial point
        self._pair: tuple | None = None  # (s, y) of the last accepted step
        self.best: np.ndarray | None = None  # the iterate ``keep`` remembered

    def direction(self, a: np.ndarray, b: np.ndarray, c: float) -> None:
        """d = sum_k a_k s_k + b_k y_k + c g (coefficients over the m slots)."""
        if self.hist is None or not (np.any(a) or np.any(b)):
            self.d = c * self.g
        else:
            self.d = np.concatenate([a, b]) @ self.hist + c * self.g

    def perturb(self, k: int) -> None:
        """d = u_k, the k-th probe of ``_lbfgs.noise_level`` (u_i = +-NOISE_STEP (1 + |x_i|),
        signs from a generator seeded by the part's size): f's noise is read at trial(1)."""
        rng = np.random.default_rng(self.x.size)
        for _ in range(k + 1):
            signs = rng.choice((-1.0, 1.0), size=self.x.size)
        self.d = signs * NOISE_STEP * (1.0 + np.abs(self.x))
        if self.mask is not None:  # frozen entries stay where they are
            self.d = np.where(self.mask, self.d, 0.0)

    def trial_x(self, stp: float) -> np.ndarray:
        return self.x + stp * self.d

    def set_trial(self, x: np.ndarray, g: np.ndarray) -> tuple[float, float]:
        """Keep (x, g) of a trial point; returns (g.d, max |g|) there."""
        if self.mask is not None:
            g = np.where(self.mask, g, 0.0)
        self._trial = (x, g)
        return float(g @ self.d), float(np.max(np.abs(g), initial=0.0))

    def accept(self) -> np.ndarray:
        """Move to the last trial point. Returns the dot products (3, 2m + 3) of the new
        s, y, g (rows) with the stored s_k, y_k (columns 0..2m-1) and with s, y, g."""
        x, g = self._trial
        s, y = x - self.x, g - self.g
        self.x, self.g = x, g
        self._pair = (s, y)
        new = np.stack([s, y, g])
        old = np.zeros((3, 2 * self.m)) if self.hist is None else new @ self.hist.T
        return np.concatenate([old, new @ new.T], axis=1)

    def keep(self) -> None:
        """Remember x, the best iterate so far (the fit returns to it with ``to_best``)."""
        self.best = self.x.copy()

    def to_best(self) -> None:
        """x = the remembered iterate (its gradient comes with the next trial at step 0)."""
        if self.best is not None:
            self.x = self.best.copy()

    def commit(self, slot: int) -> None:
        """Store the last accepted step's (s, y) in ``slot`` (the driver keeps the pair)."""
        s, y = self._pair
        if self.hist is None:
            self.hist = np.zeros((2 * self.m, s.size))
        self.hist[slot], self.hist[self.m + slot] = s, y


class Parts(Protocol):
    """What the optimiser needs of all parts together (``minimize_vlbfgs``)."""

    def direction(self, a: np.ndarray, b: np.ndarray, c: float) -> None: ...
    def perturb(self, k: int) -> None: ...  # every part's d = its k-th noise probe (``Part.perturb``)
    def trial(self, stp: float) -> tuple[float, float, float]: ...  # f, g.d, max|g| (summed / max over parts)
    def accept(self) -> np.ndarray: ...  # summed (3, 2m + 3) dot products
    def commit(self, slot: int) -> None: ...


class Gram:
    """The dot products among the stored pairs and g, and the two-loop recursion on them."""

    def __init__(self, m: int):
        self.m = m
        self.SS, self.SY, self.YY = (np.zeros((m, m)) for _ in range(3))  # SY[k, l] = s_k . y_l
        self.gS, self.gY = np.zeros(m), np.zeros(m)
        self.gg = 0.0
        self.rho = np.zeros(m)
        self.count = 0
        self.head = m - 1

    def set_g(self, dots: np.ndarray) -> None:
        """The new g's dot products (row G_ROW of ``Part.accept``'s) with the slots and itself."""
        m = self.m
        self.gS, self.gY, self.gg = dots[G_ROW, :m].copy(), dots[G_ROW, m:2 * m].copy(), float(dots[G_ROW, 2 * m + 2])

    def add(self, dots: np.ndarray, gs_old: float) -> int | None:
        """Keep the accepted step's pair if it passes L-BFGS-B's curvature test
        s.y > eps (-g_old.s); returns its slot, or None (pair skipped)."""
        m = self.m
        sy = float(dots[S_ROW, 2 * m + 1])
        if not sy > EPS * -gs_old:
            return None
        h = (self.head + 1) % m
        s_row, y_row = dots[S_ROW], dots[Y_ROW]
        self.SS[h, :], self.SS[:, h] = s_row[:m], s_row[:m]
        self.SY[h, :] = s_row[m:2 * m]  # s_h . y_l
        self.SY[:, h] = y_row[:m]  # s_k . y_h
        self.YY[h, :], self.YY[:, h] = y_row[m:2 * m], y_row[m:2 * m]
        self.SS[h, h], self.SY[h, h], self.YY[h, h] = s_row[2 * m], sy, y_row[2 * m + 1]
        self.gS[h], self.gY[h] = dots[G_ROW, 2 * m], dots[G_ROW, 2 * m + 1]
        self.rho[h] = 1.0 / sy
        self.head = h
        self.count = min(self.count + 1, m)
        return h

    def clear(self) -> None:
        self.count = 0

    def two_loop(self) -> tuple[np.ndarray, np.ndarray, float, float]:
        """Coefficients (a, b, c) of d = -H g over (s_k, y_k, g), and g.d; -g / |g|
        without memory or if -H g is not a descent direction (which clears the memory)."""
        m = self.m
        if self.count:
            a, b, c = np.zeros(m), np.zeros(m), 1.0  # q = g
            alpha = np.zeros(m)
            order = [(self.head - t) % m for t in range(self.count)]  # newest first
            for t, k in enumerate(order):
                alpha[t] = self.rho[k] * self._s_dot(a, b, c, k)
                b[k] -= alpha[t]
            h = self.head
            gamma = 1.0 / (self.rho[h] * self.YY[h, h])
            a, b, c = gamma * a, gamma * b, gamma * c
            for t in range(self.count - 1, -1, -1):  # oldest first
                k = order[t]
                beta = self.rho[k] * self._y_dot(a, b, c, k)
                a[k] += alpha[t] - beta
            a, b, c = -a, -b, -c
            gd = float(a @ self.gS + b @ self.gY + c * self.gg)
            if gd < 0.0 and np.isfinite(gd):
                return a, b, c, gd
            self.clear()
        nrm = float(np.sqrt(max(self.gg, 0.0)))
        c = -1.0 / nrm if nrm > 0.0 else 0.0
        return np.zeros(m), np.zeros(m), c, -nrm

    def _s_dot(self, a, b, c, k) -> float:
        """s_k . (sum_l a_l s_l + b_l y_l + c g)."""
        return float(a @ self.SS[:, k] + b @ self.SY[k, :] + c * self.gS[k])

    def _y_dot(self, a, b, c, k) -> float:
        """y_k . (sum_l a_l s_l + b_l y_l + c g)."""
        return float(a @ self.SY[:, k] + b @ self.YY[:, k] + c * self.gY[k])


@dataclass
class VlbfgsResult:
    fun: float
    status: int  # 0 converged, 1 iteration / evaluation limit, 2 abnormal (line search)
    message: str
    nit: int
    nfev: int


def minimize_vlbfgs(parts: Parts, maxiter: int, maxfun: int, memory: int = 50,
                    ftol: float = 1e-12, gtol: float = 1e-8,
                    callback: Callable | None = None) -> VlbfgsResult:
    """Minimise f over the parts from their current x (``minimize_lbfgs``'s steps and ends).
    ``callback(f)`` after every iteration (it may raise to stop the run); the parts then
    hold the iterate."""
    gram = Gram(memory)
    parts.direction(np.zeros(memory), np.zeros(memory), 0.0)
    f, _, gmax = parts.trial(0.0)
    gram.set_g(parts.accept())
    nfev, nit = 1, 0
    noise = None  # (eps_f, iteration of the estimate) once the run is in its noisy mode

    def done(status, message):
        return VlbfgsResult(float(f), status, message, nit, nfev)

    if gmax <= gtol:
        return done(0, "CONVERGENCE: NORM OF PROJECTED GRADIENT <= PGTOL")
    while True:
        if nit >= maxiter or nfev >= maxfun:
            return done(1, "STOP: TOTAL NO. OF ITERATIONS OR EVALUATIONS REACHED LIMIT")
        a, b, c, gd = gram.two_loop()
        parts.direction(a, b, c)
        relaxed = noise is not None
        stp, found, evals = (None, None, 0) if relaxed else _line_search(parts, f, gd)
        nfev += evals
        if stp is None:
            if noise is None or nit - noise[1] >= NOISE_EVERY:
                eps_f, k = _noise_level(parts, f)
                nfev += k
                noise = (eps_f, nit)
                parts.direction(a, b, c)  # the probes moved d
            stp, found, evals = _relaxed_line_search(parts, f, gd, noise[0])
            nfev += evals
            relaxed = True
        if stp is None:
            if gram.count == 0:
                return done(2, "ABNORMAL: LINE SEARCH FAILED")
            gram.clear()  # spoiled curvature memory: try again along -g
            continue
        f_new, _, gmax = found  # the parts' trial is at the accepted step (the last evaluated)
        dots = parts.accept()
        gram.set_g(dots)  # first: ``add`` then sets g's products with the pair it keeps
        slot = gram.add(dots, stp * gd)
        if slot is not None:
            parts.commit(slot)
        f_old, f = f, f_new
        nit += 1
        if callback is not None:
            callback(f)
        if not relaxed and (f_old - f) <= ftol * max(abs(f_old), abs(f), 1.0):
            return done(0, "CONVERGENCE: REL_REDUCTION_OF_F <= FACTR*EPSMCH")
        if gmax <= gtol:
            return done(0, "CONVERGENCE: NORM OF PROJECTED GRADIENT <= PGTOL")


def _noise_level(parts: Parts, f0: float) -> tuple[float, int]:
    """``_lbfgs.noise_level`` on the parts: (eps_f, evaluations); the parts' d is left at
    the last probe (the caller sets the direction again)."""
    vals = [f0]
    for k in range(NOISE_PROBES):
        parts.perturb(k)
        vals.append(parts.trial(1.0)[0])
    vals = np.asarray(vals, dtype=np.float64)
    if not np.all(np.abs(vals) < HUGE):
        return np.inf, NOISE_PROBES
    return float(np.std(vals)), NOISE_PROBES


def _relaxed_line_search(parts: Parts, f0: float, gd0: float, eps_f: float):
    """``_lbfgs._relaxed_line_search`` on the parts: backtracking from step 1 with the
    noise-tolerant Armijo test; the parts' trial is left at the returned step."""
    if not (gd0 < 0.0 and np.isfinite(eps_f)):
        return None, None, 0
    stp = 1.0
    for n in range(1, MAX_HALVINGS + 1):
        fg = parts.trial(stp)
        if fg[0] <= f0 + ARMIJO_C1 * stp * gd0 + 2.0 * eps_f and np.isfinite(fg[1]):
            return stp, fg, n
        stp *= 0.5
    return None, None, MAX_HALVINGS


def _line_search(parts: Parts, f0: float, gd0: float):
    """``_lbfgs.search_step`` on the parts: (step, (f, g.d, max|g|) there, evaluations), or
    (None, None, evaluations). The parts' trial is left at the returned step."""
    def phi(stp):
        fg = parts.trial(stp)
        return fg[0], fg[1], fg

    return search_step(phi, f0, gd0)


class SingleParts:
    """All of x in one in-process ``Part``: ``fun(x) -> (f, gradient)`` (tests, and the
    driver-only case). A failed evaluation is ``fun``'s to report as a huge f, gradient 0."""

    def __init__(self, fun: Callable, x0: np.ndarray, memory: int):
        self.fun = fun
        self.part = Part(x0, memory)

    def direction(self, a, b, c):
        self.part.direction(a, b, c)

    def perturb(self, k):
        self.part.perturb(k)

    def trial(self, stp):
        x = self.part.trial_x(stp)
        f, g = self.fun(x)
        gd, gmax = self.part.set_trial(x, g)
        return float(f), gd, gmax

    def accept(self):
        return self.part.accept()

    def commit(self, slot):
        self.part.commit(slot)
