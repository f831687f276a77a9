#!/usr/bin/env bash
# Quick start, command 2: set everything up and run the whole test suite.
# Installs the test extra and, when missing, Debian's chromium for the browser tests.
# Extra arguments go to pytest (e.g. -m "not slow" -x).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_setup.sh test
if [ ! -x /usr/bin/chromium ]; then
    echo "[setup] installing Debian chromium for the browser tests"
    SUDO=""; [ "$(id -u)" != 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
fi
# Real data sets come from the offline mirror next to the project when it exists.
if [ -z "${BGPLVM_DATA_MIRROR:-}" ] && [ -d ../shared/datasets ]; then
    export BGPLVM_DATA_MIRROR="$(cd ../shared/datasets && pwd)"
fi
export BGPLVM_CACHE_DIR="${BGPLVM_CACHE_DIR:-$PWD/.cache/datasets}"
exec python -m pytest "$@"
