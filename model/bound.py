"""The collapsed variational bound (FdFinal) and its gradients w.r.t. the psi statistics.

Stable form (as in the paper's code): with Kuu = Luu Luu^T,

    A = Luu^{-1} Psi2 Luu^{-T},   B = I + beta A = LB LB^T,   R = LB^{-1} Luu^{-1}  (M, M)
    c = R Psi1^T Yf   (M, r)      where Yf Yf^T = Y Y^T

    F_hat = sum_j F_j = -ND/2 log 2pi + ND/2 log beta - D log|LB| - beta/2 tr(Y Y^T)
            + beta^2/2 ||c||^2 - beta D/2 psi0 + beta D/2 tr(A)

which is equation FdFinal summed over the D outputs: log|Kuu|^(1/2) / |beta Psi2 + Kuu|^(1/2)
= -log|LB| and y^T W y = beta y^T y - beta^2 ||R Psi1^T y||^2. Y enters only through a factor
Yf of Y Y^T (``OutputStats``), so D >> N costs O(N^2 D) once and O(N M min(N, D)) per call.

The gradients returned are those GPy's ``var_dtc`` hands to its kernels:
dF/dpsi0 (N,), dF/dPsi1 (N, M), dF/dPsi2 (M, M), dF/dKuu (M, M) and dF/dbeta; each kernel
then maps them onto its own parameters and onto mu, S, Z (``Kernel.psi_gradients``).
With G = (Kuu + beta Psi2)^{-1} = R^T R and E = Psi1^T Yf:

    dF/dpsi0_n = -beta D / 2
    dF/dPsi1   = beta^2 Yf (G E)^T
    dF/dPsi2   = beta D/2 (Kuu^{-1} - G) - beta^3/2 (G E)(G E)^T
    dF/dKuu    = D/2 (Kuu^{-1} - G) - beta^2/2 (G E)(G E)^T - beta D/2 Kuu^{-1} Psi2 Kuu^{-1}
    dF/dbeta   = ND/(2 beta) - D/2 tr(G Psi2) - tr(YY^T)/2 + beta ||c||^2
                 - beta^2/2 tr((G E)^T Psi2 (G E)) - D/2 psi0 + D/2 tr(Kuu^{-1} Psi2)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .linalg import JITTER, jittered_cholesky, solve_lower, solve_upper_t

LOG_2PI = float(np.log(2.0 * np.pi))
#: elements of the (rows, M, D) products ``fstar_moments`` forms per batch of rows
FSTAR_ELEMENTS = 1 << 22


@dataclass(frozen=True)
class OutputStats:
    """What the bound needs of the centred outputs Y (N, D).

    Yf : (N, r) with Yf Yf^T = Y Y^T, r = min(N, D) (numerical rank) -- Y itself when D <= N,
         otherwise a factor from the eigendecomposition of Y Y^T (computed once, O(N^2 D)).
    trYYT : tr(Y Y^T);  D : the number of outputs of the original Y.
    """

    Yf: np.ndarray
    trYYT: float
    D: int

    @classmethod
    def from_centred(cls, Yc: np.ndarray) -> "OutputStats":
        N, D = Yc.shape
        if D <= N:
            Yf = np.ascontiguousarray(Yc)
        else:
            w, V = np.linalg.eigh(Yc @ Yc.T)
            keep = w > max(w.max(), 0.0) * 1e-14
            Yf = np.ascontiguousarray(V[:, keep] * np.sqrt(w[keep]))
        return cls(Yf=Yf, trYYT=float(np.sum(Yc * Yc)), D=D)


@dataclass
class BoundTerms:
    """The bound F_hat (without KL) and its gradients w.r.t. the statistics."""

    F: float
    dL_dpsi0: np.ndarray | None = None  # (N,)
    dL_dPsi1: np.ndarray | None = None  # (N, M)
    dL_dPsi2: np.ndarray | None = None  # (M, M)
    dL_dKuu: np.ndarray | None = None  # (M, M)
    dL_dbeta: float | None = None


@dataclass
class DataGrads:
    """Gradients of F_hat w.r.t. what the model's parameters map to: mu, S (N, Q), Z (M, Q)
    (through the psi statistics and Kuu), the kernel's parameters (name -> array) and beta."""

    dmu: np.ndarray
    dS: np.ndarray
    dZ: np.ndarray
    dtheta: dict
    dbeta: float


