"""The explorer on large models (issue 34, point 7): a measurement, not a test.

    python bench/bench_explorer_large.py [--sizes 2000 100000 1000000] [--events 20]

For each N: a static model (Q = 3, M = 30, D = 12; synthetic rows, PCA start plus a few
iterations: latency does not depend on the fit) saved with its rows referenced
(``save(path, data=rows.npy)``), opened by ``bgplvm serve --model`` in a fresh server, and
driven in Debian's chromium (Playwright):

  * open: page load to the latent view drawn (first session after the server's warm-up);
  * move / click: the input event to the second animation frame after the generated output
    changed (``bench_explorer``'s in-page timer); a click also selects the training point
    under it on the server (nearest of N means);
  * zoom: a wheel step to the second animation frame after the latent view's points were
    drawn again (the density image re-aggregated by Datashader at the new ranges; at
    N <= ``RASTER_ABOVE`` the scatter needs no server round trip and is not timed).

The reference is the smallest N, drawn as a scatter today, in the same run: the ratios
say what a large model costs over it. Target: hover and click < 300 ms at 1e5-1e6.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_explorer import ARGS, CHROMIUM, JS_HOOK, Server, _ms, wait_plot  # noqa: E402

JS_ZOOM_HOOK = """() => {
  window.__zoom = []; window.__tz = null;
  document.addEventListener('wheel', () => { window.__tz = performance.now(); }, true);
  let n = 0;
  for (const v of Bokeh.index.all_views()) {
    const m = v.model;
    if (!(m.title && m.title.text && m.title.text.startsWith('Latent space') && v.canvas_view)) continue;
    for (const r of m.renderers) {
      const g = r.glyph ? r.glyph.type : '';
      if (g === 'Image' || g === 'ImageStack') {
        r.data_source.change.connect(() => {
          const t0 = window.__tz;
          if (t0 !== null) requestAnimationFrame(() => requestAnimationFrame(() => window.__zoom.push(performance.now() - t0)));
        });
        n += 1;
      }
    }
  }
  return n;
}"""


def make_model(folder: Path, N: int, iters: int) -> tuple[Path, float]:
    from bgplvm import BayesianGPLVM

    rng = np.random.default_rng(0)
    X = rng.standard_normal((N, 2)) * [1.5, 1.0]
    Y = np.sin(X @ rng.standard_normal((2, 12))) + 0.05 * rng.standard_normal((N, 12))
    np.save(folder / f"rows-{N}.npy", Y)
    t = time.perf_counter()
    m = BayesianGPLVM(Y, 3, 30)
    m.fit(max_iters=iters, progress=False)
    m.save(folder / f"model-{N}.npz", data=folder / f"rows-{N}.npy")
    return folder / f"model-{N}.npz", time.perf_counter() - t


def drive(browser, url: str, n_events: int, rng, large: bool, shot: Path) -> dict:
    page = browser.new_page(viewport={"width": 1720, "height": 1300})
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    t0 = time.perf_counter()
    page.goto(url)
    lat = wait_plot(page, "Latent space", timeout=300)
    wait_plot(page, "Generated", timeout=300)
    out = {"open": time.perf_counter() - t0}
    page.wait_for_timeout(1000)
    assert page.evaluate(JS_HOOK), "no output plot"
    fx, fy, fw, fh = lat["frame"]
    for mode in ("move", "click"):
        page.evaluate(f"() => {{ window.__move = {str(mode == 'move').lower()}; window.__lat = []; }}")
        for i in range(n_events):
            px, py = fx + fw * rng.uniform(0.3, 0.7), fy + fh * rng.uniform(0.3, 0.7)  # among the points
            page.mouse.move(px, py, steps=1) if mode == "move" else page.mouse.click(px, py)
            t = time.perf_counter()
            while page.evaluate("() => window.__lat.length") <= i and time.perf_counter() - t < 10:
                page.wait_for_timeout(5)
            page.wait_for_timeout(150)
        out[mode] = [v for v in page.evaluate("() => window.__lat") if v is not None]
    if large:
        assert page.evaluate(JS_ZOOM_HOOK) >= 2, "no density image in the latent view"
        page.mouse.move(fx + fw / 2, fy + fh / 2)
        for i in range(n_events // 2):
            page.evaluate("() => { window.__tz = null; }")
            page.mouse.wheel(0, -120 if i % 2 == 0 else 120)
            t = time.perf_counter()
            while page.evaluate("() => window.__zoom.length") <= i and time.perf_counter() - t < 10:
                page.wait_for_timeout(5)
            page.wait_for_timeout(300)
        out["zoom"] = page.evaluate("() => window.__zoom")
    page.screenshot(path=str(shot), full_page=True)
    out["errors"] = errors
    page.close()
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[2000, 100_000, 1_000_000])
    ap.add_argument("--events", type=int, default=20)
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--shots", default=str(Path(__file__).resolve().parents[1] / "test-artifacts"))
    args = ap.parse_args(argv)
    from playwright.sync_api import sync_playwright

    from bgplvm.explorer.density import RASTER_ABOVE

    tmp = Path(tempfile.mkdtemp(prefix="bench-explorer-large-"))
    rng = np.random.default_rng(0)
    results = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        for N in args.sizes:
            path, build_s = make_model(tmp, N, args.iters)
            t = time.perf_counter()
            srv = Server(str(path))
            try:
                large = N > RASTER_ABOVE
                r = drive(browser, srv.url, args.events, rng, large, Path(args.shots) / f"bench-large-{N}.png")
            finally:
                srv.close()
            r["start"] = srv.start_s
            results[N] = r
            print(f"\n== N = {N:,} ({'density image' if large else 'scatter'}); model built, {args.iters} "
                  f"iterations and saved in {build_s:.1f} s; server start (warm-up, model and rows read) "
                  f"{srv.start_s:.1f} s; page open to the latent view drawn {r['open']:.2f} s")
            print(f"  mouse move -> output drawn   {_ms(r['move'])}")
            print(f"  click      -> output drawn   {_ms(r['click'])}")
            if large:
                print(f"  wheel zoom -> points redrawn {_ms(r['zoom'])}")
            if r["errors"]:
                print(f"  PAGE ERRORS: {r['errors']}")
            print(f"  ({time.perf_counter() - t:.0f} s)")
        browser.close()
    ref = results[args.sizes[0]]
    print(f"\n== ratios to N = {args.sizes[0]:,} (medians, same run)")
    for N, r in results.items():
        print(f"  N = {N:>9,}: move {statistics.median(r['move']) / statistics.median(ref['move']):5.2f}x  "
              f"click {statistics.median(r['click']) / statistics.median(ref['click']):5.2f}x  "
              f"open {r['open'] / ref['open']:5.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
