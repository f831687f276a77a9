"""GPy 1.15's ``MRD`` on the pose / silhouette frames, run in GPy's own venv.

``.bench-venv/bin/python reproduce/mrd_pose_gpy.py --worker spec.json`` (what ``mrd_pose``
runs as a subprocess when ``.bench-venv`` exists; ``bench/setup_gpy.sh`` makes it; GPy is
never a dependency of bgplvm). The spec names an ``.npz`` with the training views
(``silhouette``, ``pose``) and the test silhouettes (``silhouette_test``), and where to write
the answer. The fit is the one GPy users write (same Q, M and iteration cap as ours):

    m = GPy.models.MRD([silhouette, pose], input_dim=Q, num_inducing=M, Ynames=[...])
    m.optimize(messages=False, max_iters=max_iters)     # paramz L-BFGS-B

then q(x*) of each test silhouette from the silhouette sub-model
(``GPy.inference.latent_function_inference.inferenceX.infer_newX(m.bgplvms[0], Ys)``: its
nearest training silhouette's q(x_n) as start, then optimised), and the pose is
``m.predict(x*, Yindex=1)`` (the pose sub-model's predictive mean at the means of q(x*)).
Where ``infer_newX`` fails, x* is the latent mean of the nearest training silhouette, and
the answer says so. Prints ``RESULT {json}`` (as ``bench/_worker.py`` reads).
"""

from __future__ import annotations

import sys
import time


def work(spec: dict) -> dict:
    import numpy as np
    import GPy

    data = np.load(spec["data"])
    sil, pose, sil_test = (np.array(data[k], dtype=float) for k in ("silhouette", "pose", "silhouette_test"))
    Q, M = int(spec["Q"]), int(spec["M"])
    np.random.seed(int(spec.get("seed", 0)))  # GPy draws Z and the X variances from numpy's global state
    t = time.perf_counter()
    m = GPy.models.MRD([sil, pose], input_dim=Q, num_inducing=M, Ynames=["silhouette", "pose"])
    m.optimize(messages=False, max_iters=int(spec["max_iters"]))
    fit_s = time.perf_counter() - t
    t = time.perf_counter()
    how = "infer_newX(m.bgplvms[0], Ys) (silhouette sub-model), then m.predict(mean of q(x*), Yindex=1)"
    try:
        from GPy.inference.latent_function_inference.inferenceX import infer_newX

        Xs, _ = infer_newX(m.bgplvms[0], sil_test, optimize=True)
        xs = np.asarray(Xs.mean)
    except Exception as e:  # noqa: BLE001 - fall back to the nearest silhouette's latent mean, and say so
        how = (f"latent mean of the nearest training silhouette, then m.predict(., Yindex=1) "
               f"(infer_newX failed: {type(e).__name__}: {e})")
        d = ((sil_test[:, None, :] - sil[None, :, :]) ** 2).sum(-1)
        xs = np.asarray(m.X.mean)[d.argmin(1)]
    pred = np.asarray(m.predict(xs, Yindex=1)[0])
    infer_s = time.perf_counter() - t
    ard = {}
    for name, b in zip(["silhouette", "pose"], m.bgplvms):
        ls = np.asarray(b.kern.lengthscale, dtype=float)
        ard[name] = (1.0 / np.broadcast_to(ls, (Q,)) ** 2).tolist()
    np.savez(spec["out"], pose=pred, latent_test=xs)
    return {"bound": float(np.sum(m.log_likelihood())), "fit_s": fit_s, "infer_s": infer_s, "prediction": how,
            "gpy_version": GPy.__version__, "iterations_cap": int(spec["max_iters"]), "ard": ard,
            "noise_variance": {n: float(np.asarray(b.likelihood.variance).ravel()[0])
                               for n, b in zip(["silhouette", "pose"], m.bgplvms)}}


def main(argv: list[str]) -> int:
    from gpy_worker import worker_main  # beside this script (run by path, in GPy's venv)

    return worker_main(argv, work, __doc__)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
