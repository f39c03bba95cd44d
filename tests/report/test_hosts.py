"""The report's sections about the machines: the spread across hosts of one GPU type
(throughput and cost per unit of work, min, median, max and max/min, with the host
ids) and what each machine cost, billed beside the estimate."""

from __future__ import annotations

import pytest

from gpubench.report.hosts import cost_rows, host_sections, spread_rows
from gpubench.report.normalise import records_frame
from gpubench.report.render import render_section


def rec(host: str | None, throughput: float, gpus: int = 1, workload: str = "mnist-ddp",
        instance: str | None = None, price: float = 3.6, **extra) -> dict:
    return {"schema_version": 1, "workload": workload, "provider": "vast", "gpu_name": "H100 SXM",
            "precision": "fp32", "gpu_count": gpus, "nodes": 1, "status": "ok",
            "throughput": throughput, "throughput_unit": "samples/s", "price_per_hour": price,
            "host_id": host, "instance_id": instance or f"i-{host}", "run_id": f"r-{host}",
            "time": "2026-01-31T12:00:00Z", **extra}


def test_three_hosts_of_one_type_give_their_spread_with_host_ids():
    records = [rec("20001", 100.0), rec("20002", 120.0), rec("20002", 140.0), rec("20003", 80.0),
               rec("20001", 400.0, gpus=4), rec("20003", 360.0, gpus=4),
               rec("20001", 50.0, workload="gpt-ddp")]          # one host only: no spread
    rows = spread_rows(records_frame(records))
    assert [(r["workload"], r["gpu_count"], r["hosts"]) for r in rows] == \
        [("mnist-ddp", 1, 3), ("mnist-ddp", 4, 2)]
    one = rows[0]
    assert (one["throughput_min"], one["throughput_median"], one["throughput_max"]) == (80.0, 100.0, 130.0)
    assert one["throughput_ratio"] == pytest.approx(130.0 / 80.0)
    # $3.60/h is $0.001/s: a million samples at 100/s cost $10
    assert (one["cost_min"], one["cost_median"], one["cost_max"]) == \
        pytest.approx((1e6 * 0.001 / 130.0, 10.0, 1e6 * 0.001 / 80.0))
    assert one["cost_ratio"] == pytest.approx(130.0 / 80.0)
    assert one["slowest_first"] == "20003, 20001, 20002"
    [section] = [s for s in host_sections(records) if "spread" in s.title]
    assert section.title == "mnist-ddp: spread across hosts"
    text = render_section(section, "table")
    assert "20003, 20001, 20002" in text and "samples/s min" in text and "max/min" in text


def test_without_a_host_id_the_instance_names_the_machine_and_failures_are_left_out():
    records = [rec(None, 100.0, instance="a"), rec(None, 110.0, instance="b"),
               {**rec("x", 1.0), "status": "failed", "throughput": None}]
    [row] = spread_rows(records_frame(records))
    assert row["hosts"] == 2 and row["slowest_first"] == "a, b"
    assert host_sections([rec("20001", 100.0)]) == []     # one host, no costs: nothing to show


def test_each_machine_shows_billed_beside_the_estimate():
    records = [rec("20001", 100.0, estimated_cost=0.52, billed_cost=0.47),
               rec("20001", 120.0, estimated_cost=0.52, billed_cost=0.47),
               rec("20002", 90.0, estimated_cost=0.61, billed_cost=None)]
    rows = cost_rows(records_frame(records))
    assert [(r["host"], r["records"], r["estimated_cost"], r["billed_cost"]) for r in rows] == \
        [("20001", 2, 0.52, 0.47), ("20002", 1, 0.61, None)]
    section = next(s for s in host_sections(records) if "cost" in s.title)
    text = render_section(section, "table")
    assert "estimated $" in text and "billed $" in text and "0.47" in text


def test_the_report_command_shows_the_spread_and_the_html_page_has_it(tmp_path, cli):
    import json

    pytest.importorskip("matplotlib")
    results = tmp_path / "results"
    results.mkdir()
    records = [rec("20001", 100.0, estimated_cost=0.5, billed_cost=0.45), rec("20002", 125.0)]
    (results / "r.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    page = tmp_path / "page.html"
    code, out, err = cli("report", "--results", str(results), "--html", str(page))
    assert code == 0, err
    assert "mnist-ddp: spread across hosts" in out and "20001, 20002" in out
    assert "what each machine cost" in out
    html = page.read_text()
    assert 'data-section="mnist-ddp: spread across hosts"' in html and "0.45" in html
    code, out, err = cli("report", "--results", str(results), "--format", "json")
    assert code == 0 and isinstance(json.loads(out), list)      # machine output stays parseable
