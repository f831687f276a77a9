#!/usr/bin/env bash
# Build the documentation and open it: set up (the docs extra), execute every user-guide
# page (docs/guide/*.py) and build the site with warnings as errors into docs/_build/html.
# Extra arguments go to sphinx-build (e.g. -E to re-execute every page; by default a page
# runs again when it or the package's sources changed since the last build).
# BGPLVM_DOCS_QUICK=1 cuts the guide's iterations (bgplvm.docs_utils.reduce_in_tests), as
# the test suite's docs build does.
set -euo pipefail
cd "$(dirname "$0")/.."
SETUP_EXTRA=docs source scripts/_setup.sh
# Real data sets come from the offline mirror next to the project when it exists.
if [ -z "${BGPLVM_DATA_MIRROR:-}" ] && [ -d ../shared/datasets ]; then
    export BGPLVM_DATA_MIRROR="$(cd ../shared/datasets && pwd)"
fi
export BGPLVM_CACHE_DIR="${BGPLVM_CACHE_DIR:-$PWD/.cache/datasets}"
OUT=docs/_build/html
python -m sphinx -W --keep-going -b html -d docs/_build/doctrees "$@" docs "$OUT"
INDEX="$PWD/$OUT/index.html"
echo "[docs] built: $INDEX"
# open it when there is a browser to open it in (python -m webbrowser's module; on a
# machine without a display we only print the path)
python - "$INDEX" <<'PY'
import os, sys, webbrowser
# a graphical browser only: not a console one (lynx, w3m) taking over a terminal or an ssh session
graphical = sys.platform in ("darwin", "win32") or os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
try:
    if not graphical:
        raise webbrowser.Error("no display")
    browser = webbrowser.get()
except webbrowser.Error:
    print("[docs] no browser found: open the path above")
else:
    if not browser.open("file://" + sys.argv[1]):
        print("[docs] could not open a browser: open the path above")
PY
