"""Rebuild the explorer's pre-trained models (``assets/*.npz``) and their records (``*.json``).

    python -m bgplvm.assets.make_assets cmu35 [frey_video synth_walk] [--iters N]
    python -m bgplvm.assets.make_assets --add-data-check cmu35 frey_video   # no refit

Deterministic given the data, the settings in ``bgplvm.assets.ASSETS`` and the seed (the
bound may differ in the last digits between machines: BLAS and thread counts change
summation order). Written beside each model: data set, rows, the data check (the raw files'
sha256, shape and column sums of Y; ``bgplvm.assets.data_check``), settings, seed,
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

from . import ASSETS, data_check, dataset_for, get_spec, load_model_file, sha256_rows, strip_data

#: how close the bound of an asset on rows loaded here must be to its recorded bound for
#: ``add_data_check`` to take them as its rows
BOUND_RTOL = 1e-9


def build(name: str, iters: int | None = None, progress: bool = True) -> dict:
    from bgplvm import BayesianGPLVM, DynamicalGPLVM, __version__

    spec = get_spec(name)
    iters = spec.iters if iters is None else int(iters)
    if spec.embedded_data:
        from bgplvm.datasets import load

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
        "data_check": data_check(ds.Y, (ds.meta or {}).get("sha256")),
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
        "command": "python -m bgplvm.assets.make_assets " + name + (f" --iters {iters}" if iters != spec.iters else ""),
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


def add_data_check(name: str) -> dict:
    """Give an asset recorded before ``data_check`` existed one, without refitting. The rows
    loaded here are taken as the rows it was fitted to when the model's bound on them is
    the recorded bound to ``BOUND_RTOL`` (rounding of the features moves it by far less;
    other data by far more: the sha256 of the rows differs between CPUs, so it cannot
    decide). The record is rewritten in the .json file and inside the model file."""
    import io

    spec = get_spec(name)
    record = json.loads(spec.record_path.read_text())
    ds = dataset_for(spec)
    bound = float(load_model_file(spec.path, ds.Y, check=False).elbo())
    if not abs(bound - record["bound"]) <= BOUND_RTOL * abs(record["bound"]):
        raise SystemExit(f"{name}: the model's bound on the rows here is {bound!r}, not the recorded "
                         f"{record['bound']!r}: rebuild the asset instead")
    print(f"{name}: bound on the rows here {bound!r}, recorded {record['bound']!r}")
    record["data_check"] = data_check(ds.Y, (ds.meta or {}).get("sha256"))
    with np.load(spec.path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    inner = json.loads(arrays["asset.json"].tobytes().decode())
    inner["data_check"] = record["data_check"]
    arrays["asset.json"] = np.frombuffer(json.dumps(inner).encode(), dtype=np.uint8)
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    from bgplvm.io import atomic_write_bytes

    atomic_write_bytes(spec.path, buf.getvalue())
    record["file_bytes"] = len(buf.getvalue())
    atomic_write_bytes(spec.record_path, (json.dumps(record, indent=1) + "\n").encode())
    return record


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", default=["cmu35"], help=f"assets to build ({', '.join(ASSETS)})")
    ap.add_argument("--iters", type=int, default=None, help="override the recorded iteration count")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--add-data-check", action="store_true",
                    help="add the data check to assets recorded without one (no refit)")
    args = ap.parse_args(argv)
    if args.add_data_check:
        for name in args.names:
            add_data_check(name)
            print(f"{name}: data check recorded -> {get_spec(name).record_path}")
        return 0
    for name in args.names:
        rec = build(name, args.iters, progress=not args.quiet)
        print(f"{name}: bound {rec['bound']:,.2f}, {rec['active_dims']} active dims, "
              f"{rec['wall_time_s']} s, {rec['file_bytes'] / 1024:.0f} KiB -> {get_spec(name).path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