def data_bound(kernel, mu: np.ndarray, S: np.ndarray, Z: np.ndarray, beta: float,
               data: "OutputStats", grad: bool = True):
    """(F_hat, DataGrads or None) of complete outputs: the psi statistics of q(X) = N(mu, S)
    (eq:psi0, eq:psi1, eq:psi2) into ``collapsed_bound``, and its gradients through the
    kernel (``Kernel.psi_gradients``, ``Kernel.K_gradients``)."""
    k = kernel
    psi0, Psi1, Psi2 = k.psi0(mu, S), k.psi1(mu, S, Z), k.psi2(mu, S, Z)
    terms = collapsed_bound(k.K(Z), psi0, Psi1, Psi2, beta, data, grad=grad)
    if not grad:
        return terms.F, None
    dmu, dS, dZ, dth = k.psi_gradients(terms.dL_dpsi0, terms.dL_dPsi1, terms.dL_dPsi2, mu, S, Z)
    dZ_K, dth_K = k.K_gradients(terms.dL_dKuu, Z)
    return terms.F, DataGrads(dmu=dmu, dS=dS, dZ=dZ + dZ_K,
                              dtheta={n: dth[n] + dth_K[n] for n in dth}, dbeta=terms.dL_dbeta)


@dataclass(frozen=True)
class Posterior:
    """Shared algebra of q(u) used by predictions (meanFstar, covFstar, eq:testPosteriorF).

    Luu : (M, M) Cholesky of Kuu;  LB : (M, M) Cholesky of B = I + beta Luu^{-1} Psi2 Luu^{-T};
    Bmat : (M, D) the paper's B = beta (Kuu + beta Psi2)^{-1} Psi1^T Y (centred Y).
    Cw : (M, M) Kuu^{-1} - (Kuu + beta Psi2)^{-1}, formed once by triangular solves so that
         the variance over many points is one matrix product (eq:testPosteriorF).
    """

    Luu: np.ndarray
    LB: np.ndarray
    Bmat: np.ndarray
    Cw: np.ndarray

    def projected_variance(self, kdiag: np.ndarray, Kxu: np.ndarray) -> np.ndarray:
        """(n,) k(x, x) - k_u^T (Kuu^{-1} - (Kuu + beta Psi2)^{-1}) k_u for kdiag (n,), Kxu
        (n, M) (eq:testPosteriorF), as kdiag - |Luu^-1 k_u|^2 + |LB^-1 Luu^-1 k_u|^2 by
        triangular solves: the quadratic form in Cw, whose entries grow as 1 / jitter when
        Kuu is near singular, lost ~1e-6 to rounding (and varied with the batch's size)."""
        V = solve_lower(self.Luu, Kxu.T)  # (M, n)
        W = solve_lower(self.LB, V)
        return kdiag - np.sum(V * V, 0) + np.sum(W * W, 0)

    def woodbury_solve(self, A: np.ndarray) -> np.ndarray:
        """(Kuu^{-1} - (Kuu + beta Psi2)^{-1}) A, for A (M, k)."""
        a = solve_lower(self.Luu, A)
        return solve_upper_t(self.Luu, a - solve_upper_t(self.LB, solve_lower(self.LB, a)))


def kuu_jitter(Kuu: np.ndarray) -> float:
    """The jitter added to Kuu's diagonal: ``linalg.JITTER`` x max(1, mean(diag Kuu)).

    Never below 1e-6 (data in small units fitted with less stalled, ``gplvm._warn_small_
    units``), and never below 1e-6 of the kernel's scale: where a fit grows the kernel
    variance and lengthscales together (a smooth map, 1e5 synthetic rows: variance 150,
    lengthscales 30), a fixed 1e-6 leaves Kuu's condition number at ~1e9, and the
    trace term beta D / 2 (sum psi0 - tr(Kuu^-1 Psi2)), a difference of two ~1e9 numbers,
    came out with a rounding noise of 10-300 that the fit then climbed (its bound went up
    and down by 1e5 between iterations). Kuu + jitter I is still a valid choice of
    inducing variables (u = f(Z) + noise), so F stays a lower bound on log p(Y)."""
    M = Kuu.shape[0]
    return JITTER * max(1.0, float(np.trace(Kuu)) / M) if M else JITTER


def chain_kuu_jitter(dL_dKuu: np.ndarray, Kuu: np.ndarray) -> np.ndarray:
    """dL/dKuu through ``kuu_jitter`` too: where the jitter scales with mean(diag Kuu),
    each diagonal entry of Kuu also moves the jitter by JITTER / M."""
    M = Kuu.shape[0]
    if not (M and float(np.trace(Kuu)) / M > 1.0):
        return dL_dKuu
    out = np.array(dL_dKuu, dtype=np.float64)
    out[np.diag_indices(M)] += JITTER / M * float(np.trace(dL_dKuu))
    return out


