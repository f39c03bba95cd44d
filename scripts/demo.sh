#!/usr/bin/env bash
# Set up (each step timed), then sweep mnist-ddp over the GPUs of this machine
# (1 and 2 CPU processes when it has none) and print the speedup/cost table.
#
#   bash scripts/demo.sh              # short: 30 measured steps per run after 3 of warm-up,
#                                     # 3 runs per count (median and spread)
#   bash scripts/demo.sh --full       # one whole epoch per run (the workload's default)
#   bash scripts/demo.sh --repeat 5 -- --steps 200   # any `gpubench run` arguments
#   bash scripts/demo.sh --no-setup   # as above, with the .venv already set up
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS
if [ "${1:-}" = "--no-setup" ]; then
    shift
else
    scripts/setup.sh local
    echo "setup done in $((SECONDS - started)) s; sweeping (live progress below)"
fi
if [ $# -eq 0 ]; then
    set -- -- --steps 30 --warmup 3
elif [ "$1" = "--full" ]; then
    shift
fi
exec .venv/bin/gpubench run mnist-ddp "$@"
