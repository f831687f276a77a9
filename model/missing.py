"""Missing values in the training outputs: the bound over what was observed.

FdFinal is a sum over the output dimensions, F_hat = sum_j F_j, and each F_j may use only
the rows that observe column j (as the test phase does for new rows, app:partialtestBound):
its psi0, Psi1 and Psi2 are sums over those rows. Columns observed on the same set of rows
form one **group** g (rows R_g, columns C_g); its columns share Psi2_g = sum_{n in R_g}
Psi2^n and one factorisation, so that

    F_hat = sum_g F_hat(psi0[R_g], Psi1[R_g], Psi2_g; Y[R_g, C_g])

with each term the complete-data bound of ``bound.collapsed_bound`` on the group's own rows
and columns. Complete data are one group: today's bound.

Cost. psi0 and Psi1 are per row and computed once. The rows fall into R observation
patterns (the sets of columns they observe); with the RBF kernel one pass over the rows,
sorted by pattern, sums each pattern's run of rows and adds it to subset sums of its
groups (chunks of 4 groups, one addition per chunk; no subtraction: as accurate as
complete data's Psi2); the chain rule is one pass over the rows too, each row weighted by
the sum of its groups' dF/dPsi2_g, taken from the same subset sums
(``Kernel.psi2_groups``, ``Kernel.psi_gradients_groups``, ``_rbf_groups_numba``). The
groups' M x M algebra runs on stacks of all G groups at once (``grouped_bound``). So an
evaluation costs the complete one's row passes plus

    G factorisations of M x M (Kuu's is shared),  O(N ceil(G / 4) M^2) additions for the
    group sums and the rows' weights (once per run of rows with one pattern),
    O(ceil(G / 4) 16 M^2) memory per thread for the subset sums,

with G <= D and R <= N: a few missing readings, whole markers or blocks (small G and R)
cost little more than complete data; entries missing at random make every column a group
of its own (G = D) and most rows a pattern of their own (R -> min(N, 2^D)). Measured
(bench/bench_missing.py, README): oil with 30 % missing at random and with 20 blocks of
rows missing readings, Frey faces with 4 x 4 blocks missing. Other kernels (linear, sums)
take one pass per group instead (the generic ``Kernel`` forms): at most N (1 + G / 2) rows
for the gradient and sum_g |R_g| for Psi2.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from .bound import (LOG_2PI, BoundTerms, DataGrads, OutputStats, _check_ceiling, _check_nystrom_residual,
                    chain_kuu_jitter, kuu_factors)
from .linalg import jittered_cholesky, solve_lower

#: above this fraction of missing entries a data set gets a warning (the fit has little to go on)
MOSTLY_MISSING = 0.95


def as_outputs(Y, name: str = "Y") -> np.ndarray:
    """A float64 copy of Y, checked to be an (N, D) array with N >= 2, D >= 1 (values not
    checked: the model must not change with the caller's array)."""
    try:
        Y = np.array(Y, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{name} must be a numeric (N, D) array: {e}") from None
    if Y.ndim != 2:
        raise ValueError(f"{name} must be 2-D (N points x D outputs), got an array of shape {Y.shape}; "
                         "reshape a single series with Y.reshape(-1, 1)")
    if Y.shape[0] < 2 or Y.shape[1] < 1:
        raise ValueError(f"{name} needs at least 2 rows and 1 column, got shape {Y.shape}")
    return Y


def check_training_outputs(Y, mask=None, name: str = "Y", empty_rows: bool = False):
    """(Y (N, D) float64, observed (N, D) bool or None when nothing is missing).

    NaN marks a missing entry; ``mask`` (True = observed), if given, marks more. Refused:
    inf (an error naming its positions), a row with nothing observed (unless ``empty_rows``:
    one view of several, whose rows may be observed in another) and a column observed on
    fewer than 2 rows (errors naming them). More than ``MOSTLY_MISSING`` missing: a warning
    with the fraction."""
    Y = as_outputs(Y, name)
    inf = np.argwhere(np.isinf(Y))
    if inf.size:
        pos = ", ".join(f"({r}, {c})" for r, c in inf[:5])
        raise ValueError(f"{name} contains {len(inf)} infinite value(s) at (row, column) {pos}"
                         f"{' ...' if len(inf) > 5 else ''}; mark missing entries with NaN")
    observed = ~np.isnan(Y)
    if mask is not None:
        mask = np.asarray(mask)
        if mask.shape != Y.shape or mask.dtype != bool:
            raise ValueError(f"mask must be a bool array of {name}'s shape {Y.shape} (True = observed), "
                             f"got {mask.dtype} of shape {mask.shape}")
        observed &= mask
    if observed.all():
        return np.ascontiguousarray(Y), None
    _check_coverage(observed, name, empty_rows)
    Y[~observed] = np.nan
    return np.ascontiguousarray(Y), observed


def listed(idx: np.ndarray) -> str:
    """Up to 10 indices of an error message."""
    return f"{idx[:10].tolist()}{' ...' if idx.size > 10 else ''}"


def _check_coverage(observed: np.ndarray, name: str, empty_rows: bool = False) -> None:
    empty = np.flatnonzero(~observed.any(axis=1))
    if empty.size and not empty_rows:
        raise ValueError(f"{empty.size} row(s) of {name} have nothing observed (rows {listed(empty)}): "
                         "there is nothing to place them by; drop them")
    thin = np.flatnonzero(observed.sum(axis=0) < 2)
    if thin.size:
        raise ValueError(f"{thin.size} column(s) of {name} are observed on fewer than 2 rows (columns "
                         f"{listed(thin)}): too little to learn them from; drop them")
    frac = 1.0 - observed.mean()
    if frac > MOSTLY_MISSING:
        warnings.warn(f"{100 * frac:.1f}% of {name}'s entries are missing: the fit has little to go on",
                      stacklevel=5)  # the model's caller


def observed_mean(Y: np.ndarray, observed: np.ndarray | None) -> np.ndarray:
    """(D,) the mean of each column over its observed entries."""
    if observed is None:
        return Y.mean(0)
    return np.where(observed, Y, 0.0).sum(0) / observed.sum(0)


def column_variance(Yc: np.ndarray, observed: np.ndarray | None) -> np.ndarray:
    """(D,) the variance of each column of the centred Yc over its observed entries."""
    if observed is None:
        return Yc.var(0)
    return np.where(observed, Yc * Yc, 0.0).sum(0) / observed.sum(0)


@dataclass(frozen=True)
class ColumnGroup:
    """Columns ``cols`` observed on the same rows ``rows`` (both sorted int arrays), and the
    complete-data statistics of Yc[rows][:, cols] (``OutputStats``)."""

    cols: np.ndarray
    rows: np.ndarray
    data: OutputStats


class MissingOutputs:
    """The observation pattern of the training outputs and the grouped bound over it.

    Yc : (N, D) centred outputs (any value at missing entries: not read);
    observed : (N, D) bool, True = observed.

    Rows fall into R patterns (the sets of columns they observe; ``seg`` (N,) each row's)
    and columns into G groups (``groups``); ``inc`` (G, R) is 1 where pattern r observes
    group g. The kernel sums Psi2 per group and weights each row's Psi2^n by its groups
    (``Kernel.psi2_groups``, ``Kernel.psi_gradients_groups``).
    """

    def __init__(self, Yc: np.ndarray, observed: np.ndarray):
        N, D = observed.shape
        self.observed = observed
        self.Yc = Yc
        self.N, self.D = N, D
        col_pats, col_of = np.unique(observed.T, axis=0, return_inverse=True)
        col_of = col_of.ravel()
        groups = []
        for u in range(col_pats.shape[0]):
            cols = np.flatnonzero(col_of == u)
            rows = np.flatnonzero(col_pats[u])
            data = OutputStats.from_centred(np.ascontiguousarray(Yc[np.ix_(rows, cols)]))
            groups.append(ColumnGroup(cols=cols, rows=rows, data=data))
        self.groups: tuple[ColumnGroup, ...] = tuple(groups)
        row_pats, seg = np.unique(observed, axis=0, return_inverse=True)
        self.seg = np.ascontiguousarray(seg.ravel(), dtype=np.int64)
        first_col = np.array([g.cols[0] for g in groups])
        self.inc = np.ascontiguousarray(row_pats[:, first_col].T, dtype=np.float64)  # (G, R)
        self._side_by_side()

    def _side_by_side(self) -> None:
        """The groups' outputs side by side, for whole-matrix products in ``bound``: group
        g's factor Yf_g (``OutputStats``) fills columns foff[g]:foff[g + 1] of Yf (N, sum_g r_g)
        on its rows and is 0 elsewhere, so that E_g = Psi1[R_g]^T Yf_g is a block of Psi1^T Yf
        and the rows' dF/dPsi1 is one product too."""
        gs = self.groups
        self._foff = np.concatenate([[0], np.cumsum([g.data.Yf.shape[1] for g in gs])]).astype(np.int64)
        Yf = np.zeros((self.N, int(self._foff[-1])))
        for i, g in enumerate(gs):
            Yf[g.rows, self._foff[i]:self._foff[i + 1]] = g.data.Yf
        self._Yf = Yf
        self._Dg = np.array([g.data.D for g in gs], dtype=np.float64)
        self._Ng = np.array([g.rows.size for g in gs], dtype=np.float64)
        self._trYYT = np.array([g.data.trYYT for g in gs])
        self._row_D = (self._Dg @ self.inc)[self.seg]  # (N,) outputs observed per row

    def group_sums(self, v: np.ndarray) -> np.ndarray:
        """(G,) the sums of v (N,) over the rows of each group (through the R patterns)."""
        return self.inc @ np.bincount(self.seg, weights=v, minlength=self.inc.shape[1])

    @property
    def n_missing(self) -> int:
        return int(self.observed.size - self.observed.sum())

    @property
    def fraction(self) -> float:
        """The fraction of the entries that are missing."""
        return self.n_missing / self.observed.size

    @property
    def n_patterns(self) -> int:
        """R, the number of distinct sets of observed columns among the rows."""
        return self.inc.shape[1]

    def bound(self, kernel, mu: np.ndarray, S: np.ndarray, Z: np.ndarray, beta: float,
              grad: bool = True):
        """(F_hat, DataGrads or None): sum_g F_hat_g (module docstring) and its gradients
        w.r.t. mu, S (N, Q), Z (M, Q), the kernel's parameters and beta."""
        k = kernel
        psi0, Psi1 = k.psi0(mu, S), k.psi1(mu, S, Z)
        Kuu = k.K(Z)
        Psi2g = k.psi2_groups(mu, S, Z, self.seg, self.inc)
        t = grouped_bound(Kuu, psi0, Psi1, Psi2g, beta, self, grad=grad)
        if not grad:
            return t.F, None
        dmu, dS, dZ, dth = k.psi_gradients_groups(t.dL_dpsi0, t.dL_dPsi1, t.dL_dPsi2, self.seg, self.inc,
                                                  mu, S, Z)
        dZ_K, dth_K = k.K_gradients(t.dL_dKuu, Z)
        return t.F, DataGrads(dmu=dmu, dS=dS, dZ=dZ + dZ_K,
                              dtheta={n: dth[n] + dth_K[n] for n in dth}, dbeta=t.dL_dbeta)


def _sym(X: np.ndarray) -> np.ndarray:
    return 0.5 * (X + np.swapaxes(X, -1, -2))


def _group_factors(A: np.ndarray, beta: float) -> np.ndarray:
    """(G, M, M) Cholesky factors LB_g of B_g = I + beta A_g, all at once; where one fails,
    each by ``jittered_cholesky`` as ``collapsed_bound`` does (its jitter and its error)."""
    B = beta * A
    i = np.arange(A.shape[1])
    B[:, i, i] += 1.0
    if np.isfinite(B).all():
        try:
            return np.linalg.cholesky(B)
        except np.linalg.LinAlgError:
            pass
    return np.stack([jittered_cholesky(b, 0.0, what="B = I + beta Luu^-1 Psi2 Luu^-T",
                                       hint="Likely cause: a non-finite or extreme noise precision.")
                     for b in B])


@dataclass(frozen=True)
class GroupSums:
    """The sums over rows the grouped bound depends on (``bound.DataSums`` per group):
    psi0g (G,) sum of psi0 over each group's rows, E (M, sum r_g) = Psi1^T Yf with group g's
    columns at foff[g]:foff[g + 1], Psi2g (G, M, M), and each group's rows Ng, outputs Dg
    and trYYT_g (G,) each."""

    psi0g: np.ndarray
    E: np.ndarray
    Psi2g: np.ndarray
    foff: np.ndarray
    Ng: np.ndarray
    Dg: np.ndarray
    trYYT: np.ndarray


@dataclass
class GroupSumsGrads:
    """F_hat and its gradients w.r.t. the sums: a row's dF/dpsi0_n = -beta/2 times the
    outputs it observes, its dF/dPsi1 = beta^2 yf_n GE^T, and dF/dPsi2g (G, M, M), dF/dKuu,
    dF/dbeta."""

    F: float
    GE: np.ndarray | None = None  # (M, sum r_g)
    dL_dPsi2: np.ndarray | None = None
    dL_dKuu: np.ndarray | None = None
    dL_dbeta: float | None = None


def grouped_bound_from_sums(Kuu: np.ndarray, sums: GroupSums, beta: float, grad: bool = True) -> GroupSumsGrads:
    """sum_g ``bound.bound_from_sums`` over the groups, all at once (``grouped_bound``); the
    part that needs no row (a distributed model runs it on the driver)."""
    Luu, Li, Kinv = kuu_factors(Kuu)
    Psi2g, psi0g, foff, Dg, Ng = sums.Psi2g, sums.psi0g, sums.foff, sums.Dg, sums.Ng
    G = Psi2g.shape[0]
    A = _sym(Li @ Psi2g @ Li.T)
    trA = np.einsum("gii->g", A)
    for g in range(G):
        _check_nystrom_residual(float(psi0g[g]), float(trA[g]))
    LB = _group_factors(A, beta)
    LiE = Li @ sums.E  # (M, sum r_g)
    c = np.empty_like(LiE)
    for g in range(G):
        c[:, foff[g]:foff[g + 1]] = solve_lower(LB[g], LiE[:, foff[g]:foff[g + 1]])
    csq = np.array([float(np.sum(c[:, foff[g]:foff[g + 1]] ** 2)) for g in range(G)])
    logdet = np.sum(np.log(np.diagonal(LB, axis1=1, axis2=2)), axis=1)
    F = float(np.sum(-0.5 * Ng * Dg * LOG_2PI + 0.5 * Ng * Dg * np.log(beta) - Dg * logdet
                     - 0.5 * beta * sums.trYYT + 0.5 * beta**2 * csq
                     - 0.5 * beta * Dg * psi0g + 0.5 * beta * Dg * trA))
    _check_ceiling(F, float(np.sum(Ng * Dg)), beta, float(np.sum(sums.trYYT)))
    if not grad:
        return GroupSumsGrads(F=F)
    R = np.stack([solve_lower(LB[g], Li) for g in range(G)])  # (G, M, M)
    Gm = np.swapaxes(R, 1, 2) @ R  # (Kuu + beta Psi2_g)^-1
    GE = np.empty_like(c)
    dPsi2g = (0.5 * beta) * Dg[:, None, None] * (Kinv - Gm)
    psi2GE = np.empty(G)
    for g in range(G):
        s = slice(foff[g], foff[g + 1])
        GE[:, s] = R[g].T @ c[:, s]
        dPsi2g[g] -= (0.5 * beta**3) * (GE[:, s] @ GE[:, s].T)
        psi2GE[g] = float(np.sum(GE[:, s] * (Psi2g[g] @ GE[:, s])))
    dPsi2g = _sym(dPsi2g)
    dKuu = chain_kuu_jitter(_sym(dPsi2g.sum(0) / beta - (0.5 * beta) * (Li.T @ np.tensordot(Dg, A, axes=1) @ Li)), Kuu)
    trGPsi2 = np.einsum("gij,gij->g", Gm, Psi2g)
    dbeta = float(np.sum(0.5 * Ng * Dg / beta - 0.5 * Dg * trGPsi2 - 0.5 * sums.trYYT + beta * csq
                         - 0.5 * beta**2 * psi2GE - 0.5 * Dg * psi0g + 0.5 * Dg * trA))
    return GroupSumsGrads(F=F, GE=GE, dL_dPsi2=dPsi2g, dL_dKuu=dKuu, dL_dbeta=dbeta)


def grouped_bound(Kuu: np.ndarray, psi0: np.ndarray, Psi1: np.ndarray, Psi2g: np.ndarray, beta: float,
                  mo: MissingOutputs, grad: bool = True) -> BoundTerms:
    """sum_g ``collapsed_bound``(Kuu, psi0[R_g], Psi1[R_g], Psi2g[g], beta, Y[R_g, C_g]) and
    its gradients, the G groups at once (``bound``'s notation, per group g):

        A_g = Li Psi2_g Li^T,  LB_g = chol(I + beta A_g),  c_g = LB_g^-1 Li E_g,
        E_g = Psi1^T Yf_g (a block of Psi1^T Yf, ``MissingOutputs._side_by_side``),
        R_g = LB_g^-1 Li,  G_g = R_g^T R_g,  GE_g = R_g^T c_g.

    Kuu's factors Luu, Li = Luu^-1, Kinv are shared; stacks of M x M products, one Cholesky
    call for all B_g, and whole-matrix products for E, the rows' dF/dPsi1 (beta^2 Yf GE^T)
    and dF/dpsi0 (-beta/2 times the number of outputs each row observes). dF/dKuu summed
    over the groups is sum_g dF/dPsi2_g / beta - beta/2 Li^T (sum_g D_g A_g) Li: one product.
    Psi2g (G, M, M); returns BoundTerms with dL_dPsi2 (G, M, M), one per group."""
    sums = GroupSums(psi0g=mo.group_sums(psi0), E=Psi1.T @ mo._Yf, Psi2g=Psi2g, foff=mo._foff,
                     Ng=mo._Ng, Dg=mo._Dg, trYYT=mo._trYYT)
    t = grouped_bound_from_sums(Kuu, sums, beta, grad=grad)
    if not grad:
        return BoundTerms(F=t.F)
    return BoundTerms(F=t.F, dL_dpsi0=(-0.5 * beta) * mo._row_D, dL_dPsi1=beta**2 * (mo._Yf @ t.GE.T),
                      dL_dPsi2=t.dL_dPsi2, dL_dKuu=t.dL_dKuu, dL_dbeta=t.dL_dbeta)
