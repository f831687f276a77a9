"""Start the explorer with ``panel serve`` (as ``bgplvm serve`` does) and wait until it answers.

With an empty Numba cache (a fresh clone, CI) the server compiles the kernels before it
opens its port (``panel serve --setup``, ``bgplvm.explorer.warm``), which takes from ~20 s on an
idle 2-core machine to many minutes on a loaded one. The warm-up says on the console what
it is doing ("[bgplvm explorer] compiling the Numba kernels ...", "kernels ready (X s)",
..., "warm-up done in X s; serving"). While it has started and not finished, the wait goes
on (up to ``COMPILE_TIMEOUT``); otherwise the server must answer within ``READY_TIMEOUT``
seconds of starting or of finishing its warm-up.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
READY_TIMEOUT = 90.0
COMPILE_TIMEOUT = 1500.0
WARMING = "[bgplvm explorer]"
WARM = "warm-up done in"
COMPILING = "compiling the Numba kernels"
COMPILED = "kernels ready ("


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Server:
    proc: subprocess.Popen
    url: str  # base URL; the page is url + "/app"
    log_path: Path
    startup_s: float

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def start_server(log_path: Path, env_extra: dict | None = None) -> Server:
    """A fresh explorer server (its own process group), answering on /liveness."""
    from bgplvm.explorer.cli import build_command, wait_until_live

    port = free_port()
    env = dict(os.environ, NUMBA_NUM_THREADS="1", **(env_extra or {}))
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "w") as log:
        proc = subprocess.Popen(build_command(port=port, show=False), env=env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True, cwd=ROOT)
    url = f"http://127.0.0.1:{port}"
    t0 = time.time()
    deadline = t0 + READY_TIMEOUT
    warm_seen = False
    while True:
        if wait_until_live(proc, port, timeout=0.0):  # one try
            return Server(proc, url, log_path, time.time() - t0)
        now = time.time()
        text = log_path.read_text(errors="replace")
        if WARMING in text and WARM not in text:  # compiling / warming up: keep waiting
            deadline = max(deadline, min(now + READY_TIMEOUT, t0 + COMPILE_TIMEOUT))
        elif WARM in text and not warm_seen:  # the port opens next
            warm_seen = True
            deadline = max(deadline, now + READY_TIMEOUT)
        if proc.poll() is not None or now > deadline:
            state = "exited" if proc.poll() is not None else f"not answering after {now - t0:.0f} s"
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            tail = "\n".join(text.splitlines()[-15:])
            raise RuntimeError(f"explorer server {state}; log {log_path}:\n{tail}")
        time.sleep(0.2)
