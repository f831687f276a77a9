"""Latency probe for load tests (off unless ``BGPLVM_LATENCY_PROBE`` names a file).

Records, in the serving process, when each update carrying a new cursor position leaves
for a browser: the readout text "latent point: xA = ..., xB = ..." that every generated
output comes with. Each line of the file is JSON ``[t_sent, session_id, x, y]`` with
``t_sent`` from ``time.monotonic()`` (CLOCK_MONOTONIC, the same clock in every process on
the machine). A load-test client that stamps its events with the same clock gets, per
event, the server-side time from arrival to the update leaving -- queueing behind other
sessions included -- without guessing which update answered which event
(``bench/bench_load.py``). Also logs the server's CPU time and RSS every second.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time

_READOUT = re.compile(r"latent point: x\d+ = (-?\d+\.\d+), x\d+ = (-?\d+\.\d+)")
_lock = threading.Lock()
_file = None


def _write(rec) -> None:
    with _lock:
        _file.write(json.dumps(rec) + "\n")
        _file.flush()


def _scan(obj, out: list) -> None:
    if isinstance(obj, str):
        m = _READOUT.search(obj)
        if m:
            out.append((float(m.group(1)), float(m.group(2))))
    elif isinstance(obj, dict):
        for v in obj.values():
            _scan(v, out)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _scan(v, out)


def install(path: str) -> None:
    """Wrap the Bokeh server's outgoing-message path (once per process)."""
    global _file
    if _file is not None:
        return
    from bokeh.server.views.ws import WSHandler

    _file = open(path, "a", buffering=1)
    original = WSHandler.send_message

    async def send_message(self, message):
        if message.msgtype == "PATCH-DOC":
            found: list = []
            _scan(message.content, found)
            if found:
                sid = getattr(getattr(self, "connection", None), "session", None)
                sid = getattr(sid, "id", "?")
                now = time.monotonic()
                for x, y in found:
                    _write(["sent", now, sid, x, y])
        return await original(self, message)

    WSHandler.send_message = send_message

    def sample():
        pid = os.getpid()
        while True:
            try:
                with open(f"/proc/{pid}/status") as f:
                    rss = next(int(ln.split()[1]) for ln in f if ln.startswith("VmRSS"))
            except (OSError, StopIteration):
                rss = -1
            t = os.times()
            _write(["proc", time.monotonic(), t.user + t.system, rss])
            time.sleep(1.0)

    threading.Thread(target=sample, daemon=True, name="bgplvm-probe").start()


def maybe_install() -> None:
    path = os.environ.get("BGPLVM_LATENCY_PROBE")
    if path:
        install(path)
