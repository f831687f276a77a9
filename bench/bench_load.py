"""Many users at once: the explorer's latency as users see it, and the server under load.

    python bench/bench_load.py [--moves 40] [--sessions 8 32] [--rate 10] [--duration 20]
                               [--skip browser,train,clients] [--json out.json]

0. **Start**: ``bash scripts/run.sh`` (warm caches) to the first page's plots drawn in a
   browser.

Then one explorer server (``bgplvm serve``, the default page: CMU 35 with its dynamical
model) with the latency probe on (``BGPLVM_LATENCY_PROBE``, explorer/probe.py), and:

1. **Real browsers** (Playwright + Debian chromium, as the browser tests): a page moves
   the mouse over the latent view in follow mode; the page times each pointermove to the
   second animation frame after BokehJS applied the update that carries the new output
   (the generated plot's title changes): the generated pose is on screen.
   - 1 session alone (and its playback frame rate); 2 sessions moving in turn;
   - **training**: a second page starts training (the default model, 5000 iterations, in
     its worker process) while the first page is measured again; ratio to alone.
2. **Python clients of the Bokeh server protocol** (no rendering): 8 and 32 sessions, each
   sending mouse moves at ``--rate`` events/s for ``--duration`` s (the same PATCH-DOC /
   ``bokeh_event`` messages BokehJS sends). For every event: the **server-side** time from
   the event's send (= arrival; same machine, same CLOCK_MONOTONIC) to the update carrying
   its cursor leaving the server (queueing behind other sessions included; the probe
   stamps it), and the client's round trip. Memory per session from the server's RSS.

Prints one table (markdown) for bench/README.md, with the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-dev-shm-usage"]

JS_FIND = """(prefix) => {
  for (const v of Bokeh.index.all_views()) {
    const m = v.model;
    if (!(m.title && m.title.text && m.title.text.startsWith(prefix) && v.canvas_view)) continue;
    const r = v.canvas_view.el.getBoundingClientRect();
    if (r.width === 0) continue;
    return {frame: [r.x + v.frame.bbox.left, r.y + v.frame.bbox.top, v.frame.bbox.width, v.frame.bbox.height]};
  }
  return null;
}"""

# pointermove -> the generated plot's title (it carries the latent coordinates) changed ->
# two animation frames later the new output is on screen.
JS_HOOK = """() => {
  window.__lat = []; window.__t0 = null;
  document.addEventListener('pointermove', () => { window.__t0 = performance.now(); }, true);
  for (const v of Bokeh.index.all_views()) {
    const m = v.model;
    if (m.title && m.title.text && m.title.text.startsWith('Generated') && v.canvas_view &&
        v.canvas_view.el.getBoundingClientRect().width > 0) {
      m.title.properties.text.change.connect(() => {
        const t0 = window.__t0;
        requestAnimationFrame(() => requestAnimationFrame(() => window.__lat.push(performance.now() - t0)));
      });
      return true;
    }
  }
  return false;
}"""


def pct(xs, q):
    return float(np.percentile(xs, q)) if len(xs) else float("nan")


def summary(xs) -> str:
    if not len(xs):
        return "n=0"
    return f"median {statistics.median(xs):6.1f} ms, p95 {pct(xs, 95):6.1f} ms (n={len(xs)})"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env() -> dict:
    e = dict(os.environ)
    mirror = ROOT.parent / "shared" / "datasets"
    if "BGPLVM_DATA_MIRROR" not in e and mirror.is_dir():
        e["BGPLVM_DATA_MIRROR"] = str(mirror)
    e.setdefault("BGPLVM_CACHE_DIR", str(ROOT / ".cache" / "datasets"))
    return e


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(ln.split()[1]) for ln in f if ln.startswith("VmRSS"))


def cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")


class Server:
    def __init__(self, probe: Path):
        sys.path.insert(0, str(ROOT))
        from bgplvm.explorer.cli import build_command, wait_until_live

        self.port = free_port()
        e = env()
        e["BGPLVM_LATENCY_PROBE"] = str(probe)
        self.log = tempfile.TemporaryFile()
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(build_command(port=self.port, show=False), env=e, stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        if not wait_until_live(self.proc, self.port, timeout=300):
            self.log.seek(0)
            raise RuntimeError("server did not start:\n" + self.log.read().decode()[-3000:])
        self.start_s = time.perf_counter() - t0
        self.url = f"http://127.0.0.1:{self.port}/app"

    @property
    def pid(self) -> int:
        # `bgplvm serve` execs panel: the Popen pid is the server
        return self.proc.pid

    def close(self):
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)


# --------------------------------------------------------------------------- start-up
def run_sh_to_first_page(browser) -> dict:
    """`bash scripts/run.sh` (warm caches) to the first page's plots drawn in a browser."""
    port = free_port()
    t0 = time.perf_counter()
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen(["bash", str(ROOT / "scripts" / "run.sh"), "--no-show", "--port", str(port)], env=env(),
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=ROOT)
    try:
        from bgplvm.explorer.cli import wait_until_live

        if not wait_until_live(proc, port, timeout=300, poll=0.05):
            log.seek(0)
            raise RuntimeError("run.sh did not start:\n" + log.read().decode()[-3000:])
        listening = time.perf_counter() - t0
        page = browser.new_page(viewport={"width": 1366, "height": 900})
        page.goto(f"http://127.0.0.1:{port}/app")
        wait_plot(page, "Latent space")
        wait_plot(page, "Playing")
        total = time.perf_counter() - t0
        page.close()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
    return {"listening_s": listening, "plots_s": total}


