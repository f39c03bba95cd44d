#!/usr/bin/env bash
# The checks only a real NVIDIA GPU can answer, in one go and in under 8 minutes, on a
# machine with Python, torch, pandas, rich, requests, tabulate, matplotlib, nvidia-ml-py
# and lightning but no network:
#
#   bash benchmarks/gpu_check.sh OUTDIR [--wheels DIR] [--archive FILE] [--minutes M] [--only STEPS]
#                                       [--nanogpt DIR] [--examples DIR]
#
#   1. nvidia-smi and nvidia-smi -q saved; the preflight gate run against this card, every
#      check's value and verdict (benchmarks/gpu_check_gate.py).
#   2. gpubench installed from this checkout into a temporary folder, with what it needs
#      beyond the machine's packages from --wheels (benchmarks/gpu_check_wheels.txt),
#      offline; then `gpubench run mnist-ddp --gpus 1` end to end through the local
#      launcher, and `gpubench report`.
#   3. What gpubench predicts for this GPU type from published figures alone, written
#      before anything is measured (benchmarks/gpu_check_predict.py).
#   4. benchmarks/workload_suite.py at real sizes (with the device's matrix-product and
#      copy ceilings), time-boxed.
#   5. The manual's Lightning example (docs/running.md) through `gpubench run` at one GPU.
#   6. Only when --only names it: `speed`, the suite's speed against nanoGPT's (its source
#      in --nanogpt DIR) and `gpubench run` against torchrun by hand (benchmarks/gpu_speed.py:
#      speed.json, records in results/). About 5.5 minutes.
#   7. Only when --only names it: `scripts`, users' scripts (nanoGPT's train.py at two
#      batch sizes from --nanogpt, pytorch/examples' mnist and imagenet main.py from
#      --examples, the manual's Lightning example) through `gpubench run` at one GPU,
#      each beside what `gpubench predict` said of it before (results/reference/
#      scripts-predicted.json; benchmarks/gpu_scripts.py: scripts.json, records in
#      results/). About 2 minutes; `install,speed,scripts` fits in --minutes 9.
#   Last, every record in one report (report.md) and a line per record (records.txt).
#
# OUTDIR gets each step's output (<step>.txt), steps.txt (each step's exit code and
# time), results/ (the records), and the files a reference result keeps: nvidia-smi.txt,
# nvidia-smi-q.txt, command.txt, probe-facts.json, gate-checks.json, prediction.json,
# device-ceilings.json, suite.txt, report.md. --archive FILE packs OUTDIR into FILE after
# every step, so a run cut short still leaves what it did. No step stops the others;
# each has its own time limit, within --minutes (default 7.5) in all. --only runs some
# of them (comma-separated: install, gate, predict, run, suite, lightning, report, speed,
# scripts);
# the card's nvidia-smi is always saved.
#
# Without a GPU every step runs in its CPU form (tiny sizes, gloo): a check of this
# script and of the plumbing, not a figure.
set -uo pipefail

usage="usage: bash benchmarks/gpu_check.sh OUTDIR [--wheels DIR] [--archive FILE] [--minutes M] [--only STEPS] [--nanogpt DIR] [--examples DIR]"
all_steps=install,gate,predict,run,suite,lightning,report,speed,scripts
out=${1:?$usage}
shift
wheels="" archive="" minutes=7.5 only=${all_steps%,speed,scripts} nanogpt="" examples=""
while [ $# -gt 0 ]; do
    case "$1" in
        --wheels) wheels=$(cd "${2:?$usage}" && pwd) || exit 2; shift 2 ;;
        --archive) archive=${2:?$usage}; shift 2 ;;
        --minutes) minutes=${2:?$usage}; shift 2 ;;
        --only) only=${2:?$usage}; shift 2 ;;
        --nanogpt) nanogpt=$(cd "${2:?$usage}" && pwd) || exit 2; shift 2 ;;
        --examples) examples=$(cd "${2:?$usage}" && pwd) || exit 2; shift 2 ;;
        *) echo "$usage" >&2; exit 2 ;;
    esac
