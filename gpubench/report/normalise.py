"""Result records of any schema version -> one DataFrame with fixed columns.

Only the fields a report uses become columns, built column by column (one
list comprehension per field, text kept as category codes), which is what
keeps a million records fast.
Records written before schema version 1 (no `schema_version`, or 0) may use
older field names; those are mapped through ALIASES before the columns are
taken, so the rest of the report never sees an old record.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timezone

import numpy as np
import pandas as pd

from gpubench.results import ResultsStore, fast_parsing

# column -> value when a record does not have it
DEFAULTS: dict[str, object] = {
    "schema_version": 0, "run_id": "", "time": "", "workload": "", "status": None,
    "error": None, "provider": "", "instance_type": "", "gpu_name": "", "gpu_count": None,
    "nodes": 1, "precision": "fp32", "throughput": None, "throughput_unit": "samples/s",
    "price_per_hour": None, "epoch_samples": None, "median_step_s": None,
    "wall_seconds": None, "cost": None, "workload_args": "",
}
COLUMNS = list(DEFAULTS)
TEXT_COLUMNS = ("run_id", "time", "workload", "provider", "instance_type", "gpu_name",
                "precision", "throughput_unit", "workload_args")
NUMERIC_COLUMNS = ("schema_version", "gpu_count", "nodes", "throughput", "price_per_hour",
                   "epoch_samples", "median_step_s", "wall_seconds", "cost")

# Names older records used for today's fields (first one present wins).
ALIASES: dict[str, tuple[str, ...]] = {
    "gpu_count": ("gpus", "num_gpus", "n_gpus", "world_size"),
    "throughput": ("samples_per_s", "samples_per_sec", "samples_per_second", "images_per_s"),
    "price_per_hour": ("price", "usd_per_hour", "dollars_per_hour", "hourly_price"),
    "time": ("timestamp", "date", "started_at"),
    "gpu_name": ("gpu", "gpu_type"),
    "provider": ("cloud",),
    "precision": ("dtype",),
    "run_id": ("run",),
    "throughput_unit": ("unit",),
    "median_step_s": ("step_time_s", "median_step_time"),
}


def normalise_old(record: dict) -> dict:
    """A copy of a pre-version-1 record with today's field names and types."""
    rec = dict(record)
    for name, olds in ALIASES.items():
        if rec.get(name) is None:
            for old in olds:
                if rec.get(old) is not None:
                    rec[name] = rec[old]
                    break
    rec["time"] = _iso_utc(rec.get("time"))
    if rec.get("status") is None and isinstance(rec.get("ok"), bool):
        rec["status"] = "ok" if rec["ok"] else "failed"
    return rec


class _Codes:
    """One text column as category codes, filled as records arrive: each distinct
    name is kept once, and the column never holds a million string objects."""

    def __init__(self) -> None:
        self.index: dict = {}
        self.codes: list[int] = []

    def add(self, values: list) -> None:
        index = self.index
        try:
            self.codes.extend([index.setdefault(v, len(index)) for v in values])
        except TypeError:  # a list (workload arguments) or a dict where text belongs
            self.codes.extend([index.setdefault(_hashable(v), len(index)) for v in values])

    def series(self, default: str, categorical: bool) -> pd.Series:
        names = [default if v is None else v if isinstance(v, str) else str(v) for v in self.index]
        codes = np.array(self.codes, dtype=np.int32)
        if len(set(names)) == len(names):
            column = pd.Series(pd.Categorical.from_codes(codes, categories=names))
        else:  # None and the default, or 1 and "1": merge them by value
            column = pd.Series(np.array(names, dtype=object)[codes]).astype("category")
        return column if categorical else column.astype(object)


def _hashable(value):
    if isinstance(value, list):
        return " ".join(map(str, value))
    return value if isinstance(value, (str, int, float, type(None))) else str(value)


class ColumnBuilder:
    """The report's columns, filled a batch of records at a time."""

    def __init__(self) -> None:
        self.text = {c: _Codes() for c in TEXT_COLUMNS + ("status",)}
        self.other: dict[str, list] = {c: [] for c in NUMERIC_COLUMNS + ("error",)}

    def add(self, records: list[dict]) -> None:
        if any(not r.get("schema_version") for r in records):
            records = [r if r.get("schema_version") else normalise_old(r) for r in records]
        for column, codes in self.text.items():
            default = DEFAULTS[column]
            codes.add([r.get(column, default) for r in records])
        for column, values in self.other.items():
            default = DEFAULTS[column]
            values.extend([r.get(column, default) for r in records])

    def frame(self, categorical: bool = False) -> pd.DataFrame:
        """The columns so far (and a fresh start). Text columns are categorical
        when asked (compact to store), else plain Python strings."""
        text, other = self.text, self.other
        self.__init__()
        data = {}
        # Each column is built with its type stated: letting pandas infer the
        # types of a million Python values costs more than parsing them did.
        for column in TEXT_COLUMNS:
            data[column] = text[column].series(DEFAULTS[column], categorical)
        for column in NUMERIC_COLUMNS:
            data[column] = _numbers(other[column])
        data["nodes"] = data["nodes"].fillna(1)
        data["schema_version"] = data["schema_version"].fillna(0)
        status = text["status"].series("", categorical=False)
        # A record that says nothing about its status succeeded if it measured something.
        missing = status == ""
        if missing.any():
            status[missing] = np.where(data["throughput"][missing].gt(0), "ok", "failed")
        data["status"] = status.astype("category") if categorical else status
        data["error"] = pd.Series(np.array(other["error"], dtype=object), dtype=object)
        return pd.DataFrame(data, columns=COLUMNS)


def _numbers(values: list) -> pd.Series:
    try:
        return pd.Series(np.array(values, dtype=float))  # None becomes NaN
    except (TypeError, ValueError):  # text or lists in an old record
        return pd.to_numeric(pd.Series(np.array(values, dtype=object), dtype=object),
                             errors="coerce").astype(float)


def _iso_utc(value):
    """Epoch seconds or any ISO 8601 form -> '2026-01-31T12:00:00Z', the form
    records are written in today (it sorts as time, which --since relies on)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(value))
    if isinstance(value, str) and value and not value.endswith("Z"):
        try:
            when = datetime.fromisoformat(value)
        except ValueError:
            return value
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        return when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return value


def records_frame(records: list[dict]) -> pd.DataFrame:
    """The report's columns from records of any schema version."""
    builder = ColumnBuilder()
    builder.add(records)
    return builder.frame()


@dataclass
class LoadedFrame:
    frame: pd.DataFrame
    warnings: list[str]


def load_frame(store: ResultsStore) -> LoadedFrame:
    """A store's records straight into the report's columns, file by file, so a
    long history is never held as whole records (a million of them are gigabytes)."""
    builder, warnings = ColumnBuilder(), []
    with fast_parsing():
        for loaded in store.load_by_file():
            builder.add(loaded.records)
            warnings.extend(loaded.warnings)
        frame = builder.frame()
    return LoadedFrame(frame, warnings)
