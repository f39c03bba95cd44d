"""`gpubench run` end to end: real torchrun, real gloo processes, synthetic MNIST. A
sweep at one and two processes, its records and its report: the README's demo, in
tests/cli/test_progress_demo.py."""

from __future__ import annotations

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
