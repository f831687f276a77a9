#!/usr/bin/env bash
# Quick start, command 1: set everything up and open the explorer on the embedded default.
# Extra arguments go to `bgplvm serve` (e.g. --port 5007 --no-show).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_setup.sh
exec bgplvm serve "$@"
