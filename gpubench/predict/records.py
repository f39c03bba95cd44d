"""The records a prediction reads: the user's results, then the reference records that
ship with gpubench. Read afresh each time; a corrupt line is a warning, not a stop."""

from __future__ import annotations

from pathlib import Path

from gpubench.predict.basis import reference_dirs
from gpubench.store.results import DEFAULT_DIR, ResultsStore


def records_for_prediction(results: Path | None) -> tuple[list[dict], list[str]]:
    """(records, warnings). A results directory that does not exist yet holds nothing."""
    records: list[dict] = []
    warnings: list[str] = []
    for directory in [Path(results) if results is not None else DEFAULT_DIR, *reference_dirs()]:
        if directory.is_dir():
            loaded = ResultsStore(directory).load()
            records += loaded.records
            warnings += loaded.warnings
    return records, warnings
