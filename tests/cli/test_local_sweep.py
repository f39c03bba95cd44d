"""`gpubench run` end to end: real torchrun, real gloo processes, synthetic MNIST."""

from __future__ import annotations

import json

import pytest

from tests.helpers import run_gpubench

pytestmark = pytest.mark.slow


def test_sweep_at_one_and_two_processes_records_and_reports(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    proc = run_gpubench("run", "mnist-ddp", "--gpus", "1,2", "--repeat", "1", "--results", str(results),
                        "--", "--steps", "3", "--warmup", "1", "--data", "synthetic", timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # the output is streamed with the GPU count in front, and ends with the table
    assert "[1 gpu] mnist-ddp: world 1" in proc.stdout
    assert "[2 gpus] mnist-ddp: world 2" in proc.stdout
    assert "speedup" in proc.stdout

    files = list(results.glob("*.jsonl"))
    assert len(files) == 1
    records = [json.loads(line) for line in files[0].read_text().splitlines()]
    assert [r["gpu_count"] for r in records] == [1, 2]
    for r in records:
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


def test_failed_run_is_recorded_and_exit_is_nonzero(tmp_path):
    results = tmp_path / "r"
    results.mkdir()
    proc = run_gpubench("run", "mnist-ddp", "--gpus", "1", "--repeat", "1", "--results", str(results),
                        "--", "--steps", "2", "--batch-size", "100000", timeout=240)
    assert proc.returncode == 1
    record = json.loads(next(results.glob("*.jsonl")).read_text())
    assert record["status"] == "failed"
    assert "batch size too large" in record["error"]
    assert "[1 gpu] failed: error: batch size too large" in proc.stdout
