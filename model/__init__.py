"""bgplvm.model: the variational (Bayesian) GP-LVM of Titsias & Lawrence (2010) and
Damianou, Titsias & Lawrence (JMLR), with psi statistics computed in Numba."""

#: The package version (PEP 440).
__version__ = "0.1.0"

from .gplvm import BayesianGPLVM  # noqa: E402
from .classifier import GPLVMClassifier  # noqa: E402
from .dynamical import DynamicalGPLVM  # noqa: E402
from .uncertain import UncertainInputGPR  # noqa: E402
from .autoregressive import AutoregressiveGP, ForecastSpreadWarning  # noqa: E402
from .semisupervised import SemiSupervisedGPR  # noqa: E402
from .mrd import MRD, DynamicalMRD  # noqa: E402
from .mrd_uncertain import UncertainInputMRD  # noqa: E402
from .io import ModelFileError  # noqa: E402
from .kernels import make_kernel  # noqa: E402
from .linalg import CholeskyError  # noqa: E402
from .optimize import FitProgress  # noqa: E402


def warmup() -> None:
    """Compile every Numba kernel now (a tiny model, bound + gradient + predictions), so
    that users do not wait for compilation at the first click or the first fit."""
    import numpy as np

    from .kernels import warmup as warmup_kernels

    warmup_kernels()
    rng = np.random.default_rng(0)
    m = BayesianGPLVM(rng.standard_normal((6, 3)), latent_dim=2, num_inducing=3, seed=0)
    m.elbo_and_gradient()
    m.predict(m.latent_mean[:2])
    m.predict(m.latent_mean[:2], m.latent_variance[:2])
    m.infer_latent(m.Y[:2], max_iters=2)  # the test-time bound (model/testbound.py)
    Ym = np.array(m.Y)
    Ym[0, 1] = Ym[3, 2] = np.nan  # missing training values: the grouped bound (model/missing.py)
    mm = BayesianGPLVM(Ym, latent_dim=2, num_inducing=3, seed=0)
    mm.elbo_and_gradient()
    mm.impute()
    t = np.arange(6.0)
    dm = DynamicalGPLVM(m.Y, t, latent_dim=2, num_inducing=3, seed=0)  # state space, d = 2
    dm.elbo_and_gradient()
    dm.latent_at(np.array([2.5, 7.0]))  # forecasts by the smoother
    dm.with_time_prior("dense").elbo_and_gradient()  # the dense prior's blocks (saved models)
    from ._lbfgs import warmup as warmup_lbfgs

    warmup_lbfgs()  # the fit's L-BFGS direction


__all__ = ["BayesianGPLVM", "DynamicalGPLVM", "GPLVMClassifier", "UncertainInputGPR",
           "AutoregressiveGP", "SemiSupervisedGPR", "MRD", "DynamicalMRD", "UncertainInputMRD",
           "CholeskyError", "FitProgress", "ModelFileError", "ForecastSpreadWarning", "make_kernel",
           "warmup", "__version__"]