def kuu_cholesky(Kuu: np.ndarray) -> np.ndarray:
    """Luu, the Cholesky factor of Kuu + jitter (``kuu_jitter``)."""
    return jittered_cholesky(Kuu, kuu_jitter(Kuu), what="Kuu (the inducing-point kernel matrix)",
                             hint="Likely cause: two inducing inputs nearly coincide or the "
                                  "lengthscales became extreme.")


def kuu_factors(Kuu: np.ndarray) -> tuple:
    """(Luu, Luu^-1, Kuu^-1) by triangular solves: what every group of outputs of a model
    with missing values shares (``collapsed_bound``'s ``kuu``)."""
    Luu = kuu_cholesky(Kuu)
    Li = solve_lower(Luu, np.eye(Kuu.shape[0]))
    return Luu, Li, Li.T @ Li


def _factors(Kuu: np.ndarray, Psi2: np.ndarray, beta: float, Luu: np.ndarray | None = None):
    Luu = kuu_cholesky(Kuu) if Luu is None else Luu
    M = Kuu.shape[0]
    A = solve_lower(Luu, solve_lower(Luu, Psi2).T)  # Luu^{-1} Psi2 Luu^{-T} (symmetric)
    A = 0.5 * (A + A.T)
    LB = jittered_cholesky(np.eye(M) + beta * A, 0.0, what="B = I + beta Luu^-1 Psi2 Luu^-T",
                           hint="Likely cause: a non-finite or extreme noise precision.")
    return Luu, A, LB


#: how far tr(Kuu^-1 Psi2) may exceed sum(psi0), relative to sum(psi0), before the psi
#: statistics are taken to be wrong (rounding stays orders of magnitude below this)
NYSTROM_TOL = 1e-4


def _check_nystrom_residual(psi0_sum: float, trA: float) -> None:
    """sum(psi0) - tr(Kuu^-1 Psi2) = sum_n E[k(x_n, x_n) - k_u^T Kuu^-1 k_u] >= 0 (each
    Nystrom residual is >= 0). Where the psi statistics lose their accuracy (a lengthscale
    that underflowed to 0 with input variances ~1e-9 gave tr = 1,954 against sum = 64)
    the trace term turns the bound into a large positive number that an optimiser would
    gladly accept; such a point is refused like a failed Cholesky."""
    if not trA - psi0_sum <= NYSTROM_TOL * max(abs(psi0_sum), 1e-300):
        raise FloatingPointError(
            f"the psi statistics are inaccurate here: tr(Kuu^-1 Psi2) = {trA:.6g} exceeds "
            f"sum(psi0) = {psi0_sum:.6g} (it cannot in exact arithmetic); likely cause: a "
            "lengthscale or variance that became extreme.")


#: how far above its ceiling (``_check_ceiling``) a bound may come by rounding, relative to
#: the size of its data-fit term beta/2 tr(Y Y^T)
CEILING_TOL = 1e-8


def _check_ceiling(F: float, n_entries: float, beta: float, trYYT: float) -> None:
    """F_hat <= n/2 log(beta / (2 pi)) over the n observed entries: each output's term is a
    Gaussian log density whose covariance is at least the noise's, less traces >= 0. Where
    B = I + beta A is so ill-conditioned that the data-fit terms beta/2 tr(YY^T) and
    beta^2/2 |c|^2 cancel to far below their rounding, the bound can come out above it
    (seen: 1.2e6 and 1.4e7 against a ceiling of 5.6e5 on 1e4 rows at noise 0.0166), a
    region an optimiser gladly climbs into; such a point is refused like a failed Cholesky."""
    ceiling = 0.5 * float(n_entries) * (math.log(beta) - LOG_2PI)
    if not F <= ceiling + CEILING_TOL * (0.5 * beta * float(trYYT) + abs(ceiling)):
        raise FloatingPointError(
            f"the bound lost its accuracy here: {F:.6g} exceeds its ceiling {ceiling:.6g} (n/2 log(beta / 2 pi), "
            "which it cannot in exact arithmetic); likely cause: a noise variance so small that B is "
            "ill-conditioned.")


@dataclass(frozen=True)
class DataSums:
    """The sums over rows that F_hat depends on (the bound is a map-reduce over rows):
    N rows, D outputs, psi0_sum = sum_n psi0_n, E = Psi1^T Yf (M, r), Psi2 (M, M) and
    trYYT = tr(Y Y^T). Rows split into blocks give these as sums of the blocks' own."""

    N: int
    D: int
    psi0_sum: float
    E: np.ndarray
    Psi2: np.ndarray
    trYYT: float


