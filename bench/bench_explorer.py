"""Explorer latency benchmark (a measurement, not a test).

    python bench/bench_explorer.py [--datasets oil cmu35 frey_faces] [--clicks 25] [--iters 20]

Measures, per data set (a briefly trained model; latency does not depend on how well
it is trained):
  * server side: one prediction (``state.generate``), one whole mouse move as the
    server handles it (marker, generated output, readout), the 200 x 200 variance grid;
  * in a real browser (Playwright + Debian chromium): mouse move (follow mode) and click
    (pin mode) in the latent view -> the generated pose/frame drawn, timed inside the
    page from the input event to the second animation frame after BokehJS applied the
    server's update;
and for the embedded default: server start to /liveness, and page open to the latent
view drawn (Numba warm-up included in the server start).

Targets (issue 4): click/move -> drawn median < 150 ms; prediction << 5 ms; variance
grid < 50 ms (GPy: 42 ms); first page in a few seconds.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
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
    return {box: [r.x, r.y, r.width, r.height], x: [v.frame.x_range.start, v.frame.x_range.end],
            y: [v.frame.y_range.start, v.frame.y_range.end],
            frame: [r.x + v.frame.bbox.left, r.y + v.frame.bbox.top, v.frame.bbox.width, v.frame.bbox.height]};
  }
  return null;
}"""

