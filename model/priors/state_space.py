"""The dynamical prior in state-space form: the same q(X) as ``DynamicalPrior`` in O(n d^3).

For a time kernel with a stationary state-space form (``bgplvm.state_space``: x(t) = H s(t),
transitions A_i = expm(F dt_i), Q_i = P_inf - A_i P_inf A_i^T), the prior p(x_q | t) of one
latent dimension over a sequence is a linear-Gaussian Markov chain over the states, and the
q(x_q) of SFixedPointQ,

    q(x_q) = N(Kt mu_bar_q, S_q),   S_q = (Kt^{-1} + Lambda_q)^{-1},

is that chain's posterior under Gaussian sites of precisions lambda_qi (pseudo-observations
with noise variance 1 / lambda_qi). The parameters are the dense form's (mu_bar, lambda and
the time kernel's), so the two forms are interchangeable at the same parameter vector
(``DynamicalGPLVM.with_time_prior``). Per sequence and latent dimension, with n frames and
state dimension d, everything below costs O(n d^3) time and O(n d^2) memory
(``_state_space_numba``):

- mu = Kt mu_bar by two linear recursions (forward over k(t_i - t_j), j <= i, and backward);
- S_ii = H Ps_i H from the covariance Kalman filter (prior-predictive Pp_i, filtered Pf_i,
  c_i = H Pp_i H) and the RTS smoother (gains G_i, smoothed Ps_i);
- KL_q = 1/2 [tr(Kt^{-1} S) + mu_bar^T Kt mu_bar + log|I + Lambda Kt| - n]  (KLasSummationOverQ)
       = 1/2 [-sum_i lambda_i S_ii + mu_bar . mu + sum_i log(1 + lambda_i c_i)],
  as Kt^{-1} S = I - Lambda S and |Kt + Lambda^{-1}| = prod_i (c_i + 1/lambda_i) (the
  prediction-error decomposition).

Gradients of F = F_hat - KL, with g_mu = dF_hat/dmu, g = dF_hat/dS and w = g + lambda / 2
(the dense module's formulas, evaluated without any n x n matrix):

    dF/dmu_bar = Kt (g_mu - mu_bar)
    dF/dlambda_i = -sum_j S_ij^2 w_j          (two gain recursions, ``s_squared_times``)
    dF/dtheta = sum_i (g_mu - mu_bar / 2)_i dmu_i + w_i dS_ii - lambda_i dc_i / (2 (1 + lambda_i c_i))

where dmu = (dKt/dtheta) mu_bar, dS and dc are the derivatives of the recursions along
(dA/dtheta, dQ/dtheta, dP_inf/dtheta): one tangent pass per time-kernel parameter.

A row with lambda = 0 carries no site: ``latent_at`` merges new times into a training
sequence that way and reads q(x*) off the smoother (the Kalman predictor / smoother, no
n x n matrix).
"""

from __future__ import annotations

import threading

import numpy as np

from .. import _numba_config as cfg
from .._restore import is_restoring
from . import _state_space_numba as _nb
from .base import QX
from .dynamical import INIT_S_MEDIAN, DynamicalPrior


def _c(a) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float64)


