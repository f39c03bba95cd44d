"""`gpubench report`'s filters and bad input: one line on stderr, a non-zero exit."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.report.helpers import rec, scaling_records, write_store


@pytest.fixture
def store(tmp_path) -> Path:
    return write_store(tmp_path / "results", scaling_records())


def test_run_and_since_filters(cli, tmp_path):
    store = write_store(tmp_path / "r", scaling_records())
    write_store(store, [rec(1, 500.0, 3.6, run_id="20260201-000000-abc123", time="2026-02-01T00:00:00Z")],
                name="20260201-000000-abc123")
    code, out, err = cli("report", "--results", str(store), "--format", "json", "--run", "20260201")
    assert code == 0, err
    assert [r["throughput"] for r in json.loads(out)] == [500.0]
    code, out, _ = cli("report", "--results", str(store), "--format", "json", "--since", "2026-01-11")
    rows = json.loads(out)
    assert {(r["status"], r["gpu_count"]) for r in rows} == {("ok", 1), ("failed", 8)}
    code, out, _ = cli("report", "--results", str(store), "--format", "json",
                       "--since", "2026-01-10T00:00:00Z", "--run", "run-a")
    assert len([r for r in json.loads(out) if r["status"] == "ok"]) == 5


@pytest.mark.parametrize("args, message", [
    (["--format", "xml"], "--format: 'xml'"),
    (["--since", "last tuesday"], "--since: 'last tuesday' is not a date"),
    (["--compare", "p", "tpu"], "--compare: 'tpu' is neither a provider nor a GPU"),
    (["--baseline", "0"], "--baseline: GPU counts start at 1"),
    (["--run", "nope"], "--run: no run matching 'nope'"),
    (["--workload", "nope"], "--workload: no records of 'nope'"),
    (["--since", "2099-01-01"], "no result records matching these filters"),
    (["--plot-format", "gif"], "--plot-format: 'gif'"),
])
def test_bad_input_is_one_line(cli, store, args, message):
    code, out, err = cli("report", "--results", str(store), *args)
    assert code != 0
    assert message in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_corrupt_line_is_skipped_and_counted(cli, tmp_path):
    store = tmp_path / "r"
    store.mkdir()
    (store / "x.jsonl").write_text(json.dumps(rec(1, 1.0, 1.0)) + "\n{oops\n" + json.dumps(rec(2, 2.0, 1.0)) + "\n")
    code, out, err = cli("report", "--results", str(store))
    assert code == 0 and "x.jsonl:2: skipped a corrupt line" in err
    assert err.strip().splitlines()[-1].startswith("warning: skipped 1 corrupt line")
    assert "Traceback" not in err


def test_missing_matplotlib_is_one_line(cli, store, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    for flag in ("--plot", "--html"):
        code, out, err = cli("report", "--results", str(store), flag, str(tmp_path / "x"))
        assert code != 0 and out == ""
        assert err.strip() == f"error: {flag} needs matplotlib, which is not installed: " \
                              "bash scripts/setup.sh (or pip install -e '.[plots]' in the checkout)"


def test_empty_store_machine_formats(cli, tmp_path):
    (tmp_path / "r").mkdir()
    code, out, err = cli("report", "--results", str(tmp_path / "r"), "--format", "json")
    assert code == 0 and json.loads(out) == [] and "no result records" in err
    code, _, err = cli("report", "--results", str(tmp_path / "r"))
    assert code != 0 and "no result records" in err
