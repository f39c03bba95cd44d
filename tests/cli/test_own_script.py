"""`gpubench run ./my_train.py`: a user's own torchrun script, unchanged, is swept and
timed like a suite workload. It is never handed a flag it does not know; it may
report its own throughput through $GPUBENCH_RECORD_FILE, or leave the timing to
gpubench (the whole run's wall time). The plain script here trains under DDP on gloo
and the reporting one under Accelerate, so that their runs also show what the probe
says of such scripts (the other scripts it judges: tests/cli/test_own_script_probe.py)."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.helpers import JOIN, LEAVE, run_gpubench

pytestmark = pytest.mark.slow

# argparse refuses unknown flags, as most training scripts do; each script's processes
# form one process group, as a training script's do; PLAIN (JOIN, LEAVE) trains under
# DDP on gloo (the DDP tutorial's loop), then does some work to time
PLAIN = JOIN + """\
import argparse, os, time
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
p = argparse.ArgumentParser()
p.add_argument("--work", type=float, default=0.2)
a = p.parse_args()
model = DDP(nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(5):
    loss = model(torch.randn(16, 8)).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
time.sleep(a.work / int(os.environ["WORLD_SIZE"]))
print("rank", os.environ["RANK"], "done", flush=True)
""" + LEAVE

# Accelerate's Accelerator() forms the process group itself (gloo on CPUs under torchrun,
# Accelerate 1.x); the main process reports the throughput
REPORTING = """\
import json, os
import torch
from torch import nn
from accelerate import Accelerator
accelerator = Accelerator()
model = nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
model, opt = accelerator.prepare(model, opt)
for _ in range(3):
    loss = model(torch.randn(16, 8)).pow(2).mean()
    opt.zero_grad(); accelerator.backward(loss); opt.step()
world = int(os.environ["WORLD_SIZE"])
if accelerator.is_main_process:
    with open(os.environ["GPUBENCH_RECORD_FILE"], "w") as f:
        json.dump({"throughput": 1000.0 * world, "throughput_unit": "tokens/s",
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


# One count each where what is timed is the subject (two processes: the whole of a
# torchrun); both counts where the sweep must go on past the first.
def test_a_plain_ddp_script_on_gloo_is_a_measurement_timed_as_a_whole(tmp_path):
    # one run serves both: a script that reports nothing is timed as a whole, and DDP on
    # gloo is a measurement whose record says what its processes formed (the probe)
    proc, records = _run(tmp_path, PLAIN, "--", "--work", "1.0", gpus="2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [(r["gpu_count"], r["status"], r["timing"], r["throughput_unit"]) for r in records] == [
        (2, "ok", "whole process", "runs/s")]
    assert [(r["status"], r["process_group"], r["wrapped_in"]) for r in records] == [
        ("ok", "gloo x 2", "DDP")]
    for r in records:
        assert r["throughput"] == 1.0 / r["wall_seconds"]
        assert r["wall_seconds"] == r["process_seconds"] and r["precision"] == "-"
        assert "--record-file" not in r["launch_command"]
    report = run_gpubench("report", "--results", str(tmp_path / "results"), "--format", "markdown",
                          timeout=60)
    header = report.stdout.splitlines()[2]
    assert [c.strip() for c in header.strip("|").split("|")][4:11] == [
        "runs/s", "speedup", "efficiency", "$/h", "s/run", "$/run", "runs/$"]


def test_an_accelerate_script_that_reports_its_own_throughput_is_seen_for_what_it_did(tmp_path):
    # one run serves both: the figures the script reports are the record's, and Accelerate
    # 1.x forms a gloo group on CPUs by itself under torchrun, which the probe says (where
    # an Accelerator() runs as DistributedType.NO, tests/sweep/test_probe.py)
    proc, records = _run(tmp_path, REPORTING, gpus="2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [(r["throughput"], r["throughput_unit"], r["timing"], r["wall_seconds"]) for r in records] == [
        (2000.0, "tokens/s", "script", 2.0)]
    assert "tokens/s" in proc.stdout
    assert [(r["status"], r["frameworks"]) for r in records] == [("ok", "accelerate")]
    assert "gloo" in records[0]["process_group"] and records[0]["process_group"].endswith(" x 2")


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
