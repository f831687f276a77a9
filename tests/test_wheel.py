"""The package as a user installs it (``wheel_install``: the wheel built from the sdist,
installed, not editable, into a new virtual environment) and used from a folder of the
user's own that holds a ``model.py`` and an ``explorer.py``: ``import bgplvm``, ``bgplvm
--version``, ``bgplvm fit`` / ``summary``, ``bgplvm reproduce --list`` and ``bgplvm serve``
(the page, from the package's own pre-trained model and embedded data, starting from an
empty Numba cache as a fresh install does). A file missing from the package data fails
here, where the editable install would hide it."""

from __future__ import annotations

import os
import re
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest

import bgplvm
import wheel_install
from explorer_server import COMPILED, COMPILING
from wheel_install import run as _run

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def installed(request):
    """``wheel_install.Installed``, started when the tests were collected."""
    pytest.importorskip("build")
    inst = getattr(request.config, "bgplvm_wheel", None)
    if inst is None:  # collected otherwise (a plugin, a hook that did not run): start it now
        inst = wheel_install.start()
        request.addfinalizer(inst.stop)
    if inst.error:
        raise AssertionError(f"the wheel did not build, install or start: {inst.error}")
    return inst


def test_the_wheel_installs_one_package_with_its_data(installed):
    wheel = installed.wheel
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"bgplvm", f"{wheel.name.split('-py')[0]}.dist-info"}
    for f in ("bgplvm/assets/cmu35_dynamical.npz", "bgplvm/assets/synth_walk_dynamical.npz",
              "bgplvm/datasets/embedded/synth_walk.npz", "bgplvm/explorer/app.py", "bgplvm/reproduce/cli.py"):
        assert f in names, f
    meta = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("METADATA"))).decode()
    assert "Requires-Python: >=3.11" in meta  # pip refuses older Pythons, saying so


def test_import_and_version_from_a_users_folder(installed):
    bin_, user, env = installed.bin, installed.user, installed.env
    out = _run([str(bin_ / "python"), "-c", "import bgplvm, bgplvm.explorer, bgplvm.datasets; "
                "from bgplvm import BayesianGPLVM, DynamicalGPLVM; print(bgplvm.__file__)"], user, env).stdout
    assert "site-packages" in out and str(ROOT) not in out
    assert _run([str(bin_ / "bgplvm"), "--version"], user, env).stdout.strip() == f"bgplvm {bgplvm.__version__}"


def test_serve_opens_the_page_from_the_package(installed):
    """The first use of the installed package: its server (started at collection, with an
    empty Numba cache) compiles before it answers, says so on its console, and the compile
    goes to the cache (the fit below loads it)."""
    from bgplvm.explorer.cli import wait_until_live

    bin_, user, env, port, proc = installed.bin, installed.user, installed.env, installed.port, installed.serve
    assert wait_until_live(proc, port, timeout=900), installed.serve_log.read_text()[-3000:]
    live_s = time.perf_counter() - installed.started
    log_text = installed.serve_log.read_text()
    assert COMPILING in log_text and COMPILED in log_text, log_text[-2000:]
    seconds = float(re.search(re.escape(COMPILED) + r"([0-9.]+) s\)", log_text).group(1))
    assert 0 < seconds <= live_s
    print(f"\ncold start: compiled in {seconds:.1f} s, server answered {live_s:.1f} s after its start")
    assert any(Path(env["NUMBA_CACHE_DIR"]).rglob("*.nbi"))  # the compile went to the empty cache
    html = urllib.request.urlopen(f"http://127.0.0.1:{port}/app", timeout=120).read().decode()
    assert "<title>bgplvm explorer</title>" in html
    # the server rendered a first page at start: the embedded walk (no data here)
    assert re.search(r"default page ready \([\d.]+ s\): synth_walk", installed.serve_log.read_text())
    # a second server on the same port: one line naming the port and --port
    busy = _run([str(bin_ / "bgplvm"), "serve", "--port", str(port), "--no-show"], user, env, 60, check=False)
    assert busy.returncode == 2 and busy.stdout == ""
    assert busy.stderr.strip() == (f"bgplvm serve: error: port {port} on 127.0.0.1 is in use (another "
                                   f"server?); choose another with --port")
    os.killpg(proc.pid, 15)
    proc.wait(30)
    text = installed.serve_log.read_text()
    assert "Traceback" not in text, text[-3000:]


def test_fit_summary_and_reproduce_list(installed):
    bin_, user, env = installed.bin, installed.user, installed.env
    _run([str(bin_ / "bgplvm"), "fit", "--data", "data.npy", "-q", "2", "-m", "5", "--iters", "10",
          "--quiet", "--out", "m.npz"], user, env)
    out = _run([str(bin_ / "bgplvm"), "summary", "m.npz"], user, env).stdout
    assert "bound" in out
    out = _run([str(bin_ / "bgplvm"), "reproduce", "--list"], user, env).stdout
    assert "cmu35" in out and "oil" in out
