"""The arithmetic of a report, on hand-made records."""

from __future__ import annotations

import math

import pytest

from gpubench.errors import UsageError
from gpubench.report.compare import compare
from gpubench.report.compute import build_report, parse_baseline, pareto_front
from gpubench.report.normalise import records_frame
from gpubench.report.selectors import parse_selector
from gpubench.report.tables import workload_sections

from .helpers import rec, scaling_records


def row(report, provider="p", gpus=1, workload="w"):
    rows = report.rows
    found = rows[(rows.provider == provider) & (rows.gpu_count == gpus) & (rows.workload == workload)]
    assert len(found) == 1, found
    return found.iloc[0]


def test_speedup_efficiency_and_costs():
    report = build_report(scaling_records())
    one, two, four = row(report, gpus=1), row(report, gpus=2), row(report, gpus=4)
    assert one.speedup == 1.0 and one.efficiency == 1.0
    assert two.speedup == pytest.approx(1.8) and two.efficiency == pytest.approx(0.9)
    assert four.speedup == pytest.approx(3.2) and four.efficiency == pytest.approx(0.8)
    # 3.6 $/h = 0.001 $/s; an epoch of 1000 samples at 100/s is 10 s
    assert one.epoch_seconds == pytest.approx(10.0)
    assert one.cost_per_epoch == pytest.approx(0.01)
    assert one.cost_per_million_samples == pytest.approx(10.0)
    assert one.samples_per_dollar == pytest.approx(100_000)
    # 2 GPUs: 0.002 $/s, 1000/180 s
    assert two.cost_per_epoch == pytest.approx(0.002 * 1000 / 180)
    assert two.samples_per_dollar == pytest.approx(90_000)
    assert four.cost_per_million_samples == pytest.approx(12.5)


def test_unknown_price_is_unknown_cost_and_zero_price_is_free():
    report = build_report(scaling_records())
    q = row(report, provider="q")
    assert q.speedup == 1.0
    assert math.isnan(q.cost_per_epoch) and math.isnan(q.cost_per_million_samples)
    assert math.isnan(q.samples_per_dollar)
    local = row(report, provider="local")
    assert local.cost_per_epoch == 0.0 and local.cost_per_million_samples == 0.0
    assert math.isinf(local.samples_per_dollar)
    assert any("no price" in n for n in report.notes)


def test_cheapest_fastest_and_pareto_marks():
    report = build_report(scaling_records())
    assert list(report.rows[report.rows.fastest].provider) == ["p"]
    assert row(report, gpus=4).fastest
    # a free machine is free, not cheapest: the cheapest is what costs least to rent
    assert not row(report, provider="local").cheapest
    assert list(report.rows[report.rows.cheapest].gpu_count) == [1] and row(report, gpus=1).cheapest
    without_local = build_report([r for r in scaling_records() if r["provider"] != "local"])
    assert row(without_local, gpus=1).cheapest
    # p at 1, 2, 4 GPUs: each is faster and dearer than the last, so all are on the front;
    # q has no price, so it is on no front
    assert list(without_local.rows.pareto) == [True, True, True, False]


def test_pareto_front():
    seconds = [1, 2, 3, 4, 2, 5, 1]
    dollars = [10, 5, 7, 1, 5, float("nan"), 12]
    assert list(pareto_front(seconds, dollars)) == [True, True, False, True, False, False, False]
    assert list(pareto_front([], [])) == []


def test_failed_runs_are_listed_not_counted():
    records = scaling_records() + [rec(1, None, 3.6, status="failed", error="OOM",
                                       time="2026-01-12T00:00:00Z")]
    report = build_report(records)
    assert 8 not in set(report.rows.gpu_count)
    assert row(report, gpus=2).speedup == pytest.approx(1.8)  # the ok 1-GPU record is the baseline
    failed = report.failed
    assert set(failed.error) == {"NCCL timeout", "OOM"}
    assert set(failed.status) == {"failed"}


def test_repeated_records_latest_wins_with_a_note():
    records = scaling_records() + [rec(1, 90.0, 3.6, time="2026-01-09T00:00:00Z"),
                                   rec(1, 200.0, 3.6, time="2026-01-20T00:00:00Z")]
    report = build_report(records)
    assert row(report, gpus=1).throughput == 200.0
    assert row(report, gpus=2).speedup == pytest.approx(0.9)
    assert any("2 repeated record(s)" in n for n in report.notes)


