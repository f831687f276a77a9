"""`panel serve explorer/app.py` (the README's command, no --setup warm-up): the first
page says at once that the explorer is warming up, then fills in by itself."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from bgplvm.explorer.cli import wait_until_live
from explorer_server import free_port

from .conftest import ARTIFACTS, ROOT
from .test_explorer_browser import LATENT, PLAYING, plot_info

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def plain_server(numba_compiled):
    port = free_port()
    env = dict(os.environ, NUMBA_NUM_THREADS="1")
    ARTIFACTS.mkdir(exist_ok=True)  # this module may run first on a fresh clone
    log = open(ARTIFACTS / "browser-plain-server.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "panel", "serve", "explorer/app.py", "--address", "127.0.0.1",
                             "--port", str(port), f"--allow-websocket-origin=127.0.0.1:{port}", "--liveness"],
                            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=ROOT)
    url = f"http://127.0.0.1:{port}"
    if not wait_until_live(proc, port, timeout=180, poll=0.2):
        os.killpg(proc.pid, signal.SIGKILL)
        raise RuntimeError("plain panel serve did not start")
    yield f"{url}/app"
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
    log.close()


def test_first_page_says_it_is_warming_up_then_fills_in(page, plain_server):
    t0 = time.time()
    page.goto(plain_server)
    msg = page.get_by_text("bgplvm explorer is warming up")
    msg.wait_for(timeout=15000)
    said = time.time() - t0
    page.screenshot(path=str(ARTIFACTS / "explorer2-05-warming-up.png"))
    plot_info(page, LATENT, timeout=240)
    plot_info(page, PLAYING, timeout=60)
    assert not msg.is_visible()
    log = (ARTIFACTS / "browser-plain-server.log").read_text()
    assert "[bgplvm explorer]" in log and "kernels" in log  # the console says what it waits for
    print(f"warming-up message after {said:.1f} s, page filled after {time.time() - t0:.1f} s")
