"""What the test-time bound (``testbound``) needs of a fitted model, computed once.

Notation of ``model/bound.py`` and ``model/testbound.py``: Kuu = Luu Luu^T, B0 = I + beta
Luu^-1 Psi2 Luu^-T = LB0 LB0^T, R0 = LB0^-1 Luu^-1 and C = R0 Psi1^T Yc, whose column c_j is
the c of FdFinal for output j.

Fitted with missing outputs (``bgplvm.missing``), each output j belongs to a group g of
columns observed on the same rows: its F_j uses that group's Psi2_g, Psi1 rows and data,
hence its own B0_g and R0_g. ``col_group`` (D,) gives each column's group and ``R0s``
(G, M, M) their R0; C's column j is R0_g(j) Psi1_g^T y_j. For complete data G = 1.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import numpy as np

from ._threads import blas_single_threaded
from .bound import LOG_2PI, _factors
from .kernels import Kernel
from .linalg import solve_lower


@dataclass(frozen=True)
class TrainingStats:
    """What the test bound needs of a fitted model, computed once (O(N M^2 + N M D)).

    kernel : a copy of the model's kernel;  Z (M, Q);  beta = 1 / noise variance
    mu, S : (N, Q) the training q(X) (for initialising test points);  Yc (N, D) centred
    (0 at missing entries);  observed : (N, D) bool, or None for complete data
    Y_mean : (D,);  N, D
    Luu : (M, M) Cholesky factor of Kuu (+ jitter);  Kinv : (M, M) Kuu^-1 = Luu^-T Luu^-1
    R0s, R0Ts : (G, M, M) LB0_g^-1 Luu^-1 of each group of outputs (lower triangular) and
    their transposes (contiguous);  col_group : (D,) each output's group (all 0: complete)
    R0, R0T, LB0 : those of group 0 (the only one for complete data)
    Psi2 : (M, M) over all rows;  psi0_sum : sum_n psi0_n;  E : (M, D) Psi1^T Yc
    C : (M, D), column j the c of FdFinal for output j (in its group);  yy : (D,) column
    sums of Yc^2;  F_hat : the training F_hat (FdFinal summed over j, without KL)
    """

    kernel: Kernel
    Z: np.ndarray
    beta: float
    mu: np.ndarray
    S: np.ndarray
    Yc: np.ndarray
    Y_mean: np.ndarray
    Luu: np.ndarray
    LB0: np.ndarray
    R0: np.ndarray
    R0T: np.ndarray
    Kinv: np.ndarray
    Psi2: np.ndarray
    psi0_sum: float
    E: np.ndarray
    C: np.ndarray
    yy: np.ndarray
    F_hat: float
    R0s: np.ndarray
    R0Ts: np.ndarray
    col_group: np.ndarray
    observed: np.ndarray | None = None
    #: (G, M, M) each group's Psi2 (None for complete data: ``Psi2``)
    Psi2g: np.ndarray | None = None

    @property
    def N(self) -> int:
        return self.Yc.shape[0]

    @property
    def D(self) -> int:
        return self.Yc.shape[1]

    @property
    def M(self) -> int:
        return self.Z.shape[0]

    @property
    def Q(self) -> int:
        return self.Z.shape[1]

    @property
    def n_groups(self) -> int:
        return self.R0s.shape[0]

    @classmethod
    def from_model(cls, m) -> "TrainingStats":
        """From a fitted model's public attributes: ``kernel``, ``inducing_inputs``,
        ``latent_mean``, ``latent_variance`` (the marginals of q(X)), ``noise_variance``,
        ``Y`` (NaN = missing) and ``Y_mean``. The kernel must hold the model's current
        parameters."""
        observed = m.Y_observed if m.missing_fraction > 0 else None
        return cls.from_arrays(m.kernel, m.inducing_inputs, m.latent_mean, m.latent_variance,
                               m.noise_variance, m.Y, m.Y_mean, observed=observed)

    @classmethod
    @blas_single_threaded
    def from_sums(cls, kernel: Kernel, Z, noise_variance: float, N: int, psi0_sum: float, E, Psi2, yy,
                  Y_mean, mu, S, Yc) -> "TrainingStats":
        """From the sums over the N training rows of complete data (a distributed model's):
        psi0_sum, E = Psi1^T Yc (M, D), Psi2 (M, M), yy (D,) the columns' sums of Yc^2. mu,
        S, Yc: the training rows test points start from (``testbound.nearest_rows``; a
        sample of them will do)."""
        kernel = copy.deepcopy(kernel)
        Z = np.ascontiguousarray(Z, dtype=np.float64)
        M, D = Z.shape[0], E.shape[1]
        beta = 1.0 / float(noise_variance)
        Luu, A, LB = _factors(kernel.K(Z), Psi2, beta)
        Li = solve_lower(Luu, np.eye(M))  # Luu^-1
        R0 = np.tril(solve_lower(LB, Li))
        C = R0 @ E
        F = (-0.5 * N * D * LOG_2PI + 0.5 * N * D * math.log(beta)
             - D * float(np.sum(np.log(np.diag(LB)))) - 0.5 * beta * float(yy.sum())
             + 0.5 * beta**2 * float(np.sum(C ** 2))
             - 0.5 * beta * D * float(psi0_sum) + 0.5 * beta * D * float(np.trace(A)))
        Kinv = Li.T @ Li
        return cls(kernel=kernel, Z=Z, beta=beta, mu=np.ascontiguousarray(mu, dtype=np.float64),
                   S=np.ascontiguousarray(S, dtype=np.float64), Yc=np.ascontiguousarray(Yc, dtype=np.float64),
                   Y_mean=np.asarray(Y_mean, dtype=np.float64).copy(), Luu=Luu, LB0=LB, R0=R0,
                   R0T=np.ascontiguousarray(R0.T), Kinv=0.5 * (Kinv + Kinv.T), Psi2=Psi2,
                   psi0_sum=float(psi0_sum), E=E, C=np.ascontiguousarray(C), yy=yy, F_hat=F,
                   R0s=R0[None], R0Ts=np.ascontiguousarray(R0.T)[None], col_group=np.zeros(D, dtype=np.int64))

    @classmethod
    @blas_single_threaded
    def from_arrays(cls, kernel: Kernel, Z, mu, S, noise_variance: float, Y, Y_mean,
                    observed=None) -> "TrainingStats":
        kernel = copy.deepcopy(kernel)
        Z = np.ascontiguousarray(Z, dtype=np.float64)
        mu = np.ascontiguousarray(mu, dtype=np.float64)
        S = np.ascontiguousarray(S, dtype=np.float64)
        Y_mean = np.asarray(Y_mean, dtype=np.float64).copy()
        Yc = np.asarray(Y, dtype=np.float64) - Y_mean
        if observed is not None:
            observed = np.asarray(observed, dtype=bool)
            Yc = np.where(observed, Yc, 0.0)
        Yc = np.ascontiguousarray(Yc)
        N, D = Yc.shape
        psi0 = kernel.psi0(mu, S)
        Psi1 = kernel.psi1(mu, S, Z)
        Psi2 = kernel.psi2(mu, S, Z)
        E = Psi1.T @ Yc
        yy = np.sum(Yc * Yc, axis=0)
        if observed is None:  # one group: all rows, all columns
            return cls.from_sums(kernel, Z, noise_variance, N, float(np.sum(psi0)), E, Psi2, yy, Y_mean, mu, S, Yc)
        from .missing import MissingOutputs

        mo = MissingOutputs(Yc, observed)
        groups = [(g.cols, g.rows.size, float(np.sum(psi0[g.rows])), Psi1[g.rows].T @ Yc[np.ix_(g.rows, g.cols)])
                  for g in mo.groups]
        return cls._grouped(kernel, Z, 1.0 / float(noise_variance), groups, kernel.psi2_groups(mu, S, Z, mo.seg, mo.inc), Psi2,
                            float(np.sum(psi0)), E, yy, Y_mean, mu, S, Yc, observed)

    @classmethod
    @blas_single_threaded
    def from_group_sums(cls, kernel: Kernel, Z, noise_variance: float, psi0_sum: float, Psi2, sums, perm,
                        yy, Y_mean, mu, S, Yc, observed) -> "TrainingStats":
        """From the sums over the training rows of data with missing values (a distributed
        model's): ``sums`` a ``missing.GroupSums`` (its E's columns in the group order
        ``perm``), psi0_sum and Psi2 over all rows, yy (D,) the columns' sums of Yc^2. mu,
        S, Yc, observed: the training rows test points start from (a sample will do)."""
        kernel = copy.deepcopy(kernel)
        Z = np.ascontiguousarray(Z, dtype=np.float64)
        foff = np.asarray(sums.foff, dtype=np.int64)
        E = np.empty_like(sums.E)
        E[:, perm] = sums.E
        groups = [(perm[foff[g]:foff[g + 1]], int(sums.Ng[g]), float(sums.psi0g[g]), sums.E[:, foff[g]:foff[g + 1]])
                  for g in range(len(foff) - 1)]
        return cls._grouped(kernel, Z, 1.0 / float(noise_variance), groups, sums.Psi2g, Psi2, float(psi0_sum), E,
                            yy, np.asarray(Y_mean, dtype=np.float64).copy(), np.ascontiguousarray(mu, dtype=np.float64),
                            np.ascontiguousarray(S, dtype=np.float64), np.ascontiguousarray(Yc, dtype=np.float64),
                            np.asarray(observed, dtype=bool))

    @classmethod
    def _grouped(cls, kernel, Z, beta, groups, Psi2g, Psi2, psi0_sum, E, yy, Y_mean, mu, S, Yc,
                 observed) -> "TrainingStats":
        """The statistics of data with missing values from each group's (columns, rows n_g,
        sum of psi0 over its rows, Psi1_g^T Yc_g (M, d_g)) and Psi2g (G, M, M)."""
        M, D = Z.shape[0], E.shape[1]
        Kuu = kernel.K(Z)
        R0s = np.empty((len(groups), M, M))
        C = np.empty((M, D))
        col_group = np.empty(D, dtype=np.int64)
        F = 0.0
        for i, (cols, n, psi0_g, E_g) in enumerate(groups):
            Luu, A, LB = _factors(Kuu, Psi2g[i], beta)
            Li = solve_lower(Luu, np.eye(M))  # Luu^-1
            R0s[i] = np.tril(solve_lower(LB, Li))
            C[:, cols] = R0s[i] @ E_g
            col_group[cols] = i
            d = len(cols)
            F += (-0.5 * n * d * LOG_2PI + 0.5 * n * d * math.log(beta)
                  - d * float(np.sum(np.log(np.diag(LB)))) - 0.5 * beta * float(yy[cols].sum())
                  + 0.5 * beta**2 * float(np.sum(C[:, cols] ** 2))
                  - 0.5 * beta * d * psi0_g + 0.5 * beta * d * float(np.trace(A)))
            if i == 0:
                LB0 = LB
        Kinv = Li.T @ Li
        R0Ts = np.ascontiguousarray(R0s.transpose(0, 2, 1))
        return cls(kernel=kernel, Z=Z, beta=beta, mu=mu, S=S, Yc=Yc, Y_mean=Y_mean, Luu=Luu,
                   LB0=LB0, R0=R0s[0], R0T=R0Ts[0], Kinv=0.5 * (Kinv + Kinv.T),
                   Psi2=Psi2, psi0_sum=psi0_sum, E=E, C=np.ascontiguousarray(C), yy=yy,
                   F_hat=F, R0s=R0s, R0Ts=R0Ts, col_group=col_group, observed=observed,
                   Psi2g=np.asarray(Psi2g))
