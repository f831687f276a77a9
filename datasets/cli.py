"""``bgplvm datasets ...``: list the registry and fetch data sets.

    bgplvm datasets list [--cache-dir DIR]
    bgplvm datasets fetch NAME [NAME ...] [--mirror DIR] [--cache-dir DIR] [--quiet]
    bgplvm datasets fetch all --mirror ../shared/datasets

``main(argv)`` returns the exit status (0 ok, 1 data error, 2 usage error); the
top-level ``bgplvm`` console script dispatches ``bgplvm datasets ...`` here. Also
runnable as ``python -m bgplvm.datasets.cli``.
"""

from __future__ import annotations

import argparse
import sys

from . import REGISTRY, cache_root, fetch, list_datasets, resolve_mirror
from .errors import DatasetError


def _human(n: int) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return str(n)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="bgplvm datasets", description="List and fetch bgplvm's data sets.")
    sub = p.add_subparsers(dest="command", required=True, metavar="{list,fetch}")
    pl = sub.add_parser("list", help="list the data sets: size, cached or not, licence")
    pl.add_argument("--cache-dir", help="cache directory (default $BGPLVM_CACHE_DIR, else $XDG_CACHE_HOME/bgplvm/datasets or ~/.cache/bgplvm/datasets)")
    pf = sub.add_parser("fetch", help="download data set files into the cache (verified by sha256)")
    pf.add_argument("names", nargs="+", metavar="NAME", help="data set name(s), or 'all'")
    pf.add_argument("--mirror", help="offline mirror: a folder laid out like ../shared/datasets, or a file:// "
                                     "or http(s):// URL (default $BGPLVM_DATA_MIRROR)")
    pf.add_argument("--cache-dir", help="cache directory (default $BGPLVM_CACHE_DIR, else $XDG_CACHE_HOME/bgplvm/datasets or ~/.cache/bgplvm/datasets)")
    pf.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def _list(args, out) -> int:
    infos = list_datasets(cache_dir=args.cache_dir)
    w = max(len(i.name) for i in infos)
    print(f"{'name':<{w}}  {'kind':<6} {'rows':>6} {'size':>9}  {'status':<8}  licence", file=out)
    for i in infos:
        status = "embedded" if i.embedded else ("cached" if i.cached else "-")
        licence = i.licence if len(i.licence) <= 60 else i.licence[:57] + "..."
        print(f"{i.name:<{w}}  {i.kind:<6} {i.n_rows:>6} {_human(i.size_bytes):>9}  {status:<8}  {licence}", file=out)
    print(f"\ncache: {cache_root(args.cache_dir)}", file=out)
    m = resolve_mirror(None)
    if m:
        print(f"mirror ($BGPLVM_DATA_MIRROR): {m}", file=out)
    return 0


def _fetch(args, out) -> int:
    names = list(REGISTRY) if args.names == ["all"] else args.names
    status = 0
    for name in names:
        try:
            paths = fetch(name, mirror=args.mirror, cache_dir=args.cache_dir, progress=not args.quiet)
        except DatasetError as e:
            print(f"error: {e}", file=sys.stderr)
            status = 1
            continue
        for fname, path in paths.items():
            print(f"{name}: {fname} -> {path}", file=out)
    return status


def main(argv: list[str] | None = None, out=None) -> int:
    out = out or sys.stdout
    try:
        args = _parser().parse_args(sys.argv[1:] if argv is None else list(argv))
    except SystemExit as e:  # argparse: --help (0) or a usage error (2)
        return int(e.code or 0)
    if args.command == "list":
        return _list(args, out)
    return _fetch(args, out)


if __name__ == "__main__":
    sys.exit(main())
