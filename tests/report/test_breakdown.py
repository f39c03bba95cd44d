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


def ranks(*own_and_wait) -> list[dict]:
    """step_parts_by_rank: each rank's (compute, exposed all-reduce) in seconds."""
    return [{"rank": i, "data": 0.001, "compute": own - 0.001, "exposed_comm": wait, "other": 0.0}
            for i, (own, wait) in enumerate(own_and_wait)]


def slow_records(by_rank, **more) -> list[dict]:
    gpu = dict(device="cuda", host="gpu-box", **more)
    return [rec(1, 100.0, 3.6, step_shares=ONE, **gpu),
            rec(len(by_rank), 138.0, 7.2, step_shares=TWO, step_parts_by_rank=by_rank, **gpu)]


def test_the_rank_the_others_waited_for_is_named_in_a_line_and_in_json():
    report = compute.build_report(slow_records(ranks((0.022, 0.010), (0.031, 0.001))))
    assert [n for n in report.notes if "slowest" in n] == [
        "w at 2 GPUs on p NVIDIA G100: rank 1 on gpu-box was the slowest: its own work (data and "
        "compute) 31.0 ms a step against 22.0 ms for the others; the others waited for it (9.0 ms "
        "more of their step in the all-reduce and after it)"]
    rows = {r["gpu_count"]: r for r in json.loads(render(report, "json").text)}
    assert rows[2]["slow_rank"] == {"rank": 1, "node": "gpu-box", "own_s": 0.031, "others_s": 0.022,
                                    "wait_s": pytest.approx(0.009)}
    assert rows[1]["slow_rank"] is None


@pytest.mark.parametrize("by_rank", [
    ranks((0.022, 0.010), (0.024, 0.008)),               # 9% longer: within the margin
    ranks((0.022, 0.001), (0.031, 0.001)),               # longer, but nobody waited for it
    ranks((0.022, 0.010)),                               # one rank
    "rank 1", [{"rank": "x"}, None, {"rank": 1, "compute": "slow"}],   # not parts
])
def test_no_rank_is_named_within_the_margin_without_a_wait_or_without_parts(by_rank):
    report = compute.build_report(slow_records(by_rank))
    assert not [n for n in report.notes if "slowest" in n]
    assert all(r["slow_rank"] is None for r in json.loads(render(report, "json").text))


def test_on_two_nodes_the_slow_rank_is_named_by_its_node():
    by_rank = ranks((0.022, 0.010), (0.022, 0.010), (0.022, 0.010), (0.031, 0.001))
    report = compute.build_report(slow_records(by_rank, nodes=2, rank0_node=1,
                                               node_addresses=["10.0.0.1", "10.0.0.2"]))
    row = next(r for r in json.loads(render(report, "json").text) if r["gpu_count"] == 4)
    assert row["slow_rank"]["rank"] == 3 and row["slow_rank"]["node"] == "node 0 (10.0.0.1)"


def test_the_lost_points_line_sets_the_exposed_all_reduce_beside_the_models():
    expected = {"data": 0.0, "compute": 0.91, "exposed_comm": 0.09, "other": 0.0}
    report = compute.build_report(records(predicted_basis="datasheet")[:1] + [
        rec(2, 138.0, 7.2, step_shares=TWO, predicted_step_shares=expected, device="cuda",
            predicted_throughput=180.0, predicted_basis="datasheet")])
    line = next(n for n in report.notes if "points against" in n)
    assert line.endswith("other 2; exposed all-reduce 24% of the step, the model expected 9%: the "
                         "link is slower than the model's datasheet figure for it, or less of the "
                         "all-reduce hid behind the backward")
    rows = {r["gpu_count"]: r for r in json.loads(render(report, "json").text)}
    assert rows[2]["predicted_breakdown"] == expected and rows[1]["predicted_breakdown"] is None


def test_an_exposed_all_reduce_near_the_models_is_said_as_it_is():
    from gpubench.report.expected_parts import expected_words

    near = expected_words({"exposed_comm": 0.24}, {"exposed_comm": 0.21})
    assert near == "exposed all-reduce 24% of the step, the model expected 21%"
    less = expected_words({"exposed_comm": 0.02}, {"exposed_comm": 0.20}, "measured")
    assert less.endswith("the link is faster than the model's measured figure for it, or more of "
                         "the all-reduce hid behind the backward")
    assert expected_words({"exposed_comm": 0.2}, None) is None


def test_the_figure_stacks_the_parts_of_each_counts_step():
    from gpubench.report.plots import report_plots

    report = compute.build_report(records(median_step_s=0.032))
    plots = {p.kind: p for p in report_plots(report)}
    assert list(plots) == ["throughput", "efficiency", "breakdown", "cost-time"]
    axes = plots["breakdown"].figure.axes[0]
    bars = axes.patches   # a bar per count with parts (1 and 2, not 4), a segment per part
    assert len(bars) == 2 * 4
    assert [t.get_text() for t in axes.get_xticklabels()] == ["1", "2"]
    heights = [sum(b.get_height() for b in bars if b.get_x() + b.get_width() / 2 == x) for x in (0, 1)]
    assert heights == pytest.approx([32.0, 32.0])   # milliseconds of each median step
    assert [t.get_text() for t in plots["breakdown"].figure.legends[0].get_texts()] == [
        "data", "compute", "exposed all-reduce", "other"]
    assert "24%" in [t.get_text() for t in axes.texts]   # the all-reduce's share, on its segment
    assert plots["breakdown"].caption[1].endswith("exposed all-reduce 24%, other 5%")


def test_the_page_embeds_the_figure_of_the_parts(tmp_path):
    from gpubench.report.html import render_html

    page = render_html(compute.build_report(records(median_step_s=0.032)))
    assert 'data-kind="breakdown"' in page and "exposed all-reduce 24%" in page
