"""The results store: a directory of JSON Lines files, one record per line.

Each sweep appends to a file of its own, with an fsync after every record, and
no file is rewritten, with one exception: after `bench` has taken its machine down,
it replaces its own run files once, atomically, with the machine's estimated and
billed cost added to each record (gpubench.store.billing). A run killed mid-write can leave a torn last line;
the reader skips that one with a warning. Any other undecodable line is
corruption: it is skipped with a warning naming file:line (the first few of a
file; the rest are counted), and the other records still load, so one bad line
never blocks a report. `load_summary` counts what was skipped, for the end of
a command's output.

Reading is built for long histories: lines are parsed with orjson when it is
installed (the standard library decides any line orjson refuses, so both
agree on what is corrupt), with the cyclic garbage collector paused, and
load_by_file() lets a reader keep only the fields it needs of each file.
"""

from __future__ import annotations

import gc
import json
import os
import re
import secrets
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from gpubench.errors import ResultsError
from gpubench.workloads.record_schema import SCHEMA_VERSION  # noqa: F401  (the version records are written under)

DEFAULT_DIR = Path("results")


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(3)


@dataclass
class LoadedRecords:
    records: list[dict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


class ResultsStore:
    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)

    @classmethod
    def for_writing(cls, directory: Path | None) -> "ResultsStore":
        """The directory (the default one, or the one the user named) is created on
        first use, with its parents; a path that is a file is refused."""
        directory = Path(directory) if directory is not None else DEFAULT_DIR
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            raise ResultsError(f"results directory {directory} is not a directory") from None
        except OSError as e:
            raise ResultsError(f"cannot create results directory {directory}: {e.strerror}") from None
        return cls(directory)

    @classmethod
    def existing(cls, directory: Path | None) -> "ResultsStore":
        directory = Path(directory) if directory is not None else DEFAULT_DIR
        if not directory.is_dir():
            what = "is not a directory" if directory.exists() else "does not exist"
            raise ResultsError(f"results directory {directory} {what}")
        return cls(directory)

    def files(self) -> list[Path]:
        return sorted(self.directory.glob("*.jsonl"))

    def append(self, run_id: str, record: dict) -> Path:
        """Append one record to this run's file and fsync it before returning."""
        path = self.directory / f"{run_id}.jsonl"
        line = json.dumps(record, sort_keys=True, allow_nan=False) + "\n"
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line.encode("utf-8"))
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as e:
            raise ResultsError(f"cannot write result record to {path}: {e.strerror}") from None
        return path

    def load(self) -> LoadedRecords:
        out = LoadedRecords()
        with fast_parsing():
            for path in self.files():
                _load_file(path, out)
        return out

    def load_by_file(self, paths: list[Path] | None = None) -> Iterator[LoadedRecords]:
        """The records file by file (all files, or `paths`), with the same checks as
        load(): a caller that keeps only some fields of each never holds the whole
        history at once."""
        for path in self.files() if paths is None else paths:
            out = LoadedRecords()
            _load_file(path, out)
            yield out


@contextmanager
def fast_parsing():
    """A long history is millions of small dicts: the cyclic collector would walk
    them again and again while they are built, and it finds nothing in them."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _json_loads():
    """orjson when it is installed (several times faster), else the standard library."""
    try:
        import orjson
    except ImportError:
        return json.loads
    return orjson.loads


# Corrupt lines of one file said one by one; past these, they are counted in one line.
CORRUPT_LINES_SAID = 5
_CORRUPT = "skipped a corrupt line (not a JSON object record)"
_MORE_CORRUPT = re.compile(r": skipped (\d+) more corrupt lines?$")


def corrupt_lines(warnings: list[str]) -> int:
    """How many corrupt lines the load warnings speak of (loads and the report
    cache keep only the warnings, so the count is read back from them)."""
    count = 0
    for warning in warnings:
        if warning.endswith(_CORRUPT):
            count += 1
        elif (more := _MORE_CORRUPT.search(warning)) is not None:
            count += int(more.group(1))
    return count


def load_summary(warnings: list[str]) -> str | None:
    """'skipped 2 corrupt lines in the results': the line a command ends with, or None."""
    count = corrupt_lines(warnings)
    if not count:
        return None
    return f"skipped {count} corrupt line{'s' if count != 1 else ''} in the results (see the warnings above)"


def _load_file(path: Path, out: LoadedRecords) -> None:
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ResultsError(f"cannot read {path}: {e.strerror}") from None
    loads = _json_loads()
    lines = data.split(b"\n")
    torn_tail = not data.endswith(b"\n")  # the last element is a partial line or b""
    records = out.records
    corrupt = 0
    for number, raw in enumerate(lines, start=1):
        try:
            record = loads(raw)
        except ValueError:  # includes orjson's JSONDecodeError and UnicodeDecodeError
            record = _slow_parse(raw)
        if type(record) is not dict:
            if record is _BLANK:
                continue
            if torn_tail and number == len(lines):
                out.warnings.append(f"{path}:{number}: skipped a truncated last line "
                                    "(a run stopped while writing it)")
                continue
            corrupt += 1
            if corrupt <= CORRUPT_LINES_SAID:
                out.warnings.append(f"{path}:{number}: {_CORRUPT}")
            continue
        if "schema_version" not in record:
            record["schema_version"] = 0
        records.append(record)
    if corrupt > CORRUPT_LINES_SAID:
        more = corrupt - CORRUPT_LINES_SAID
        out.warnings.append(f"{path}: skipped {more} more corrupt line{'s' if more != 1 else ''}")


_BLANK = object()


def _slow_parse(raw: bytes):
    """The standard library's verdict on a line the fast parser refused: blank
    lines are skipped, and anything else json accepts is kept, so the fast
    parser never changes which lines count as corrupt."""
    if not raw.strip():
        return _BLANK
    try:
        return json.loads(raw)
    except ValueError:
        return None
