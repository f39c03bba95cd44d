"""The README's first command (scripts/demo.sh) end to end: real torchrun, real gloo
processes, synthetic MNIST at one and two processes. Each run's count and progress as
plain lines when its output is not a terminal, a record per count, and the speedup
table at the end; `gpubench report` of the same records. Its records also serve as
mnist-ddp's valid records at 1 and 2 processes (what every suite workload's record
carries: tests/workloads/test_workload_runs.py's check_record)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import run_gpubench
from tests.workloads.test_workload_runs import check_record

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_demo_sweeps_one_and_two_processes_records_each_and_ends_with_a_speedup_table(tmp_path):
    # a copy of the script beside this venv, so that its results land in tmp_path
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "demo.sh", tmp_path / "scripts" / "demo.sh")
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))
    # one run per count (the demo's own is three), and a few steps: what a count records
    # is the subject here, not its figures
    done = subprocess.run(["bash", str(tmp_path / "scripts" / "demo.sh"), "--no-setup", "--repeat", "1",
                           "--", "--steps", "3", "--warmup", "1"],
                          capture_output=True, text=True, timeout=280,
                          env={**os.environ, "COLUMNS": "200"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    assert "(run 1 of 2)" in out and "(run 2 of 2)" in out
    # the output is streamed with the GPU count in front, and ends with the table
    assert "[1 gpu] mnist-ddp: world 1" in out and "[2 gpus] mnist-ddp: world 2" in out
    assert "speedup" in out and "mnist-ddp" in out
    assert "GPUBENCH_PROGRESS" not in out

    results = tmp_path / "results"
    files = list(results.glob("*.jsonl"))
    assert len(files) == 1
    records = [json.loads(line) for line in files[0].read_text().splitlines()]
    assert [r["gpu_count"] for r in records] == [1, 2]   # a CPU machine: 1 and 2 processes
    for r in records:
        check_record(r, "mnist-ddp", r["gpu_count"])
        assert r["status"] == "ok"
        assert r["provider"] == "local" and r["backend"] == "gloo"
        assert r["world_size"] == r["gpu_count"]
        assert r["steps"] == 3 and r["samples"] == 3 * 64 * r["gpu_count"]
        assert r["throughput"] > 0 and r["median_step_s"] > 0
        assert r["price_per_hour"] == 0.0 and r["cost"] == 0.0
        assert r["run_id"] == files[0].stem
        assert "--nproc_per_node=%d" % r["gpu_count"] in r["launch_command"]
        assert r["torch_version"].startswith("2.")

    report = run_gpubench("report", "--results", str(results), "--format", "json", timeout=240)
    assert report.returncode == 0, report.stderr
    rows = json.loads(report.stdout)
    assert [row["gpu_count"] for row in rows] == [1, 2]
    assert rows[0]["speedup"] == 1.0
    assert abs(rows[1]["speedup"] - records[1]["throughput"] / records[0]["throughput"]) < 1e-9
    assert rows[0]["cost_per_epoch"] == 0.0