# --------------------------------------------------------------------------- browsers
def wait_plot(page, prefix, timeout=90):
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        info = page.evaluate(JS_FIND, prefix)
        if info:
            return info
        page.wait_for_timeout(50)
    raise RuntimeError(f"plot {prefix!r} not drawn")


def open_page(browser, url):
    page = browser.new_page(viewport={"width": 1366, "height": 1000})
    t0 = time.perf_counter()
    page.goto(url)
    lat = wait_plot(page, "Latent space")
    wait_plot(page, "Generated")
    ready = time.perf_counter() - t0
    page.wait_for_timeout(500)
    assert page.evaluate(JS_HOOK), "no generated-output plot"
    page.evaluate("() => { window.__lat = []; }")
    return page, lat["frame"], ready


def move_once(page, frame, rng, i):
    fx, fy, fw, fh = frame
    page.mouse.move(fx + fw * rng.uniform(0.1, 0.9), fy + fh * rng.uniform(0.1, 0.9), steps=1)
    t = time.perf_counter()
    while page.evaluate("() => window.__lat.length") <= i and time.perf_counter() - t < 5:
        page.wait_for_timeout(5)


def playback_fps(page) -> int:
    """Press Play; the most frames the page drew in any one second of three."""
    page.evaluate("() => { window.__bgplvm_frames = []; }")
    page.locator(".play-toggle button").first.click()
    page.wait_for_timeout(3000)
    fr = page.evaluate("() => window.__bgplvm_frames || []")
    page.locator(".play-toggle button").first.click()
    best = 0
    for k, (t0, _) in enumerate(fr):
        best = max(best, len({i for t, i in fr[k:] if t - t0 < 1000}))
    return best


def measure_moves(pages, n, rng, gap_ms=120):
    """n moves per page, pages taking turns; returns the latencies of each page."""
    for page, _ in pages:
        page.evaluate("() => { window.__lat = []; }")
    for i in range(n):
        for page, frame in pages:
            move_once(page, frame, rng, i)
            page.wait_for_timeout(gap_ms)
    return [[v for v in page.evaluate("() => window.__lat") if v is not None] for page, _ in pages]