done
for s in ${only//,/ }; do
    [[ ",$all_steps," == *",$s,"* ]] || { echo "--only: '$s' is not one of $all_steps" >&2; exit 2; }
done
wanted() { [[ ",$only," == *",$1,"* ]]; }
python=${PYTHON:-python3}
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out" && out=$(cd "$out" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/gpubench-gpu-check.XXXXXX")
trap 'rm -rf "$work"' EXIT
deadline=$(( SECONDS + $(awk -v m="$minutes" 'BEGIN { print int(m * 60) }') ))
results="$out/results"
mkdir -p "$results"
echo "bash benchmarks/gpu_check.sh $out${wheels:+ --wheels $wheels}${archive:+ --archive $archive} --minutes $minutes --only $only${nanogpt:+ --nanogpt $nanogpt}${examples:+ --examples $examples}" \
    > "$out/command.txt"
: > "$out/steps.txt"

# gpubench's own state (ledger, config) and the runs' working folders stay in $work.
export GPUBENCH_CONFIG_DIR="$work/config" GPUBENCH_STATE_DIR="$work/state" PYTHONUNBUFFERED=1
export COLUMNS=${COLUMNS:-150}

pack() {
    [ -n "$archive" ] && tar czf "$archive.part" -C "$out" . 2>/dev/null && mv "$archive.part" "$archive"
    return 0
}

# step NAME LIMIT_S COMMAND...: run it with at most LIMIT_S seconds (less if the whole
# check's time is running out), output to the terminal and to NAME.txt.
step() {
    local name=$1 limit=$2 left rc started=$SECONDS
    shift 2
    wanted "${name%%-*}" || return 0
    left=$(( deadline - SECONDS ))
    [ "$left" -lt "$limit" ] && limit=$left
    if [ "$limit" -lt 5 ]; then
        echo "$name: skipped (no time left)" | tee -a "$out/steps.txt"
        return 0
    fi
    echo "=== $name (at most ${limit}s) ==="
    timeout -k 5 "$limit" "$@" 2>&1 | tee "$out/$name.txt"
    rc=${PIPESTATUS[0]}
    echo "$name: rc=$rc in $(( SECONDS - started ))s$([ $rc -eq 124 ] && echo ' (time limit)')" \
        | tee -a "$out/steps.txt"
    pack
    return 0
}

# -- 1. the card, and the gate against it ---------------------------------------------
{ nvidia-smi 2>&1 || echo "nvidia-smi: not available"; } > "$out/nvidia-smi.txt"
{ nvidia-smi -q 2>&1 || echo "nvidia-smi: not available"; } > "$out/nvidia-smi-q.txt"
head -20 "$out/nvidia-smi.txt"

