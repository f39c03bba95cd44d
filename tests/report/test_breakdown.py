"""The step in parts in the report (issue 58): each row's breakdown (its record's
step_shares), and above one GPU the efficiency points lost against the 1-GPU row of the
same workload and machine, part by part, in the json rows (points_lost) and in a note
per count. Hand-made records: the arithmetic, not a run."""

from __future__ import annotations

import csv
import io
import json

import pytest

from gpubench.report import compute
from gpubench.report.render import render

from .helpers import rec

ONE = {"data": 0.05, "compute": 0.90, "exposed_comm": 0.0, "other": 0.05}
# 69% efficiency at 2 GPUs; against ONE: 24 points to the all-reduce, 5 to data, 2 to other
TWO = {"data": 0.05 + 0.69 * 0.05 + 0.0, "compute": 0.69 * 0.90, "exposed_comm": 0.24,
       "other": 0.02 + 0.69 * 0.05}


def records(**more) -> list[dict]:
    gpu = dict(device="cuda", **more)
    return [rec(1, 100.0, 3.6, step_shares=ONE, **gpu),
            rec(2, 138.0, 7.2, step_shares=TWO, **gpu),
            rec(4, 300.0, 14.4, **gpu)]  # an older record: no parts


def test_each_row_has_its_breakdown_and_the_lost_points_add_up_to_the_efficiency_lost():
    report = compute.build_report(records())
    rows = {r["gpu_count"]: r for r in json.loads(render(report, "json").text)}
    assert rows[1]["breakdown"] == ONE and rows[1]["points_lost"] is None
    assert sum(rows[2]["breakdown"].values()) == pytest.approx(1.0, abs=1e-3)
    lost = rows[2]["points_lost"]
    assert lost == pytest.approx({"data": 5.0, "compute": 0.0, "exposed_comm": 24.0, "other": 2.0},
                                 abs=0.01)
    assert sum(lost.values()) == pytest.approx(100 * (1 - rows[2]["efficiency"]), abs=0.02)
    assert rows[4]["breakdown"] is None and rows[4]["points_lost"] is None


def test_a_note_per_count_names_the_points_lost_and_where():
    report = compute.build_report(records())
    lines = [n for n in report.notes if "points against" in n]
    assert lines == ["w at 2 GPUs on p NVIDIA G100: efficiency 69%, -31 points against 1 GPU: "
                     "exposed all-reduce 24, data 5, other 2"]
    text = render(report, "table").text
    assert "-31 points against 1 GPU: exposed all-reduce 24, data 5, other 2" in text.replace("\n      ", " ")


def test_a_part_that_scaled_better_than_ideal_is_a_negative_loss_and_a_cpu_counts_processes():
    one = {"data": 0.30, "compute": 0.70, "exposed_comm": 0.0, "other": 0.0}
    two = {"data": 0.10, "compute": 0.70, "exposed_comm": 0.20, "other": 0.0}
    cpu = dict(device="cpu", gpu_name="cpu", provider="local")
    report = compute.build_report([rec(1, 10.0, 0.0, step_shares=one, **cpu),
                                   rec(2, 18.0, 0.0, step_shares=two, **cpu)])
    # efficiency 0.9: exposed 20 - 0, compute 70 - 63 = 7, data 10 - 27 = -17
    assert [n for n in report.notes if "points against" in n] == [
        "w at 2 processes on local cpu: efficiency 90%, -10 points against 1 process: "
        "exposed all-reduce 20, compute 7, data -17"]


def test_without_a_one_gpu_row_with_parts_nothing_is_said():
    report = compute.build_report([rec(1, 100.0, 3.6), rec(2, 138.0, 7.2, step_shares=TWO)])
    assert not [n for n in report.notes if "points against" in n]
    rows = {r["gpu_count"]: r for r in json.loads(render(report, "json").text)}
    assert rows[2]["breakdown"] is not None and rows[2]["points_lost"] is None


def test_csv_carries_the_mappings_as_json():
    table = list(csv.DictReader(io.StringIO(render(compute.build_report(records()), "csv").text)))
    two = next(r for r in table if r["gpu_count"] == "2")
    assert json.loads(two["points_lost"])["exposed_comm"] == pytest.approx(24.0, abs=0.01)
    assert json.loads(two["breakdown"]) == pytest.approx(TWO, abs=1e-4)
    assert next(r for r in table if r["gpu_count"] == "4")["breakdown"] == ""
