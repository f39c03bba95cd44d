"""A column cache that makes a long history report in about a second the second time.

Result files are append-only, so a file whose size and modification time are
unchanged holds the same records as when it was last read. The report's
columns of every file are kept in one pickle per results directory under the
state directory ($GPUBENCH_STATE_DIR/report-cache/); files that changed or
appeared are parsed again, files that disappeared are dropped. Small histories
(under MIN_BYTES of records) are parsed directly and leave nothing behind.
A cache that cannot be read, or that holds columns of another schema (another
record_schema table or version: normalise.frame_signature), is rebuilt; one
that cannot be written is skipped.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
from pandas.api.types import union_categoricals

from gpubench import paths
from gpubench.errors import ResultsError
from gpubench.report.normalise import (ColumnBuilder, LoadedFrame, frame_signature,
                                       label_columns, load_frame)
from gpubench.store.results import ResultsStore, fast_parsing

CACHE_VERSION = 2  # raise it when normalise reads records differently under the same schema
MIN_BYTES = 64 * 2**20  # about 50k records


def cache_file(directory: Path) -> Path:
    key = hashlib.sha256(str(Path(directory).resolve()).encode()).hexdigest()[:20]
    return paths.state_dir() / "report-cache" / f"{key}.pkl"


def load_frame_cached(store: ResultsStore, min_bytes: int = MIN_BYTES) -> LoadedFrame:
    files = store.files()
    stamps = {}
    for path in files:
        try:
            st = path.stat()
        except OSError as e:
            raise ResultsError(f"cannot read {path}: {e.strerror}") from None
        stamps[path.name] = (st.st_size, st.st_mtime_ns)
    if sum(size for size, _ in stamps.values()) < min_bytes:
        return load_frame(store)
    target = cache_file(store.directory)
    key = cache_key()
    entries, cached = _read(target, key)
    kept = [n for n in stamps if n in entries and entries[n]["stamp"] == stamps[n]]
    fresh = [p for p in files if p.name not in set(kept)]
    removed = [n for n in entries if n not in stamps]

    builder, names = ColumnBuilder(), []
    with fast_parsing():
        for path, loaded in zip(fresh, store.load_by_file(fresh)):
            builder.add(loaded.records)
            names.extend([path.name] * len(loaded.records))
            entries[path.name] = {"stamp": stamps[path.name], "warnings": loaded.warnings}
        parsed = builder.frame(categorical=True)
    parsed["_file"] = pd.Series(names, dtype="category")
    entries = {n: entries[n] for n in stamps}
    frame = parsed
    if kept:
        old = cached[cached["_file"].isin(kept)]
        frame = _concat(old, parsed) if len(parsed) else old
    # Rows in file order, as a plain load gives them (ties in time keep that order).
    rank = {name: i for i, name in enumerate(stamps)}
    order = frame["_file"].map(rank).to_numpy(dtype=np.int64).argsort(kind="stable")
    frame = frame.iloc[order].reset_index(drop=True)
    if fresh or removed:
        _write(target, key, entries, frame)
    plain = frame.drop(columns="_file")
    for column in label_columns():
        if isinstance(plain[column].dtype, pd.CategoricalDtype):
            plain[column] = plain[column].astype(object)
    return LoadedFrame(plain, [w for n in stamps for w in entries[n]["warnings"]])


def _concat(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """Rows of a then b; categorical columns stay categorical (pandas would turn
    two different sets of categories into plain objects, costly to undo)."""
    data = {}
    for column in a.columns:
        if isinstance(a[column].dtype, pd.CategoricalDtype) and isinstance(b[column].dtype, pd.CategoricalDtype):
            data[column] = pd.Series(union_categoricals([a[column], b[column]], ignore_order=True))
        else:
            data[column] = pd.concat([a[column], b[column]], ignore_index=True)
    return pd.DataFrame(data, columns=a.columns)


def cache_key() -> str:
    """The cache's own version and the frame's signature: a cache written under any
    other is not served."""
    text = repr((CACHE_VERSION, frame_signature()))
    return hashlib.sha256(text.encode()).hexdigest()


def _read(target: Path, key: str) -> tuple[dict, pd.DataFrame]:
    try:
        with open(target, "rb") as f:
            data = pickle.load(f)
        if data.get("key") == key:
            return data["entries"], data["frame"]
    except Exception:  # missing, truncated or of another schema: rebuild it
        pass
    return {}, pd.DataFrame()


def _write(target: Path, key: str, entries: dict, frame: pd.DataFrame) -> None:
    """Text columns are stored as categories (a few distinct names each): they pickle
    and load fast."""
    stored = frame.copy()
    for column in label_columns() + ("_file",):
        if not isinstance(stored[column].dtype, pd.CategoricalDtype):
            stored[column] = stored[column].astype("category")
    try:
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-")
    except OSError:
        return  # a read-only state directory: the report is still right, only slower
    try:
        with os.fdopen(fd, "wb") as f:
            pickle.dump({"key": key, "entries": entries, "frame": stored}, f,
                        protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, target)  # readers see the old cache or the new one, never half
    except OSError:
        Path(tmp).unlink(missing_ok=True)
