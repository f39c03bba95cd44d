"""`gpubench run ./my_train.py`: a user's own torchrun script, unchanged, is swept and
measured like a suite workload. It is never handed a flag it does not know; the probe
times its training steps (samples/s summed over the processes), or it may report its
own throughput through $GPUBENCH_RECORD_FILE, which wins. The plain script here trains
under DDP on gloo and the reporting one under Accelerate (cpu=True), so that their runs
also show what the probe says of such scripts (the other scripts it judges:
tests/cli/test_own_script_probe.py)."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.helpers import JOIN, LEAVE, run_gpubench

pytestmark = pytest.mark.slow

# argparse refuses unknown flags, as most training scripts do; each script's processes
# form one process group, as a training script's do. PLAIN (JOIN, LEAVE) trains under
# DDP on gloo a fixed number of steps a process (Hugging Face's max_steps, torchtitan):
# each step's work a sleep, so that two processes do twice the work in the same time
# on any machine
PLAIN = JOIN + """\
import argparse, os, time
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=40)
a = p.parse_args()
model = DDP(nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(a.steps):
    loss = model(torch.randn(64, 8)).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
    time.sleep(0.03)
print("rank", os.environ["RANK"], "done", flush=True)
""" + LEAVE

# Accelerate's Accelerator(cpu=True) forms the process group itself (gloo on CPUs under
# torchrun) and wraps the model in DDP; the main process reports the throughput it
# computes from its own steps (batch x processes over the median step after 5)
REPORTING = """\
import json, os, statistics, time
import torch
from torch import nn
from accelerate import Accelerator
accelerator = Accelerator(cpu=True)
model = nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
model, opt = accelerator.prepare(model, opt)
ends = []
for _ in range(30):
    loss = model(torch.randn(16, 8)).pow(2).mean()
    opt.zero_grad(); accelerator.backward(loss); opt.step()
    time.sleep(0.02)
    ends.append(time.perf_counter())
world = int(os.environ["WORLD_SIZE"])
step = statistics.median(b - a for a, b in zip(ends[4:], ends[5:]))
if accelerator.is_main_process:
    with open(os.environ["GPUBENCH_RECORD_FILE"], "w") as f:
        json.dump({"throughput": 16 * world / step, "throughput_unit": "samples/s",
                   "wall_seconds": 2.0}, f)
"""


def _run(tmp_path, source: str, *args: str, gpus: str = "1,2") -> tuple[subprocess.CompletedProcess, list[dict]]:
    script = tmp_path / "my_train.py"
    script.write_text(source)
    results = tmp_path / "results"
    results.mkdir(exist_ok=True)
    proc = run_gpubench("run", str(script), "--gpus", gpus, "--repeat", "1", "--results", str(results), *args,
                        timeout=180)
    records = [json.loads(line) for f in results.glob("*.jsonl") for line in f.read_text().splitlines()]
    return proc, records


def test_a_fixed_steps_ddp_script_is_measured_by_its_steps_and_scales(tmp_path):
    # one run serves three: the probe times the training steps (not the start-up), so
    # a fixed number of steps a process shows two processes doing twice the work, DDP
    # on gloo is a measurement whose record says what its processes formed, and under
    # --trace every rank leaves a trace of 3 steps that its timing leaves out
    proc, records = _run(tmp_path, PLAIN, "--trace", gpus="1,2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    records = sorted(records, key=lambda r: r["gpu_count"])
    assert [(r["gpu_count"], r["status"], r["timing"], r["throughput_unit"]) for r in records] == [
        (1, "ok", "training steps", "samples/s"), (2, "ok", "training steps", "samples/s")]
    assert [(r["process_group"], r["wrapped_in"], r["global_batch"]) for r in records] == [
        ("gloo x 1", "DDP", 64), ("gloo x 2", "DDP", 128)]
    for r in records:
        # 40 steps: max(2, a tenth) left out as warm-up, and of the steps the trace touched (3 the
        # profiler's own, 4 to 6 recorded, 7 paid for writing the file) those after it: 5 to 7
        assert r["steps"] == 33 and r["warmup_steps"] == 4 and r["traced_steps"] == 3
        traces = sorted((tmp_path / "results" / r["trace_dir"]).glob("rank*.pt.trace.json.gz"))
        assert [p.name.split("-")[0] for p in traces] == [f"rank{i}" for i in range(r["gpu_count"])]
        assert r["throughput"] == pytest.approx(r["global_batch"] / r["median_step_s"], rel=0.1)
        assert r["p10_step_s"] <= r["median_step_s"] <= r["p90_step_s"]
        assert 0 < r["startup_s"] < r["wall_seconds"] == r["process_seconds"]
        assert r["precision"] == "-" and "--record-file" not in r["launch_command"]
    speedup = records[1]["throughput"] / records[0]["throughput"]
    assert 1.6 < speedup < 2.3, speedup   # about 2x, where whole-run timing said about 1
    report = run_gpubench("report", "--results", str(tmp_path / "results"), "--format", "markdown",
                          timeout=60)
    header = [c.strip() for c in report.stdout.splitlines()[2].strip("|").split("|")]
    assert header[4:7] == ["samples/s", "speedup", "efficiency"] and "runs/s" not in header


def test_an_accelerate_script_that_reports_its_own_throughput_is_seen_for_what_it_did(tmp_path):
    # one run serves three: the figure the script reports is the record's, Accelerator(cpu=True)
    # forms a gloo group and wraps the model in DDP (which the probe says), and the probe's
    # own figure from the steps, kept beside it, is within 10% of the script's
    proc, records = _run(tmp_path, REPORTING, gpus="2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (record,) = records
    assert (record["throughput_unit"], record["timing"], record["wall_seconds"]) == (
        "samples/s", "script", 2.0)
    assert "samples/s" in proc.stdout
    assert (record["status"], record["frameworks"], record["wrapped_in"]) == ("ok", "accelerate", "DDP")
    assert "gloo" in record["process_group"] and record["process_group"].endswith(" x 2")
    assert record["step_throughput"] == pytest.approx(record["throughput"], rel=0.1)
    assert record["global_batch"] == 32


def test_a_failing_script_is_recorded_as_failed(tmp_path):
    proc, records = _run(tmp_path, "raise SystemExit('no data at /data/imagenet')\n")
    assert proc.returncode == 1
    assert [r["status"] for r in records] == ["failed", "failed"]
    assert "no data at /data/imagenet" in records[0]["error"]


def test_workdir_is_where_local_runs_start(tmp_path):
    proj = tmp_path / "proj"
    (proj / "scripts").mkdir(parents=True)
    (proj / "config.txt").write_text("3\n")
    script = proj / "scripts" / "train.py"
    script.write_text("import os\nif os.environ['RANK'] == '0':\n"
                      "    n = int(open('config.txt').read())\n"
                      "    open(os.environ['GPUBENCH_RECORD_FILE'], 'w').write("
                      "'{\"throughput\": %d}' % n)\n")
    results = tmp_path / "results"
    results.mkdir()
    proc = run_gpubench("run", str(script), "--workdir", str(proj), "--gpus", "1", "--repeat", "1", "--results",
                        str(results), cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (record,) = [json.loads(line) for f in results.glob("*.jsonl") for line in f.read_text().splitlines()]
    assert (record["throughput"], record["throughput_unit"]) == (3, "samples/s")
