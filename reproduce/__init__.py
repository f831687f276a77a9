"""Reproductions of the paper's experiments: ``bgplvm reproduce NAME``.

Each experiment is a module of this package with a ``run(ctx: Context) -> Result``
function; ``EXPERIMENTS`` names them. A run writes, under ``<out>/<NAME>/``:
``result.json`` (every number, the settings, wall times), ``table.md`` (our numbers beside
the paper's) and its figures (PNG), then regenerates ``<out>/REPORT.md`` from every
``result.json`` found there, so the tables gather in one report (``reproduction/REPORT.md``
in the repository). Reproductions are commands run once, not CI tests.
"""

from __future__ import annotations

import importlib
import time

from .report import Context, Result, code_version, gather_report  # noqa: F401

#: name -> (module in this package, one-line description)
EXPERIMENTS: dict[str, tuple[str, str]] = {}


def register(name: str, module: str, description: str) -> None:
    EXPERIMENTS[name] = (module, description)


def run(name: str, ctx: Context) -> Result:
    """Run experiment ``name``, write its files and the gathered report; return its Result."""
    if name not in EXPERIMENTS:
        raise ValueError(f"unknown experiment {name!r}; known: {', '.join(sorted(EXPERIMENTS))}")
    module = importlib.import_module(f"{__name__}.{EXPERIMENTS[name][0]}")
    code = code_version()
    t0 = time.perf_counter()
    result = module.run(ctx)
    if result.wall_time_s is None:
        result.wall_time_s = time.perf_counter() - t0
    result.quick = result.quick or ctx.quick
    result.code = code
    result.write(ctx.out_dir / name)
    gather_report(ctx.out_dir)
    return result
register("mackey-glass", "mackey_glass", "iterative k-step forecasts with uncertain inputs (Mackey-Glass)")
register("semi-supervised", "semi_supervised", "semi-supervised GP with missing inputs (simulated)")
register("semi-supervised-mocap", "semi_supervised_mocap", "semi-supervised GP with missing inputs (CMU 35 walks)")
register("cmu35", "cmu35", "CMU 35 mocap: legs/body reconstruction table (dynamical, static, NN)")
register("cmu35-static", "cmu35_static", "CMU 35 mocap: the static variational GP-LVM rows + NN")
register("video", "video", "Frey faces as a video: missing-pixel reconstruction (dyn., static, k-NN) and generated frames")
register("walk", "walk", "CMU 35 walk forecast beyond its last training frame (strip of generated skeletons)")
register("usps", "usps", "USPS digits: 10 class GP-LVMs (Q=10, M=50), label by class density (issue 9)")
register("oil-test", "oil_test", "oil test set, half the readings missing: reconstruction RMSE, latent 1-NN (issue 9)")
register("oil-missing", "oil_missing", "oil training data with 10-50 % / blocks missing: imputation RMSE, latent 1-NN, init (issue 33)")
register("calibration", "calibration", "coverage of the predictive intervals on every prediction path, before and after calibrate() (issue 44)")
register("mrd-toy", "mrd_toy", "MRD on three views with a known shared / private segmentation: recovered over seeds, per start and inducing choice (issue 45)")
register("mrd-pose", "mrd_pose", "MRD pose from silhouette (ankur_pose, 418 test frames): error per body point against nearest neighbour, mean pose and GPy; ARD per view (issue 45)")