@dataclass
class SumsGrads:
    """F_hat and its gradients w.r.t. the sums (what a block of rows needs back to form its
    rows' gradients): dF/dpsi0_n = dpsi0 for every row, dF/dPsi1 = beta^2 Yf GE^T for the
    block's rows Yf, and dF/dPsi2, dF/dKuu, dF/dbeta (module docstring)."""

    F: float
    dpsi0: float | None = None
    GE: np.ndarray | None = None  # (M, r) G E
    dL_dPsi2: np.ndarray | None = None
    dL_dKuu: np.ndarray | None = None
    dL_dbeta: float | None = None


def bound_from_sums(Kuu: np.ndarray, sums: DataSums, beta: float, grad: bool = True,
                    kuu: tuple | None = None) -> SumsGrads:
    """F_hat (FdFinal summed over the outputs) and its gradients from the row sums alone:
    the part of ``collapsed_bound`` that needs no row (the distributed bound runs it on the
    driver, over the sums of the workers' blocks). ``kuu``: ``kuu_factors(Kuu)``."""
    N, D, M = sums.N, sums.D, Kuu.shape[0]
    Psi2, E, psi0_sum = sums.Psi2, sums.E, sums.psi0_sum
    Luu, A, LB = _factors(Kuu, Psi2, beta, None if kuu is None else kuu[0])
    c = solve_lower(LB, solve_lower(Luu, E))  # R E
    trA = float(np.trace(A))
    _check_nystrom_residual(psi0_sum, trA)
    F = (-0.5 * N * D * LOG_2PI + 0.5 * N * D * np.log(beta)
         - D * float(np.sum(np.log(np.diag(LB))))
         - 0.5 * beta * sums.trYYT + 0.5 * beta**2 * float(np.sum(c * c))
         - 0.5 * beta * D * psi0_sum + 0.5 * beta * D * trA)
    _check_ceiling(F, N * D, beta, sums.trYYT)
    if not grad:
        return SumsGrads(F=F)

    if kuu is None:
        Li = solve_lower(Luu, np.eye(M))  # Luu^{-1}
        Kinv = Li.T @ Li  # Kuu^{-1} (from triangular solves)
    else:
        _, Li, Kinv = kuu
    R = solve_lower(LB, Li)  # LB^{-1} Luu^{-1}
    G = R.T @ R  # (Kuu + beta Psi2)^{-1}
    GE = R.T @ c  # G E  (M, r)
    GEGE = GE @ GE.T
    Kinv_Psi2_Kinv = Li.T @ A @ Li

    dL_dPsi2 = 0.5 * beta * D * (Kinv - G) - 0.5 * beta**3 * GEGE
    dL_dKuu = 0.5 * D * (Kinv - G) - 0.5 * beta**2 * GEGE - 0.5 * beta * D * Kinv_Psi2_Kinv
    trGPsi2 = float(np.sum(G * Psi2))
    dL_dbeta = (0.5 * N * D / beta - 0.5 * D * trGPsi2 - 0.5 * sums.trYYT
                + beta * float(np.sum(c * c)) - 0.5 * beta**2 * float(np.sum(GE * (Psi2 @ GE)))
                - 0.5 * D * psi0_sum + 0.5 * D * trA)
    sym = lambda X: 0.5 * (X + X.T)  # noqa: E731
    return SumsGrads(F=F, dpsi0=-0.5 * beta * D, GE=GE, dL_dPsi2=sym(dL_dPsi2),
                     dL_dKuu=chain_kuu_jitter(sym(dL_dKuu), Kuu), dL_dbeta=dL_dbeta)


def collapsed_bound(Kuu: np.ndarray, psi0: np.ndarray, Psi1: np.ndarray, Psi2: np.ndarray,
                    beta: float, data: OutputStats, grad: bool = True, kuu: tuple | None = None) -> BoundTerms:
    """F_hat(q(X)) = sum_j F_j (FdFinal) from the psi statistics (psis).

    Kuu (M, M) without jitter (added here), psi0 (N,), Psi1 (N, M), Psi2 (M, M); beta the
    noise precision. With ``grad`` also the gradients listed in the module docstring.
    ``kuu``: ``kuu_factors(Kuu)`` computed once by a caller with several calls per Kuu.
    """
    N = Psi1.shape[0]
    sums = DataSums(N=N, D=data.D, psi0_sum=float(np.sum(psi0)), E=Psi1.T @ data.Yf, Psi2=Psi2,
                    trYYT=data.trYYT)
    t = bound_from_sums(Kuu, sums, beta, grad=grad, kuu=kuu)
    if not grad:
        return BoundTerms(F=t.F)
    return BoundTerms(F=t.F, dL_dpsi0=np.full(N, t.dpsi0), dL_dPsi1=beta**2 * (data.Yf @ t.GE.T),
                      dL_dPsi2=t.dL_dPsi2, dL_dKuu=t.dL_dKuu, dL_dbeta=t.dL_dbeta)


