"""What a machine cost, added to the records of the runs made on it once it is gone.

A bench writes each record as its run ends, before the machine is taken down; what
the machine cost is known only after (the estimate: price x time from creation to
confirmed termination; the billed amount: what the provider's billing says, where it
says). Both are added to each record of the bench's own run files (record_schema:
estimated_cost, billed_cost), so that every reader of the records (the report, a
user's script, `--format json`) sees them without a join.

This is the one rewrite a results file ever gets, made so that no record is lost:
the whole file is read and checked first (a line that is not a record leaves the
file as it is, with a warning), the new text is written beside it and fsynced, and
os.replace swaps it in at once; a reader sees the old file or the new, never half.
Only files of runs that have ended are touched: nothing appends to them any more.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path


def add_machine_cost(directory: Path, run_ids: list[str], estimated: float | None,
                     billed: float | None) -> list[str]:
    """Set estimated_cost and billed_cost in every record of these runs' files;
    returns a warning per file left as it was."""
    warnings = []
    for run_id in run_ids:
        path = Path(directory) / f"{run_id}.jsonl"
        if not path.exists():
            continue   # every count was already recorded: nothing ran
        why = rewrite_records(path, {"estimated_cost": estimated, "billed_cost": billed})
        if why:
            warnings.append(f"{path}: its records do not say what the machine cost ({why})")
    return warnings


def rewrite_records(path: Path, fields: dict) -> str | None:
    """Add `fields` to every record of the file, atomically; None when done, else why not."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        return f"cannot read it: {e}"
    records = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            return f"line {number} is not a record"
        if not isinstance(record, dict):
            return f"line {number} is not a record"
        records.append({**record, **fields})
    new = "".join(json.dumps(r, sort_keys=True, allow_nan=False) + "\n" for r in records)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(new)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return f"cannot write it: {e.strerror}"
    _fsync_dir(path.parent)
    return None


def _fsync_dir(directory: Path) -> None:
    """The rename itself survives a crash once the directory is synced."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