def test_older_schema_records_are_normalised():
    old = {"workload": "w", "provider": "p", "instance_type": "p.8x", "gpu_name": "NVIDIA G100",
           "gpus": 2, "samples_per_s": 180.0, "price": 7.2, "timestamp": 1768003200.0,
           "epoch_samples": 1000}
    frame = records_frame([rec(1, 100.0, 3.6), old])
    assert frame.loc[1, "gpu_count"] == 2 and frame.loc[1, "throughput"] == 180.0
    assert frame.loc[1, "status"] == "ok" and frame.loc[1, "precision"] == "fp32"
    assert frame.loc[1, "time"] == "2026-01-10T00:00:00Z"
    report = build_report(frame)
    assert row(report, gpus=2).speedup == pytest.approx(1.8)
    assert row(report, gpus=2).cost_per_million_samples == pytest.approx(0.002e6 / 180)
    # an old record that measured nothing is a failure
    assert records_frame([{"workload": "w", "gpus": 1}]).loc[0, "status"] == "failed"


def test_old_time_forms_are_normalised():
    from gpubench.report.normalise import records_frame

    frame = records_frame([{"workload": "w", "timestamp": "2026-01-31 14:00:00+02:00"},
                           {"workload": "w", "time": "2026-01-31T12:00:00"}])
    assert list(frame["time"]) == ["2026-01-31T12:00:00Z"] * 2


def test_baseline_count_min_and_machine():
    frame = records_frame(scaling_records())
    two = build_report(frame, parse_baseline("2", frame))
    assert row(two, gpus=4).speedup == pytest.approx(320 / 180)
    assert row(two, gpus=4).efficiency == pytest.approx(320 / 180 / 2)
    assert row(two, gpus=1).speedup == pytest.approx(100 / 180)
    assert row(two, gpus=1).efficiency == pytest.approx(100 / 180 * 2)
    assert math.isnan(row(two, provider="q").speedup)  # q never ran on 2 GPUs
    assert any("no baseline record" in n for n in two.notes)
    smallest = build_report(frame.iloc[1:], parse_baseline("min", frame))
    assert row(smallest, gpus=2).speedup == 1.0
    against_q = build_report(frame, parse_baseline("q", frame))
    assert row(against_q, gpus=1).speedup == pytest.approx(100 / 150)
    assert row(against_q, gpus=4).efficiency == pytest.approx(320 / 150 / 4)
    with pytest.raises(UsageError, match="--baseline"):
        parse_baseline("nowhere", frame)
    with pytest.raises(UsageError, match="several machines"):
        build_report(frame, parse_baseline("G100", frame))  # p and q both have it


def test_compare_providers_and_gpus():
    report = build_report(scaling_records())
    p, q = (parse_selector(t, report.rows, "--compare") for t in ("p", "q"))
    table = compare(report.rows, p, q).rows
    assert list(table.gpu_count) == [1, 2, 4]
    first = table.iloc[0]
    assert first.a_throughput == 100.0 and first.b_throughput == 150.0
    assert first.throughput_ratio == pytest.approx(1.5)
    assert math.isnan(table.iloc[1].b_throughput)
    g, cpu = (parse_selector(t, report.rows, "--compare") for t in ("g100", "cpu"))
    assert g.kind == "gpu" and g.gpu_names == ("NVIDIA G100",)
    by_gpu = compare(report.rows, g, cpu).rows
    assert by_gpu.iloc[0].a_provider == "p"  # of p and q the one with a known, lower cost
    with pytest.raises(UsageError, match="neither a provider nor a GPU"):
        parse_selector("tpu", report.rows, "--compare")


def test_workload_arguments_keep_configurations_apart():
    records = scaling_records() + [rec(1, 400.0, 3.6, workload_args=["--batch-size", "256"]),
                                   rec(2, 720.0, 7.2, workload_args=["--batch-size", "256"])]
    report = build_report(records)
    big = report.rows[report.rows.workload_args == "--batch-size 256"]
    assert list(big.speedup) == [1.0, pytest.approx(1.8)]
    plain = report.rows[(report.rows.workload_args == "") & (report.rows.provider == "p")]
    assert list(plain.throughput) == [100.0, 180.0, 320.0]
    assert not any("repeated" in n for n in report.notes)
    tables = workload_sections(report)
    assert tables[0].columns[0] == ("workload_args", "args")
