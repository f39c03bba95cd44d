"""The report's columns come from the record schema: one entry (and a formula for a
computed column) reaches every output and the cache; nodes show when they vary."""

from __future__ import annotations

import csv
import io
import json

import pandas as pd
import pytest

from gpubench.report import compute
from gpubench.report.cache import cache_file, cache_key, load_frame_cached
from gpubench.report.render import render
from gpubench.store.results import ResultsStore
from gpubench.workloads import record_schema
from gpubench.workloads.record_schema import EVERY_ROW, NUMBER, REPORT, WORKLOAD, Field, Heading

from .helpers import rec, scaling_records, write_store
from .test_cache import stored
from .test_formats import markdown_tables

# A field the workload would write and the report reads and shows, and a column
# the report computes from it.
LOAD = Field("load_avg", float, "", "the machine's load average while it ran", WORKLOAD,
             NUMBER, None, column=EVERY_ROW, heading=Heading("load"))
PER_GPU = Field("throughput_per_gpu", float, "throughput_unit", "throughput over gpu_count",
                REPORT, column=EVERY_ROW, heading=Heading("{unit}/s/gpu"))


@pytest.fixture
def new_columns(monkeypatch):
    """The schema with two more entries, and the computed one's formula."""
    monkeypatch.setattr(record_schema, "FIELDS", record_schema.FIELDS + (LOAD, PER_GPU))
    monkeypatch.setitem(compute.FORMULAS, "throughput_per_gpu",
                        lambda rows: rows["throughput"] / rows["gpu_count"])


def loaded_records() -> list[dict]:
    return [dict(r, load_avg=0.5 * r["gpu_count"]) for r in scaling_records()]


def test_a_schema_entry_and_a_formula_reach_every_format_and_the_cache(tmp_path, new_columns):
    store = ResultsStore(write_store(tmp_path / "r", loaded_records()))
    loaded = load_frame_cached(store, min_bytes=0)  # parsed, and the cache written
    assert cache_file(store.directory).exists()
    again = load_frame_cached(store, min_bytes=0)  # served from the cache
    pd.testing.assert_frame_equal(loaded.frame, again.frame)
    assert list(again.frame["load_avg"]) == [0.5, 1.0, 2.0, 0.5, 0.5, 4.0]

    report = compute.build_report(again.frame)
    rows = json.loads(render(report, "json").text)
    four = next(r for r in rows if r["provider"] == "p" and r["gpu_count"] == 4)
    assert four["load_avg"] == 2.0 and four["throughput_per_gpu"] == pytest.approx(80.0)

    table = list(csv.DictReader(io.StringIO(render(report, "csv").text)))
    four = next(r for r in table if r["provider"] == "p" and r["gpu_count"] == "4")
    assert float(four["load_avg"]) == 2.0 and float(four["throughput_per_gpu"]) == pytest.approx(80.0)

    main = markdown_tables(render(report, "markdown").text)[0]
    header = main[0]
    assert header[-3:] == ["load", "samples/s/gpu", "best"]
    four = next(dict(zip(header, r)) for r in main[1:] if r[header.index("gpus")] == "4")
    assert four["load"] == "2.00" and four["samples/s/gpu"] == "80.00"


def test_a_cache_made_under_another_schema_is_not_served(tmp_path, monkeypatch):
    store = ResultsStore(write_store(tmp_path / "r", loaded_records()))
    before = load_frame_cached(store, min_bytes=0)
    assert "load_avg" not in before.frame
    first_key = stored(store.directory)["key"]

    monkeypatch.setattr(record_schema, "FIELDS", record_schema.FIELDS + (LOAD,))
    after = load_frame_cached(store, min_bytes=0)
    assert list(after.frame["load_avg"]) == [0.5, 1.0, 2.0, 0.5, 0.5, 4.0]
    rebuilt = stored(store.directory)  # written again under the new schema
    assert rebuilt["key"] == cache_key() != first_key and "load_avg" in rebuilt["frame"]

    monkeypatch.setattr(record_schema, "SCHEMA_VERSION", record_schema.SCHEMA_VERSION + 1)
    load_frame_cached(store, min_bytes=0)
    assert stored(store.directory)["key"] == cache_key() != rebuilt["key"]  # a new version too


def test_every_report_column_is_computed_or_read():
    """A REPORT entry without a formula (or a step of build_report) fails here."""
    report = compute.build_report(scaling_records())
    rows = compute.report_rows(report, include_failed=True)
    assert list(report.rows.columns) == list(record_schema.report_columns(EVERY_ROW))
    assert set(record_schema.report_columns(record_schema.FAILED_ROWS)) <= set(rows[-1])
    for f in record_schema.FIELDS:
        if f.column is not None and f.filled_by != REPORT:
            assert f.read_as is not None, f"{f.name} is shown but the report does not read it"
        if f.heading is not None:
            assert f.column is not None, f"{f.name} has a heading but is not a report column"


def multi_node_records() -> list[dict]:
    return scaling_records() + [rec(8, 600.0, 28.8, nodes=2, instance_type="p.4x"),
                                rec(16, None, 57.6, nodes=4, status="failed", error="rendezvous",
                                    instance_type="p.4x")]


def test_nodes_column_only_when_a_run_spans_machines():
    single = markdown_tables(render(compute.build_report(scaling_records()), "markdown").text)
    assert all("nodes" not in table[0] for table in single)

    report = compute.build_report(multi_node_records())
    main, failed = markdown_tables(render(report, "markdown").text)
    assert main[0][:5] == ["provider", "gpu", "precision", "gpus", "nodes"]
    by_gpus = {r[3]: r[4] for r in main[1:] if r[0] == "p"}
    assert by_gpus == {"1": "1", "2": "1", "4": "1", "8": "2"}
    rows = [dict(zip(failed[0], r)) for r in failed[1:]]
    assert {(r["gpus"], r["nodes"]) for r in rows} == {("8", "1"), ("16", "4")}
    assert "nodes" in render(report, "table").text
    for r in json.loads(render(compute.build_report(scaling_records()), "json").text):
        assert r["nodes"] == 1  # programs always get it
