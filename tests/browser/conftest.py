"""Real-browser fixtures: the explorer served by ``panel serve`` (NUMBA_NUM_THREADS=1)
and Debian's chromium driven by Playwright (see ../../../shared/STACK_NOTES.md)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"


def pytest_collection_modifyitems(config, items):
    skip = pytest.mark.skip(reason=f"{CHROMIUM} not installed (apt-get install chromium)")
    for item in items:
        if "browser" in item.keywords and not Path(CHROMIUM).exists():
            item.add_marker(skip)


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    return {**browser_type_launch_args, "executable_path": CHROMIUM,
            "args": ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                     "--disable-background-networking", "--disable-component-update", "--disable-sync",
                     "--disable-dev-shm-usage"]}


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args):
    return {**browser_context_args, "viewport": {"width": 1720, "height": 1300}, "accept_downloads": True}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


#: seconds allowed to compile the Numba kernels with an empty cache (about a minute on an
#: idle 2-core machine; several times that on a busy one)
COMPILE_TIMEOUT = 1200


@pytest.fixture(scope="session")
def numba_compiled():
    """Compile (or load) the model's Numba kernels in a subprocess before any server starts,
    so that a fresh clone's first run does not race the server's start-up against an empty
    compile cache (the cache on disk is then shared by the servers)."""
    import sys

    t0 = time.time()
    # the explorer's set: the model's kernels and those of test-time inference (observe and infer)
    subprocess.run([sys.executable, "-c", "from explorer.warm import compile_kernels; compile_kernels()"], cwd=ROOT,
                   check=True,
                   timeout=COMPILE_TIMEOUT, env=dict(os.environ, NUMBA_NUM_THREADS="1"))
    print(f"[browser tests] Numba kernels ready in {time.time() - t0:.1f} s")


@pytest.fixture(scope="session")
def server(numba_compiled):
    """Base URL of a fresh explorer server; killed (whole process group) at the end."""
    from explorer.cli import build_command, wait_until_live

    port = _free_port()
    env = dict(os.environ, NUMBA_NUM_THREADS="1")
    ARTIFACTS.mkdir(exist_ok=True)
    log = open(ARTIFACTS / "browser-server.log", "w")
    proc = subprocess.Popen(build_command(port=port, show=False), env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True, cwd=ROOT)
    url = f"http://127.0.0.1:{port}"
    if not wait_until_live(proc, port, timeout=180, poll=0.2):
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        raise RuntimeError(f"explorer server did not start; see {ARTIFACTS / 'browser-server.log'}")
    yield f"{url}/app"
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
    log.close()