class Chains:
    """Times of independent sequences stored one after another (rows ``starts[b]:starts[b+1]``
    are sequence b, in time order) and the state-space model's transitions between them."""

    def __init__(self, t: np.ndarray, starts: np.ndarray):
        self.t = _c(t)
        self.starts = np.ascontiguousarray(starts, dtype=np.int64)
        self.N = int(self.starts[-1])
        dt = np.ones(self.N)  # the last row of each sequence has no transition (not read)
        dt[:-1] = np.diff(self.t)
        last = np.zeros(self.N, dtype=bool)
        last[self.starts[1:] - 1] = True
        dt[last] = dt[~last][0] if (~last).any() else 1.0  # any step of the data (no new entry)
        # transitions are computed for the distinct steps only (one for evenly spaced frames)
        self.steps, ai = np.unique(dt, return_inverse=True)
        self.ai = np.ascontiguousarray(ai.reshape(-1), dtype=np.int64)

    def model(self, ss):
        """(A, Qn, P, H, dims) for state space ``ss`` at these times: A, Qn = P - A P A^T
        (U, d, d) for the U distinct steps (``ai`` indexes them), dims = (0,) * d (or () for
        d > SPECIALISED_DIMS: ``_state_space_numba``)."""
        A = _c(ss.A(self.steps))
        P = _c(ss.P_inf)
        Qn = np.empty_like(A)
        _nb.process_noise(A, P, Qn)
        d = P.shape[0]
        return A, Qn, P, _c(ss.H), (0,) * d if d <= _nb.SPECIALISED_DIMS else ()

    def derivatives(self, ss, model, params=None) -> dict:
        """{param: (dA, dQn, dP)} (U, d, d), (U, d, d), (d, d) for the parameters in
        ``params`` (None: all)."""
        A, _, P, _, _ = model
        grads = {}
        dAs = ss.dA(self.steps)
        for k, dP in ss.dP_inf.items():
            if params is not None and k not in params:
                continue
            dA, dP = _c(dAs[k]), _c(dP)
            dQ = np.empty_like(A)
            _nb.process_noise_tangent(A, dA, P, dP, dQ)
            grads[k] = (dA, dQ, dP)
        return grads