# -- 2. gpubench from this checkout, offline -------------------------------------------
site="$work/site"
install_gpubench() {
    set -e
    if [ -n "$wheels" ]; then
        "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
            --target "$site" "$wheels"/*.whl
    fi
    # a copy, so that the build leaves the checkout as it was
    mkdir -p "$work/src"
    cp -r "$root/pyproject.toml" "$root/README.md" "$root/gpubench" "$root/providers" \
        "$root/workloads" "$work/src/"
    # --upgrade: the wheels' own scripts already made $site/bin, which pip --target
    # otherwise leaves as it is, without gpubench's
    if ! "$python" -m pip install -q --no-index --no-deps --no-build-isolation --no-compile \
            --no-cache-dir --upgrade --target "$site" "$work/src"; then
        echo "pip could not build gpubench here: laid out by copying instead"
        cp -r "$work/src/gpubench" "$site/gpubench"
        cp -r "$work/src/providers" "$site/gpubench/providers"
        cp -r "$work/src/workloads" "$site/gpubench/workloads"
        mkdir -p "$site/bin"
        printf '#!/bin/sh\nexec %s -m gpubench "$@"\n' "$python" > "$site/bin/gpubench"
        chmod +x "$site/bin/gpubench"
    fi
    PYTHONPATH="$site" "$site/bin/gpubench" --version
}
export python wheels work root site
export -f install_gpubench
step install 90 bash -c install_gpubench
export PYTHONPATH="$site" PATH="$site/bin:$PATH"

step gate 150 "$python" "$root/benchmarks/gpu_check_gate.py" --out "$out"

# -- 3. the prediction, before any measurement -----------------------------------------
read -r gpu_name memory_gb < <("$python" - <<'EOF'
import torch
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    print(p.name.replace(" ", "_"), round(p.total_memory / 1e9, 1))
else:
    print("cpu", 0)
EOF
)
gpu_name=${gpu_name//_/ }
step predict 60 "$python" "$root/benchmarks/gpu_check_predict.py" --gpu "$gpu_name" \
    ${memory_gb:+--memory-gb "$memory_gb"} --out "$out"

# -- 2 (cont.). the CLI end to end --------------------------------------------------------
# one epoch on a GPU; on a CPU a few steps, enough to go through every stage
mnist_args=()
[ "$gpu_name" = cpu ] && mnist_args=(-- --steps 30)
mkdir -p "$work/run"
(cd "$work/run" && step run-mnist 150 gpubench run mnist-ddp --gpus 1 --repeat 1 --results "$results" \
    --quiet "${mnist_args[@]}")
step run-report 40 gpubench report --results "$results" --workload mnist-ddp

# -- 4. the suite at real sizes (leaving time for the Lightning example) ---------------
suite_limit=$(( deadline - SECONDS - 75 ))
step suite "$suite_limit" "$python" "$root/benchmarks/workload_suite.py" --results "$results" --timeout 150
[ -f "$results/device-ceilings.json" ] && cp "$results/device-ceilings.json" "$out/"

# -- 5. the manual's Lightning example (docs/running.md) ----------------------------
mkdir -p "$work/lightning"
"$python" "$root/benchmarks/gpu_scripts.py" lightning-example > "$work/lightning/lightning_example.py"
(cd "$work/lightning" && step lightning 120 gpubench run ./lightning_example.py --gpus 1 --repeat 1 \
    --results "$results" --quiet)

# -- 6. speed against nanoGPT, and around the run (only when asked for) -------------------
speed_limit=$(( deadline - SECONDS - 20 - $(wanted scripts && echo 150 || echo 0) ))
step speed "$speed_limit" "$python" "$root/benchmarks/gpu_speed.py" --out "$out" \
    ${nanogpt:+--nanogpt "$nanogpt"} --minutes "$(awk -v s="$speed_limit" 'BEGIN { print (s - 15) / 60 }')"
wanted speed && [ -f "$out/records.jsonl" ] && cp "$out/records.jsonl" "$results/speed.jsonl"

# -- 7. users' scripts against their predictions (only when asked for) --------------------
scripts_limit=$(( deadline - SECONDS - 20 ))
step scripts "$scripts_limit" "$python" "$root/benchmarks/gpu_scripts.py" measure --out "$out" \
    --predicted "$root/results/reference/scripts-predicted.json" ${nanogpt:+--nanogpt "$nanogpt"} \
    ${examples:+--examples "$examples"} --minutes "$(awk -v s="$scripts_limit" 'BEGIN { print (s - 10) / 60 }')"
wanted scripts && [ -f "$out/scripts-records.jsonl" ] && cp "$out/scripts-records.jsonl" "$results/scripts.jsonl"

# -- every record, in one report ---------------------------------------------------------
step report 40 gpubench report --results "$results" --format markdown
cp "$out/report.txt" "$out/report.md" 2>/dev/null
"$python" - "$results" > "$out/records.txt" <<'EOF'
import json, pathlib, sys
for path in sorted(pathlib.Path(sys.argv[1]).glob("*.jsonl")):
    for line in path.read_text().splitlines():
        r = json.loads(line)
        mem = r.get("peak_memory_bytes") or r.get("gpu_mem_used_bytes_peak")
        print(f"{r.get('workload', '?'):<22} {r.get('status', '?'):<6} {r.get('gpu_count')}x "
              f"{r.get('gpu_name') or r.get('device_name')} {r.get('precision', '-'):<5} "
              f"{r.get('throughput') or 0:,.1f} {r.get('throughput_unit', '')}; "
              f"sampling={r.get('gpu_sampling')} util={r.get('gpu_util_pct_mean')} "
              f"power={r.get('gpu_power_w_mean')} peak_mem={mem} "
              f"predicted={r.get('predicted_throughput')} ({r.get('predicted_basis')})"
              + (f"; error: {r.get('error')}" if r.get("status") != "ok" else ""))
EOF
cat "$out/records.txt"
echo "=== steps ==="
cat "$out/steps.txt"
pack
