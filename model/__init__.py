"""bgplvm.model: the variational (Bayesian) GP-LVM of Titsias & Lawrence (2010) and
Damianou, Titsias & Lawrence (JMLR), with psi statistics computed in Numba."""

__version__ = "0.1.0"

from .gplvm import BayesianGPLVM  # noqa: E402
from .io import ModelFileError  # noqa: E402
from .kernels import make_kernel  # noqa: E402
from .linalg import CholeskyError  # noqa: E402
from .optimize import FitProgress  # noqa: E402


def warmup(verbose: bool = False, waiting: str = "") -> float:
    """Compile every Numba kernel now (a tiny model, bound + gradient + predictions), so
    that users do not wait for compilation at the first click or the first fit.

    With an empty Numba cache (a fresh clone) this compiles for ~20-40 s on 2 cores; later
    processes load the kernels from the on-disk cache in well under a second. ``verbose``
    prints to stderr what is happening when it takes longer than ``COMPILE_NOTICE_AFTER``
    seconds (that is, when it compiles) and how long it took; ``waiting`` (e.g. "the page
    opens when this is done") is added to the first message. Returns the seconds taken.
    """
    import sys
    import threading
    import time

    import numpy as np

    from .kernels import warmup as warmup_kernels

    t0 = time.perf_counter()
    said = threading.Event()

    def notice():
        said.set()
        print("bgplvm: compiling the Numba kernels (first start with an empty cache; later starts "
              "load them from the cache in under a second)" + (f"; {waiting}" if waiting else "")
              + "...", file=sys.stderr, flush=True)

    timer = threading.Timer(COMPILE_NOTICE_AFTER, notice) if verbose else None
    if timer is not None:
        timer.daemon = True
        timer.start()
    try:
        warmup_kernels()
        rng = np.random.default_rng(0)
        m = BayesianGPLVM(rng.standard_normal((6, 3)), latent_dim=2, num_inducing=3, seed=0)
        m.elbo_and_gradient()
        m.predict(m.latent_mean[:2])
        m.predict(m.latent_mean[:2], m.latent_variance[:2])
    finally:
        if timer is not None:
            timer.cancel()
    dt = time.perf_counter() - t0
    if said.is_set():
        print(f"bgplvm: Numba kernels compiled in {dt:.1f} s (cached for later starts)",
              file=sys.stderr, flush=True)
    return dt


#: seconds after which ``warmup(verbose=True)`` says it is compiling (loading every kernel
#: from the cache takes ~0.3-1 s)
COMPILE_NOTICE_AFTER = 3.0


__all__ = ["BayesianGPLVM", "CholeskyError", "FitProgress", "ModelFileError", "make_kernel",
           "warmup", "__version__"]
