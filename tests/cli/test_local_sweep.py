"""`gpubench run` end to end: real torchrun, real gloo processes, synthetic MNIST. A
sweep at one and two processes, its records and its report: the README's demo, in
tests/cli/test_progress_demo.py; the same sweep traced (--trace) here."""

from __future__ import annotations

import gzip
import json

import pytest

from tests.helpers import run_gpubench

pytestmark = pytest.mark.slow


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


def test_run_trace_leaves_one_gzipped_trace_per_rank_under_the_results_and_summarises_it(tmp_path):
    # one run per count, a few steps: every rank of each count traces 2 steps after the
    # timed window, into <results>/<run id>/traces/<count>/, and the sweep ends with a table
    results = tmp_path / "r"
    proc = run_gpubench("run", "mnist-ddp", "--gpus", "1,2", "--repeat", "1", "--trace-steps", "2",
                        "--results", str(results), "--", "--steps", "3", "--warmup", "1",
                        env={"COLUMNS": "200"}, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    records = sorted((json.loads(line) for line in next(results.glob("*.jsonl")).read_text().splitlines()),
                     key=lambda r: r["gpu_count"])
    for record in records:
        assert record["status"] == "ok" and record["steps"] == 3 and record["traced_steps"] == 2
        folder = results / record["trace_dir"]
        assert record["trace_dir"] == f"{record['run_id']}/traces/{record['gpu_count']}gpu" + \
            ("s" if record["gpu_count"] > 1 else "")
        files = sorted(folder.glob("rank*.pt.trace.json.gz"))
        assert len(files) == record["trace_files"] == record["gpu_count"]   # one per rank
        for rank, path in enumerate(files):
            trace = json.loads(gzip.decompress(path.read_bytes()))
            assert trace["distributedInfo"]["rank"] == rank      # started after the process group
            steps = [e for e in trace["traceEvents"] if e.get("name", "").startswith("ProfilerStep#")]
            assert len(steps) == 2 and sum(e.get("ph") == "X" for e in trace["traceEvents"]) > 50
    out = proc.stdout
    assert "USDT:" not in out                       # the profiler's own lines are not the run's
    table = out[out.index("traced steps per rank"):]
    assert "compute ms" in table and "comm ms" in table and "idle ms" in table
    assert "2 gpus" in table and "from the CPU ops" in table
    assert "ui.perfetto.dev" in table and "chrome://tracing" in table
    assert str(results / records[0]["run_id"] / "traces") in table
