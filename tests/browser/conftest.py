"""Real-browser fixtures: the explorer served by ``panel serve`` (NUMBA_NUM_THREADS=1; started
by ``tests/explorer_server.py``) and Debian's chromium driven by Playwright (see
../../../shared/STACK_NOTES.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from explorer_server import start_server

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
def server():
    """Base URL of a fresh explorer server; killed (whole process group) at the end. With an
    empty Numba cache the start waits for the server's compile (see ``explorer_server``)."""
    srv = start_server(ARTIFACTS / "browser-server.log")
    yield f"{srv.url}/app"
    srv.stop()
