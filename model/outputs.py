"""A model's training outputs as one part: Y, its observed entries, its centring, its column
groups and the statistics of the collapsed bound (FdFinal).

The latent prior is one replaceable part of a model (``bgplvm.priors``); the outputs are the
other. ``Outputs(Y, mask)`` checks Y (NaN or ``mask`` False = missing), centres each column
with its observed mean and keeps what the bound reads of it: complete data the factor and
trace of ``bound.OutputStats``, missing values the column groups and observation patterns of
``missing.MissingOutputs``. ``Outputs.bound`` is F_hat = sum_j F_j of these outputs given
q(X) (without the KL), so a model of one view calls it once and a model of several views of
the same rows (MRD, Damianou et al. 2012) once per view, with each view's kernel, inducing
inputs and noise, and subtracts KL(q(X) || p(X)) once.
"""

from __future__ import annotations

import warnings

import numpy as np

from .bound import OutputStats, data_bound
from .missing import MissingOutputs, check_training_outputs, column_variance, observed_mean

#: Below this mean variance of Y's columns the jitter on Kuu (``bound.kuu_jitter``: at
#: least ``linalg.JITTER``) is no longer small against the kernel variance the data need.
SMALL_DATA_VARIANCE = 1e-3


def warn_small_units(Yc: np.ndarray, observed: np.ndarray | None = None, name: str = "Y") -> None:
    """Warn when the data are in units so small that the jitter distorts the fit (data of
    unit scale x 1e-3 were fitted as pure noise). A jitter relative to the kernel scale
    below 1 was tried and dropped: the smaller jitter on real data sets (oil, CMU walks)
    made their fits stall or end lower; it is relative above 1 only (``bound.kuu_jitter``).
    ``observed``: the entries to count (Yc centred over them)."""
    var = float(np.mean(column_variance(Yc, observed)))
    if 0.0 < var < SMALL_DATA_VARIANCE:
        warnings.warn(f"{name}'s columns have a mean variance of {var:.2g}: in units this small the "
                      "fixed jitter on the inducing-point kernel matrix (1e-6) is not small against "
                      f"the signal and the model may explain everything as noise. Rescale {name} (e.g. "
                      "to unit variance) before fitting.", stacklevel=4)


class Outputs:
    """Training outputs Y (N, D) and what the bound needs of them.

    Y : (N, D) float64 with NaN at the missing entries;  mean : (D,) each column's observed
    mean;  Yc : (N, D) centred, 0 at the missing entries;  stats : ``OutputStats`` of Yc
    (complete data) or None;  missing : ``MissingOutputs`` (column groups, row patterns and
    the grouped bound) or None for complete data;  name : how errors and warnings call it.
    ``empty_rows``: rows with nothing observed are allowed (a view of a multi-view model,
    whose rows are placed by the other views); they add nothing to the bound.
    """

    def __init__(self, Y, mask=None, name: str = "Y", empty_rows: bool = False):
        Y, observed = check_training_outputs(Y, mask, name, empty_rows)
        self.name = name
        self.Y = Y
        self.mean = observed_mean(Y, observed)
        self.Yc = Y - self.mean if observed is None else np.where(observed, Y - self.mean, 0.0)
        warn_small_units(self.Yc, observed, name)
        self.stats = OutputStats.from_centred(self.Yc) if observed is None else None
        self.missing = None if observed is None else MissingOutputs(self.Yc, observed)

    @property
    def shape(self) -> tuple[int, int]:
        return self.Y.shape

    @property
    def observed(self) -> np.ndarray | None:
        """(N, D) bool, True = observed; None for complete data."""
        return None if self.missing is None else self.missing.observed

    @property
    def observed_mask(self) -> np.ndarray:
        """(N, D) bool, True = observed (all True for complete data); a copy."""
        return np.ones(self.Y.shape, dtype=bool) if self.missing is None else self.missing.observed.copy()

    @property
    def missing_fraction(self) -> float:
        return 0.0 if self.missing is None else self.missing.fraction

    def bound(self, kernel, mu: np.ndarray, S: np.ndarray, Z: np.ndarray, beta: float, grad: bool = True):
        """(F_hat, DataGrads or None): sum_j F_j (FdFinal) over the observed entries of each
        output given q(X) = N(mu, diag S) (N, Q), inducing inputs Z (M, Q), the kernel and
        beta = 1 / noise variance; gradients w.r.t. mu, S, Z, the kernel's parameters and beta."""
        if self.missing is None:
            return data_bound(kernel, mu, S, Z, beta, self.stats, grad=grad)
        return self.missing.bound(kernel, mu, S, Z, beta, grad=grad)

    def column_stats(self, kernel, mu: np.ndarray, S: np.ndarray, Z: np.ndarray) -> tuple:
        """(Psi2g (G, M, M), col_group (D,), PsiY (M, D)): each output's q(u) statistics:
        output j's Psi2 is Psi2g[col_group[j]] and PsiY[:, j] = Psi1^T y_j over the rows that
        observe it (one group, all rows, for complete data)."""
        Psi1 = kernel.psi1(mu, S, Z)
        if self.missing is None:
            return kernel.psi2(mu, S, Z)[None], np.zeros(self.Y.shape[1], dtype=np.int64), Psi1.T @ self.Yc
        mo = self.missing
        PsiY = np.empty((Z.shape[0], self.Y.shape[1]))
        col_group = np.empty(self.Y.shape[1], dtype=np.int64)
        for i, g in enumerate(mo.groups):
            PsiY[:, g.cols] = Psi1[g.rows].T @ self.Yc[np.ix_(g.rows, g.cols)]
            col_group[g.cols] = i
        return kernel.psi2_groups(mu, S, Z, mo.seg, mo.inc), col_group, PsiY
