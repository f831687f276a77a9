# Sourced by run.sh and test.sh: create .venv (if missing) and install the project into it.
# Usage: source scripts/_setup.sh [extra]   e.g. "test"
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${BGPLVM_VENV:-$ROOT/.venv}"
PY="${PYTHON:-python3}"
if [ ! -x "$VENV/bin/python" ]; then
    echo "[setup] creating virtual environment in $VENV"
    "$PY" -m venv "$VENV"
    "$VENV/bin/python" -m pip install -q --upgrade pip
fi
EXTRA="${1:-}"
SPEC="$ROOT"
[ -n "$EXTRA" ] && SPEC="$ROOT[$EXTRA]"
echo "[setup] installing bgplvm${EXTRA:+[$EXTRA]} (editable)"
"$VENV/bin/python" -m pip install -q -e "$SPEC" 2>&1 | grep -v "^WARNING: Location" || true
"$VENV/bin/python" -c "import model, explorer, bgplvm_datasets" || { echo "[setup] install failed"; exit 1; }
export PATH="$VENV/bin:$PATH"
