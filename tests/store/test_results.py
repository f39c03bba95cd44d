"""The results store's load path: torn tails, blank lines, corrupt lines skipped and
counted, what the standard library's JSON reader accepts, with orjson and without;
and the directory a store writes to, created when it is not there yet."""

from __future__ import annotations

import json

import pytest

import gpubench.store.results as results_module
from gpubench.errors import ResultsError
from gpubench.store.results import ResultsStore, corrupt_lines, load_summary
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
        loaded = ResultsStore(tmp_path).load()
        assert len(loaded.records) == 2  # the lines around it still load
        assert loaded.warnings == [f"{tmp_path / 'a.jsonl'}:2: skipped a corrupt line (not a JSON object record)"]
        assert corrupt_lines(loaded.warnings) == 1
        assert load_summary(loaded.warnings).startswith("skipped 1 corrupt line in the results")


def test_many_corrupt_lines_are_said_a_few_and_all_counted(tmp_path, parser):
    good = json.dumps(rec(1, 1.0, 1.0))
    (tmp_path / "a.jsonl").write_text(good + "\n" + "{oops\n" * 12 + good + "\n")
    (tmp_path / "b.jsonl").write_text("[]\n" + good + "\n")
    loaded = ResultsStore(tmp_path).load()
    assert len(loaded.records) == 3
    said = [w for w in loaded.warnings if "skipped a corrupt line" in w]
    assert [w.split(": ")[0].rsplit(":", 1)[1] for w in said] == ["2", "3", "4", "5", "6", "1"]
    assert any(w.endswith("a.jsonl: skipped 7 more corrupt lines") for w in loaded.warnings)
    assert corrupt_lines(loaded.warnings) == 13
    assert load_summary(loaded.warnings).startswith("skipped 13 corrupt lines")
    assert load_summary([]) is None


def test_for_writing_creates_the_directory_it_is_given(tmp_path):
    store = ResultsStore.for_writing(tmp_path / "new" / "nested")
    assert store.directory.is_dir()
    assert ResultsStore.for_writing(tmp_path / "new" / "nested").directory == store.directory  # again: fine
    (tmp_path / "a-file").write_text("")
    with pytest.raises(ResultsError, match="a-file is not a directory"):
        ResultsStore.for_writing(tmp_path / "a-file")
    with pytest.raises(ResultsError, match="cannot create results directory"):
        ResultsStore.for_writing(tmp_path / "a-file" / "below")


def test_load_accepts_what_the_standard_library_accepts(tmp_path, parser):
    # NaN is not JSON and orjson refuses it; the store never writes it, but
    # a record that json.loads reads must not become "corrupt" with orjson.
    (tmp_path / "a.jsonl").write_text('{"throughput": NaN, "n": 18446744073709551616}\n')
    record = ResultsStore(tmp_path).load().records[0]
    assert record["n"] == 2 ** 64 and record["throughput"] != record["throughput"]
