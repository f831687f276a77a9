"""Running a GPy comparison in GPy's own venv (``.bench-venv``, made by ``bench/setup_gpy.sh``;
GPy is never a dependency of bgplvm), for the reproductions that compare with it.

The parent (``run``) writes the arrays to an ``.npz`` and the settings to a JSON spec, runs
``<venv python> <script> --worker spec.json`` with single-threaded BLAS, reads the worker's
``RESULT {json}`` line and the arrays it wrote. The worker side (``worker_main``) is
imported by the worker scripts from their own folder (this module needs neither numpy nor
bgplvm at import), so it runs in a venv without bgplvm.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

#: GPy's venv, beside the project (``bench/setup_gpy.sh``)
GPY_VENV = Path(__file__).resolve().parents[1] / ".bench-venv"


def gpy_python(switch: str) -> Path | None:
    """``.bench-venv``'s python if the venv exists (GPy in it is checked by the worker) and
    the environment variable ``switch`` is not "0"."""
    if os.environ.get(switch, "1") == "0":
        return None
    p = GPY_VENV / "bin" / "python"
    return p if p.is_file() else None


def run(python: Path, script: Path, arrays: dict, settings: dict, timeout: float) -> tuple[dict, dict | None]:
    """(the worker's result dict, or {"error": ...}; the arrays it wrote to spec["out"], or None)."""
    import numpy as np

    with tempfile.TemporaryDirectory() as tmp:
        data, out, spec = Path(tmp) / "data.npz", Path(tmp) / "out.npz", Path(tmp) / "spec.json"
        np.savez(data, **arrays)
        spec.write_text(json.dumps(dict(settings, data=str(data), out=str(out))))
        env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
        try:
            p = subprocess.run([str(python), str(script), "--worker", str(spec)], env=env, capture_output=True,
                               text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"error": f"timeout after {timeout:.0f} s"}, None
        res = None
        for line in p.stdout.splitlines()[::-1]:
            if line.startswith("RESULT "):
                res = json.loads(line[7:])
                break
        if res is None:
            tail = (p.stderr or p.stdout).strip().splitlines()[-6:]
            return {"error": f"worker exit {p.returncode}: " + " | ".join(tail)}, None
        if "error" in res or not out.exists():
            return res, None
        with np.load(out) as z:
            return res, {k: z[k] for k in z.files}


def worker_main(argv: list[str], work, doc: str) -> int:
    """A worker script's ``main``: ``--worker spec.json`` -> ``work(spec)`` printed as
    ``RESULT {json}`` (an exception becomes {"error": ...}, reported by the parent)."""
    if len(argv) != 2 or argv[0] != "--worker":
        print(doc, file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as f:
        spec = json.load(f)
    try:
        out = work(spec)
    except Exception as e:  # noqa: BLE001 - the parent reports it in the table
        out = {"error": f"{type(e).__name__}: {e}"}
    print("RESULT " + json.dumps(out), flush=True)
    return 0
