#!/usr/bin/env bash
# Set up, then sweep mnist-ddp over the GPUs of this machine (1 and 2 CPU
# processes when it has none) and print the speedup/cost table. On a CPU each
# count runs 3 times (the table gives their median and spread), 50 measured
# steps each: about a minute and a half on 2 cores. Arguments replace that:
# bash scripts/demo.sh --repeat 5 -- --steps 200
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh local
if [ $# -eq 0 ]; then
    set -- -- --steps 50
fi
exec .venv/bin/gpubench run mnist-ddp "$@"
