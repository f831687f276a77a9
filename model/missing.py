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
sorted by pattern, sums each pattern's run of rows and adds it to the groups the pattern
observes (no subtraction: as accurate as complete data's Psi2); the chain rule is one pass
over the rows too, each row weighted by the sum of its groups' dF/dPsi2_g
(``Kernel.psi2_groups``, ``Kernel.psi_gradients_groups``). So an evaluation costs the
complete one's row passes plus

    G factorisations of M x M (Kuu's is shared),  O(R G_r M^2) additions for the group
    sums and the rows' weights (G_r <= G groups per pattern),  R M^2 memory (weights),

with G <= D and R <= N: a few missing readings, whole markers or blocks (small G and R)
cost little more than complete data; entries missing at random make every column a group
of its own (G = D) and most rows a pattern of their own (R -> min(N, 2^D)). Measured
(bench/bench_missing.py): oil with 30 % missing at random 1.6-2.3x a complete evaluation,
20 blocks of rows 1.5x. Other kernels (linear, sums) take one pass per group instead (the
generic ``Kernel`` forms): at most N (1 + G / 2) rows for the gradient and sum_g |R_g| for
Psi2.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from .bound import DataGrads, OutputStats, collapsed_bound, kuu_factors

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


def check_training_outputs(Y, mask=None, name: str = "Y"):
    """(Y (N, D) float64, observed (N, D) bool or None when nothing is missing).

    NaN marks a missing entry; ``mask`` (True = observed), if given, marks more. Refused:
    inf (an error naming its positions), a row with nothing observed and a column observed
    on fewer than 2 rows (errors naming them). More than ``MOSTLY_MISSING`` missing: a
    warning with the fraction."""
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
    _check_coverage(observed, name)
    Y[~observed] = np.nan
    return np.ascontiguousarray(Y), observed


def _check_coverage(observed: np.ndarray, name: str) -> None:
    def listed(idx):
        return f"{idx[:10].tolist()}{' ...' if idx.size > 10 else ''}"

    empty = np.flatnonzero(~observed.any(axis=1))
    if empty.size:
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
        kuu = kuu_factors(Kuu)  # shared by the groups
        Psi2g = k.psi2_groups(mu, S, Z, self.seg, self.inc)
        F = 0.0
        N, M = Psi1.shape
        if grad:
            dpsi0, dPsi1 = np.zeros(N), np.zeros((N, M))
            dKuu, dbeta = np.zeros((M, M)), 0.0
            dPsi2g = np.empty_like(Psi2g)
        for i, g in enumerate(self.groups):
            r = g.rows
            t = collapsed_bound(Kuu, psi0[r], Psi1[r], Psi2g[i], beta, g.data, grad=grad, kuu=kuu)
            F += t.F
            if not grad:
                continue
            dpsi0[r] += t.dL_dpsi0
            dPsi1[r] += t.dL_dPsi1
            dKuu += t.dL_dKuu
            dbeta += t.dL_dbeta
            dPsi2g[i] = t.dL_dPsi2
        if not grad:
            return F, None
        dmu, dS, dZ, dth = k.psi_gradients_groups(dpsi0, dPsi1, dPsi2g, self.seg, self.inc, mu, S, Z)
        dZ_K, dth_K = k.K_gradients(dKuu, Z)
        return F, DataGrads(dmu=dmu, dS=dS, dZ=dZ + dZ_K,
                            dtheta={n: dth[n] + dth_K[n] for n in dth}, dbeta=dbeta)
