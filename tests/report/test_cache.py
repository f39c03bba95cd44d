"""The column cache gives exactly what parsing every file gives, and follows the files."""

from __future__ import annotations

import json
import pickle

import pandas as pd
import pytest

from gpubench.report.cache import cache_file, cache_key, load_frame_cached
from gpubench.report.normalise import load_frame
from gpubench.store.results import ResultsStore

from .helpers import rec, scaling_records, write_store


def same(store_dir):
    store = ResultsStore(store_dir)
    plain, cached = load_frame(store), load_frame_cached(store, min_bytes=0)
    pd.testing.assert_frame_equal(plain.frame, cached.frame, check_dtype=False)
    assert list(plain.frame.dtypes) == list(cached.frame.dtypes)
    assert plain.warnings == cached.warnings
    return cached


def stored(store_dir) -> dict:
    """The cache file as written: its key, its files and its frame."""
    with open(cache_file(store_dir), "rb") as f:
        return pickle.load(f)


def test_cache_follows_appends_new_and_removed_files(tmp_path):
    store = write_store(tmp_path / "r", scaling_records())
    write_store(store, [rec(1, 5.0, 1.0, workload="x")], name="run-z")
    same(store)
    assert cache_file(store).exists()
    first = cache_file(store).stat().st_mtime_ns
    same(store)  # nothing changed: read, not rewritten
    assert cache_file(store).stat().st_mtime_ns == first

    with open(store / "run-a.jsonl", "a") as f:  # a sweep appends
        f.write(json.dumps(rec(8, 600.0, 28.8, time="2026-01-12T00:00:00Z")) + "\n")
        f.write('{"torn": ')
    cached = same(store)
    assert (cached.frame["throughput"] == 600.0).sum() == 1
    assert len(cached.warnings) == 1 and "truncated last line" in cached.warnings[0]
    assert "truncated last line" in same(store).warnings[0]  # warned again from the cache

    (store / "run-z.jsonl").unlink()
    assert "x" not in set(same(store).frame["workload"])
    write_store(store, [rec(2, 7.0, 1.0, workload="y")], name="run-0")  # sorts first
    assert list(same(store).frame["workload"])[0] == "y"


def test_unreadable_cache_is_rebuilt(tmp_path):
    store = write_store(tmp_path / "r", scaling_records())
    same(store)
    cache_file(store).write_bytes(b"not a pickle")
    same(store)
    rebuilt = stored(store)  # written again, whole
    assert rebuilt["key"] == cache_key() and list(rebuilt["entries"]) == ["run-a.jsonl"]
    assert len(rebuilt["frame"]) == len(scaling_records())


def test_small_histories_leave_no_cache(tmp_path, isolated):
    store = write_store(tmp_path / "r", scaling_records())
    load_frame_cached(ResultsStore(store))
    assert not isolated.state.exists() or not any(isolated.state.rglob("*.pkl"))


def test_corruption_is_reported_through_the_cache(tmp_path):
    from gpubench.store.results import corrupt_lines

    store = write_store(tmp_path / "r", scaling_records())
    same(store)
    with open(store / "run-a.jsonl", "a") as f:
        f.write("{oops\n" + json.dumps(rec(1, 1.0, 1.0)) + "\n")
    for _ in range(2):  # built, then served from the cache: warned both times
        loaded = load_frame_cached(ResultsStore(store), min_bytes=0)
        assert len(loaded.frame) == len(scaling_records()) + 1
        assert [w for w in loaded.warnings if "run-a.jsonl:7: skipped a corrupt line" in w]
        assert corrupt_lines(loaded.warnings) == 1


def test_unwritable_state_dir_still_reports(tmp_path, monkeypatch):
    store = write_store(tmp_path / "r", scaling_records())
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("GPUBENCH_STATE_DIR", str(tmp_path / "a-file" / "state"))  # cannot exist
    assert len(load_frame_cached(ResultsStore(store), min_bytes=0).frame) == 6