def posterior_from_stats(Kuu: np.ndarray, Psi2: np.ndarray, beta: float,
                         PsiY: np.ndarray) -> Posterior:
    """The q(u) algebra for predictions from the statistics it depends on: Psi2 (M, M) and
    PsiY = Psi1^T Yc (M, D), Yc the centred outputs (sums over the data points: more points
    are added by adding their terms)."""
    Luu, _, LB = _factors(Kuu, Psi2, beta)
    # Bmat = beta Luu^{-T} LB^{-T} LB^{-1} Luu^{-1} Psi1^T Y
    Bmat = beta * solve_upper_t(Luu, solve_upper_t(LB, solve_lower(LB, solve_lower(Luu, PsiY))))
    post = Posterior(Luu=Luu, LB=LB, Bmat=Bmat, Cw=np.empty((0, 0)))
    Cw = post.woodbury_solve(np.eye(Kuu.shape[0]))
    return Posterior(Luu=Luu, LB=LB, Bmat=Bmat, Cw=0.5 * (Cw + Cw.T))


def fstar_moments(post: Posterior, psi0: np.ndarray, Psi1: np.ndarray, Psi2c: np.ndarray):
    """meanFstar and the diagonal of covFstar (eqs. meanFstar, covFstar) of f (centred) at
    Gaussian inputs q(x*_i), from their psi statistics psi0 (n,), Psi1 (n, M) and the
    centred Psi2c (n, M, M) = Psi2^n - psi1_n psi1_n^T (``Kernel.psi2n_centred``).
    Returns (mean (n, D), var (n, D)), D = post.Bmat's columns; var without the noise.

    covFstar_dd = B_d^T Psi2c B_d + psi0 - tr((Kuu^-1 - (Kuu + beta Psi2)^-1) Psi2^n), with
    Psi2^n split as Psi2c + psi1 psi1^T: the psi1 part is the projected-process variance at
    the mean (``Posterior.projected_variance``), and every term left is of the size of
    Psi2c. (Computed from Psi2^n directly, the B^T Psi2^n B and psi1 psi1^T parts, ~|B|^2,
    cancelled to rounding error, which |B| ~ 1e5 in a nearly noise-free model turned into
    a variance 50x too wide, or a negative one.)"""
    Bm = post.Bmat
    mean = Psi1 @ Bm
    at_mean = post.projected_variance(psi0, Psi1)  # (n,)
    M, D = Bm.shape
    trace = Psi2c.reshape(-1, M * M) @ post.Cw.reshape(M * M)  # tr(Cw Psi2c_i), Cw symmetric
    var = np.empty((Psi1.shape[0], D))
    step = max(1, FSTAR_ELEMENTS // (M * D))  # rows per batch: (step, M, D) temporaries
    for i in range(0, Psi1.shape[0], step):  # covFstar, diagonal per output
        quad = np.einsum("imd,md->id", Psi2c[i:i + step] @ Bm, Bm)
        var[i:i + step] = quad + (at_mean[i:i + step] - trace[i:i + step])[:, None]
    return mean, np.maximum(var, 0.0)


def predictive_moments(kernel, Z: np.ndarray, posteriors: list, D: int, mu: np.ndarray,
                       S: np.ndarray | None = None):
    """Mean and variance (n, D) of f (centred, no noise) at latent points mu (n, Q): the
    projected process (eq:testPosteriorF) when ``S`` is None, else at q(x*) = N(mu, diag S)
    (``fstar_moments``). ``posteriors``: [(columns, Posterior)], one q(u) per group of
    outputs (``BayesianGPLVM._posteriors``)."""
    mean, var = np.empty((mu.shape[0], D)), np.empty((mu.shape[0], D))
    if S is None:
        kd, Kxu = kernel.Kdiag(mu), kernel.K(mu, Z)
        for cols, post in posteriors:
            mean[:, cols] = Kxu @ post.Bmat
            var[:, cols] = np.maximum(post.projected_variance(kd, Kxu), 0.0)[:, None]
        return mean, var
    psi = kernel.psi0(mu, S), kernel.psi1(mu, S, Z), kernel.psi2n_centred(mu, S, Z)
    for cols, post in posteriors:
        mean[:, cols], var[:, cols] = fstar_moments(post, *psi)
    return mean, var
