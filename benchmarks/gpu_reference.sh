#!/usr/bin/env bash
# Measure the workload suite on a GPU machine that has PyTorch but maybe no network,
# and keep in one folder everything a reference result needs:
#
#   bash benchmarks/gpu_reference.sh OUTDIR [workload_suite.py arguments]
#
# OUTDIR receives <run id>.jsonl (the records), device-ceilings.json, suite.txt (the
# table beside published figures), nvidia-smi.txt and command.txt. gpubench is laid out in a
# temporary folder without its dependencies: the suite needs only the standard library
# and torch. Make the report wherever gpubench is installed in full:
#
#   gpubench report --results OUTDIR --format markdown > OUTDIR/report.md
set -euo pipefail
out=${1:?usage: bash benchmarks/gpu_reference.sh OUTDIR [workload_suite.py arguments]}
shift
python=${PYTHON:-python3}
root=$(cd "$(dirname "$0")/.." && pwd)
site=$(mktemp -d "${TMPDIR:-/tmp}/gpubench-site.XXXXXX")
trap 'rm -rf "$site"' EXIT

mkdir -p "$out"
# the installed layout (see pyproject's package-dir), by copying: no pip, no build, no network
cp -r "$root/gpubench" "$site/gpubench"
cp -r "$root/providers" "$site/gpubench/providers"
cp -r "$root/workloads" "$site/gpubench/workloads"
{ nvidia-smi 2>&1 || echo "nvidia-smi: not available"; } > "$out/nvidia-smi.txt"
echo "bash benchmarks/gpu_reference.sh $out $*" > "$out/command.txt"
PYTHONPATH="$site" PYTHONUNBUFFERED=1 \
    "$python" "$root/benchmarks/workload_suite.py" --results "$out" "$@" 2>&1 | tee "$out/suite.txt"
