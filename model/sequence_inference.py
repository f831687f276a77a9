"""Reconstruction of partially observed frames with the dynamical model (test time).

Paper sections "Predictions in the Dynamical Model" and the appendix on the test bound
(app:partialtestBound). The model's parameters and the training q(X) are held fixed; the
new frames Y* (NaN = missing) at times t* get q(X*) with the temporal prior's
parametrisation (SFixedPointQ) and are optimised jointly, as one batch of the test bound
(``bgplvm.testbound``: every frame's observed dims enter the collapsed bound together with
the training data):

    maximise  F_hat(q(X), q(X*)) - KL(q(X*) || p(X*))   over (mu_bar*, lambda*)  (n*, Q)

The prior p(X*) is the time prior of a new sequence, N(0, Kt(t*)), or, for new frames of a
training sequence s, the prior conditioned on that sequence's latent path: with q(X_s)
fixed, E_q(X_s)[KL(q(X*) || p(X* | X_s))] differs from KL(q(X*) || N(m, C)) by a constant,

    m = K_*s mu_bar_s  (= K_*s Kss^{-1} mu_s),   C = K_** - K_*s Kss^{-1} K_s*,

so the coupling through time costs one Cholesky of Kss. A new sequence under a model whose
time prior is in state-space form gets q(X*) in that form (``priors.state_space``: Kalman
filter and smoother over t*, linear in n*, so 1e4+ frames reconstruct); new frames of a
training sequence use the dense conditional above in either form (sequences of up to
CONDITIONAL_MAX_FRAMES frames). q(X*) = N(m + C mu_bar*,
(C^{-1} + Lambda*)^{-1}) per latent dimension (``GaussianBlocks`` with a mean offset).
Initialisation: each frame starts near q(x_n) of the training frame nearest in its
observed dims. The reconstruction is meanFstar / covFstar at q(X*) plus the noise variance,
with q(u) conditioned on the new frames' observed entries as well (``conditioned_predict``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .bound import fstar_moments, posterior_from_stats
from .linalg import JITTER, jittered_cholesky, solve_lower
from .optimize import Optimisation
from .params import Block, ParamLayout
from .priors import GaussianBlocks
from .testbound import TestBound, nearest_rows
from .priors.dynamical import LAMBDA_POSITIVE
from .priors.state_space import Chains, StateSpaceQ
from .transforms import IDENTITY


#: longest training sequence that new frames are conditioned on (``_conditional_prior``:
#: a dense Cholesky of its time-kernel matrix, 8 n^2 bytes)
CONDITIONAL_MAX_FRAMES = 20_000


@dataclass
class SequenceFit:
    """q(X*) of reconstructed frames: mu, S (n*, Q); bound = F_hat(q(X), q(X*)) - KL(q(X*))
    at the optimum; gain its first part minus F_hat(q(X)); iterations, evaluations.

    For new frames of a training sequence the KL is the one against the conditional prior
    N(m, C) (module docstring): it leaves out the term 1/2 sum_q tr(C^-1 A S_q A^T) of the
    expectation over q(X_s), constant in q(X*) but large when C is nearly singular, so such a
    ``bound`` compares with others of the same frames and sequence only."""

    mu: np.ndarray
    S: np.ndarray
    bound: float
    gain: float
    kl: float
    iterations: int
    evaluations: int


def _conditional_prior(model, t_star: np.ndarray, sequence):
    """(m (n*, Q), C (n*, n*)): the time prior of X* alone (sequence None) or given the
    training frames of ``sequence``."""
    if sequence is None:
        return np.zeros((t_star.shape[0], model.latent_dim)), model.time_kernel.K(t_star)
    return conditional_prior(model.prior, model._values(), t_star, sequence)


def conditional_prior(prior, values: dict, t_star: np.ndarray, sequence):
    """(m (n*, Q), C (n*, n*)) of X* at times t_star given the training frames of
    ``sequence`` under a dynamical ``prior`` (dense or state-space form) at ``values``
    (its rows' "mu_bar" (n, Q) and its time kernel's): m = K_*s mu_bar_s,
    C = K_** - K_*s Kss^{-1} K_s* (module docstring). A distributed model runs it on the
    worker that holds the sequence."""
    prior.sync(values)  # the time kernel at its values
    tk = prior.time_kernel
    ix = prior.rows_of(sequence)
    if len(ix) > CONDITIONAL_MAX_FRAMES:
        raise ValueError(
            f"sequence {sequence!r} has {len(ix):,} training frames: new frames of a training "
            f"sequence are conditioned on it through an n x n Cholesky, done for up to "
            f"{CONDITIONAL_MAX_FRAMES:,} frames. Reconstruct them as a new sequence "
            "(sequence=None: linear in their number), or with the sequence's last frames")
    t_s = prior.t[ix]
    L = jittered_cholesky(tk.K(t_s), JITTER * float(np.mean(tk.Kdiag(t_s))),
                          what="Kt of the training sequence")
    Ksn = tk.K(t_star, t_s)
    A = solve_lower(L, Ksn.T)  # L^{-1} K_s*
    m = Ksn @ values["mu_bar"][ix]
    C = tk.K(t_star) - A.T @ A
    return m, 0.5 * (C + C.T)


class SequenceObjective:
    """F_hat(q(X), q(X*)) - F_hat(q(X)) - KL(q(X*) || p(X*)) as a function of the packed
    unconstrained (mu_bar*, lambda*) vector ``x`` (``layout``), with its gradient.

    Ys, observed : (n*, D) frames (any value where not observed) and the observed mask;
    t_star : (n*,) times; sequence : None (a new sequence) or a training sequence's id.
    prior : (m, C) of p(X*) computed elsewhere (``conditional_prior``), or None.
    ``x0`` starts from the q(x_n) of the training frame nearest to each frame in its observed
    dims: mu_bar from those means through the prior with a small ridge (so the start's means
    are near them, not equal), lambda = 1 / S_n.
    """

    def __init__(self, model, Ys, observed, t_star, sequence=None, prior=None):
        stats = model._test_stats()  # training statistics at the model's current parameters
        n, Q = Ys.shape[0], model.latent_dim
        self.F_train = stats.F_hat
        self.tb = TestBound(stats, Ys, observed, batch=np.zeros(n, dtype=np.int64))
        self.layout = ParamLayout([Block("mu_bar", (n, Q), IDENTITY),
                                   Block("lambda", (n, Q), LAMBDA_POSITIVE)])
        nn = nearest_rows(stats, Ys, observed)[:, 0]
        mu0, S0 = model.latent_mean[nn], model.latent_variance[nn]
        self.state_space = sequence is None and getattr(model.prior, "form", "dense") == "state_space"
        if self.state_space:  # linear in n*: no n* x n* matrix
            self.ss = model.prior.state_space()
            self.core = StateSpaceQ(Chains(t_star, np.array([0, n])))
            self.m = np.zeros((n, Q))
            ridge = 0.1 * max(float(np.mean(model.time_kernel.Kdiag(t_star[:1]))), 1e-12)
            mb0 = self.core.solve_ridge(self.core.chains.model(self.ss), mu0, ridge)
        else:
            self.m, self.C = _conditional_prior(model, t_star, sequence) if prior is None else prior
            self.blocks = GaussianBlocks([np.arange(n)])
            ridge = 0.1 * max(float(np.mean(np.diag(self.C))), 1e-12)
            mb0 = np.linalg.solve(self.C + ridge * np.eye(n), mu0 - self.m)
        self.x0 = self.layout.pack({"mu_bar": mb0, "lambda": 1.0 / np.maximum(S0, 1e-8)})

    def _q(self, v, grad):
        if self.state_space:
            # the model's time kernel is fixed here: no tangents
            return self.core.q(self.ss, v["mu_bar"], v["lambda"], grad=grad, params=())
        return self.blocks.q([self.C], v["mu_bar"], v["lambda"], m=self.m, grad=grad)

    def moments(self, x):
        """(mu, S (n*, Q), KL) of q(X*) at x."""
        mu, S, kl, _ = self._q(self.layout.unpack(x), grad=False)
        return mu, S, kl

    def __call__(self, x, grad: bool = True):
        v = self.layout.unpack(x)
        mu, S, kl, chain = self._q(v, grad)
        gain, dmu, dS = self.tb.evaluate(mu, S, grad=grad)
        F = float(gain[0]) - kl
        if not grad:
            return F, None
        dmb, dlam, _ = chain(dmu, dS)
        return F, self.layout.chain(x, {"mu_bar": dmb, "lambda": dlam})


def infer_sequence(model, Ys, observed, t_star, sequence=None, max_iters: int = 500,
                   callback=None, progress: bool | None = False, prior=None) -> SequenceFit:
    """Optimise q(X*) for frames Ys (n*, D) observed where ``observed`` (n*, D) is True, at
    times t_star (n*,) (checked by the caller: ``DynamicalGPLVM.infer_sequence``).
    ``prior``: (m, C) of p(X*) when computed elsewhere (``conditional_prior`` on a
    distributed model's worker); None: from ``model`` and ``sequence``."""
    obj = SequenceObjective(model, Ys, observed, t_star, sequence, prior)
    opt = Optimisation(max_iters, callback, progress)
    with opt.bar:
        x = opt.run(obj, obj.x0, np.ones(obj.layout.size, dtype=bool), max_iters, "q(X*)")
    mu, S, kl = obj.moments(x)
    F = obj(x, grad=False)[0]
    return SequenceFit(mu=mu, S=S, bound=F + obj.F_train, gain=F + kl, kl=kl,
                       iterations=opt.iteration, evaluations=opt.n_evals)


def check_fill(fit, Y_star, D: int) -> tuple[np.ndarray, np.ndarray]:
    """(Ys, observed) of the frames Y_star (n*, D; NaN = missing) whose q(X*) is ``fit`` (a
    ``SequenceFit`` of as many frames), checked for ``fill_missing``."""
    from .testbound import check_test_outputs

    Ys, observed = check_test_outputs(Y_star, D)
    if fit.mu.shape[0] != Ys.shape[0]:
        raise ValueError(f"fit holds q(X*) of {fit.mu.shape[0]} frames but Y_star has "
                         f"{Ys.shape[0]} rows: pass the frames the fit was inferred from")
    return Ys, observed


def conditioned_predict(model, mu, S, Ys, observed, include_noise: bool = True):
    """meanFstar / covFstar (eqs. meanFstar, covFstar) at q(X*) = N(mu, diag S) (n*, Q),
    with q(u_d) of every output dimension d conditioned on the training data *and* on the
    entries of Ys (n*, D) observed in column d (``observed``).

    This is the optimal q(u) of the joint bound F(q(X), q(X*)): with partially observed
    frames, column d of the data is the training column plus the new frames' observed
    entries, so its statistics gain their terms, Psi2_d = Psi2 + sum_{n: y*_nd observed}
    Psi2(x*_n) and Psi1^T y_d += sum_n psi1(x*_n) y*_nd. (vargplvm does the same for the
    fully observed frames of a test sequence before predicting the rest,
    vargplvmDynamicsUpdateModelTestVar.) Columns with the same pattern of observed frames
    share one q(u); columns observed in no frame use the training q(u). Returns (mean, var)
    (n*, D), the noise included with ``include_noise``."""
    Kuu, beta, Psi2g, col_group, PsiY = model._column_stats()  # one group unless fitted with NaN
    Z = model.inducing_inputs
    psi0, Psi1, Psi2n = model.kernel.psi_stats_n(mu, S, Z)
    Psi2c = model.kernel.psi2n_centred(mu, S, Z)
    Yc = np.where(observed, Ys - model.Y_mean, 0.0)
    n, D = Ys.shape
    mean, var = np.empty((n, D)), np.empty((n, D))
    # columns share a q(u) when their new frames' pattern and their training group agree
    patterns, which = np.unique(np.vstack([observed, col_group[None, :]]).T, axis=0, return_inverse=True)
    for p, key in enumerate(patterns):
        rows, g = key[:-1].astype(bool), int(key[-1])
        cols = np.flatnonzero(which.ravel() == p)
        if rows.any():
            post = posterior_from_stats(Kuu, Psi2g[g] + Psi2n[rows].sum(0), beta,
                                        PsiY[:, cols] + Psi1[rows].T @ Yc[np.ix_(rows, cols)])
        elif Psi2g.shape[0] > 1:
            post = posterior_from_stats(Kuu, Psi2g[g], beta, PsiY[:, cols])
        else:
            base = model._posterior()
            post = replace(base, Bmat=base.Bmat[:, cols])
        mean[:, cols], var[:, cols] = fstar_moments(post, psi0, Psi1, Psi2c)
    noise = model.noise_variance if include_noise else 0.0
    return mean + model.Y_mean, var + noise
