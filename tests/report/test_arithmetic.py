"""Speedup, efficiency and cost from hand-made records."""

from __future__ import annotations

import pytest

from gpubench.report.compute import build_report, report_rows


def rec(gpus, throughput, price=None, time="2026-01-01T00:00:00Z", **kw):
    base = {"workload": "mnist-ddp", "provider": "vast", "instance_type": "4x RTX 4090",
            "gpu_name": "RTX 4090", "precision": "fp32", "gpu_count": gpus, "status": "ok",
            "throughput": throughput, "price_per_hour": price, "epoch_samples": 60000,
            "time": time, "throughput_unit": "images/s"}
    base.update(kw)
    return base


def test_speedup_efficiency_and_cost_per_epoch():
    rows = report_rows(build_report([rec(1, 1000.0, 0.4), rec(2, 1800.0, 0.8), rec(4, 3000.0, 1.6)]))
    by_gpus = {r["gpu_count"]: r for r in rows}
    assert by_gpus[1]["speedup"] == 1.0 and by_gpus[1]["efficiency"] == 1.0
    assert by_gpus[2]["speedup"] == pytest.approx(1.8)
    assert by_gpus[4]["efficiency"] == pytest.approx(0.75)
    # 60000 images at 1000/s = 60 s at $0.40/h
    assert by_gpus[1]["epoch_seconds"] == pytest.approx(60.0)
    assert by_gpus[1]["cost_per_epoch"] == pytest.approx(0.4 * 60 / 3600)
    assert by_gpus[4]["cost_per_epoch"] == pytest.approx(1.6 * 20 / 3600)
    assert by_gpus[2]["cost_per_million_samples"] == pytest.approx(0.8 / 3600 * 1e6 / 1800)
    assert by_gpus[2]["samples_per_dollar"] == pytest.approx(1800 * 3600 / 0.8)


def test_groups_do_not_mix_and_missing_baseline_gives_no_speedup():
    records = [rec(1, 1000.0, 0.4), rec(2, 1900.0, 0.8),
               rec(2, 5000.0, 4.0, provider="lambda", gpu_name="H100 PCIe", instance_type="gpu_2x_h100_pcie")]
    rows = report_rows(build_report(records))
    lam = [r for r in rows if r["provider"] == "lambda"][0]
    assert lam["speedup"] is None and lam["efficiency"] is None
    vast2 = [r for r in rows if r["provider"] == "vast" and r["gpu_count"] == 2][0]
    assert vast2["speedup"] == pytest.approx(1.9)


def test_latest_record_of_a_configuration_wins_and_failures_stay_out():
    records = [rec(1, 900.0, 0.4, time="2026-01-01T00:00:00Z"),
               rec(1, 1000.0, 0.4, time="2026-01-02T00:00:00Z"),
               rec(2, 1500.0, 0.8),
               rec(2, None, 0.8, status="failed", error="CUDA out of memory")]
    report = build_report(records)
    rows = report_rows(report)
    assert [r["throughput"] for r in rows] == [1000.0, 1500.0]
    assert rows[1]["speedup"] == pytest.approx(1.5)
    assert len(report.failed) == 1
    assert any("latest" in n for n in report.notes)


def test_free_machine_costs_zero_and_unknown_price_stays_unknown():
    rows = report_rows(build_report([rec(1, 1000.0, 0.0), rec(1, 1000.0, None, provider="ssh")]))
    free = [r for r in rows if r["provider"] == "vast"][0]
    unknown = [r for r in rows if r["provider"] == "ssh"][0]
    assert free["cost_per_epoch"] == 0.0 and free["samples_per_dollar"] is None
    assert unknown["cost_per_epoch"] is None
