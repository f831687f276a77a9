"""MRD with observed, uncertain inputs: several views regressed on one set of noisy inputs.

The views Y^(v) (N x D_v) are outputs of the same latent inputs X, observed with noise as Z
(N x Q): p(X | Z) = prod_n N(x_n | z_n, Sigma_z) (uncertainInputsPX, ``UncertainInputPrior``)
replaces MRD's N(0, I), and the bound is, as for ``MRD``, the views' collapsed bounds minus
that prior's KL once,

    F = sum_v F_hat_v(q(X); kernel_v, Z_v, beta_v) - KL(q(X) || p(X | Z)).

Each view has its own kernel, so its ARD weights say which input dimensions it depends on
(``segmentation``, as for any MRD). With one view this is ``UncertainInputGPR``
(``tests/test_mrd.py``: equal to 1e-12). Two sensors read at noisy positions, or a pose and
its silhouette at noisily measured joint angles, share the inputs' noise: each view's
evidence about where an input really was informs the others' predictions.
"""

from __future__ import annotations

import numpy as np

from .gplvm import BayesianGPLVM
from .io import register_model_class
from .mrd import MRD, check_views
from .priors import LatentPrior, UncertainInputPrior
from .uncertain import INPUT_VARIANCE, UncertainInputGPR, check_inputs, check_pairs, not_for_regression, regression_init




class UncertainInputMRD(MRD):
    """Several views of outputs of noisily observed inputs (module docstring).

    Parameters
    ----------
    Z : (N, Q) observed inputs (Q is the latent dimension).
    views : as ``MRD``'s (a dict name -> (N, D_v) array, or a list).
    num_inducing, kernel, seed, inducing : as ``MRD``'s.
    tie_mean : q(X)'s means held at Z (``UncertainInputGPR``'s).
    input_variance : the initial q(X) and Sigma_z variances (scalar or (Q,)); default
        ``uncertain.INPUT_VARIANCE`` (1e-2) of each input's variance, as ``UncertainInputGPR``'s:
        measured on two views of noisy 2-D inputs (80 rows, input noise sd 0.15, 4 seeds,
        500 iterations), a start at 1e-6 left every fit with q(X) at the inputs, Sigma_z
        collapsed and bounds of -59 to 43; starts at 1e-3 and 1e-2 of the input variance
        reached 300-384 and moved q(X)'s means 2-3x closer to the true inputs than Z.

    The first phase of ``fit`` holds q(X) and Sigma_z at their start (the inputs): the views'
    mappings fit first, as ``UncertainInputGPR``'s does.
    """

    _init_held = ("mu", "S", "Sigma_z")

    def __init__(self, Z, views, num_inducing: int = 30, kernel="rbf", tie_mean: bool = False,
                 input_variance=None, seed: int | None = 0, inducing: str = "per_view"):
        from .uncertain import _check_input_variance

        Z = check_inputs(Z, "Z")
        names, arrays = check_views(views)
        for a in arrays:
            check_pairs(Z, np.asarray(a))
        self.inputs = Z
        self.tie_mean = bool(tie_mean)
        v = INPUT_VARIANCE * Z.var(0) if input_variance is None else _check_input_variance(input_variance, Z.shape[1])
        self._S0 = np.broadcast_to(np.maximum(np.asarray(v, dtype=np.float64), 1e-9), Z.shape)
        super().__init__(dict(zip(names, arrays)), latent_dim=Z.shape[1], num_inducing=num_inducing,
                         kernel=kernel, seed=seed, inducing=inducing)
        self._init_held = type(self)._init_held  # MRD's constructor names the views' noises

    def _initial_state(self, Q: int, M: int, rng: np.random.Generator) -> dict:
        """q(X) at the inputs (``regression_init``), each view's kernel from its own variance."""
        start = regression_init(self.inputs, self._S0, np.zeros((len(self.inputs), 1)), M, rng)
        start["view_var"] = self._view_variances()
        return start

    def _make_prior(self, N: int, Q: int, init: dict) -> LatentPrior:
        return UncertainInputPrior(self.inputs, tie_mean=self.tie_mean)

    @property
    def input_noise_variance(self) -> np.ndarray:
        """(Q,) the diagonal of Sigma_z."""
        return np.asarray(self._values()["Sigma_z"], dtype=np.float64).copy()

    def predict(self, Z_star, Z_star_var=None, include_noise: bool = True, input_noise: bool = True,
                view: str | None = None):
        """{view: (mean, variance) (n, D_v)} (or that of ``view``) at observed test inputs
        Z_star (n, Q): x* ~ N(Z_star, diag(Z_star_var + Sigma_z)), as
        ``UncertainInputGPR.predict`` (``input_noise=False`` leaves Sigma_z out)."""
        Z_star, var = UncertainInputGPR._test_inputs(self, Z_star, Z_star_var, input_noise)
        return super().predict(Z_star, var, include_noise=include_noise, view=view)

    _hold_helps = BayesianGPLVM._hold_helps  # the inputs' hold lasts its whole phase, as for one view

    infer_latent = infer_candidates = log_density = predict_views = reconstruct = not_for_regression

    def __repr__(self) -> str:
        return "UncertainInput" + super().__repr__()

    def _file_args(self):
        args, arrays = super()._file_args()
        args.pop("init", None)  # q(X) starts at the inputs
        args["tie_mean"] = self.tie_mean
        return args, arrays

    @classmethod
    def _from_file(cls, Y, common, args, arrays):
        views = {n: arrays[f"Y.{n}"] for n in args["views"]}
        return cls(arrays["prior.inputs"], views, num_inducing=common["num_inducing"], kernel=list(args["kernels"]),
                   seed=common["seed"], inducing=args["inducing"], tie_mean=args.get("tie_mean", False))


register_model_class(UncertainInputMRD)
