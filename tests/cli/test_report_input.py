"""Filters, bad input, and the results store's load path."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gpubench.errors import ResultsError
from gpubench.results import ResultsStore
import gpubench.results as results_module

from .helpers import rec, scaling_records, write_store


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


def test_corrupt_store_is_one_line(cli, tmp_path):
    store = tmp_path / "r"
    store.mkdir()
    (store / "x.jsonl").write_text(json.dumps(rec(1, 1.0, 1.0)) + "\n{oops\n" + json.dumps(rec(2, 2.0, 1.0)) + "\n")
    code, _, err = cli("report", "--results", str(store))
    assert code != 0 and "x.jsonl:2: corrupt result record" in err
    assert len(err.strip().splitlines()) == 1


def test_missing_matplotlib_is_one_line(cli, store, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    for flag in ("--plot", "--html"):
        code, out, err = cli("report", "--results", str(store), flag, str(tmp_path / "x"))
        assert code != 0 and out == ""
        assert err.strip() == f"error: {flag} needs matplotlib, which is not installed: " \
                              "pip install 'gpubench[plots]'"


def test_render_report_after_a_sweep(store):
    from gpubench.report.render import render_report

    text = render_report(ResultsStore(store).load().records, "table", workload="w")
    assert "speedup" in text and "NCCL timeout" in text


@pytest.fixture(params=["orjson", "json"])
def parser(request, monkeypatch):
    if request.param == "json":
        monkeypatch.setattr(results_module, "_json_loads", lambda: json.loads)
    else:
        pytest.importorskip("orjson")
    return request.param


def test_load_torn_tail_blank_lines_and_corruption(tmp_path, parser):
    good = json.dumps(rec(1, 1.0, 1.0))
    (tmp_path / "a.jsonl").write_text(good + "\n\n  \n" + json.dumps({"old": 1}) + "\n" + good[:20])
    loaded = ResultsStore(tmp_path).load()
    assert len(loaded.records) == 2
    assert loaded.records[1] == {"old": 1, "schema_version": 0}
    assert len(loaded.warnings) == 1 and "a.jsonl:5: skipped a truncated last line" in loaded.warnings[0]
    for bad in ("[1, 2]", good[:20], "null", "NaN x"):
        (tmp_path / "a.jsonl").write_text(good + "\n" + bad + "\n" + good + "\n")
        with pytest.raises(ResultsError, match=r"a.jsonl:2: corrupt result record"):
            ResultsStore(tmp_path).load()


def test_load_accepts_what_the_standard_library_accepts(tmp_path, parser):
    # NaN is not JSON and orjson refuses it; the store never writes it, but
    # a record that json.loads reads must not become "corrupt" with orjson.
    (tmp_path / "a.jsonl").write_text('{"throughput": NaN, "n": 18446744073709551616}\n')
    record = ResultsStore(tmp_path).load().records[0]
    assert record["n"] == 2 ** 64 and record["throughput"] != record["throughput"]


def test_cli_import_stays_light():
    code = ("import sys, gpubench.cli; "
            "heavy = [m for m in ('pandas', 'matplotlib', 'torch', 'numpy') if m in sys.modules]; "
            "print(heavy); sys.exit(1 if heavy else 0)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_since_forms():
    from datetime import datetime, timezone

    from gpubench.report.filters import parse_since

    now = datetime(2026, 3, 10, 12, 0, tzinfo=timezone.utc)
    assert parse_since("7d", now) == "2026-03-03T12:00:00Z"
    assert parse_since("12h", now) == "2026-03-10T00:00:00Z"
    assert parse_since("2026-01-31") == "2026-01-31T00:00:00Z"
    assert parse_since("2026-01-31T14:00+02:00") == "2026-01-31T12:00:00Z"


def test_old_time_forms_are_normalised():
    from gpubench.report.normalise import records_frame

    frame = records_frame([{"workload": "w", "timestamp": "2026-01-31 14:00:00+02:00"},
                           {"workload": "w", "time": "2026-01-31T12:00:00"}])
    assert list(frame["time"]) == ["2026-01-31T12:00:00Z"] * 2


def test_empty_store_machine_formats(cli, tmp_path):
    (tmp_path / "r").mkdir()
    code, out, err = cli("report", "--results", str(tmp_path / "r"), "--format", "json")
    assert code == 0 and json.loads(out) == [] and "no result records" in err
    code, _, err = cli("report", "--results", str(tmp_path / "r"))
    assert code != 0 and "no result records" in err