class StateSpaceQ:
    """q(X) under the state-space prior on ``chains`` with the (mu_bar, lambda)
    parametrisation (module docstring); rows in the chains' order."""

    def __init__(self, chains: Chains):
        self.chains = chains
        self._work: dict = {}  # thread id -> (generation, buffers): see ``_buffers``

    def _buffers(self, Qd: int, d: int) -> tuple[int, dict]:
        """This thread's work arrays for Qd latent dimensions and state dimension d, reused
        from one evaluation to the next (fresh (Q, N, d, d) arrays each time cost as much
        again in page faults as the passes writing them), and their generation: a chain
        whose buffers were overwritten by a later ``q`` recomputes them."""
        tid = threading.get_ident()
        gen, buf = self._work.get(tid, (0, None))
        N = self.chains.N
        if buf is None or buf["Pp"].shape != (Qd, N, d, d):
            buf = {k: np.empty((Qd, N, d, d)) for k in ("Pp", "Pf", "Ps", "G", "Lp")}
        self._work[tid] = (gen + 1, buf)
        return gen + 1, buf

    def _tangent_buffers(self, shape) -> tuple[np.ndarray, np.ndarray]:
        """Two (Q, N, d, d) work arrays of the tangent passes, kept with this thread's."""
        buf = self._work[threading.get_ident()][1]
        if buf.get("dPp") is None or buf["dPp"].shape != shape:
            buf["dPp"], buf["dPf"] = np.empty(shape), np.empty(shape)
        return buf["dPp"], buf["dPf"]

    def _generation(self) -> int:
        return self._work.get(threading.get_ident(), (0, None))[0]

    def _threads(self):
        return cfg.thread_limit(self.chains.N)

    def kt(self, model, V: np.ndarray) -> np.ndarray:
        """Kt V (N, k) for the block-diagonal Kt of ``model`` = (A, Qn, P, H)."""
        A, _, P, H, dims = model
        out = np.empty(V.shape)
        with self._threads():
            _nb.kt_matvec(A, self.chains.ai, P, H, self.chains.starts, _c(V), out)
        return out

    def covariances(self, model, lam_T: np.ndarray, reuse: bool = False, derivs=None) -> dict:
        """Filter / smoother covariances for lambda^T (Q, N): Pp, Pf, Ps, G, Lp (Q, N, d, d),
        S and c (Q, N); with ``derivs`` ({param: (dA, dQn, dP)}, ``Chains.derivatives``) also
        their tangents "dS", "dc": {param: (Q, N)}. ``reuse``: in this thread's work arrays
        (``_buffers``; "gen" is their generation)."""
        A, Qn, P, H, dims = model
        Qd, N, d = lam_T.shape[0], self.chains.N, H.shape[0]
        if reuse:
            gen, buf = self._buffers(Qd, d)
            c = {k: buf[k] for k in ("Pp", "Pf", "Ps", "G", "Lp")}
            c["gen"] = gen
        else:
            c = {k: np.empty((Qd, N, d, d)) for k in ("Pp", "Pf", "Ps", "G", "Lp")}
        c["S"], c["c"] = np.empty((Qd, N)), np.empty((Qd, N))
        names = list(derivs or {})
        p = len(names)
        dA = np.empty((p, *A.shape))
        dQ = np.empty((p, *A.shape))
        dP = np.empty((p, d, d))
        for j, k in enumerate(names):
            dA[j], dQ[j], dP[j] = derivs[k]
        dS, dc = np.empty((p, Qd, N)), np.empty((p, Qd, N))
        if p and reuse:
            dPp, dPf = self._tangent_buffers(c["Pp"].shape)
        else:
            dPp = dPf = np.empty((Qd, N, d, d) if p else (0, 0, 0, 0))
            if p:
                dPf = np.empty_like(dPp)
        with self._threads():
            bad = _nb.covariances(A, self.chains.ai, Qn, P, H, self.chains.starts, lam_T, c["Pp"],
                                  c["Pf"], c["Ps"], c["G"], c["Lp"], c["S"], c["c"], dA, dQ, dP,
                                  dS, dc, dPp, dPf, dims)
        if bad:
            raise np.linalg.LinAlgError("a predicted state covariance of the time prior is not "
                                        "positive definite (time kernel parameters out of range?)")
        c["dS"] = {k: dS[j] for j, k in enumerate(names)}
        c["dc"] = {k: dc[j] for j, k in enumerate(names)}
        return c

    def solve_ridge(self, model, Y: np.ndarray, ridge: float) -> np.ndarray:
        """(Kt + ridge I)^{-1} Y (N, k) = (Y - m) / ridge, m the smoothed means of x given
        observations Y with noise variance ``ridge`` (m = Kt (Kt + ridge I)^{-1} Y)."""
        A, _, _, H, dims = model
        lam = np.full((Y.shape[1], self.chains.N), 1.0 / ridge)
        cov = self.covariances(model, lam)
        m = np.empty((Y.shape[1], self.chains.N))
        with self._threads():
            _nb.smoothed_means(A, self.chains.ai, H, self.chains.starts, lam, cov["Pp"], cov["G"],
                               _c(Y.T), m)
        return (Y - m.T) / ridge

    def q(self, ss, mu_bar: np.ndarray, lam: np.ndarray, grad: bool = True, offset=None,
          params=None):
        """Marginals mu, S (N, Q), the KL and (with ``grad``) chain(gmu, gS) -> (dmu_bar,
        dlambda (N, Q), {time-kernel parameter: derivative}) for the time-kernel parameters
        in ``params`` (None: all; their tangents are computed here, in the same pass as the
        covariances). ``offset`` (N, Q): a fixed prior mean m (q's means m + Kt mu_bar; the
        KL is that of x - m)."""
        model = self.chains.model(ss)
        mu_bar, lam_T = _c(mu_bar), _c(lam.T)
        Kmb = self.kt(model, mu_bar)
        derivs = self.chains.derivatives(ss, model, params) if grad else {}
        cov = self.covariances(model, lam_T, reuse=True, derivs=derivs)
        S, c = cov["S"], cov["c"]
        kl = 0.5 * float(-np.sum(lam_T * S) + np.sum(mu_bar * Kmb) + np.sum(np.log1p(lam_T * c)))
        mu = Kmb if offset is None else Kmb + offset
        S_out = np.maximum(S.T, 1e-300)
        if not grad:
            return mu, S_out, kl, None

        def chain(gmu, gS):
            nonlocal cov
            if cov.get("gen") != self._generation():  # a later q reused the work arrays
                cov = self.covariances(model, lam_T, derivs=derivs)
            w = _c(gS.T) + 0.5 * lam_T
            dmb = self.kt(model, _c(gmu) - mu_bar)
            ssw = np.empty_like(w)
            A, _, P, H, dims = model
            with self._threads():
                _nb.s_squared_times(H, self.chains.starts, cov["Ps"], cov["G"], w, ssw, dims)
            dtheta = {}
            a = _c(gmu) - 0.5 * mu_bar
            r = lam_T / (2.0 * (1.0 + lam_T * c))
            for k, (dA, _, dP) in derivs.items():
                dmu = np.empty_like(mu_bar)
                with self._threads():
                    _nb.kt_matvec_tangent(A, dA, self.chains.ai, P, dP, H, self.chains.starts,
                                          mu_bar, dmu)
                dtheta[k] = float(np.sum(a * dmu) + np.sum(w * cov["dS"][k]) - np.sum(r * cov["dc"][k]))
            return dmb, -ssw.T, dtheta

        return mu, S_out, kl, chain


