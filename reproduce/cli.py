"""``bgplvm reproduce NAME [--out DIR] [--quick] [--mirror DIR] [--seed S]``, ``--list``, ``--stale``."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from bgplvm._interrupt import interrupt_aborts
from bgplvm.io import check_writable

from . import EXPERIMENTS, run
from .report import Context, stale_results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bgplvm reproduce",
                                description="Run one of the paper's experiments and write its "
                                            "JSON, figures and table beside the paper's numbers.")
    p.add_argument("name", nargs="?", help="experiment name (see --list)")
    p.add_argument("--list", action="store_true", help="list the experiments")
    p.add_argument("--out", default="reproduction", help="report folder (default ./reproduction)")
    p.add_argument("--mirror", default=None, help="offline mirror directory for data sets")
    p.add_argument("--quick", action="store_true", help="a short smoke run (not the reproduction)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--stale", action="store_true",
                   help="list the results in --out whose model or data-set code changed since their run "
                        "(exit status 1 if any)")
    args = p.parse_args(argv)
    if args.stale:
        return _stale(Path(args.out))
    if args.list or not args.name:
        for name, (_, desc) in sorted(EXPERIMENTS.items()):
            print(f"{name:22s} {desc}")
        return 0 if args.list else 2
    ctx = Context(out_dir=Path(args.out), mirror=args.mirror, quick=args.quick, seed=args.seed)
    t0 = time.perf_counter()
    try:
        check_writable(Path(args.out) / args.name, directory=True)  # before the run, not after
        with interrupt_aborts():  # Ctrl-C in any fit ends the run: no result from a cut fit
            result = run(args.name, ctx)
    except (ValueError, OSError) as e:
        print(f"bgplvm reproduce: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("bgplvm reproduce: interrupted before its result was written (result.json, "
              "table.md and REPORT.md are as they were)", file=sys.stderr)
        return 130
    print(result.markdown())
    print(f"wrote {Path(args.out) / args.name} and {Path(args.out) / 'REPORT.md'} "
          f"in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return 0


def _stale(out: Path) -> int:
    """``--stale``: one line per result; 1 if any result's numbers may be out of date."""
    rows = stale_results(out)
    if not rows:
        print(f"no results in {out}")
        return 0
    stale = False
    for r in rows:
        code, n, k = r["code"] or "?", r["changed"], r["module_changed"]
        if n is None:
            what = "cannot tell (no commit recorded, or not a git checkout)"
        elif n:
            stale = True
            what = f"STALE: {n} commit(s) under model/ or datasets/ since; rerun: bgplvm reproduce {r['name']}"
        else:
            what = "model/ and datasets/ unchanged since"
        if k:
            what += f"; its experiment modules (reproduce/) changed in {k} commit(s) since (notes or protocol)"
        print(f"{r['name']:22s} run from {code:18s} {what}")
    return 1 if stale else 0
