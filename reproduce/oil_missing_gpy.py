"""GPy 1.15's missing-data Bayesian GP-LVM on one masked oil set, run in GPy's own venv.

``.bench-venv/bin/python reproduce/oil_missing_gpy.py --worker spec.json`` (what
``oil_missing`` runs as a subprocess when ``.bench-venv`` exists; ``bench/setup_gpy.sh``
makes it; GPy is never a dependency of bgplvm). The spec names an ``.npz`` with ``Y``
(NaN = missing) and where to write the answer; the fit is the one GPy users write:

    m = GPy.models.bayesian_gplvm_minibatch.BayesianGPLVMMiniBatch(Y, Q, num_inducing=M, missing_data=True)
    m.optimize(messages=False, max_iters=max_iters)      # paramz L-BFGS-B (GPy's default optimiser)

then the imputation is the predictive mean at q(X) (``m.predict(m.X)``: GPy's psi-statistic
prediction at the Gaussian latent points, every output's own posterior), and the ARD
weights are ``1 / lengthscale^2``. Prints ``RESULT {json}`` (as ``bench/_worker.py`` reads).
"""

from __future__ import annotations

import sys
import time


def work(spec: dict) -> dict:
    import numpy as np
    import GPy

    data = np.load(spec["data"])
    Y = np.array(data["Y"], dtype=float)
    np.random.seed(int(spec.get("seed", 0)))  # GPy draws its start (X variances, Z) from numpy's global state
    t = time.perf_counter()
    m = GPy.models.bayesian_gplvm_minibatch.BayesianGPLVMMiniBatch(
        Y, int(spec["Q"]), num_inducing=int(spec["M"]), missing_data=True)
    m.optimize(messages=False, max_iters=int(spec["max_iters"]))
    fit_s = time.perf_counter() - t
    how = "predict(m.X) (uncertain inputs, psi statistics)"
    try:
        mean = np.asarray(m.predict(m.X)[0])
    except Exception as e:  # noqa: BLE001 - fall back to the means of q(X), and say so
        how = f"predict(m.X.mean) (m.predict(m.X) failed: {type(e).__name__}: {e})"
        mean = np.asarray(m.predict(np.asarray(m.X.mean))[0])
    ls = np.asarray(m.kern.lengthscale, dtype=float)
    ls = np.broadcast_to(ls, (int(spec["Q"]),)) if ls.size == 1 else ls
    np.savez(spec["out"], mean=mean, latent_mean=np.asarray(m.X.mean), ard=1.0 / ls ** 2)
    return {"bound": float(np.sum(m.log_likelihood())), "fit_s": fit_s, "prediction": how,
            "gpy_version": GPy.__version__, "iterations_cap": int(spec["max_iters"]),
            "noise_variance": float(np.asarray(m.likelihood.variance).ravel()[0])}


def main(argv: list[str]) -> int:
    from gpy_worker import worker_main  # beside this script (run by path, in GPy's venv)

    return worker_main(argv, work, __doc__)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