def browser_phase(srv, args, rng, results):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        a, fa, ready = open_page(browser, srv.url)
        results["page_ready_s"] = ready
        print(f"page open to plots drawn: {ready:.2f} s (first session)")
        (lat1,) = measure_moves([(a, fa)], args.moves, rng)
        results["browser_1"] = lat1
        results["playback_fps"] = playback_fps(a)
        print(f"playback: {results['playback_fps']} frames drawn in the best second of three (1x = 30 frames/s)")
        print(f"1 session:            {summary(lat1)}")
        b, fb, _ = open_page(browser, srv.url)
        lat2 = measure_moves([(a, fa), (b, fb)], args.moves, rng)
        results["browser_2"] = lat2[0] + lat2[1]
        print(f"2 sessions:           {summary(lat2[0] + lat2[1])}")
        if "train" not in args.skip:
            (alone,) = measure_moves([(a, fa)], args.moves, rng)
            iters = b.locator(".iters-input input")
            iters.fill("5000")
            iters.press("Enter")
            b.wait_for_timeout(300)
            b.get_by_role("button", name="Train", exact=True).click()
            status = b.get_by_text(re.compile(r"^(Starting|Queued|Iteration|Finished|Stopped|Training failed)")).first
            t0 = time.perf_counter()
            while "Iteration" not in status.inner_text() and time.perf_counter() - t0 < 120:
                b.wait_for_timeout(200)
            print(f"  training status: {status.inner_text()[:90]}")
            (training,) = measure_moves([(a, fa)], args.moves, rng)
            print(f"  training status: {status.inner_text()[:90]}")
            b.get_by_role("button", name="Stop", exact=True).click()
            results["browser_alone_before_training"] = alone
            results["browser_while_training"] = training
            r_med = statistics.median(training) / statistics.median(alone)
            r_p95 = pct(training, 95) / pct(alone, 95)
            results["training_ratio"] = [r_med, r_p95]
            print(f"1 session alone:      {summary(alone)}")
            print(f"  while another trains: {summary(training)}  -> x{r_med:.2f} median, x{r_p95:.2f} p95")
            t0 = time.perf_counter()
            while "Stopped" not in status.inner_text() and "Finished" not in status.inner_text() \
                    and time.perf_counter() - t0 < 120:
                b.wait_for_timeout(200)
        a.screenshot(path=str(ROOT / "test-artifacts" / "bench-load-page.png"), full_page=True)
        browser.close()


# --------------------------------------------------------------------------- protocol clients
def _frames(msgtype: str, content: dict) -> list[str]:
    return [json.dumps({"msgid": uuid.uuid4().hex.upper(), "msgtype": msgtype}), "{}", json.dumps(content)]


def _event(model_id: str, x: float, y: float) -> dict:
    entries = [["model", {"id": model_id}], ["sx", 100], ["sy", 100], ["x", x], ["y", y],
               ["modifiers", {"type": "map", "entries": [["shift", False], ["ctrl", False], ["alt", False]]}]]
    return {"events": [{"kind": "MessageSent", "msg_type": "bokeh_event",
                        "msg_data": {"type": "event", "name": "mousemove",
                                     "values": {"type": "map", "entries": entries}}}]}


def _objects(node, out: dict):
    if isinstance(node, dict):
        if node.get("type") == "object" and "id" in node and "attributes" in node:
            out[node["id"]] = node
        for v in node.values():
            _objects(v, out)
    elif isinstance(node, list):
        for v in node:
            _objects(v, out)


def latent_figure(doc: dict):
    objs: dict = {}
    _objects(doc, objs)

    def get(ref):
        return objs.get(ref.get("id")) if isinstance(ref, dict) else None

    for o in objs.values():
        if o.get("name") != "Figure":
            continue
        title = get(o["attributes"].get("title"))
        if title and str(title["attributes"].get("text", "")).startswith("Latent space"):
            xr, yr = get(o["attributes"]["x_range"]), get(o["attributes"]["y_range"])
            return o["id"], (xr["attributes"]["start"], xr["attributes"]["end"]), \
                (yr["attributes"]["start"], yr["attributes"]["end"])
    raise RuntimeError("latent figure not found in the document")


READOUT = re.compile(r"latent point: x\d+ = (-?\d+\.\d+), x\d+ = (-?\d+\.\d+)")


