#!/usr/bin/env bash
# Quick start, command 1: set everything up and open the explorer on its default page (CMU
# motion capture with a shipped dynamical model; the embedded synthetic walk when CMU's data
# cannot be fetched).
# Extra arguments go to `bgplvm serve` (e.g. --port 5007 --no-show).
set -euo pipefail
cd "$(dirname "$0")/.."
SETUP_EXTRA="" source scripts/_setup.sh
# Real data sets picked in the page come from the offline mirror next to the project when
# it exists (otherwise they are downloaded on first use); the default data is embedded.
if [ -z "${BGPLVM_DATA_MIRROR:-}" ] && [ -d ../shared/datasets ]; then
    export BGPLVM_DATA_MIRROR="$(cd ../shared/datasets && pwd)"
fi
exec bgplvm serve "$@"