class StateSpacePrior(DynamicalPrior):
    """``DynamicalPrior`` computed in state-space form (module docstring): the same free
    parameters and q(X), O(N d^3) instead of sum_s n_s^3 per latent dimension.

    ``state_space_options``: passed to ``bgplvm.state_space.state_space`` (e.g. the order of
    an rbf approximation, the kernel error of a periodic one)."""

    form = "state_space"
    def __init__(self, t, sequences, Q, time_kernel="matern32", state_space_options=None):
        super().__init__(t, sequences, Q, time_kernel)
        from ..state_space import state_space

        self._given_options = dict(state_space_options or {})
        self.state_space_options = dict(self._given_options)
        self._pin_periodic_order()
        state_space(self.time_kernel, **self.state_space_options)  # fails now if it has no form
        self.order = np.concatenate(self._index)
        self._in_order = bool(np.array_equal(self.order, np.arange(self.N)))  # rows grouped already
        starts = np.cumsum([0] + [len(ix) for ix in self._index])
        self.chains = Chains(self.t[self.order], starts)
        self.core = StateSpaceQ(self.chains)

    def _pin_periodic_order(self) -> None:
        """Fix the number of harmonics of a periodic part (unless given): the one its
        tolerance needs at the current lengthscale. Chosen afresh at every evaluation it
        would follow the lengthscale during a fit, and each change makes the bound jump by up
        to the tolerance (line searches then fail). Saved with the model (``spec``)."""
        from ..state_space import PERIODIC_DEFAULT_MAX_ERROR, periodic_coefficients

        given = self._given_options
        if "order" in given or "periodic_order" in given:
            return
        tol = given.get("periodic_max_error", given.get("max_error", PERIODIC_DEFAULT_MAX_ERROR))
        for part in self.time_kernel.parts:
            if part.name == "periodic":
                w, _ = periodic_coefficients(float(part.params["lengthscale"]), None, tol)
                self.state_space_options["periodic_order"] = len(w) - 1

    def state_space(self):
        """The time kernel's state-space form at its current parameters."""
        from ..state_space import state_space

        return state_space(self.time_kernel, **self.state_space_options)

    # --- rows: the prior's order <-> the chains' order ---------------------------------------
    def _to_chain(self, a: np.ndarray) -> np.ndarray:
        return _c(a) if self._in_order else _c(a[self.order])

    def _from_chain(self, a: np.ndarray) -> np.ndarray:
        if self._in_order:
            return a
        out = np.empty_like(a)
        out[self.order] = a
        return out

    def q(self, values, grad=True):
        self.sync(values)
        # a skipped (frozen) parameter saves a tangent pass, about a filter and smoother
        free = [k for k in self.time_kernel.params if "time_kernel." + k not in self.skip_gradients]
        mu, S, kl, chain = self.core.q(self.state_space(), self._to_chain(values["mu_bar"]),
                                       self._to_chain(values["lambda"]), grad=grad, params=free)
        mu, S = self._from_chain(mu), self._from_chain(S)
        if not grad:
            return QX(mu=mu, S=S, kl=kl, chain=None)

        def full_chain(gmu, gS):
            dmb, dlam, dtheta = chain(self._to_chain(gmu), self._to_chain(gS))
            return {"mu_bar": self._from_chain(dmb), "lambda": self._from_chain(dlam),
                    **{"time_kernel." + k: np.asarray(dtheta.get(k, 0.0)) for k in self.time_kernel.params}}

        return QX(mu=mu, S=S, kl=kl, chain=full_chain)

    # --- starting values without n x n matrices --------------------------------------------
    def _mean_prior_variance(self) -> float:
        return float(np.mean(self.time_kernel.Kdiag(self.t[:1])))

    def initial_values(self, mu0, S0):
        """As ``DynamicalPrior.initial_values`` (mu_bar = (Kt + r I)^{-1} mu0, one lambda
        calibrated to INIT_S_MEDIAN), with the solve by the Kalman smoother."""
        if is_restoring():
            return super().initial_values(mu0, S0)
        self._pin_periodic_order()  # at the starting lengthscale (set after __init__)
        model = self.chains.model(self.state_space())
        r = 1e-3 * self._mean_prior_variance()
        mu_bar = self._from_chain(self.core.solve_ridge(model, self._to_chain(mu0), r))
        return {"mu_bar": mu_bar, "lambda": np.full_like(mu0, self._calibrate_lambda_ss(model)),
                **self.time_values()}

    def values_from_q(self, mu, S):
        model = self.chains.model(self.state_space())
        k0 = self._mean_prior_variance()
        mu_bar = self._from_chain(self.core.solve_ridge(model, self._to_chain(mu), 1e-6 * k0))
        lam = 1.0 / S - 1.0 / self.time_kernel.Kdiag(self.t)[:, None]
        return {"mu_bar": mu_bar, "lambda": np.maximum(lam, 1e-3)}

    def _calibrate_lambda_ss(self, model) -> float:
        """``DynamicalPrior._calibrate_lambda`` (the longest 4 sequences, bisection on log
        lambda) with S from the filter and smoother."""
        sizes = np.diff(self.chains.starts)
        longest = np.argsort(-sizes, kind="stable")[:4]
        rows = np.concatenate([np.arange(self.chains.starts[b], self.chains.starts[b + 1])
                               for b in longest])
        sub = StateSpaceQ(Chains(self.chains.t[rows], np.cumsum([0] + [sizes[b] for b in longest])))
        sub_model = sub.chains.model(self.state_space())
        lo, hi = -9.0, 9.0
        for _ in range(30):
            mid = 0.5 * (lo + hi)
            S = sub.covariances(sub_model, np.full((1, rows.size), np.exp(mid)))["S"]
            lo, hi = (mid, hi) if np.median(S) > INIT_S_MEDIAN else (lo, mid)
        return float(np.exp(0.5 * (lo + hi)))

    # --- forecasting by the Kalman predictor / smoother -----------------------------------------
    def latent_at(self, values, t_new, sequence):
        """q(X*) at times t_new of training sequence ``sequence`` (qxstar), as
        ``DynamicalPrior.latent_at``: the new times join the sequence as rows without a site
        (lambda = 0), mu* = (Kt mu_bar)* and var(x*) from the smoother. A time equal to a
        training time is that frame."""
        self.sync(values)
        if sequence is None:
            return super().latent_at(values, t_new, None)
        ix = self.rows_of(sequence)
        t_s = self.t[ix]
        pos = np.searchsorted(t_s, t_new)
        same = (pos < len(t_s)) & (t_s[np.minimum(pos, len(t_s) - 1)] == t_new)
        extra = np.unique(t_new[~same])
        t_all = np.concatenate([t_s, extra])
        order = np.argsort(t_all, kind="stable")
        n_s = len(t_s)
        Qd = self.Q
        lam = np.zeros((len(t_all), Qd))
        lam[:n_s] = values["lambda"][ix]
        mb = np.zeros((len(t_all), Qd))
        mb[:n_s] = values["mu_bar"][ix]
        core = StateSpaceQ(Chains(t_all[order], np.array([0, len(t_all)])))
        mu, S, _, _ = core.q(self.state_space(), mb[order], lam[order], grad=False)
        where = np.empty(len(t_all), dtype=np.intp)
        where[order] = np.arange(len(t_all))  # row of t_all[k] in the sorted chain
        k = np.minimum(np.searchsorted(extra, t_new), max(extra.size - 1, 0))
        row = np.where(same, where[np.minimum(pos, n_s - 1)],
                       where[np.minimum(n_s + k, len(t_all) - 1)])
        return mu[row], np.maximum(S[row], 1e-12)

    # --- files -----------------------------------------------------------------------------
    def spec(self):
        out = {**super().spec(), "time_prior": self.form}
        if self.state_space_options:
            out["state_space_options"] = self.state_space_options
        return out