class Client:
    """One browser-less session speaking the Bokeh server protocol."""

    def __init__(self, base: str):
        self.base = base
        self.sent: dict = {}  # (x, y) -> t_send
        self.rtt: list[float] = []
        self.sid = None

    async def connect(self):
        from bokeh.util.token import get_session_id
        from tornado.httpclient import AsyncHTTPClient, HTTPRequest
        from tornado.websocket import websocket_connect

        html = (await AsyncHTTPClient().fetch(self.base, request_timeout=300)).body.decode()
        token = re.search(r'"token":\s*"([^"]+)"', html).group(1)
        self.sid = get_session_id(token)
        ws_url = self.base.replace("http://", "ws://") + "/ws"
        self.ws = await websocket_connect(HTTPRequest(ws_url, request_timeout=300), subprotocols=["bokeh", token],
                                          max_message_size=200 * 2**20)
        # as browsers do (Chromium sets TCP_NODELAY on every socket): without it the three
        # frames of each message meet Nagle's algorithm and the server's delayed ACK, and
        # every event arrives ~40 ms late (measured: send to the server's receipt 44.5 ms
        # median without, 0.8 ms with)
        self.ws.stream.set_nodelay(True)
        await self.read()  # ACK
        await self.send("PULL-DOC-REQ", {})
        while True:
            h, content = await self.read()
            if h["msgtype"] == "PULL-DOC-REPLY":
                break
        self.model_id, self.xr, self.yr = latent_figure(content)
        # what BokehJS sends once the page is drawn: Panel then treats the session as loaded
        await self.send("PATCH-DOC", {"events": [{"kind": "MessageSent", "msg_type": "bokeh_event",
                                                  "msg_data": {"type": "event", "name": "document_ready",
                                                               "values": {"type": "map"}}}]})

    async def send(self, msgtype, content):
        for f in _frames(msgtype, content):
            await self.ws.write_message(f)

    async def read(self):
        header = json.loads(await self.ws.read_message())
        await self.ws.read_message()  # metadata
        content = await self.ws.read_message()
        for _ in range(2 * int(header.get("num_buffers", 0))):  # each buffer: a header frame + the bytes
            await self.ws.read_message()
        return header, (json.loads(content) if isinstance(content, str) else {})

    async def listen(self):
        while True:
            raw = await self.ws.read_message()
            if raw is None:
                return
            try:
                header = json.loads(raw)
            except (ValueError, TypeError):
                continue
            await self.ws.read_message()
            content = await self.ws.read_message()
            for _ in range(2 * int(header.get("num_buffers", 0))):
                await self.ws.read_message()
            if header.get("msgtype") != "PATCH-DOC" or not isinstance(content, str):
                continue
            now = time.monotonic()
            for m in READOUT.finditer(content):
                key = (float(m.group(1)), float(m.group(2)))
                t = self.sent.pop(key, None)
                if t is not None:
                    self.rtt.append(1e3 * (now - t))

    async def move(self, rng):
        x = round(rng.uniform(*self.xr) * 0.8 + 0.1 * (self.xr[0] + self.xr[1]), 3)
        y = round(rng.uniform(*self.yr) * 0.8 + 0.1 * (self.yr[0] + self.yr[1]), 3)
        self.sent[(x, y)] = time.monotonic()
        self.all_sent.append((x, y, self.sent[(x, y)]))
        await self.send("PATCH-DOC", _event(self.model_id, x, y))


async def client_phase_async(url, n, rate, duration, seed):
    clients = [Client(url) for _ in range(n)]
    for c in clients:  # sessions are opened one after the other, as users arrive
        await c.connect()
        c.all_sent = []
    listeners = [asyncio.ensure_future(c.listen()) for c in clients]
    await asyncio.sleep(1.0)
    t_start = time.monotonic()

    async def run(c, k):
        rng = random.Random(seed + k)
        await asyncio.sleep(rng.uniform(0, 1.0 / rate))
        nxt = time.monotonic()
        while time.monotonic() - t_start < duration:
            await c.move(rng)
            nxt += 1.0 / rate
            await asyncio.sleep(max(0.0, nxt - time.monotonic()))

    await asyncio.gather(*(run(c, k) for k, c in enumerate(clients)))
    await asyncio.sleep(2.0)  # late answers
    t_end = time.monotonic()
    for f in listeners:
        f.cancel()
    for c in clients:
        c.ws.close()
    return clients, t_start, t_end


def read_probe(path: Path):
    sent, procs = {}, []
    for ln in path.read_text().splitlines():
        rec = json.loads(ln)
        if rec[0] == "sent":
            _, t, sid, x, y = rec
            sent.setdefault((sid, x, y), t)  # first time this cursor left for that session
        elif rec[0] == "proc":
            procs.append(rec[1:])
    return sent, procs


