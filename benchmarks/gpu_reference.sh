#!/usr/bin/env bash
# Measure the workload suite on a GPU machine that has PyTorch but maybe no network,
# and keep in one folder everything a reference result needs:
#
#   bash benchmarks/gpu_reference.sh OUTDIR [workload_suite.py arguments]
#
# OUTDIR receives <run id>.jsonl (the records), device-ceilings.json, suite.txt (the
# table beside published figures), nvidia-smi.txt and command.txt. gpubench is installed
# without its dependencies into a temporary folder: the suite needs only the standard
# library and torch. Make the report wherever gpubench is installed in full:
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
# built from a copy, so that the build leaves nothing in the checkout
mkdir "$site/src"
cp -r "$root/pyproject.toml" "$root/README.md" "$root/gpubench" "$root/providers" "$root/workloads" "$site/src/"
"$python" -m pip install --quiet --disable-pip-version-check --no-deps --no-index \
    --no-build-isolation --target "$site/lib" "$site/src"
{ nvidia-smi 2>&1 || echo "nvidia-smi: not available"; } > "$out/nvidia-smi.txt"
echo "bash benchmarks/gpu_reference.sh $out $*" > "$out/command.txt"
PYTHONPATH="$site/lib" PYTHONUNBUFFERED=1 \
    "$python" "$root/benchmarks/workload_suite.py" --results "$out" "$@" 2>&1 | tee "$out/suite.txt"
