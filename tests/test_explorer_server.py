"""The explorer server's start-up from an empty Numba cache (a fresh clone, as in CI): it
compiles before it answers, says so on its console, and the start-up wait of the browser
tests (``explorer_server.start_server``) waits for it."""

from __future__ import annotations

import re
import urllib.request

import pytest

from explorer_server import COMPILED, COMPILING, ROOT, start_server

pytestmark = pytest.mark.slow


def test_server_starts_with_an_empty_numba_cache(tmp_path):
    srv = start_server(ROOT / "test-artifacts" / "cold-start-server.log",
                       {"NUMBA_CACHE_DIR": str(tmp_path / "numba-cache")})
    try:
        log = srv.log()
        assert COMPILING in log and COMPILED in log, log[-2000:]
        seconds = float(re.search(re.escape(COMPILED) + r"([0-9.]+) s\)", log).group(1))
        assert 0 < seconds <= srv.startup_s
        page = urllib.request.urlopen(f"{srv.url}/app", timeout=60).read().decode()
        assert "bgplvm explorer" in page
        print(f"\ncold start: compiled in {seconds:.1f} s, server answered after {srv.startup_s:.1f} s")
    finally:
        srv.stop()
    assert any((tmp_path / "numba-cache").rglob("*.nbi"))  # the compile went to the empty cache
