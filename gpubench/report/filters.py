"""`--run ID`, `--since DATE` and `--workload NAME`: which records a report looks at."""

from __future__ import annotations

import re
import time
from datetime import datetime, timedelta, timezone

import pandas as pd

from gpubench.errors import UsageError

_RELATIVE = re.compile(r"^(\d+)([hdw])$")
_UNITS = {"h": "hours", "d": "days", "w": "weeks"}


def parse_since(text: str, now: datetime | None = None) -> str:
    """A date, a date and time (UTC unless it says otherwise), or an age such
    as 7d, 12h, 2w -> the same instant as a record's time string."""
    word = text.strip()
    now = now or datetime.now(timezone.utc)
    relative = _RELATIVE.match(word)
    if relative:
        when = now - timedelta(**{_UNITS[relative.group(2)]: int(relative.group(1))})
    else:
        try:
            when = datetime.fromisoformat(word.replace("Z", "+00:00"))
        except ValueError:
            raise UsageError(f"--since: '{text}' is not a date (examples: 2026-01-31, "
                             "2026-01-31T12:00, 7d, 12h)") from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", when.astimezone(timezone.utc).timetuple())


def filter_records(frame: pd.DataFrame, runs: list[str] | None = None,
                   since: str | None = None) -> pd.DataFrame:
    """Records of the named runs (a unique prefix of a run id is enough) made
    at or after `since` (a string from parse_since)."""
    if runs:
        ids = frame["run_id"].unique()
        chosen = []
        for run in runs:
            if run in ids:
                chosen.append(run)
                continue
            matches = [i for i in ids if i.startswith(run)]
            if len(matches) != 1:
                what = "no run" if not matches else f"{len(matches)} runs"
                raise UsageError(f"--run: {what} matching '{run}' in the records")
            chosen.append(matches[0])
        frame = frame[frame["run_id"].isin(chosen)]
    if since:
        # Record times are ISO 8601 UTC strings ('...Z'), which sort as instants.
        frame = frame[frame["time"] >= since]
    return frame


def only_workload(frame: pd.DataFrame, workload: str, where: str = "results") -> pd.DataFrame:
    """The records of `workload`; a usage error when there are none in `where`
    (the results directory, as the message names it)."""
    if workload not in set(frame["workload"]):
        raise UsageError(f"--workload: no records of '{workload}' in {where}")
    return frame[frame["workload"] == workload]
