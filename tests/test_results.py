"""The results store's load path: torn tails, blank lines, corruption, and what
the standard library's JSON reader accepts, with orjson and without."""

from __future__ import annotations

import json

import pytest

import gpubench.results as results_module
from gpubench.errors import ResultsError
from gpubench.results import ResultsStore
from tests.report.helpers import rec


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
