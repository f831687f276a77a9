"""State-space (linear SDE) forms of the stationary time kernels (``bgplvm.time_kernels``).

References: [HS10] J. Hartikainen & S. Sarkka (2010), "Kalman filtering and smoothing
solutions to temporal Gaussian process regression models", IEEE MLSP (Matern: exact;
squared exponential: spectral Taylor series). [SS14] A. Solin & S. Sarkka (2014), "Explicit
link between periodic covariance functions and state space models", AISTATS (periodic:
Bessel series of resonators). [SS19] S. Sarkka & A. Solin (2019), "Applied Stochastic
Differential Equations", Cambridge UP, ch. 12 (GPs as SDEs, GP regression by Kalman
filtering and smoothing); the linear-SDE solution and discretisation in the earlier chapters.

A stationary GP x(t) with covariance k(r) is (exactly or approximately) the output of a
linear time-invariant SDE [HS10, SS19 ch. 12]:

    ds = F s dt + L dW,  x(t) = H s(t),  E[dW dW^T] = q_c dt                          (1)
    F P_inf + P_inf F^T + L q_c L^T = 0         (stationary covariance, Lyapunov)     (2)
    k(t - t') = H expm(F (t - t')) P_inf H^T    for t >= t'                           (3)
    s(t + dt) = A s(t) + e,  A = expm(F dt),  e ~ N(0, Q),  Q = P_inf - A P_inf A^T   (4)

(4) is the exact discretisation between frames dt apart, started from the stationary
distribution: what a Kalman-filter prior needs. ``StateSpace`` gives H (d,), P_inf (d, d),
A(dt) (m, d, d), their parameter derivatives (dP_inf: (d, d), dA: (m, d, d) per parameter)
and Q(A) (m, d, d); d is the state dimension, m the number of steps.

matern12/32/52 (exact [HS10]; lam = sqrt(2 nu) / l, d = nu + 1/2): the companion form of
    (d/dt + lam)^d x = w. With D = diag(1, lam, lam^2), F = lam D F_1 D^-1 where F_1 is the
    companion matrix of (s + 1)^d and N = F_1 + I is nilpotent, so in closed form (a = lam dt)
        A_ij(dt) = lam^(i-j) g_ij(a),  g(a) = e^{-a} sum_{k<d} a^k N^k / k!,           (5)
    e.g. matern32: A = e^{-a} [[1 + a, dt], [-lam^2 dt, 1 - a]];  P_inf = sf2 D P_1 D,
    P_1 = 1, I_2, [[1, 0, -1/3], [0, 1/3, 0], [-1/3, 0, 1]];  dA_ij/dl = -(lam^(i-j) / l)
    [(i - j) g_ij(a) + a g_ij'(a)],  dP_inf,ij/dl = -(i + j) P_inf,ij / l. Only a^k e^{-a}
    appears: finite for every dt >= 0 (A underflows to 0 for dt >> l, never inf * 0).
white (exact): an independent state per frame, d = 1, H = [1], A = 0 (for every dt),
    P_inf = sf2. It carries no memory, so in a sum it adds sf2 to the variance of each frame,
    H P_inf H^T, and nothing between frames: exactly the dense ``K(t)``, whose diagonal holds
    the white part (``K(t) = K_smooth(t) + diag(white_diag(t))``).
bias (exact): d = 1, A = 1, P_inf = sf2 (Q = 0: one constant per sequence).
periodic [SS14]: MacKay's sf2 exp(-2 sin^2(w0 r / 2) / l^2), w0 = 2 pi / T (the same
    parametrisation as [SS14]); with x = l^-2 and ive(j, x) = I_j(x) e^{-x},
        k(r) = sum_{j>=0} q_j^2 cos(j w0 r),  q_0^2 = sf2 ive(0, x),  q_j^2 = 2 sf2 ive(j, x),  (6)
    truncated at order J: a constant state (A = 1) and J undamped resonators, A_j the
    rotation by j w0 dt, P_inf,j = q_j^2 I_2, H_j = [1, 0]; d = 2 J + 1. Since |cos| <= 1,
    sup_r |k_J - k| is the dropped tail sum_{j>J} q_j^2 (attained at r = 0): max_error. J is
    the smallest order with tail <= max_error * sf2 (default 1e-6), or ``order``. dq_j^2/dl
    through d ive(j, x)/dx = (ive(j-1, x) + ive(j+1, x)) / 2 - ive(j, x) (ive(-1) = ive(1));
    the period enters A only. J depends on l (about 1 / l): l = 2: J = 4 (d = 9); l = 1:
    J = 7 (d = 15, error 7.8e-8 sf2); l = 0.5: J = 11 (d = 23, 5.0e-7 sf2); l = 0.25: J = 20.
rbf [HS10]: for unit l and sf2, S(w) = sqrt(2 pi) e^{-w^2/2} ~ sqrt(2 pi) / sum_{k<=N}
    (w^2/2)^k / k!. In s = i w that denominator is (2^N N!)^-1 G(s) G(-s): its 2N roots are
    s = +-sqrt(-2 z) over the roots z of the truncated exponential series e_N(z), and
    G(s) = prod (s - s_i) keeps the N with Re s_i < 0 (spectral factorisation). F_1 is G's
    companion matrix, L = e_N, q_c = sqrt(2 pi) 2^N N! (so the spectral densities agree),
    P_1 from (2) (``solve_continuous_lyapunov`` plus iterative refinement: Q in (4) needs a
    small residual). We RENORMALISE so that H P_1 H^T = 1 (k(0) = sf2 exactly; the
    spectral density is divided by k_N(0) = 1.003 at N = 6) and rescale the states x, x',
    x'', ... (derivatives in t / l) to unit stationary variance, F_1 -> D F_1 D^-1,
    P_1 -> D P_1 D, D = diag(P_1)^-1/2 (H = e_1 unchanged; the scaled P_1 has condition
    number 12 at N = 6, 280 at N = 10). The lengthscale only rescales time:
        A(dt) = expm(F_1 dt / l),  dA/dl = -(dt / l^2) F_1 A,  P_inf = sf2 P_1           (7)
    (exact derivative: F_1 commutes with its exponential; dP_inf/dl = 0). A is computed by
    scaling and squaring (degree-16 Taylor series of F_1 x / 2^k from cached powers of F_1,
    one einsum per squaring count k), vectorised over the steps. Diagonalising F_1 instead,
    A = V diag(e^{s_i dt / l}) V^-1, is faster, but the Vandermonde V has condition number
    2e4 at N = 6 and 5e8 at N = 10, which left Q indefinite at -1e-11; this way Q's
    eigenvalues stay above -1e-14 up to N = 12. max_error = sup_r |k_N - k| (relative to
    sf2 it does not depend on l) on a grid of r in [0, 10 l], refined at the worst point:
        N = 4: 2.17e-2,  6: 4.26e-3 (default),  8: 9.10e-4,  10: 2.03e-4,  12: 4.66e-5  (x sf2).
sums: block-diagonal: H concatenated, P_inf and A block-diagonal, parameters named
    "<part>.<param>" as in ``TimeSum.params``; exact iff all parts are; max_error the sum of
    the parts'; order the largest part order (None when all parts are exact).

A(dt) and dA(dt) are computed for the unique step sizes only (an evenly spaced sequence
has one) and vectorised over them (no Python loop over steps); dt = 0 gives A = I for the
smooth parts (A = 0 for white).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable

import numpy as np
from scipy.linalg import block_diag, solve_continuous_lyapunov
from scipy.optimize import minimize_scalar
from scipy.special import ive

from .time_kernels import (BiasTime, Matern12Time, Matern32Time, Matern52Time, PeriodicTime, RBFTime,
                           TimeKernel, TimeSum, WhiteTime)

#: kinds with a state-space form (sums of them too); the first five are exact
STATE_SPACE_KINDS: tuple[str, ...] = ("matern12", "matern32", "matern52", "white", "bias", "periodic", "rbf")
EXACT_KINDS: tuple[str, ...] = STATE_SPACE_KINDS[:5]
RBF_DEFAULT_ORDER = 6
PERIODIC_DEFAULT_MAX_ERROR = 1e-6


class NoStateSpaceForm(ValueError):
    """A time kernel without a state-space form."""


def _steps(dt) -> np.ndarray:
    dt = np.asarray(dt, dtype=np.float64)
    if dt.ndim > 1:
        raise ValueError(f"time steps must be a 1-D array, got shape {dt.shape}")
    dt = dt.reshape(-1)
    if not np.all(np.isfinite(dt)) or np.any(dt < 0):
        raise ValueError("time steps must be finite and >= 0")
    return dt


@dataclass(eq=False)
class StateSpace:
    """Stationary state-space form of a time kernel (d = state dimension)."""

    H: np.ndarray  # (d,)  x(t) = H @ s(t)
    P_inf: np.ndarray  # (d, d) stationary state covariance, symmetric PSD
    dP_inf: dict[str, np.ndarray]  # param name -> (d, d); same keys, same order as kernel.params
    exact: bool  # True when H expm(F r) P_inf H^T equals the kernel exactly
    max_error: float  # max_r |k_ss(r) - k(r)| (0.0 when exact)
    order: int | None  # approximation order (None when exact)
    # transitions and their derivatives for unique, validated steps (m,) -> (m, d, d)
    _A: Callable[[np.ndarray], np.ndarray] = field(default=None, repr=False, compare=False)
    # (None for a derivative that vanishes identically)
    _dA: Callable[[np.ndarray], dict[str, np.ndarray | None]] = field(default=None, repr=False, compare=False)

    @property
    def d(self) -> int:
        """State dimension."""
        return int(self.H.shape[0])

    def A(self, dt: np.ndarray) -> np.ndarray:
        """(m,) time steps >= 0 -> (m, d, d) transitions expm(F dt)."""
        dt = _steps(dt)
        u, inv = np.unique(dt, return_inverse=True)
        return self._A(u)[inv.reshape(-1)]

    def dA(self, dt: np.ndarray) -> dict[str, np.ndarray]:
        """param name -> (m, d, d) derivative of A(dt) w.r.t. that parameter (every
        parameter of the kernel, in the order of ``kernel.params``). Where A does not depend
        on the parameter (variances, a periodic lengthscale) the entry is a read-only zero
        view, ``np.broadcast_to(0.0, (m, d, d))``, which costs no memory."""
        dt = _steps(dt)
        u, inv = np.unique(dt, return_inverse=True)
        inv = inv.reshape(-1)
        shape = (dt.shape[0], self.d, self.d)
        return {k: np.broadcast_to(np.float64(0.0), shape) if v is None else v[inv]
                for k, v in self._dA(u).items()}

    def Q(self, A: np.ndarray) -> np.ndarray:
        """(m, d, d) process-noise covariances P_inf - A P_inf A^T, symmetrised."""
        A = np.asarray(A, dtype=np.float64)
        Q = self.P_inf - A @ self.P_inf @ np.swapaxes(A, -1, -2)
        return 0.5 * (Q + np.swapaxes(Q, -1, -2))

    def kernel_values(self, r: np.ndarray) -> np.ndarray:
        """(m,) k_ss(r) = H A(r) P_inf H^T for steps r >= 0: the covariance of two different
        frames r apart (a white part adds to the variance of one frame, H P_inf H^T, only)."""
        A = self.A(r)
        return np.einsum("i,mij,jk,k->m", self.H, A, self.P_inf, self.H)


# --- Matern nu = 1/2, 3/2, 5/2 ---------------------------------------------------------------
_MATERN_P1 = {1: np.eye(1), 2: np.eye(2),
              3: np.array([[1.0, 0.0, -1.0 / 3.0], [0.0, 1.0 / 3.0, 0.0], [-1.0 / 3.0, 0.0, 1.0]])}


@lru_cache(maxsize=None)
def _matern_unit(d: int) -> np.ndarray:
    """(d, d, d) C_k = N^k / k!, N = F_1 + I nilpotent, F_1 the companion of (s + 1)^d."""
    F1 = np.zeros((d, d))
    F1[np.arange(d - 1), np.arange(1, d)] = 1.0
    F1[-1] = -np.array([math.comb(d, k) for k in range(d)], dtype=np.float64)
    N = F1 + np.eye(d)
    C = np.empty((d, d, d))
    Nk = np.eye(d)
    for k in range(d):
        C[k] = Nk / math.factorial(k)
        Nk = Nk @ N
    return C


def _matern(kernel: TimeKernel, d: int) -> StateSpace:
    sf2, ell = float(kernel.params["variance"]), float(kernel.params["lengthscale"])
    lam = math.sqrt(2 * d - 1) / ell
    i = np.arange(d)
    diff = (i[:, None] - i[None, :]).astype(np.float64)  # i - j
    scale = lam ** diff  # lam^(i-j)
    P = sf2 * (lam ** (i[:, None] + i[None, :])) * _MATERN_P1[d]
    C = _matern_unit(d)
    k = np.arange(d, dtype=np.float64)

    def parts(u):
        a = lam * u
        powers = a[:, None] ** k[None, :]  # (m, d): a^k
        e = np.exp(-a)[:, None, None]
        g = e * np.einsum("mk,kij->mij", powers, C)  # e^{-a} p(a)
        return a, powers, e, g

    def A(u):
        return scale * parts(u)[3]

    def dA(u):
        a, powers, e, g = parts(u)
        ag1 = e * np.einsum("mk,kij->mij", powers * k, C) - a[:, None, None] * g  # a g'(a)
        return {"variance": None, "lengthscale": -(scale / ell) * (diff * g + ag1)}

    dP = {"variance": P / sf2, "lengthscale": -(i[:, None] + i[None, :]) * P / ell}
    return StateSpace(np.eye(d)[0], P, dP, True, 0.0, None, A, dA)


# --- white and bias ------------------------------------------------------------------------------
def _white(kernel: TimeKernel) -> StateSpace:
    sf2 = float(kernel.params["variance"])
    return StateSpace(np.ones(1), np.full((1, 1), sf2), {"variance": np.ones((1, 1))}, True, 0.0, None,
                      lambda u: np.zeros((u.shape[0], 1, 1)),
                      lambda u: {"variance": None})


def _bias(kernel: TimeKernel) -> StateSpace:
    sf2 = float(kernel.params["variance"])
    return StateSpace(np.ones(1), np.full((1, 1), sf2), {"variance": np.ones((1, 1))}, True, 0.0, None,
                      lambda u: np.ones((u.shape[0], 1, 1)),
                      lambda u: {"variance": None})


# --- periodic (Solin & Sarkka 2014) --------------------------------------------------------------
def periodic_coefficients(lengthscale: float, order: int | None = None,
                          max_error: float = PERIODIC_DEFAULT_MAX_ERROR) -> tuple[np.ndarray, float]:
    """Unit-variance resonator weights q_j^2 / sf2, j = 0..J, and the dropped tail
    sum_{j>J} q_j^2 / sf2 (= sup_r |k_J(r) - k(r)| / sf2). J = ``order`` when given, else the
    smallest J with tail <= max_error."""
    x = float(lengthscale) ** -2
    M, w0 = 16, ive(0, x)
    while ive(M, x) > 1e-30 * w0 or (order is not None and M <= order):  # the rest vanishes
        M *= 2
    j = np.arange(M + 1)
    w = np.where(j == 0, 1.0, 2.0) * ive(j, x)
    tail = np.r_[np.cumsum(w[::-1])[::-1][1:], 0.0]  # tail[J] = sum_{j > J} w_j
    if order is None:
        if not max_error > 0:
            raise ValueError(f"periodic state space: max_error must be positive, got {max_error}")
        order = int(np.argmax(tail <= max_error))
    elif int(order) != order or order < 0:
        raise ValueError(f"periodic state space: order must be an integer >= 0, got {order}")
    order = int(order)
    return w[:order + 1], float(tail[order])


def _periodic(kernel: TimeKernel, order, max_error) -> StateSpace:
    sf2, ell, T = (float(kernel.params[k]) for k in ("variance", "lengthscale", "period"))
    if max_error is None:
        max_error = PERIODIC_DEFAULT_MAX_ERROR
    w, tail = periodic_coefficients(ell, order, max_error)
    J = w.shape[0] - 1
    d = 2 * J + 1
    x = ell ** -2
    j = np.arange(J + 1)
    dive = 0.5 * (ive(np.abs(j - 1), x) + ive(j + 1, x)) - ive(j, x)
    dw_dl = np.where(j == 0, 1.0, 2.0) * dive * (-2.0 / ell**3)
    diag = np.r_[w[0], np.repeat(w[1:], 2)]
    ddiag = np.r_[dw_dl[0], np.repeat(dw_dl[1:], 2)]
    H = np.r_[1.0, np.tile([1.0, 0.0], J)]
    c0 = 1 + 2 * np.arange(J)  # first index of each resonator's block
    w0 = 2.0 * np.pi / T

    def rot(u, c, s):
        out = np.zeros((u.shape[0], d, d))
        out[:, c0, c0] = c
        out[:, c0, c0 + 1] = -s
        out[:, c0 + 1, c0] = s
        out[:, c0 + 1, c0 + 1] = c
        return out

    def theta(u):
        return w0 * u[:, None] * j[None, 1:]  # (m, J)

    def A(u):
        th = theta(u)
        out = rot(u, np.cos(th), np.sin(th))
        out[:, 0, 0] = 1.0
        return out

    def dA(u):
        th = theta(u)
        # d/dT rot(th) = d rot/d th * (-th / T), d rot/d th = rot with (c, s) -> (-s, c)
        f = -th / T
        return {"variance": None, "lengthscale": None, "period": rot(u, -np.sin(th) * f, np.cos(th) * f)}

    dP = {"variance": np.diag(diag), "lengthscale": sf2 * np.diag(ddiag), "period": np.zeros((d, d))}
    return StateSpace(H, sf2 * np.diag(diag), dP, False, sf2 * tail, J, A, dA)


# --- rbf (Hartikainen & Sarkka 2010) -------------------------------------------------------------
_TAYLOR_DEGREE, _TAYLOR_THETA = 16, 0.5  # expm truncation (theta^17 / 17! < 1e-19 relative)


def _expm_scaled(Fpow: np.ndarray, norm: float, x: np.ndarray) -> np.ndarray:
    """(m, N, N) expm(F x) for x (m,) >= 0 by scaling and squaring: the Taylor series in
    F x / 2^k (||.|| <= theta) from the powers Fpow[j] = F^j / j! (one einsum), squared k times;
    vectorised over x, grouped by k (a handful of values)."""
    with np.errstate(divide="ignore"):
        k = np.ceil(np.log2(x * norm / _TAYLOR_THETA))
    k = np.where(np.isfinite(k) & (k > 0), k, 0).astype(np.int64)
    out = np.empty((x.shape[0],) + Fpow.shape[1:])
    j = np.arange(Fpow.shape[0])
    for kk in np.unique(k):
        idx = np.flatnonzero(k == kk)
        E = np.einsum("mj,jab->mab", (x[idx] * 2.0**-kk)[:, None] ** j, Fpow)
        for _ in range(kk):
            E = E @ E
        out[idx] = E
    return out


@lru_cache(maxsize=None)
def _rbf_unit(N: int):
    """(F_1, powers F_1^j / j!, ||F_1||_1, P_1, max_error / sf2) of the order-N form, l = sf2 = 1."""
    z = np.roots([1.0 / math.factorial(k) for k in range(N, -1, -1)])  # e_N(z) = 0
    s = -np.sqrt(-2.0 * z.astype(np.complex128))  # Re s < 0
    a = np.real(np.poly(s))  # monic G: [1, a_{N-1}, ..., a_0]
    F = np.zeros((N, N))
    F[np.arange(N - 1), np.arange(1, N)] = 1.0
    F[-1] = -a[::-1][:N]
    LqL = np.zeros((N, N))
    LqL[-1, -1] = math.sqrt(2.0 * math.pi) * 2.0**N * math.factorial(N)  # q_c
    P = solve_continuous_lyapunov(F, -LqL)
    for _ in range(3):  # iterative refinement: Q = P - A P A^T needs a small residual
        P = P + solve_continuous_lyapunov(F, -(F @ P + P @ F.T + LqL))
        P = 0.5 * (P + P.T)
    # states x, dx, d2x, ... rescaled to unit stationary variance (also renormalises x: H P H^T = 1)
    D = 1.0 / np.sqrt(np.diag(P))
    F, P = D[:, None] * F / D[None, :], D[:, None] * P * D[None, :]
    Fpow = np.empty((_TAYLOR_DEGREE + 1, N, N))
    Fpow[0] = np.eye(N)
    for j in range(1, _TAYLOR_DEGREE + 1):
        Fpow[j] = Fpow[j - 1] @ F / j
    norm = float(np.abs(F).sum(axis=0).max())

    def k_ss(r):
        return _expm_scaled(Fpow, norm, np.atleast_1d(r))[:, 0, :] @ P[:, 0]

    def err(r):
        return abs(float(k_ss(r)[0]) - math.exp(-0.5 * r * r))

    grid = np.linspace(0.0, 10.0, 20001)
    e = np.abs(k_ss(grid) - np.exp(-0.5 * grid**2))
    i = int(np.argmax(e))
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
    best = minimize_scalar(lambda r: -err(r), bounds=(lo, hi), method="bounded", options={"xatol": 1e-10})
    for arr in (F, Fpow, P):
        arr.setflags(write=False)
    return F, Fpow, norm, P, max(float(e[i]), err(float(best.x)))


def rbf_max_error(order: int = RBF_DEFAULT_ORDER) -> float:
    """sup_r |k_N(r) - k(r)| / sf2 of the order-N rbf form (independent of l and sf2)."""
    return _rbf_unit(_rbf_order(order))[4]


def _rbf_order(order) -> int:
    if int(order) != order or order < 1:
        raise ValueError(f"rbf state space: order must be an integer >= 1, got {order}")
    return int(order)


def _rbf(kernel: TimeKernel, order) -> StateSpace:
    sf2, ell = float(kernel.params["variance"]), float(kernel.params["lengthscale"])
    N = _rbf_order(RBF_DEFAULT_ORDER if order is None else order)
    F, Fpow, norm, P1, err = _rbf_unit(N)

    def A(u):
        return _expm_scaled(Fpow, norm, u / ell)

    def dA(u):
        return {"variance": None,
                "lengthscale": (-u / ell**2)[:, None, None] * (F @ A(u))}

    dP = {"variance": P1.copy(), "lengthscale": np.zeros((N, N))}
    return StateSpace(np.eye(N)[0], sf2 * P1, dP, False, sf2 * err, N, A, dA)


# --- sums and dispatch ---------------------------------------------------------------------------
def _sum(names: list[str], parts: list[StateSpace]) -> StateSpace:
    ds = [p.d for p in parts]
    off = np.r_[0, np.cumsum(ds)]
    d = int(off[-1])

    def embed(blocks: list[np.ndarray], m: int | None) -> np.ndarray:
        out = np.zeros((d, d) if m is None else (m, d, d))
        for b, o0, o1 in zip(blocks, off[:-1], off[1:]):
            out[..., o0:o1, o0:o1] = b
        return out

    def one(i: int, b: np.ndarray | None, m: int | None) -> np.ndarray | None:
        if b is None:
            return None
        out = np.zeros((d, d) if m is None else (m, d, d))
        out[..., off[i]:off[i + 1], off[i]:off[i + 1]] = b
        return out

    dP = {f"{n}.{k}": one(i, v, None)
          for i, (n, p) in enumerate(zip(names, parts)) for k, v in p.dP_inf.items()}

    def A(u):
        return embed([p._A(u) for p in parts], u.shape[0])

    def dA(u):
        return {f"{n}.{k}": one(i, v, u.shape[0])
                for i, (n, p) in enumerate(zip(names, parts)) for k, v in p._dA(u).items()}

    orders = [p.order for p in parts if p.order is not None]
    return StateSpace(np.concatenate([p.H for p in parts]), block_diag(*[p.P_inf for p in parts]), dP,
                      all(p.exact for p in parts), float(sum(p.max_error for p in parts)),
                      max(orders) if orders else None, A, dA)


def _kind(part: TimeKernel) -> str | None:
    for cls in (Matern12Time, Matern32Time, Matern52Time, WhiteTime, BiasTime, PeriodicTime, RBFTime):
        if type(part) is cls:
            return cls.name
    return None


def _unsupported(kernel: TimeKernel) -> list[TimeKernel]:
    return [p for p in kernel.parts if _kind(p) is None]


def has_exact_state_space(kernel: TimeKernel) -> bool:
    """True for matern12/32/52, white, bias and sums of those only."""
    return all(_kind(p) in EXACT_KINDS for p in kernel.parts)


def state_space(kernel: TimeKernel, *, order: int | None = None, max_error: float | None = None,
                rbf_order: int | None = None, periodic_order: int | None = None,
                periodic_max_error: float | None = None) -> StateSpace:
    """The stationary state-space form of ``kernel`` at its current parameters.

    Options (ignored by the kinds they do not concern): ``order``, the approximation order of
    rbf (Taylor order N, default 6) and periodic (number of harmonics J) parts; ``max_error``,
    the periodic truncation tolerance relative to its variance (default 1e-6; unused when an
    order is given); ``rbf_order``, ``periodic_order``, ``periodic_max_error`` override them
    per kind in sums. Raises ``NoStateSpaceForm`` for other kernels.
    """
    bad = _unsupported(kernel)
    if bad:
        raise NoStateSpaceForm(f"time kernel {kernel.spec!r} ({', '.join(repr(p) for p in bad)}) has no "
                               f"state-space form; kinds that have one: {', '.join(STATE_SPACE_KINDS)} "
                               "(and sums of them)")
    rbf_order = order if rbf_order is None else rbf_order
    periodic_order = order if periodic_order is None else periodic_order
    periodic_max_error = max_error if periodic_max_error is None else periodic_max_error
    forms = []
    for p in kernel.parts:
        kind = _kind(p)
        if kind in ("matern12", "matern32", "matern52"):
            forms.append(_matern(p, {"matern12": 1, "matern32": 2, "matern52": 3}[kind]))
        elif kind == "white":
            forms.append(_white(p))
        elif kind == "bias":
            forms.append(_bias(p))
        elif kind == "periodic":
            forms.append(_periodic(p, periodic_order, periodic_max_error))
        else:
            forms.append(_rbf(p, rbf_order))
    if isinstance(kernel, TimeSum):
        return _sum([p.name for p in kernel.parts], forms)
    return forms[0]
