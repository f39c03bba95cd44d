"""Whether a bench ends with exit 1: any failed run among its sweeps."""

from __future__ import annotations

from gpubench.bench.request import BenchResult


def test_all_ok_is_false_once_any_run_failed():
    assert BenchResult().all_ok
    assert BenchResult(records=[{"status": "ok"}, {"status": "ok"}]).all_ok
    assert not BenchResult(records=[{"status": "ok"}, {"status": "failed", "error": "x"}]).all_ok
