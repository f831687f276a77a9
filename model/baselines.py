"""The simple baseline a user would otherwise reach for: k nearest neighbours, with a
Gaussian of its cross-validated residual variance, so that its intervals can be scored as
the model's are (``metrics.gaussian_scores``).

``KNNBaseline(Y)`` holds training rows Y (N, D; NaN = missing). A query row's neighbours
are the training rows nearest in the entries it observes (the mean squared difference over
the entries both observe); a missing entry is predicted by the mean of its k nearest
neighbours that observe it (the column's mean when none does). k is chosen by
cross-validation on the training rows themselves: ``n_cv`` rows lose a fraction ``hide``
of their observed entries, which are predicted from the other rows for every k in ``KS``;
the k with the smallest error is kept, and each column's residual variance at that k is
the predictive variance of its missing entries (a floor of 1e-12 x the column's variance).
"""

from __future__ import annotations

import numpy as np

#: the numbers of neighbours tried
KS = (1, 2, 3, 5, 8, 13, 20, 30)


def hide_fraction(observed: np.ndarray, fraction: float, rng) -> np.ndarray:
    """(n, D) bool: for each row of ``observed`` (n, D), a random ``fraction`` of its observed
    entries (at least one hidden and one kept; rows observing fewer than two: none)."""
    held = np.zeros(observed.shape, dtype=bool)
    for r in range(observed.shape[0]):
        j = np.flatnonzero(observed[r])
        if j.size > 1:
            held[r, rng.choice(j, size=min(j.size - 1, max(1, int(round(fraction * j.size)))), replace=False)] = True
    return held


class KNNBaseline:
    """k-NN imputation with cross-validated k and residual variance (module docstring).

    Y : (N, D) training rows, NaN = missing. hide : fraction of a cross-validation row's
    observed entries hidden (match the queries': 0.5 for half-observed rows). n_cv : rows
    used to choose k. After construction: ``k``, ``cv_rmse`` (per k tried), ``sigma2`` (D,).
    """

    def __init__(self, Y, hide: float = 0.5, n_cv: int = 500, ks=KS, seed: int = 0):
        Y = np.asarray(Y, dtype=np.float64)
        if Y.ndim != 2 or Y.shape[0] < 3:
            raise ValueError(f"Y must be 2-D with at least 3 rows, got shape {Y.shape}")
        if not 0 < hide < 1:
            raise ValueError(f"hide must be a fraction in (0, 1), got {hide!r}")
        self.Y = Y
        self.observed = ~np.isnan(Y)
        if not self.observed.any(axis=0).all():
            raise ValueError("every column of Y must be observed on at least one row")
        self.col_mean = np.nanmean(Y, axis=0)
        self.ks = tuple(k for k in ks if k < Y.shape[0]) or (1,)
        self._choose_k(hide, n_cv, np.random.default_rng(seed))

    # --- neighbours ------------------------------------------------------------------------
    def _distances(self, Ys: np.ndarray, obs: np.ndarray) -> np.ndarray:
        """(n*, N) mean squared differences over the entries both observe (inf: none)."""
        T = self.observed.astype(np.float64).T  # (D, N)
        Yt = np.where(self.observed, self.Y, 0.0)
        yc = np.where(obs, Ys, 0.0)
        o = obs.astype(np.float64)
        both = o @ T
        d = (yc * yc) @ T + o @ (Yt * Yt).T - 2.0 * yc @ Yt.T
        with np.errstate(invalid="ignore", divide="ignore"):
            d = np.maximum(d, 0.0) / both
        d[both == 0] = np.inf
        return d

    def _predict_k(self, order: np.ndarray, k: int) -> np.ndarray:
        """(n*, D): each column's mean over the first k neighbours in ``order`` that
        observe it (the column mean where none of them does)."""
        nn = order[:, :k]  # (n*, k)
        vals = np.where(self.observed[nn], self.Y[nn], 0.0)  # (n*, k, D)
        cnt = self.observed[nn].sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            out = vals.sum(axis=1) / cnt
        return np.where(cnt > 0, out, self.col_mean)

    def _order(self, Ys, obs, exclude=None, chunk: int = 1024) -> np.ndarray:
        """(n*, max k) neighbour indices, nearest first (``exclude``: a training row per query
        that is not its own neighbour)."""
        kmax = max(self.ks)
        out = np.empty((Ys.shape[0], kmax), dtype=np.int64)
        for a in range(0, Ys.shape[0], chunk):
            d = self._distances(Ys[a:a + chunk], obs[a:a + chunk])
            if exclude is not None:
                d[np.arange(d.shape[0]), exclude[a:a + chunk]] = np.inf
            part = np.argpartition(d, kmax - 1, axis=1)[:, :kmax]
            srt = np.argsort(np.take_along_axis(d, part, axis=1), axis=1, kind="stable")
            out[a:a + chunk] = np.take_along_axis(part, srt, axis=1)
        return out

    # --- cross-validation -----------------------------------------------------------------------
    def _choose_k(self, hide: float, n_cv: int, rng) -> None:
        N, D = self.Y.shape
        rows = rng.choice(N, size=min(n_cv, N), replace=False)
        obs = self.observed[rows].copy()
        held = hide_fraction(obs, hide, rng)
        obs &= ~held
        order = self._order(self.Y[rows], obs, exclude=rows)
        truth = self.Y[rows]
        self.cv_rmse, resid = {}, {}
        for k in self.ks:
            err = np.where(held, self._predict_k(order, k) - truth, np.nan)
            self.cv_rmse[k] = float(np.sqrt(np.nanmean(err ** 2)))
            resid[k] = err
        self.k = min(self.cv_rmse, key=self.cv_rmse.get)
        e = resid[self.k]
        pooled = np.nanmean(e ** 2)
        n_col = np.sum(~np.isnan(e), axis=0)
        col = np.where(np.isnan(e), 0.0, e ** 2).sum(axis=0) / np.maximum(n_col, 1)
        per_col = np.where(n_col >= 10, col, pooled)  # too few held entries in a column: pooled
        floor = 1e-12 * np.maximum(np.nanvar(self.Y, axis=0), 1e-300)
        self.sigma2 = np.maximum(per_col, floor)

    # --- predictions ------------------------------------------------------------------------------
    def predict(self, Y_star, exclude=None) -> tuple[np.ndarray, np.ndarray]:
        """Mean and variance (n*, D) of rows Y_star (NaN = missing): observed entries passed
        through with variance 0, missing ones from their k neighbours with ``sigma2``.
        ``exclude``: (n*,) a training row index per query not to use (the query itself, when
        imputing the training rows: ``impute``)."""
        Ys = np.asarray(Y_star, dtype=np.float64)
        if Ys.ndim != 2 or Ys.shape[1] != self.Y.shape[1]:
            raise ValueError(f"Y_star must have shape (n*, {self.Y.shape[1]}), got {Ys.shape}")
        obs = ~np.isnan(Ys)
        if not obs.any(axis=1).all():
            raise ValueError("every row of Y_star must observe at least one entry")
        mean = self._predict_k(self._order(Ys, obs, exclude=exclude), self.k)
        return np.where(obs, Ys, mean), np.where(obs, 0.0, self.sigma2)

    def impute(self) -> tuple[np.ndarray, np.ndarray]:
        """The training rows' missing entries, each row's neighbours among the other rows."""
        return self.predict(self.Y, exclude=np.arange(self.Y.shape[0]))
