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
# pip runs only when pyproject.toml (or the extra) changed since the last install: a
# second `bash scripts/run.sh` starts the explorer without seconds of dependency checks
STAMP="$VENV/.bgplvm-install-${EXTRA:-base}"
WANT="$(cat "$ROOT/pyproject.toml" | sha256sum | cut -d' ' -f1) $ROOT"
if [ "$(cat "$STAMP" 2>/dev/null)" != "$WANT" ]; then
    echo "[setup] installing bgplvm${EXTRA:+[$EXTRA]} (editable)"
    "$VENV/bin/python" -m pip install -q -e "$SPEC" 2>&1 | grep -v "^WARNING: Location" || true
    "$VENV/bin/python" -c "import model, explorer, bgplvm_datasets, bgplvm_assets" \
        || { echo "[setup] install failed"; exit 1; }
    echo "$WANT" > "$STAMP"
else
    echo "[setup] bgplvm${EXTRA:+[$EXTRA]} already installed (pyproject.toml unchanged)"
fi
export PATH="$VENV/bin:$PATH"
