"""``bgplvm serve``: run the explorer with ``panel serve`` and open it in the browser.

    bgplvm serve [--port 5006] [--address 127.0.0.1] [--no-show] [--model FILE]

Numba kernels are compiled once at server start (``panel serve --setup``), so the
first page and the first click do not wait for compilation. Uploads are limited to
``MAX_UPLOAD_MB`` (the WebSocket message limit is set just above it, base64 included).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from .user_input import MAX_UPLOAD_BYTES, MAX_UPLOAD_MB

HERE = Path(__file__).resolve().parent
APP = HERE / "app.py"
SETUP = HERE / "_setup_server.py"
#: Uploads travel base64-encoded (4/3 larger) in one WebSocket message, plus framing.
WEBSOCKET_MAX_BYTES = int(MAX_UPLOAD_BYTES * 4 / 3) + 4 * 1024 * 1024


def build_command(port: int = 5006, address: str = "127.0.0.1", show: bool = True,
                  allow_origin: list[str] | None = None) -> list[str]:
    """The ``python -m panel serve ...`` command line."""
    origins = allow_origin or [f"{address}:{port}"] + ([f"localhost:{port}"] if address in ("127.0.0.1", "localhost") else [])
    cmd = [sys.executable, "-m", "panel", "serve", str(APP),
           "--address", address, "--port", str(port),
           "--liveness", "--setup", str(SETUP),
           "--websocket-max-message-size", str(WEBSOCKET_MAX_BYTES),
           "--index", "app"]
    for o in origins:
        cmd += ["--allow-websocket-origin", o]
    if show:
        cmd.append("--show")
    return cmd


def wait_until_live(proc: subprocess.Popen, port: int, timeout: float, poll: float = 0.1) -> bool:
    """Poll the server's ``/liveness`` on 127.0.0.1:port until it answers 200 (True), or the
    process ``proc`` exits or ``timeout`` seconds pass (False). For scripts and tests that
    start ``bgplvm serve`` / ``panel serve`` in a subprocess."""
    t0 = time.perf_counter()
    while True:
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:{port}/liveness", timeout=1).status == 200:
                return True
        except OSError:
            pass
        if proc.poll() is not None or time.perf_counter() - t0 > timeout:
            return False
        time.sleep(poll)


def port_in_use(address: str, port: int) -> bool:
    """True when ``address:port`` cannot be listened on (another server has it)."""
    import socket

    host = "" if address in ("0.0.0.0", "") else address
    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds
            s.bind((host, port))
    except OSError:
        return True
    return False


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bgplvm serve", description="Open the bgplvm explorer in the browser.")
    ap.add_argument("--port", type=int, default=5006)
    ap.add_argument("--address", default="127.0.0.1", help="interface to listen on (0.0.0.0 for all)")
    ap.add_argument("--no-show", action="store_true", help="do not open a browser tab")
    ap.add_argument("--allow-websocket-origin", action="append", default=None,
                    help="host[:port] allowed to connect (repeatable; default: the address and port)")
    ap.add_argument("--model", default=None, help="a saved model to open at start instead of the default")
    args = ap.parse_args(argv)
    env = dict(os.environ)
    if args.model:
        if not Path(args.model).exists():
            print(f"bgplvm serve: error: model file {args.model} not found", file=sys.stderr)
            return 2
        env["BGPLVM_EXPLORER_MODEL"] = str(Path(args.model).resolve())
    if port_in_use(args.address, args.port):  # said before a minute of warm-up, in one line
        print(f"bgplvm serve: error: port {args.port} on {args.address} is in use (another server?); "
              f"choose another with --port", file=sys.stderr)
        return 2
    cmd = build_command(args.port, args.address, not args.no_show, args.allow_websocket_origin)
    # one BLAS thread per serving process (see explorer.warm.limit_server_blas)
    for k in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env.setdefault(k, "1")
    print(f"bgplvm explorer: http://{args.address}:{args.port}/app  (uploads up to {MAX_UPLOAD_MB} MB; Ctrl-C stops)\n"
          "[bgplvm explorer] warming up before listening (Numba kernels, default model); progress follows...",
          flush=True)
    if os.name == "posix":
        # become the server: signals (Ctrl-C, kill) reach it directly, no orphan is left
        os.execve(cmd[0], cmd, env)
    try:
        return subprocess.call(cmd, env=env)
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
