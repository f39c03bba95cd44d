"""The results store: a directory of JSON Lines files, one record per line.

Each sweep appends to a file of its own, with an fsync after every record, and
no file is ever rewritten. A run killed mid-write can leave a torn last line;
the reader skips that one with a warning. Any other undecodable line is
corruption and is reported, never silently dropped.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path

from gpubench.errors import ResultsError

SCHEMA_VERSION = 1
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
        """The default directory is created on first use; one the user named must exist."""
        if directory is None:
            DEFAULT_DIR.mkdir(exist_ok=True)
            return cls(DEFAULT_DIR)
        return cls.existing(directory)

    @classmethod
    def existing(cls, directory: Path | None) -> "ResultsStore":
        directory = Path(directory) if directory is not None else DEFAULT_DIR
        if not directory.is_dir():
            raise ResultsError(f"results directory {directory} does not exist")
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
        for path in self.files():
            _load_file(path, out)
        return out


def _load_file(path: Path, out: LoadedRecords) -> None:
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ResultsError(f"cannot read {path}: {e.strerror}") from None
    lines = data.split(b"\n")
    torn_tail = not data.endswith(b"\n")  # the last element is a partial line or b""
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
            if not isinstance(record, dict):
                raise ValueError("not an object")
        except (ValueError, UnicodeDecodeError):
            if torn_tail and number == len(lines):
                out.warnings.append(f"{path}:{number}: skipped a truncated last line "
                                    "(a run stopped while writing it)")
                continue
            raise ResultsError(f"{path}:{number}: corrupt result record (not a JSON object); "
                               "fix or remove that line") from None
        record.setdefault("schema_version", 0)
        out.records.append(record)
