"""Semi-supervised GP regression with missing input features (paper section
"Semi-supervised GP Regression and Data Imputation" and the appendix algorithm
``algorithm:semiSupervised``).

Rows of the inputs X (N, Q) are fully observed (o) or partially observed (u: NaN where a
feature is missing, any pattern). The inputs are replaced by q(X) = prod N(mu_nq, S_nq)
under the GP-LVM prior N(0, I) on standardised inputs; observed entries are held at
N(x_nq, eps) (eps = 1e-9) by per-entry freeze masks, missing ones are learned. ``fit``:

1. train a model M^o on the fully observed rows with q(X^o) fixed at the inputs: a
   (sparse variational) GP regression (``UncertainInputGPR(fixed_inputs=True)``);
2. infer q(X^u) for the missing entries: start them at the inputs of the nearest fully
   observed row (distance over the row's observed features and the standardised outputs)
   with variance 1/2, then maximise the bound of all rows over the missing entries only,
   with M^o's kernel, noise and inducing inputs held fixed (test-time inference of q(X^u));
3. train M^{o,u} on all rows: the missing entries of q(X) and the inducing inputs (the
   variational parameters), the observed entries still fixed. The kernel and noise variance
   stay M^o's, learned from the fully observed rows (``learn_hyperparameters=True`` learns
   them here too, the appendix algorithm read literally).

Why the hyperparameters stay M^o's: the bound of the joint model prices every free entry of
q(X^u) by its KL against N(0, 1) and every partial row's outputs by how well the mapping at
q(x_n) explains them. When many features are missing (15 inputs, 5 outputs in the paper's
simulation), the bound is raised most cheaply by switching most ARD dimensions off (the KL
of the free entries in those dimensions drops to 0) and raising the noise variance (the
partial rows' outputs become noise). On the simulated data (``reproduce semi-supervised``,
seeds 0 and 1) at 100% missing the joint fit ends 400-500 nats above the fit with them
held, with 4 of 15 dimensions left and 7-15 times the noise variance, and a test MSE of
0.33-0.34 against 0.19 / 0.16 held and the GP's 0.19 / 0.14; at 50% missing 0.19 / 0.16
against 0.10 / 0.08 held. The rows that carry the least information about the mapping then
decide its hyperparameters. With them held, a partial row only adds its
(uncertain) input-output pair to the posterior of the mapping, and a row with no observed
feature leaves the predictions near the GP's on the observed rows.

Predictions at fully observed test inputs are the model's projected-process predictive.
The bound (``elbo``) includes the KL of the held entries against N(0, 1), a constant that
is large (about -1/2 log eps per entry) but does not move during the fit.
"""

from __future__ import annotations

import numpy as np

from .gplvm import BayesianGPLVM, _check_Y, _check_int
from .io import kernel_spec, register_model_class
from .uncertain import (FIXED_INPUT_VARIANCE, UncertainInputGPR, check_inputs, check_pairs, not_for_regression,
                        regression_init)

#: initial variance (standardised units) of the missing entries before inference
MISSING_INIT_VARIANCE = 0.5


def nearest_rows(Xs: np.ndarray, observed: np.ndarray, Ys: np.ndarray, full: np.ndarray) -> np.ndarray:
    """For every row, the index of the nearest fully observed row, by squared distance
    over that row's observed features of Xs plus all standardised outputs Ys."""
    Xo, Yo = Xs[full], Ys[full]
    dY = np.sum((Ys[:, None, :] - Yo[None]) ** 2, axis=2)  # (N, No)
    diff = np.where(observed[:, None, :], Xs[:, None, :] - Xo[None], 0.0)
    d = dY + np.sum(diff * diff, axis=2)
    return np.flatnonzero(full)[np.argmin(d, axis=1)]


def _stopped(fit_info: dict) -> bool:
    """Whether a fit ended on a callback's request or Ctrl-C (not on its iteration budget)."""
    return fit_info.get("reason") in ("callback", "interrupted")


