"""What the report says about how far its numbers can be trusted: the median and
spread of repeated runs, a speedup above the process count marked suspect with
its likely cause, rows that ran on a CPU standing in for GPUs labelled and kept
apart, a bandwidth test shown as bandwidth, and which failures are listed."""

from __future__ import annotations

import csv
import io
import json

import pytest

from gpubench.report.compute import build_report
from gpubench.report.html import render_html
from gpubench.report.render import render

from .helpers import rec, write_store
from .test_formats import markdown_tables


@pytest.fixture
def no_figures(monkeypatch):
    """The HTML page without its matplotlib figures, which these tests do not look at."""
    from gpubench.report import plots

    monkeypatch.setattr(plots, "report_plots", lambda report: [])


def _repeated() -> list[dict]:
    """1 GPU: 90, 100, 110 samples/s; 2 GPUs: 150, 180, 200 (a noisy row); --repeat 3."""
    records = [rec(1, t, 3.6, repeat=i + 1, repeat_count=3, time=f"2026-01-10T00:0{i}:00Z")
               for i, t in enumerate((100.0, 90.0, 110.0))]
    records += [rec(2, t, 7.2, repeat=i + 1, repeat_count=3, time=f"2026-01-10T00:1{i}:00Z")
                for i, t in enumerate((180.0, 150.0, 200.0))]
    return records


def test_repeated_runs_show_their_median_and_spread():
    # an older single run of the 1-GPU configuration is left out: the latest three count
    report = build_report([rec(1, 10.0, 3.6, time="2026-01-01T00:00:00Z")] + _repeated())
    one, two = (report.rows[report.rows.gpu_count == n].iloc[0] for n in (1, 2))
    assert (one.throughput, one.throughput_min, one.throughput_max, one.repeats) == (100.0, 90.0, 110.0, 3)
    assert one.spread == pytest.approx(0.2) and one.noisy
    assert two.throughput == 180.0 and two.spread == pytest.approx(50 / 180)
    assert two.speedup == pytest.approx(1.8)
    assert (two.speedup_min, two.speedup_max) == (pytest.approx(150 / 110), pytest.approx(200 / 90))
    assert two.cost_per_million_samples_min == pytest.approx(0.002e6 / 200)
    assert any("1 repeated record(s)" in n for n in report.notes)
    assert any(n.startswith("spread: the range of a row's runs over their median") for n in report.notes)

    table = markdown_tables(render(report, "markdown").text)[0]
    header = table[0]
    for column in ("runs", "spread", "check"):
        assert column in header
    two_shown = dict(zip(header, table[2]))
    assert (two_shown["runs"], two_shown["spread"], two_shown["speedup"]) == ("3", "28%", "1.80 (1.36-2.22)")
    assert two_shown["check"] == "noisy"
    rows = list(csv.DictReader(io.StringIO(render(report, "csv").text)))
    assert float(rows[1]["throughput_min"]) == 150.0 and rows[1]["noisy"] == "True"


def test_a_single_run_per_count_shows_no_spread_columns():
    report = build_report([rec(1, 100.0, 3.6), rec(2, 180.0, 7.2)])
    header = markdown_tables(render(report, "markdown").text)[0][0]
    assert not {"runs", "spread", "check"} & set(header)
    assert report.rows["spread"].isna().all() and not report.rows["noisy"].any()


def test_a_speedup_above_the_process_count_is_suspect_in_every_output(no_figures):
    # the demo's case: one process with 2 threads on a busy CPU, then 2 processes with 1
    records = [rec(1, 134.6, 0.0, gpu_name="cpu", device="cpu", threads_per_process=2,
                   machine_busy="other processes took 60% of the cores' time while it ran"),
               rec(2, 332.5, 0.0, gpu_name="cpu", device="cpu", threads_per_process=1)]
    report = build_report(records)
    two = report.rows[report.rows.gpu_count == 2].iloc[0]
    assert two.suspect.startswith("speedup 2.47 on 2 processes is above the 2x that 2 times the "
                                  "processes can give; likely: the baseline ran on a busy machine")
    assert "the baseline ran 2 threads per process against 1 here" in two.suspect
    assert report.rows[report.rows.gpu_count == 1].iloc[0].suspect is None

    note = next(n for n in report.notes if n.startswith("suspect: "))
    assert "w on p cpu, 2 processes: speedup 2.47" in note
    table = markdown_tables(render(report, "markdown").text)[0]
    assert dict(zip(table[0], table[2]))["check"] == "superlinear: suspect"
    assert "suspect: " in render(report, "table").text
    assert json.loads(render(report, "json").text)[1]["suspect"] == two.suspect
    assert list(csv.DictReader(io.StringIO(render(report, "csv").text)))[1]["suspect"] == two.suspect
    page = render_html(report)
    assert "superlinear: suspect" in page and "likely: the baseline ran on a busy machine" in page


def test_a_script_timed_as_a_whole_is_suspected_of_doing_less_work():
    records = [rec(1, 1 / 24.0, 0.0, throughput_unit="runs/s", workload="~/t.py"),
               rec(2, 1 / 8.0, 0.0, throughput_unit="runs/s", workload="~/t.py")]
    two = build_report(records).rows.iloc[1]
    assert "may have done less work at this count (resumed from a checkpoint" in two.suspect