def client_phase(srv, probe, n, args, results):
    rss0 = rss_kb(srv.pid)
    t0 = time.perf_counter()
    c0 = cpu_s(srv.pid)
    clients, t_start, t_end = asyncio.run(client_phase_async(srv.url, n, args.rate, args.duration, 1000 * n))
    open_s = time.perf_counter() - t0
    sent, procs = read_probe(probe)
    server_ms, rtt, n_events, answered = [], [], 0, 0
    for c in clients:
        rtt += c.rtt
        for x, y, t in c.all_sent:
            n_events += 1
            ts = sent.get((c.sid, x, y))
            if ts is not None and ts >= t:
                answered += 1
                server_ms.append(1e3 * (ts - t))
    cpu = [p for p in procs if t_start <= p[0] <= t_end]
    busy = (cpu[-1][1] - cpu[0][1]) / (cpu[-1][0] - cpu[0][0]) if len(cpu) > 1 else float("nan")
    rss1 = rss_kb(srv.pid)
    per_session_mb = (rss1 - rss0) / 1024 / n
    res = dict(sessions=n, events=n_events, answered=answered, server_ms=server_ms, rtt_ms=rtt,
               server_cpu_cores=busy, rss_mb=rss1 / 1024, mb_per_session=per_session_mb,
               loadavg=os.getloadavg(), open_and_run_s=open_s, server_cpu_s=cpu_s(srv.pid) - c0)
    results[f"clients_{n}"] = res
    print(f"{n:2d} sessions x {args.rate} events/s: server {summary(server_ms)}; client round trip "
          f"{summary(rtt)}; answered {answered}/{n_events}; server busy {busy:.2f} cores; "
          f"RSS {rss1 / 1024:.0f} MB (+{per_session_mb:.1f} MB/session); load {os.getloadavg()[0]:.2f}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--moves", type=int, default=40, help="mouse moves per browser measurement")
    ap.add_argument("--sessions", type=int, nargs="+", default=[8, 32])
    ap.add_argument("--rate", type=float, default=10.0, help="events per second per client session")
    ap.add_argument("--duration", type=float, default=20.0, help="seconds of moves per client phase")
    ap.add_argument("--skip", default="", help="comma list of: start, browser, train, clients")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    args.skip = set(filter(None, args.skip.split(",")))
    rng = np.random.default_rng(0)
    (ROOT / "test-artifacts").mkdir(exist_ok=True)
    probe = Path(tempfile.mkdtemp(prefix="bgplvm-probe-")) / "probe.jsonl"
    print(f"load average at start: {os.getloadavg()}")
    results = {}
    if "start" not in args.skip and Path(CHROMIUM).exists():
        from playwright.sync_api import sync_playwright

        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            results["run_sh"] = run_sh_to_first_page(browser)
            browser.close()
        r = results["run_sh"]
        print(f"bash scripts/run.sh -> server listening {r['listening_s']:.1f} s -> first page's plots drawn "
              f"{r['plots_s']:.1f} s (load {os.getloadavg()[0]:.1f})")
    srv = Server(probe)
    results.update(server_start_s=srv.start_s, rss_idle_mb=rss_kb(srv.pid) / 1024)
    print(f"server start to /liveness: {srv.start_s:.1f} s; RSS {results['rss_idle_mb']:.0f} MB")
    try:
        if "browser" not in args.skip and Path(CHROMIUM).exists():
            browser_phase(srv, args, rng, results)
        if "clients" not in args.skip:
            for n in args.sessions:
                client_phase(srv, probe, n, args, results)
    finally:
        srv.close()
    results["loadavg_end"] = os.getloadavg()
    print("\n| measurement | median | p95 | notes |\n|---|---|---|---|")
    if "playback_fps" in results:
        print(f"| playback in the browser | {results['playback_fps']} frames/s | | best 1-s window of 3 s at 1x |")
    if "run_sh" in results:
        r = results["run_sh"]
        print(f"| `bash scripts/run.sh` to the first page's plots (warm caches) | {r['plots_s']:.1f} s | | "
              f"server listening after {r['listening_s']:.1f} s |")
    for key, label in (("browser_1", "browser, 1 session"), ("browser_2", "browser, 2 sessions"),
                       ("browser_alone_before_training", "browser, alone (before training)"),
                       ("browser_while_training", "browser, another session training")):
        if key in results:
            xs = results[key]
            note = ""
            if key == "browser_while_training":
                note = f"x{results['training_ratio'][0]:.2f} median, x{results['training_ratio'][1]:.2f} p95"
            print(f"| {label} | {statistics.median(xs):.0f} ms | {pct(xs, 95):.0f} ms | {note} |")
    for n in args.sessions:
        r = results.get(f"clients_{n}")
        if r:
            print(f"| server, {n} sessions x {args.rate:g} events/s | {statistics.median(r['server_ms']):.1f} ms | "
                  f"{pct(r['server_ms'], 95):.1f} ms | round trip {statistics.median(r['rtt_ms']):.1f} / "
                  f"{pct(r['rtt_ms'], 95):.1f} ms; {r['server_cpu_cores']:.2f} cores busy; "
                  f"{r['mb_per_session']:.1f} MB/session; answered {r['answered']}/{r['events']} |")
    print(f"\nload average at end: {results['loadavg_end']}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
