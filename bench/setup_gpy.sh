#!/usr/bin/env bash
# Create the benchmark's OWN environment `.bench-venv/` (gitignored) holding
#   - this project, installed editable (so the bench measures the working tree), and
#   - GPy 1.15.0, the reference implementation.
# GPy is never a runtime dependency of bgplvm: it lives only in this venv.
#
# Usage:  bash bench/setup_gpy.sh            # create / update .bench-venv
#         BENCH_VENV=/some/where bash bench/setup_gpy.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${BENCH_VENV:-$ROOT/.bench-venv}"
PY="${PYTHON:-python3}"

if [ ! -x "$VENV/bin/python" ]; then
    echo "[bench-setup] creating $VENV"
    "$PY" -m venv "$VENV"
    "$VENV/bin/python" -m pip install -q --upgrade pip 2>&1 | grep -v "^WARNING: Location" || true
fi

echo "[bench-setup] installing bgplvm (editable) + gpy==1.15.0"
# GPy 1.15.0 installs as it is against the current numpy 2.x / scipy 1.1x wheels
# (pins, if ever needed, go on this line and into bench/README.md -- this venv only).
"$VENV/bin/python" -m pip install -q -e "$ROOT" "gpy==1.15.0" 2>&1 | grep -v "^WARNING: Location" || true

"$VENV/bin/python" - <<'EOF'
import GPy, numpy, scipy, numba, paramz
import bgplvm  # noqa: F401  (the project itself)
print(f"[bench-setup] ok: GPy {GPy.__version__}, paramz {paramz.__version__}, numpy {numpy.__version__}, "
      f"scipy {scipy.__version__}, numba {numba.__version__}")
EOF
echo "[bench-setup] run:  $VENV/bin/python bench/bench_gplvm.py [--quick]"
