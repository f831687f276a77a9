#!/usr/bin/env bash
# Quick start, command 2: set everything up and run the whole test suite.
# Installs the test extra and, when missing, Debian's chromium for the browser tests.
# Extra arguments go to pytest (e.g. -m "not slow" -x).
set -euo pipefail
cd "$(dirname "$0")/.."
SETUP_EXTRA=test source scripts/_setup.sh
# Without apt-get or the rights to use it the browser tests skip, saying why (in CI,
# where they must run, the setup fails instead).
if [ ! -x /usr/bin/chromium ]; then
    installed=""
    if command -v apt-get >/dev/null; then
        echo "[setup] installing Debian chromium for the browser tests"
        SUDO=""; [ "$(id -u)" != 0 ] && SUDO="sudo"
        # 'env' carries the variable through sudo, and also when $SUDO is empty
        if $SUDO apt-get update -qq && $SUDO env DEBIAN_FRONTEND=noninteractive \
                apt-get install -y -qq chromium chromium-driver >/dev/null; then
            installed=1
        fi
    fi
    if [ -z "$installed" ]; then
        if [ "${CI:-}" = true ]; then
            echo "[setup] could not install Debian chromium, which CI's browser tests need" >&2
            exit 1
        fi
        echo "[setup] Debian chromium not installed (no apt-get, or no rights): the browser tests will be skipped" >&2
    fi
fi
# Real data sets come from the offline mirror next to the project when it exists.
if [ -z "${BGPLVM_DATA_MIRROR:-}" ] && [ -d ../shared/datasets ]; then
    export BGPLVM_DATA_MIRROR="$(cd ../shared/datasets && pwd)"
fi
export BGPLVM_CACHE_DIR="${BGPLVM_CACHE_DIR:-$PWD/.cache/datasets}"
exec python -m pytest "$@"
