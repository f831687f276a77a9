"""Rebuild the explorer's pre-trained models (``assets/*.npz``) and their records (``*.json``).

    python -m bgplvm_assets.make_assets cmu35 [frey_video synth_walk] [--iters N]

Deterministic given the data, the settings in ``bgplvm_assets.ASSETS`` and the seed (the
bound may differ in the last digits between machines: BLAS and thread counts change
summation order). Written beside each model: data set, rows, sha256 of Y, settings, seed,
iterations, bound, wall time, machine load. Real data sets are not written into the files
(``strip_data``); the embedded synthetic walk's model keeps its Y.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import numpy as np

from . import ASSETS, dataset_for, get_spec, sha256_rows, strip_data


def build(name: str, iters: int | None = None, progress: bool = True) -> dict:
    from model import BayesianGPLVM, DynamicalGPLVM, __version__

    spec = get_spec(name)
    iters = spec.iters if iters is None else int(iters)
    if spec.embedded_data:
        from bgplvm_datasets import load

        ds = load(spec.dataset, progress=False)
    else:
        ds = dataset_for(spec)
    load0 = os.getloadavg()
    t0 = time.perf_counter()
    if spec.model_class == "DynamicalGPLVM":
        m = DynamicalGPLVM(ds.Y, ds.times, sequences=ds.sequence, **spec.settings)
    else:
        m = BayesianGPLVM(ds.Y, **spec.settings)
    m.fit(max_iters=iters, progress=progress)
    wall = time.perf_counter() - t0
    bound = float(m.elbo())
    alpha = np.asarray(m.ard_weights)
    record = {
        "asset": name,
        "title": spec.title,
        "dataset": spec.dataset,
        "split": spec.split,
        "rows": list(spec.rows) if spec.rows else None,
        "N": int(ds.N), "D": int(ds.D),
        "data_sha256": sha256_rows(ds.Y),
        "data_included": bool(spec.embedded_data),
        "model_class": spec.model_class,
        "settings": spec.settings,
        "seed": spec.settings.get("seed"),
        "iterations": int(m.fit_info.get("iterations", iters)),
        "max_iters": iters,
        "evaluations": int(m.fit_info.get("evaluations", 0)),
        "bound": bound,
        "noise_variance": float(m.noise_variance),
        "ard_weights": alpha.round(6).tolist(),
        "active_dims": int((alpha > 0.05 * alpha.max()).sum()),
        "wall_time_s": round(wall, 1),
        "machine": {"cpus": os.cpu_count(), "loadavg_before": [round(v, 2) for v in load0],
                    "loadavg_after": [round(v, 2) for v in os.getloadavg()],
                    "python": platform.python_version(), "numpy": np.__version__},
        "bgplvm_version": __version__,
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": "python -m bgplvm_assets.make_assets " + name + (f" --iters {iters}" if iters != spec.iters else ""),
        "fps": spec.fps,
        "time_unit": spec.time_unit,
    }
    if spec.model_class == "DynamicalGPLVM":
        record["time_kernel"] = repr(m.time_kernel)
    m.metadata = dict(m.metadata or {}, dataset=spec.dataset, asset=name)
    import io

    buf = io.BytesIO()
    m.save(buf)
    data = buf.getvalue() if spec.embedded_data else strip_data(buf.getvalue(), record)
    spec.path.write_bytes(data)
    record["file_bytes"] = len(data)
    spec.record_path.write_text(json.dumps(record, indent=1) + "\n")
    return record


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", default=["cmu35"], help=f"assets to build ({', '.join(ASSETS)})")
    ap.add_argument("--iters", type=int, default=None, help="override the recorded iteration count")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    for name in args.names:
        rec = build(name, args.iters, progress=not args.quiet)
        print(f"{name}: bound {rec['bound']:,.2f}, {rec['active_dims']} active dims, "
              f"{rec['wall_time_s']} s, {rec['file_bytes'] / 1024:.0f} KiB -> {get_spec(name).path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
