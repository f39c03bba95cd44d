#!/usr/bin/env bash
# Set up, then sweep mnist-ddp over the GPUs of this machine (1 and 2 CPU
# processes when it has none) and print the speedup/cost table.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh local
exec .venv/bin/gpubench run mnist-ddp "$@"
