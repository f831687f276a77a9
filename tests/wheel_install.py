"""The package as a user installs it (``test_wheel.py``): the wheel built from the sdist,
installed (not editable) into a new virtual environment, a user's folder, and the
installed ``bgplvm serve`` started there with an empty Numba cache.

The suite starts all of it as soon as its tests are collected
(``conftest.pytest_collection_finish``, when ``test_wheel.py`` is among them): the
server's compile (about three minutes on one core) then runs beside the suite's own first
compile (the browser tests' ``numba_compiled``, one core too) instead of after the rest.

The new environment gets the dependencies from this one (a ``.pth`` line to its
site-packages, which is not processed further, so this environment's editable bgplvm is
not seen), so nothing needs the network.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Installed:
    """The venv's bin folder, the user's folder, the environment to run in, the wheel, and
    the server started there (its process, port, start time and console log)."""

    tmp: Path
    bin: Path | None = None
    user: Path | None = None
    env: dict = field(default_factory=dict)
    wheel: Path | None = None
    serve: subprocess.Popen | None = None
    port: int = 0
    started: float = 0.0
    log: IO | None = None
    error: str = ""  # why the install failed (the tests say it)

    @property
    def serve_log(self) -> Path:
        return self.user / "serve.log"

    def stop(self) -> None:
        """Stop the server (its process group) and remove the folder."""
        if self.serve is not None and self.serve.poll() is None:
            os.killpg(self.serve.pid, signal.SIGTERM)
            try:
                self.serve.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.serve.pid, signal.SIGKILL)
        if self.log is not None:
            self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


def run(cmd, cwd, env, timeout=600, check=True) -> subprocess.CompletedProcess:
    p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError(f"{cmd} exited {p.returncode}:\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}")
    return p


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start() -> Installed:
    """Build, install, and start ``bgplvm serve`` (not waited for). A failure is kept in
    ``error``, for the tests to report."""
    inst = Installed(tmp=Path(tempfile.mkdtemp(prefix="bgplvm-wheel-")))
    try:
        _install(inst)
        _serve(inst)
    except Exception as e:  # reported by the tests, not at collection
        inst.error = f"{type(e).__name__}: {e}"
    return inst


def _install(inst: Installed) -> None:
    tmp = inst.tmp
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "BGPLVM_", "VIRTUAL_ENV"))}
    run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(tmp / "dist"), str(ROOT)], tmp, env)
    inst.wheel = next((tmp / "dist").glob("bgplvm-*.whl"))
    venv = tmp / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp, env)
    run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "--no-deps",
         "--no-index", "-q", str(inst.wheel)], tmp, env)
    site = Path(run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                    tmp, env).stdout.strip())
    (site / "_deps_from_test_env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    inst.user = user = tmp / "user"
    user.mkdir()
    # a user's own modules named as this package's folders: they must not be picked up
    (user / "model.py").write_text("raise SystemExit('the user model.py was imported')\n")
    (user / "explorer.py").write_text("raise SystemExit('the user explorer.py was imported')\n")
    np.save(user / "data.npy", np.sin(np.random.default_rng(0).standard_normal((40, 2)) @ np.ones((2, 5))))
    inst.env = dict(env, BGPLVM_DATA_MIRROR="", BGPLVM_CACHE_DIR=str(tmp / "cache"), HOME=str(tmp / "home"),
                    NUMBA_CACHE_DIR=str(tmp / "numba"), PATH=f"{venv / 'bin'}:{env.get('PATH', '')}",
                    OMP_NUM_THREADS="1", NUMBA_NUM_THREADS="1")
    inst.bin = venv / "bin"


def _serve(inst: Installed) -> None:
    inst.port = free_port()
    inst.log = open(inst.serve_log, "w+")
    inst.started = time.perf_counter()
    inst.serve = subprocess.Popen([str(inst.bin / "bgplvm"), "serve", "--port", str(inst.port), "--no-show"],
                                  cwd=inst.user, env=inst.env, stdout=inst.log, stderr=subprocess.STDOUT,
                                  start_new_session=True)
