# Sourced by run.sh and test.sh: create .venv (if missing) and install the project into it.
# Usage: SETUP_EXTRA=test source scripts/_setup.sh   (SETUP_EXTRA: a pip extra, or unset)
# The extra comes in a variable, not as an argument: `source` without arguments hands the
# caller's own arguments ("--port 5007", ...) to the sourced script.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${BGPLVM_VENV:-$ROOT/.venv}"
PY="${PYTHON:-python3}"
if [ ! -x "$VENV/bin/python" ]; then
    echo "[setup] creating virtual environment in $VENV"
    "$PY" -m venv "$VENV"
    "$VENV/bin/python" -m pip install -q --upgrade pip
fi
EXTRA="${SETUP_EXTRA:-}"
SPEC="$ROOT"
[ -n "$EXTRA" ] && SPEC="$ROOT[$EXTRA]"
# pip runs only when pyproject.toml (or the extra) changed since the last install: a
# second `bash scripts/run.sh` starts the explorer without seconds of dependency checks
STAMP="$VENV/.bgplvm-install-${EXTRA:-base}"
WANT="$(cat "$ROOT/pyproject.toml" | sha256sum | cut -d' ' -f1) $ROOT"
if [ "$(cat "$STAMP" 2>/dev/null)" != "$WANT" ]; then
    echo "[setup] installing bgplvm${EXTRA:+[$EXTRA]} (editable)"
    # the log is shown only when pip fails (setuptools warns at every editable install of a
    # package laid out with package-dir, which is this one)
    if ! "$VENV/bin/python" -m pip install -q -e "$SPEC" >"$VENV/.bgplvm-install.log" 2>&1; then
        grep -v "^WARNING: Location" "$VENV/.bgplvm-install.log" >&2
        echo "[setup] pip install failed (log above, and in $VENV/.bgplvm-install.log)" >&2
        exit 1
    fi
    "$VENV/bin/python" -c "import bgplvm, bgplvm.explorer, bgplvm.datasets, bgplvm.assets" \
        || { echo "[setup] install failed"; exit 1; }
    echo "$WANT" > "$STAMP"
else
    echo "[setup] bgplvm${EXTRA:+[$EXTRA]} already installed (pyproject.toml unchanged)"
fi
export PATH="$VENV/bin:$PATH"
