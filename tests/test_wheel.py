"""The package as a user installs it: ``python -m build`` (sdist, then the wheel from the
sdist), the wheel installed (not editable) into a new virtual environment, and used from a
folder of the user's own that holds a ``model.py`` and an ``explorer.py``: ``import bgplvm``,
``bgplvm --version``, ``bgplvm fit`` / ``summary``, ``bgplvm reproduce --list`` and
``bgplvm serve`` (the page, from the package's own pre-trained model and embedded data,
starting from an empty Numba cache as a fresh install does). A
file missing from the package data fails here, where the editable install would hide it.

The new environment gets the dependencies from this one (a ``.pth`` line to its
site-packages, which is not processed further, so this environment's editable bgplvm is
not seen), so the test needs no network."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.request
import zipfile
from pathlib import Path

import numpy as np
import pytest

import bgplvm
from explorer_server import COMPILED, COMPILING

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def _run(cmd, cwd, env, timeout=600, check=True) -> subprocess.CompletedProcess:
    p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError(f"{cmd} exited {p.returncode}:\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}")
    return p


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(venv's bin folder, a user's folder, the environment to run in, the wheel's path)."""
    pytest.importorskip("build")
    tmp = tmp_path_factory.mktemp("wheel")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "BGPLVM_", "VIRTUAL_ENV"))}
    _run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(tmp / "dist"), str(ROOT)], tmp, env)
    wheel = next((tmp / "dist").glob("bgplvm-*.whl"))
    venv = tmp / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp, env)
    _run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "--no-deps",
          "--no-index", "-q", str(wheel)], tmp, env)
    site = Path(_run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                     tmp, env).stdout.strip())
    (site / "_deps_from_test_env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    user = tmp / "user"
    user.mkdir()
    # a user's own modules named as this package's folders: they must not be picked up
    (user / "model.py").write_text("raise SystemExit('the user model.py was imported')\n")
    (user / "explorer.py").write_text("raise SystemExit('the user explorer.py was imported')\n")
    np.save(user / "data.npy", np.sin(np.random.default_rng(0).standard_normal((40, 2)) @ np.ones((2, 5))))
    env = dict(env, BGPLVM_DATA_MIRROR="", BGPLVM_CACHE_DIR=str(tmp / "cache"), HOME=str(tmp / "home"),
               NUMBA_CACHE_DIR=str(tmp / "numba"), PATH=f"{venv / 'bin'}:{env.get('PATH', '')}",
               OMP_NUM_THREADS="1", NUMBA_NUM_THREADS="1")
    return venv / "bin", user, env, wheel


def test_the_wheel_installs_one_package_with_its_data(installed):
    *_, wheel = installed
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"bgplvm", f"{wheel.name.split('-py')[0]}.dist-info"}
    for f in ("bgplvm/assets/cmu35_dynamical.npz", "bgplvm/assets/synth_walk_dynamical.npz",
              "bgplvm/datasets/embedded/synth_walk.npz", "bgplvm/explorer/app.py", "bgplvm/reproduce/cli.py"):
        assert f in names, f
    meta = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("METADATA"))).decode()
    assert "Requires-Python: >=3.11" in meta  # pip refuses older Pythons, saying so


def test_import_and_version_from_a_users_folder(installed):
    bin_, user, env, _ = installed
    out = _run([str(bin_ / "python"), "-c", "import bgplvm, bgplvm.explorer, bgplvm.datasets; "
                "from bgplvm import BayesianGPLVM, DynamicalGPLVM; print(bgplvm.__file__)"], user, env).stdout
    assert "site-packages" in out and str(ROOT) not in out
    assert _run([str(bin_ / "bgplvm"), "--version"], user, env).stdout.strip() == f"bgplvm {bgplvm.__version__}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_opens_the_page_from_the_package(installed):
    """The first use of the installed package: its server starts with an empty Numba cache
    (it compiles before it answers, says so on its console, and the compile goes to the
    cache; the fit below loads it)."""
    bin_, user, env, _ = installed
    cache = Path(env["NUMBA_CACHE_DIR"])
    assert not any(cache.rglob("*.nbi")), "this test runs first: the cache starts empty"
    t0 = time.perf_counter()
    port = _free_port()
    log = open(user / "serve.log", "w+")
    proc = subprocess.Popen([str(bin_ / "bgplvm"), "serve", "--port", str(port), "--no-show"], cwd=user, env=env,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        from bgplvm.explorer.cli import wait_until_live

        assert wait_until_live(proc, port, timeout=900), (user / "serve.log").read_text()[-3000:]
        live_s = time.perf_counter() - t0
        log_text = (user / "serve.log").read_text()
        assert COMPILING in log_text and COMPILED in log_text, log_text[-2000:]
        seconds = float(re.search(re.escape(COMPILED) + r"([0-9.]+) s\)", log_text).group(1))
        assert 0 < seconds <= live_s
        print(f"\ncold start: compiled in {seconds:.1f} s, server answered after {live_s:.1f} s")
        html = urllib.request.urlopen(f"http://127.0.0.1:{port}/app", timeout=120).read().decode()
        assert "<title>bgplvm explorer</title>" in html
        # the server rendered a first page at start: the embedded walk (no data here)
        assert re.search(r"default page ready \([\d.]+ s\): synth_walk", (user / "serve.log").read_text())
        # a second server on the same port: one line naming the port and --port
        busy = _run([str(bin_ / "bgplvm"), "serve", "--port", str(port), "--no-show"], user, env, 60, check=False)
        assert busy.returncode == 2 and busy.stdout == ""
        assert busy.stderr.strip() == (f"bgplvm serve: error: port {port} on 127.0.0.1 is in use (another "
                                       f"server?); choose another with --port")
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(30)
    text = (user / "serve.log").read_text()
    assert "Traceback" not in text, text[-3000:]
    assert any(cache.rglob("*.nbi"))  # the compile went to the empty cache


def test_fit_summary_and_reproduce_list(installed):
    bin_, user, env, _ = installed
    _run([str(bin_ / "bgplvm"), "fit", "--data", "data.npy", "-q", "2", "-m", "5", "--iters", "10",
          "--quiet", "--out", "m.npz"], user, env)
    out = _run([str(bin_ / "bgplvm"), "summary", "m.npz"], user, env).stdout
    assert "bound" in out
    out = _run([str(bin_ / "bgplvm"), "reproduce", "--list"], user, env).stdout
    assert "cmu35" in out and "oil" in out
