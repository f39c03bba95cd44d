"""Where run --trace's files land, and what a record says of them.

Every rank of the first run of each count writes one gzipped Chrome trace
(workloads/rank_trace.py); the launcher gets them into
<results>/<run id>/traces/<count>/ (a local run writes them there, a remote one
pulls them back with the run's other files), and the record names that folder
(trace_dir, relative to the results directory) and how many came (trace_files).
Later repeats of a count run untraced: one trace per rank and count is the
picture, and its steps cost the run time.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from gpubench.launch.base import SweepPoint
from gpubench.suite import WorkloadRef
from gpubench.sweep import runlogs
from gpubench.workloads.rank_trace import SUFFIX

TRACES_DIR = "traces"
# What torch's profiler (Kineto) writes to stderr as each trace starts and stops, whatever
# its log level: 'USDT:2026-12-05 02:54:22 9445:9445 SyncActivityProfilerHandler.cpp:52]
# profiler_start'; two ranks' may share a line, their newlines left on empty ones after it.
PROFILER_CHATTER = re.compile(r"USDT:\S+ \S+ \d+:\d+ \S+\] profiler_(?:start|stop)")
NOTHING_SAID = re.compile(r"^\s*(?:\[[^\]]*\]\s*)*$")  # blank, or a launcher's '[node1] ' alone


def relative_dir(run_id: str, point: SweepPoint) -> str:
    """'<run id>/traces/2gpus': a count's traces, relative to the results directory."""
    return f"{run_id}/{TRACES_DIR}/{runlogs.label(point)}"


def for_run(workload: WorkloadRef, directory: Path | None, run_id: str, point: SweepPoint,
            traced: set[SweepPoint]) -> WorkloadRef:
    """The workload as one run of `point` gets it: traced into the count's folder for the
    first run of the point (noted in `traced`), untraced for the others and where the
    store keeps no files (`directory` None)."""
    if workload.trace is None:
        return workload
    if directory is None or point in traced:
        return replace(workload, trace=None)
    traced.add(point)
    dest = Path(directory).resolve() / relative_dir(run_id, point)
    return replace(workload, trace=replace(workload.trace, directory=str(dest)))


def files_in(folder: Path) -> list[Path]:
    """The per-rank trace files in `folder`, by name."""
    return sorted(folder.glob(f"*{SUFFIX}")) if folder.is_dir() else []


def record_fields(directory: Path | None, workload: WorkloadRef) -> dict:
    """trace_dir and trace_files of a run that was traced (trace_dir null where nothing came
    back); nothing for one that was not."""
    if directory is None or workload.trace is None or workload.trace.directory is None:
        return {}
    dest = Path(workload.trace.directory)
    found = files_in(dest)
    relative = dest.relative_to(Path(directory).resolve()).as_posix() if found else None
    return {"trace_dir": relative, "trace_files": len(found)}


class ProfilerChatter:
    """Drops the profiler's own lines from a run's output (PROFILER_CHATTER): `keep(line)`
    is the line without them, or None where nothing else was in it (nor in the empty
    lines two ranks' interleaved chatter leaves after it)."""

    def __init__(self) -> None:
        self._empty_owed = 0  # empty lines still to come from chatter that shared a line

    def keep(self, line: str) -> str | None:
        if self._empty_owed and NOTHING_SAID.match(line):
            self._empty_owed -= 1
            return None
        rest, found = PROFILER_CHATTER.subn("", line)
        if not found:
            self._empty_owed = 0
            return line
        self._empty_owed = found - 1
        return None if NOTHING_SAID.match(rest) else rest
