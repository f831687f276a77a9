"""Run one measurement of a benchmark script in a fresh subprocess (``SCRIPT --worker
spec.json``) and read back the JSON it prints on a line starting with ``RESULT ``.

Each implementation and case gets its own process, so compilation, caches and memory
peaks do not leak between measurements."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path


def loadavg() -> float:
    """1-minute load average (the machine is shared: > its cores means others compete)."""
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return float("nan")


def loadavg_text() -> str:
    """The 1-, 5- and 15-minute load averages as /proc/loadavg prints them ("?" elsewhere)."""
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def run_worker(script: str, spec: dict, python: str, env_extra: dict | None = None,
               timeout: float = 3600) -> dict:
    """The worker's result dict, or {"error": ...} on a timeout or a failed worker."""
    env = dict(os.environ)
    env.update(env_extra or {})
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(spec, f)
        path = f.name
    try:
        p = subprocess.run([python, script, "--worker", path], env=env, capture_output=True,
                           text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {timeout} s"}
    finally:
        os.unlink(path)
    for line in p.stdout.splitlines()[::-1]:
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    tail = (p.stderr or p.stdout).strip().splitlines()[-8:]
    return {"error": f"worker exit {p.returncode}: " + " | ".join(tail)}
