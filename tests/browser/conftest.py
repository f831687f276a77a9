"""Real-browser fixtures: the explorer served by ``panel serve`` (NUMBA_NUM_THREADS=1; started
by ``tests/explorer_server.py``) and Debian's chromium driven by Playwright (see
../../../shared/STACK_NOTES.md)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from explorer_server import COMPILE_TIMEOUT, start_server

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


@pytest.fixture(scope="session")
def numba_compiled():
    """Compile (or load) the explorer's Numba kernels in a subprocess, for servers that
    compile at their first page rather than at start (plain ``panel serve``, no warm-up):
    so that a fresh clone's first page does not wait for an empty compile cache."""
    t0 = time.time()
    # the explorer's set: the model's kernels and those of test-time inference (observe and infer)
    subprocess.run([sys.executable, "-c", "from bgplvm.explorer.warm import compile_kernels; compile_kernels()"],
                   cwd=ROOT, check=True, timeout=COMPILE_TIMEOUT, env=dict(os.environ, NUMBA_NUM_THREADS="1"))
    print(f"[browser tests] Numba kernels ready in {time.time() - t0:.1f} s")


@pytest.fixture(scope="session")
def server():
    """Base URL of a fresh explorer server; killed (whole process group) at the end. With an
    empty Numba cache the start waits for the server's compile (see ``explorer_server``)."""
    srv = start_server(ARTIFACTS / "browser-server.log")
    yield f"{srv.url}/app"
    srv.stop()


@pytest.fixture(scope="session")
def server_without_data(tmp_path_factory):
    """Base URL of an explorer server as a user without the real data has it (no mirror,
    an empty data cache, no network): the page opens on the embedded synthetic walk."""
    srv = start_server(ARTIFACTS / "browser-server-no-data.log",
                       {"BGPLVM_DATA_MIRROR": "", "BGPLVM_CACHE_DIR": str(tmp_path_factory.mktemp("empty-cache"))})
    yield f"{srv.url}/app"
    srv.stop()


#: hosts the page may load from: the explorer's own server (it runs with no network)
_LOCAL_HOSTS = ("127.0.0.1", "localhost")


@pytest.fixture(autouse=True)
def _page_stays_on_the_machine(request):
    """Every request a test's page makes goes to the explorer's own server: the app works
    with no network (Panel's theme stylesheets, for one, can point at cdn.holoviz.org when a
    pane is rebuilt outside its document). Requests elsewhere are aborted, as they would
    fail offline, and fail the test. So does an uncaught error in the page's JavaScript:
    BokehJS stops applying the update it was in (an emptied latent layer repainted while
    its figure left the page once left the player showing the previous model's frames)."""
    if "page" not in request.fixturenames:
        yield
        return
    from urllib.parse import urlparse

    page = request.getfixturevalue("page")
    off: list[str] = []
    errors: list[str] = []

    def on_error(e):  # the message and where it was thrown (the first frames of its stack)
        stack = [ln.strip() for ln in (getattr(e, "stack", "") or "").splitlines()[1:5]]
        errors.append(str(e) + (f" [{' | '.join(stack)}]" if stack else ""))

    page.on("pageerror", on_error)

    def route(r):
        url = r.request.url
        if url.startswith(("data:", "blob:")) or urlparse(url).hostname in _LOCAL_HOSTS:
            r.continue_()
        else:
            off.append(url)
            r.abort()

    page.context.route("**/*", route)
    yield
    if off:
        pytest.fail(f"the page asked for {len(set(off))} address(es) off this machine (they fail "
                    f"offline): {sorted(set(off))[:5]}")
    if errors:
        pytest.fail(f"{len(errors)} uncaught JavaScript error(s) in the page: {errors[:3]}")