def test_rows_on_a_cpu_standing_in_for_gpus_are_labelled_and_kept_apart(no_figures):
    records = [rec(1, 100.0, 1.29, provider="lambda", gpu_name="NVIDIA A100-PCIE-40GB", device="cuda"),
               rec(1, 30.0, 0.22, provider="vast", gpu_name="RTX 3090", device="cpu",
                   mock_instance=True),
               rec(2, 50.0, 0.44, provider="vast", gpu_name="RTX 3090", device="cpu",
                   mock_instance=True),
               rec(1, 20.0, None, provider="ssh", gpu_name="T4", device="cpu")]
    report = build_report(records)
    assert sorted(report.rows.gpu_name) == ["NVIDIA A100-PCIE-40GB", "RTX 3090 (mock, CPU)",
                                            "RTX 3090 (mock, CPU)", "T4 (CPU)"]
    assert json.loads(render(report, "json").text)[-1]["gpu_name"] == "RTX 3090 (mock, CPU)"
    assert "RTX 3090 (mock, CPU)" in render(report, "csv").text
    text = render(report, "table").text
    assert "w, on a CPU standing in for GPUs (not GPU figures)" in text
    tables = markdown_tables(render(report, "markdown").text)
    assert [len(t) - 1 for t in tables] == [1, 3]  # the real row, then the three stand-ins
    assert all("CPU)" in " ".join(row) for row in tables[1][1:])
    page = render_html(report)
    real, _, apart = page.partition('<section class="stand-in">')
    assert "A100" in real and "RTX 3090" not in real
    assert "RTX 3090 (mock, CPU)" in apart and "they do not measure a GPU" in apart


def test_allreduce_is_reported_as_bandwidth():
    def bw(ranks: int, algbw: float, busbw: float) -> dict:
        """peak and largest-size figures; busbw is 0 on one rank by definition"""
        return rec(ranks, algbw, 3.6 * ranks, workload="allreduce", throughput_unit="GB/s",
                   epoch_samples=None, peak_busbw=busbw, peak_busbw_size=1 << 28,
                   peak_algbw=algbw, max_bytes=1 << 30, largest_size_busbw=busbw * 0.9,
                   largest_size_algbw=algbw * 0.9)
    records = [bw(1, 20.0, 0.0), bw(2, 90.0, 90.0), bw(4, 100.0, 150.0)]
    report = build_report(records)
    assert report.rows[["speedup", "efficiency", "epoch_seconds", "cost_per_epoch",
                        "cost_per_million_samples", "samples_per_dollar"]].isna().all().all()
    assert not any("no baseline" in n for n in report.notes)
    (table,) = markdown_tables(render(report, "markdown").text)
    header = table[0]
    for column in ("peak busbw GB/s", "at bytes", "peak algbw GB/s", "largest bytes",
                   "busbw there GB/s", "algbw there GB/s"):
        assert column in header
    for absent in ("speedup", "efficiency", "epoch s", "$/epoch", "GB/s", "GB/$"):
        assert absent not in header, absent
    four = dict(zip(header, table[3]))
    assert (four["gpus"], four["peak busbw GB/s"], four["busbw there GB/s"]) == ("4", "150.00", "135.00")


def test_allreduce_on_one_process_is_a_note_not_a_row_or_a_failure():
    alone = rec(1, None, 3.6, workload="allreduce", throughput_unit="GB/s", epoch_samples=None,
                peak_busbw=None, peak_algbw=None,
                no_bandwidth="one process: an all-reduce moves nothing; no bandwidth to measure")
    two = rec(2, 90.0, 7.2, workload="allreduce", throughput_unit="GB/s", epoch_samples=None,
              peak_busbw=90.0, peak_algbw=90.0)
    report = build_report([alone, two])
    assert list(report.rows["gpu_count"]) == [2] and report.failed.empty
    assert "allreduce on 1 GPU: one process moves nothing; no bandwidth to measure" in report.notes


def test_failures_none_latest_or_all(tmp_path):
    records = [rec(2, None, 7.2, status="failed", error="OOM", time="2026-01-01T00:00:00Z"),
               rec(2, 180.0, 7.2, time="2026-01-02T00:00:00Z"),  # fixed since
               rec(4, None, 14.4, status="failed", error="NCCL timeout", time="2026-01-03T00:00:00Z"),
               rec(1, 100.0, 3.6)]
    assert list(build_report(records, failures="all").failed.error) == ["OOM", "NCCL timeout"]
    assert list(build_report(records).failed.error) == ["NCCL timeout"]
    assert build_report(records, failures="none").failed.empty


def test_failures_flag_on_the_command_line(cli, tmp_path):
    store = write_store(tmp_path / "r", [
        rec(1, 100.0, 3.6), rec(2, None, 7.2, status="failed", error="OOM")])
    code, out, _ = cli("report", "--results", str(store), "--failures", "none", "--format", "json")
    assert code == 0 and [r["status"] for r in json.loads(out)] == ["ok"]
    code, _, err = cli("report", "--results", str(store), "--failures", "some")
    assert code == 2 and err.strip() == "error: --failures: 'some' is not one of none, latest, all"


def test_the_efficiency_figure_marks_a_suspect_speedup():
    pytest.importorskip("matplotlib")
    from gpubench.report.plots import efficiency_plot

    report = build_report([rec(1, 100.0, 3.6), rec(2, 260.0, 7.2)])
    figure = efficiency_plot("w", report.rows, report.baseline.describe()).figure
    (axes,) = figure.axes
    assert [t.get_text() for t in axes.texts] == ["suspect"]
    assert "suspect: above the process count" in [t.get_text() for t in axes.get_legend().get_texts()]