@register_model_class
class SemiSupervisedGPR(BayesianGPLVM):
    """GP regression from inputs with missing features (NaN) to outputs Y.

    Parameters
    ----------
    X : (N, Q) array
        Inputs, NaN where a feature is missing; at least 2 rows fully observed and every
        feature observed somewhere.
    Y : (N, D) array
        Outputs, no NaN.
    num_inducing : int
        M <= N (model M^o uses min(M, number of fully observed rows)).
    kernel : str or Kernel
        As ``BayesianGPLVM`` (ARD RBF by default).
    """

    def __init__(self, X, Y, num_inducing: int = 30, kernel="rbf", seed: int | None = 0):
        X = check_inputs(X, "X", allow_nan=True)
        Y = _check_Y(Y)
        check_pairs(X, Y)
        observed = ~np.isnan(X)
        full = observed.all(1)
        empty = np.flatnonzero(~observed.any(0))
        if empty.size:
            raise ValueError(f"input features {empty[:5].tolist()} are missing in every row")
        if full.sum() < 2:
            raise ValueError(f"X needs at least 2 fully observed rows to train the first model, "
                             f"got {int(full.sum())}")
        self.inputs, self.observed, self.full_rows = X, observed, full
        self.x_mean = np.nanmean(X, axis=0)
        std = np.nanstd(X, axis=0)
        self.x_std = np.where(std > 1e-12 * np.maximum(np.abs(self.x_mean), 1.0), std, 1.0)
        self._Xs = np.where(observed, (X - self.x_mean) / self.x_std, 0.0)
        self.observed_model: UncertainInputGPR | None = None
        super().__init__(Y, latent_dim=X.shape[1], num_inducing=num_inducing, kernel=kernel, seed=seed)
        self.freeze_entries("mu", observed)
        self.freeze_entries("S", observed)

    def _initial_state(self, Q, M, rng):
        S0 = np.where(self.observed, FIXED_INPUT_VARIANCE, 1.0)  # missing: the prior N(0, 1)
        return regression_init(self._Xs, S0, self._Yc, M, rng)

    def _standardise(self, X_star) -> np.ndarray:
        return (self._check_latent(X_star, "X_star") - self.x_mean) / self.x_std

    # --- training (algorithm:semiSupervised) --------------------------------------------------
    def fit(self, max_iters: int = 1000, observed_iters: int | None = None, infer_iters: int | None = None,
            learn_hyperparameters: bool = False, learn_inducing: bool = True, callback=None,
            progress: bool | None = None) -> "SemiSupervisedGPR":
        """Steps 1-3 of the module docstring: ``observed_iters`` (default ``max_iters``) for
        M^o, ``infer_iters`` (default ``max_iters // 2``) for q(X^u) alone, ``max_iters``
        for the final fit of M^{o,u}; ``learn_hyperparameters`` also learns the kernel and
        noise variance there (the module docstring says why it is off by default);
        ``learn_inducing=False`` holds the inducing inputs at M^o's too (only q(X^u) moves):
        on the simulated data (4 seeds) that was worse at 10% missing in 3 seeds and at 50% in
        2 (up to 0.158 vs 0.068), better at 100% in 3 (0.20 vs 0.29 at worst), so they move by
        default.
        ``callback`` as ``BayesianGPLVM.fit``: it sees all three steps, and returning True
        (or Ctrl-C) ends the fit, the later steps included. Each call runs the three
        steps from the start (a new M^o, q(X^u) inferred again): unlike
        ``BayesianGPLVM.fit`` it does not continue from the current point."""
        max_iters = _check_int("max_iters", max_iters, 0)
        observed_iters = max_iters if observed_iters is None else _check_int("observed_iters", observed_iters, 0)
        infer_iters = max_iters // 2 if infer_iters is None else _check_int("infer_iters", infer_iters, 0)
        full = self.full_rows
        mo = UncertainInputGPR(self._Xs[full], self.Y[full], num_inducing=min(self.num_inducing, int(full.sum())),
                               kernel=kernel_spec(self.kernel), fixed_inputs=True, seed=self.seed)
        mo.fit(max_iters=observed_iters, callback=callback, progress=progress)
        self.observed_model = mo
        self._start_from(mo)
        info = {"observed": mo.fit_info}
        if not _stopped(mo.fit_info):  # a callback's stop or Ctrl-C ends the later steps too
            held = [n for n in self.param_names if n not in ("mu", "S")]
            info["infer"] = self._fit_holding(held, infer_iters, callback, progress)
        if not _stopped(info.get("infer", mo.fit_info)):
            hyper = [] if learn_hyperparameters else [n for n in self.param_names
                                                      if n.startswith("kernel.") or n == "noise_variance"]
            hyper += [] if learn_inducing else ["Z"]
            self._fit_holding(hyper, max_iters, callback, progress)
            info["joint"] = self.fit_info
        last = info[list(info)[-1]]
        self.fit_info = dict(last, phases={k: {kk: vv for kk, vv in v.items() if kk != "history"}
                                           for k, v in info.items()})
        return self

    def _fit_holding(self, held: list[str], max_iters: int, callback, progress) -> dict:
        """``BayesianGPLVM.fit`` (no fixed-noise phase) with the parameters ``held`` frozen;
        the user's own frozen set is restored after. Returns the fit's ``fit_info``."""
        user_frozen = set(self._layout.frozen)
        self.freeze(*held)
        try:
            super().fit(max_iters=max_iters, init_iters=0, callback=callback, progress=progress)
        finally:
            self.unfreeze(*held)
            self.freeze(*user_frozen)
        return self.fit_info

    def _start_from(self, mo: UncertainInputGPR) -> None:
        """Kernel, noise and inducing inputs of M^o; missing entries of q(X) from the
        nearest fully observed row (variance ``MISSING_INIT_VARIANCE``)."""
        v = self._values()
        vo = mo._values()
        for k in v:
            if k.startswith("kernel.") or k == "noise_variance":
                v[k] = vo[k]
        Mo = mo.num_inducing
        v["Z"] = v["Z"].copy()
        v["Z"][:Mo] = vo["Z"]
        Ys = self._Yc / np.where(self._Yc.std(0) > 0, self._Yc.std(0), 1.0)
        nn = nearest_rows(self._Xs, self.observed, Ys, self.full_rows)
        miss = ~self.observed
        v["mu"] = np.where(miss, self._Xs[nn], self._Xs)
        v["S"] = np.where(miss, MISSING_INIT_VARIANCE, v["S"])
        self._set_x(self._layout.pack(v))

    # --- predictions ---------------------------------------------------------------------------
    def predict(self, X_star, include_noise: bool = True):
        """Predictive mean and variance (n, D) of y* at fully observed inputs X_star (n, Q)
        (original units; eq:testPosteriorF)."""
        return super().predict(self._standardise(X_star), None, include_noise=include_noise)

    @property
    def imputed_inputs(self) -> tuple[np.ndarray, np.ndarray]:
        """q(X) in the inputs' units: means (N, Q) (the observed values where observed) and
        variances (N, Q) (0 where observed)."""
        mu = np.where(self.observed, self.inputs, self.latent_mean * self.x_std + self.x_mean)
        return mu, np.where(self.observed, 0.0, self.latent_variance * self.x_std**2)

    # --- model files -------------------------------------------------------------------------
    def _file_args(self):
        return {}, {"inputs": self.inputs}

    @classmethod
    def _from_file(cls, Y, common, args, arrays):
        return cls(arrays["model.inputs"], Y, num_inducing=common["num_inducing"], kernel=common["kernel"],
                   seed=common["seed"])

    infer_latent = reconstruct = log_density = not_for_regression
    _not_calibrated_because = (
        "its training inputs are partly missing, and calibrate() (UncertainInputGPR's) predicts held-out rows "
        "at their observed inputs; the coverage of its predictions is measured in `bgplvm reproduce calibration`")

    def __repr__(self) -> str:
        N, D = self.Y.shape
        return (f"SemiSupervisedGPR(N={N} ({int(self.full_rows.sum())} fully observed), Q={self.latent_dim}, "
                f"D={D}, missing={float(np.mean(~self.observed)):.0%}, num_inducing={self.num_inducing}, "
                f"kernel={self.kernel!r})")
