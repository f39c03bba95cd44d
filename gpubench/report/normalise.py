"""Result records of any schema version -> one DataFrame with fixed columns.

Only the fields a report reads (record_schema: the fields with `read_as`)
become columns, built column by column (one list comprehension per field, text
kept as category codes), which is what keeps a million records fast; a record
without a field reads as the field's default.
Records written before schema version 1 (no `schema_version`, or 0) may use
older field names (the schema's `old_names`); those are mapped before the
columns are taken, so the rest of the report never sees an old record.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timezone

import numpy as np
import pandas as pd

from gpubench.store.results import ResultsStore, fast_parsing
from gpubench.workloads import record_schema
from gpubench.workloads.record_schema import Field


def frame_fields() -> tuple[Field, ...]:
    """The record fields that become the frame's columns, in the schema's order."""
    return record_schema.read_fields()


def label_columns() -> tuple[str, ...]:
    """The columns kept as category codes (status among them)."""
    return tuple(f.name for f in frame_fields() if f.read_as == record_schema.LABEL)


def frame_signature() -> tuple:
    """What decides the frame's columns and how old records map onto them: a frame
    made under another signature (a cached one) is not this code's frame."""
    return (record_schema.SCHEMA_VERSION,
            tuple((f.name, f.read_as, repr(f.default), f.old_names) for f in frame_fields()))


def normalise_old(record: dict) -> dict:
    """A copy of a pre-version-1 record with today's field names and types."""
    rec = dict(record)
    for f in frame_fields():
        if f.old_names and rec.get(f.name) is None:
            for old in f.old_names:
                if rec.get(old) is not None:
                    rec[f.name] = rec[old]
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
    if isinstance(value, dict):  # a script's environment: NAME=value, as a shell sets it
        return " ".join(f"{k}={v}" for k, v in value.items())
    return value if isinstance(value, (str, int, float, type(None))) else str(value)


class ColumnBuilder:
    """The report's columns, filled a batch of records at a time."""

    def __init__(self) -> None:
        self.fields = frame_fields()
        self.labels = {f.name: _Codes() for f in self.fields if f.read_as == record_schema.LABEL}
        self.values: dict[str, list] = {f.name: [] for f in self.fields
                                         if f.read_as != record_schema.LABEL}

    def add(self, records: list[dict]) -> None:
        if any(not r.get("schema_version") for r in records):
            records = [r if r.get("schema_version") else normalise_old(r) for r in records]
        for f in self.fields:
            default = f.default
            if f.name in self.labels:
                self.labels[f.name].add([r.get(f.name, default) for r in records])
            else:
                self.values[f.name].extend([r.get(f.name, default) for r in records])

    def frame(self, categorical: bool = False) -> pd.DataFrame:
        """The columns so far (and a fresh start). Text columns are categorical
        when asked (compact to store), else plain Python strings."""
        fields, labels, values = self.fields, self.labels, self.values
        self.__init__()
        data = {}
        # Each column is built with its type stated: letting pandas infer the
        # types of a million Python values costs more than parsing them did.
        for f in fields:
            if f.read_as == record_schema.LABEL:
                data[f.name] = labels[f.name].series(f.default or "", categorical)
            elif f.read_as == record_schema.NUMBER:
                data[f.name] = _numbers(values[f.name])
                if f.default is not None:  # an explicit null reads as the default too
                    data[f.name] = data[f.name].fillna(f.default)
            else:  # from the list itself: numpy would make lists of one length a 2-d array
                data[f.name] = pd.Series(values[f.name], dtype=object)
        data["status"] = _inferred_status(data["status"], data["throughput"])
        return pd.DataFrame(data, columns=[f.name for f in fields])


def _inferred_status(status: pd.Series, throughput: pd.Series) -> pd.Series:
    """A record that says nothing about its status succeeded if it measured something."""
    missing = status == ""
    if not missing.any():
        return status
    categorical = isinstance(status.dtype, pd.CategoricalDtype)
    status = status.astype(object)
    status[missing] = np.where(throughput[missing].gt(0), "ok", "failed")
    return status.astype("category") if categorical else status


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