# Time from the last input event to the second animation frame after the output plot's
# title (which carries the latent coordinates) changed: the new output is on screen.
JS_HOOK = """() => {
  window.__lat = []; window.__t0 = null;
  document.addEventListener('pointerdown', () => { window.__t0 = performance.now(); }, true);
  document.addEventListener('pointermove', () => { if (window.__move) window.__t0 = performance.now(); }, true);
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


def _ms(xs):
    return f"median {statistics.median(xs):7.2f} ms  (p90 {np.percentile(xs, 90):7.2f}, n={len(xs)})"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env():
    env = dict(os.environ)
    mirror = ROOT.parent / "shared" / "datasets"
    if "BGPLVM_DATA_MIRROR" not in env and mirror.is_dir():
        env["BGPLVM_DATA_MIRROR"] = str(mirror)
    env.setdefault("BGPLVM_CACHE_DIR", str(ROOT / ".cache" / "datasets"))
    return env


class Server:
    def __init__(self, model_path: str | None = None):
        from bgplvm.explorer.cli import build_command, wait_until_live

        self.port = _free_port()
        env = _env()
        if model_path:
            env["BGPLVM_EXPLORER_MODEL"] = model_path
        self.t0 = time.perf_counter()
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(build_command(port=self.port, show=False), env=env, stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        if not wait_until_live(self.proc, self.port, timeout=120):
            self.log.seek(0)
            raise RuntimeError("server did not start:\n" + self.log.read().decode()[-3000:])
        self.start_s = time.perf_counter() - self.t0
        self.url = f"http://127.0.0.1:{self.port}/app"

    def close(self):
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)


def wait_plot(page, prefix, timeout=60):
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        info = page.evaluate(JS_FIND, prefix)
        if info:
            return info
        page.wait_for_timeout(20)
    raise RuntimeError(f"plot {prefix!r} not drawn")


def browser_latency(browser, url, n, rng, shots: Path | None = None, name=""):
    page = browser.new_page(viewport={"width": 1720, "height": 1300})
    t0 = time.perf_counter()
    page.goto(url)
    lat = wait_plot(page, "Latent space")
    wait_plot(page, "Generated")
    ready = time.perf_counter() - t0
    page.wait_for_timeout(500)
    assert page.evaluate(JS_HOOK), "no output plot"
    fx, fy, fw, fh = lat["frame"]
    out = {}
    for mode in ("move", "click"):
        page.evaluate(f"() => {{ window.__move = {str(mode == 'move').lower()}; window.__lat = []; }}")
        for i in range(n):
            px, py = fx + fw * rng.uniform(0.1, 0.9), fy + fh * rng.uniform(0.1, 0.9)
            if mode == "move":
                page.mouse.move(px, py, steps=1)
            else:
                page.mouse.click(px, py)
            t = time.perf_counter()
            while page.evaluate("() => window.__lat.length") <= i and time.perf_counter() - t < 5:
                page.wait_for_timeout(5)
            page.wait_for_timeout(120)  # let the throttled stream settle before the next event
        out[mode] = [v for v in page.evaluate("() => window.__lat") if v is not None]
    if shots is not None:
        page.screenshot(path=str(shots / f"bench-{name}.png"), full_page=True)
    page.close()
    return ready, out


def server_side(state, n, rng):
    """Median times of: one prediction; one whole mouse move as the server handles it
    (state.hover -> cursor cross, generated output written into the Bokeh sources,
    readout), with the views rendered into a Bokeh document; the 200x200 grid."""
    from bokeh.document import Document

    from bgplvm.explorer.latent import variance_grid
    from bgplvm.explorer.latent_view import LatentView
    from bgplvm.explorer.output_view import OutputView

    x0, y0, x1, y1 = state.bounds()
    pts = np.column_stack([rng.uniform(x0, x1, n), rng.uniform(y0, y1, n)])
    gen = []
    for x, y in pts:
        t = time.perf_counter()
        state.generate(x + 1e-9 * rng.standard_normal(), y)
        gen.append(1e3 * (time.perf_counter() - t))
    doc = Document()
    lv, ov = LatentView(state=state), OutputView(state=state)
    for pane in (lv._pane, ov._pane, ov._sd_pane, ov._readout):
        pane.get_root(doc)
    state.follow = True
    move = []
    for x, y in pts + 1e-3:
        t = time.perf_counter()
        state.hover(float(x), float(y))
        move.append(1e3 * (time.perf_counter() - t))
    assert ov._sources, "output not rendered"
    grid = []
    b = state.bounds()
    variance_grid(state.model, np.asarray(state.fixed), state.dims, b, 200)
    for _ in range(10):
        t = time.perf_counter()
        variance_grid(state.model, np.asarray(state.fixed), state.dims, b, 200)
        grid.append(1e3 * (time.perf_counter() - t))
    return gen[2:], move[2:], grid


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="explorer latency benchmark")
    ap.add_argument("--datasets", nargs="+", default=["oil", "cmu35", "frey_faces"])
    ap.add_argument("--clicks", type=int, default=25)
    ap.add_argument("--iters", type=int, default=20, help="training iterations of each bench model")
    ap.add_argument("--latent-dim", type=int, default=5)
    ap.add_argument("--inducing", type=int, default=30)
    ap.add_argument("--no-browser", action="store_true")
    ap.add_argument("--shots", default=str(ROOT / "test-artifacts"))
    args = ap.parse_args(argv)
    os.environ.update({k: v for k, v in _env().items() if k.startswith("BGPLVM_")})

    import holoviews as hv
    from bgplvm.datasets import load
    from bgplvm import BayesianGPLVM, warmup

    from bgplvm.explorer.state import ExplorerState

    hv.extension("bokeh", logo=False)
    t = time.perf_counter()
    warmup()
    print(f"numba warm-up in this process: {time.perf_counter() - t:.2f} s")
    rng = np.random.default_rng(0)
    shots = Path(args.shots)
    shots.mkdir(exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="bench-explorer-"))
    models = {}
    for name in args.datasets:
        ds = load(name)
        t = time.perf_counter()
        m = BayesianGPLVM(ds.Y, latent_dim=args.latent_dim, num_inducing=args.inducing, seed=0)
        m.fit(max_iters=args.iters, progress=False)
        m.metadata = {"dataset": name}
        path = tmp / f"{name}.npz"
        m.save(path)
        models[name] = path
        st = ExplorerState()
        st.set_model(m, ds)
        gen, cb, grid = server_side(st, 60, rng)
        print(f"\n== {name}: N={ds.N}, D={ds.D}, kind={ds.renderer.kind}; model Q={args.latent_dim}, "
              f"M={args.inducing}, {args.iters} iterations ({time.perf_counter() - t:.1f} s)")
        print(f"  server: predict one point         {_ms(gen)}")
        print(f"  server: whole mouse move          {_ms(cb)}")
        print(f"  server: variance grid 200x200     {_ms(grid)}")

    if args.no_browser or not Path(CHROMIUM).exists():
        print("\n(browser part skipped)")
        return 0
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        srv = Server()
        try:
            ready, _ = browser_latency(browser, srv.url, 3, rng)
            print(f"\n== the default page (the shipped default asset's model and data): server start to /liveness "
                  f"{srv.start_s:.2f} s (Numba warm-up included); page open to plots drawn {ready:.2f} s "
                  f"(first session)")
            ready2, lat = browser_latency(browser, srv.url, args.clicks, rng, shots, "default")
            print(f"  second session page open to plots drawn {ready2:.2f} s")
            print(f"  browser: mouse move -> pose drawn {_ms(lat['move'])}")
            print(f"  browser: click      -> pose drawn {_ms(lat['click'])}")
        finally:
            srv.close()
        for name, path in models.items():
            srv = Server(str(path))
            try:
                ready, lat = browser_latency(browser, srv.url, args.clicks, rng, shots, name)
                what = {"oil": "vector", "frey_faces": "frame"}.get(name, "pose")
                print(f"\n== {name} in the browser (page ready {ready:.2f} s)")
                print(f"  browser: mouse move -> {what} drawn {_ms(lat['move'])}")
                print(f"  browser: click      -> {what} drawn {_ms(lat['click'])}")
            finally:
                srv.close()
        browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
