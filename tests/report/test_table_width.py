"""Tables for people fit the terminal, 80 columns too, and never cut a number:
columns go by priority with a line naming them; --wide and --columns bring them
back; --compare of two sides with nothing in common says what they share."""

from __future__ import annotations

import csv
import io
import json
import re
import shlex

import pytest

from gpubench.format import TableFit, format_cell, render_rows

from .helpers import cost_story_records, rec, write_store

NUMBER = re.compile(r"^-?[\d,]*\.?\d+(?:e[-+]?\d+)?%?$")
KEY_HEADINGS = ("provider", "gpu", "gpus", "speedup", "efficiency", "$/h")


@pytest.fixture
def story(tmp_path):
    return write_store(tmp_path / "results", cost_story_records())


def table_lines(text: str) -> list[str]:
    """The rows of every table in a report's text (not its sentences and notes): the
    lines after a heading rule that start with a provider, or go on a folded cell."""
    lines, inside = [], False
    for line in text.splitlines():
        if line.startswith("─"):
            inside = True
        elif inside and (line.startswith(("lambda", "vast", "local", " "))):
            lines.append(line)
        else:
            inside = False
    return lines


def shown_numbers(text: str) -> list[str]:
    """Every whitespace-separated token of a table's rows that reads as a number."""
    return [t.rstrip("*") for line in table_lines(text) for t in line.split()
            if NUMBER.match(t.rstrip("*"))]


def data_numbers(cli, store) -> tuple[set[str], list[dict]]:
    """Each number of the report's rows as the tables write it, and the rows."""
    code, out, err = cli("report", "--results", str(store), "--format", "json")
    assert code == 0, err
    rows = [r for r in json.loads(out) if r["status"] == "ok"]
    texts = {format_cell(v) for r in rows for v in r.values()
             if isinstance(v, (int, float)) and not isinstance(v, bool)}
    texts |= {word for r in rows for v in r.values() if isinstance(v, str) for word in v.split()}
    return texts, rows  # numbers, and the words of names ("RTX 3090")


@pytest.mark.parametrize("width", [80, 200])
def test_report_fits_and_every_number_is_whole(cli, story, monkeypatch, width):
    texts, rows = data_numbers(cli, story)
    monkeypatch.setenv("COLUMNS", str(width))
    code, out, err = cli("report", "--results", str(story))
    assert code == 0, err
    assert max(len(line) for line in out.splitlines()) <= width
    assert "…" not in out
    tokens = shown_numbers(out)
    cut = [t for t in tokens if t not in texts]
    assert cut == [], f"numbers not in the data (cut or folded): {cut}"
    # the key figures of every row are there, whole
    for row in rows:
        for key in ("throughput", "speedup", "efficiency", "price_per_hour"):
            assert format_cell(row[key]) in tokens, (key, row)
        cost = row["cost_per_epoch"] if row["cost_per_epoch"] is not None \
            else row["cost_per_million_samples"]
        assert format_cell(cost) in tokens, row
    for heading in KEY_HEADINGS:
        assert re.search(rf"(^|\s){re.escape(heading)}(\s|$)", out, re.M), heading
    if width == 80:
        assert "left out to fit 80 columns:" in out and "--wide" in out and "--columns" in out
    else:
        assert "left out" not in out


def test_wide_shows_every_column_whatever_the_terminal(cli, story, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = cli("report", "--results", str(story), "--workload", "mnist-ddp", "--wide")
    assert code == 0, err
    assert "left out" not in out
    header = next(line for line in out.splitlines() if line.startswith("provider"))
    for heading in ("precision", "epoch s", "$/epoch", "$/M images", "images/$", "best"):
        assert heading in header
    assert max(len(line) for line in out.splitlines()) > 80


def test_columns_picks_and_orders(cli, story, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = cli("report", "--results", str(story), "--workload", "mnist-ddp",
                         "--columns", "gpu,gpus,$/epoch,speedup")
    assert code == 0, err
    header = next(line for line in out.splitlines() if line.startswith("gpu"))
    assert header.split() == ["gpu", "gpus", "$/epoch", "speedup"]
    code, out, err = cli("report", "--results", str(story), "--format", "csv",
                         "--columns", "provider,gpu_count,cost_per_epoch")
    assert code == 0, err
    assert next(csv.reader(io.StringIO(out))) == ["provider", "gpu_count", "cost_per_epoch"]


def test_columns_unknown_is_one_line(cli, story):
    code, out, err = cli("report", "--results", str(story), "--columns", "speedup,colour")
    assert code != 0 and out == ""
    assert err.startswith("error: --columns: no column 'colour' (columns: ")
    assert len(err.strip().splitlines()) == 1


def test_render_rows_drops_low_priority_columns_first():
    """The helper every listing uses (offers, ls): numbers whole, the key columns kept."""
    rows = [{"name": f"machine-{i}", "gpu": "NVIDIA H100 80GB HBM3", "gpus": 8,
             "price": 23.92 + i, "region": "us-east-1", "note": "a long remark " * 3}
            for i in range(3)]
    columns = [(k, k) for k in ("name", "gpu", "gpus", "price", "region", "note")]
    text = render_rows(rows, columns, "table", keep=("name", "gpus", "price", "gpu"),
                       fit=TableFit(width=40))
    lines = text.splitlines()
    assert max(len(line) for line in lines[:-2]) <= 40
    assert "left out to fit 40 columns: region, note" in " ".join(lines[-2:])
    for row in rows:
        assert format_cell(row["price"]) in text.split()
    # nothing fits but the first key column: it still shows, whole
    narrow = render_rows(rows, columns, "table", keep=("price",), fit=TableFit(width=5))
    assert all(format_cell(r["price"]) in narrow.split() for r in rows)


def test_text_folds_but_numbers_do_not():
    rows = [{"error": "NCCL timeout after 1800 seconds on rank 3 of 8", "gpus": 12345678}]
    text = render_rows(rows, [("error", "error"), ("gpus", "gpus")], "table",
                       fit=TableFit(width=30))
    assert "12345678" in text.split() and "1800" in text.split()
    assert max(len(line) for line in text.splitlines()) <= 30
    assert "left out" not in text


def test_compare_with_no_gpu_in_common_says_what_to_compare(cli, story):
    code, out, err = cli("report", "--results", str(story), "--compare", "lambda", "vast")
    assert code != 0 and out == ""
    assert "lambda and vast ran no GPU type in common (lambda: A100-SXM4-40GB; vast: RTX 3090)" in err
    assert "they share mnist-ddp" in err
    suggested = shlex.split(err.split("e.g. ", 1)[1])
    code, out, err = cli("report", "--results", str(story), *suggested)
    assert code == 0, err
    assert "mnist-ddp" in out and "5,422" in out.split() and "5,012" in out.split()


def test_compare_with_no_workload_in_common(cli, tmp_path):
    records = [rec(1, 100.0, 1.0, provider="lambda", workload="gpt-ddp"),
               rec(1, 90.0, 0.5, provider="vast", workload="mnist-ddp"),
               rec(1, 95.0, 0.5, provider="vast", workload="resnet-ddp")]
    store = write_store(tmp_path / "r", records)
    code, out, err = cli("report", "--results", str(store), "--compare", "lambda", "vast")
    assert code != 0
    assert err.strip() == ("error: --compare: lambda and vast share no workload; lambda ran "
                           "gpt-ddp, vast ran mnist-ddp and resnet-ddp")


def test_compare_at_80_columns_keeps_both_throughputs(cli, story, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = cli("report", "--results", str(story), "--compare", "A100", "3090")
    assert code == 0, err
    assert max(len(line) for line in out.splitlines()) <= 80
    for number in ("5,422", "5,012", "10,318", "9,643"):
        assert number in out.split()


def test_a_predicted_table_keeps_predicted_and_vs_pred_at_80_columns_as_a_percentage(cli, tmp_path, monkeypatch):
    records = cost_story_records()
    for r in records:
        if r["workload"] == "mnist-ddp" and r.get("throughput"):
            r.update(predicted_throughput=r["throughput"] / (1 - 0.00884), predicted_basis="modelled")
    store = write_store(tmp_path / "results", records)
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = cli("report", "--results", str(store), "--workload", "mnist-ddp")
    assert code == 0, err
    header = next(line for line in out.splitlines() if line.startswith("provider"))
    assert "predicted" in header and "vs pred." in header and "$/epoch" in header
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "-0.9%" in out and "-0.00884" not in out
