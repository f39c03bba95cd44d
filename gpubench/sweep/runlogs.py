"""The whole output of every run, kept beside its records.

One file per run and count: <results>/logs/<run id>/<count>.log, e.g.
logs/20260131-120000-ab12cd/2gpus.log, and 2gpus-r3.log for the third of
several repeats. The record names its file (log_file, relative to the results
directory); `gpubench logs RUN [COUNT]` shows them. The output is held in
memory while the run lasts (the run's working directory is watched for files it
leaves, so nothing is written there meanwhile) and written when it ends, or when
it is interrupted (Ctrl-C: what it said so far); a run that prints more than
MAX_BYTES keeps its beginning and its last lines.
"""

from __future__ import annotations

import re
from pathlib import Path

from gpubench.errors import ResultsError, UsageError
from gpubench.launch.base import SweepPoint

LOG_DIR = "logs"
MAX_BYTES = 32 * 2**20


def label(point: SweepPoint, repeat: int = 1, repeat_count: int = 1) -> str:
    """'1gpu', '4gpus', '2nodes-4gpus'; '-r2' for the second of several repeats."""
    gpus = f"{point.procs_per_node}gpu{'s' if point.procs_per_node > 1 else ''}"
    text = gpus if point.nodes == 1 else f"{point.nodes}nodes-{gpus}"
    return text + (f"-r{repeat}" if repeat_count > 1 else "")


def relative_path(run_id: str, name: str) -> str:
    """Where a run's log goes, relative to the results directory."""
    return f"{LOG_DIR}/{run_id}/{name}.log"


class RunLog:
    """One run's output lines, as they come, up to MAX_BYTES."""

    def __init__(self, header: list[str]) -> None:
        self.lines = list(header)
        self.size = sum(len(line) + 1 for line in header)
        self.dropped = 0

    def add(self, line: str) -> None:
        if self.size < MAX_BYTES:
            self.lines.append(line)
            self.size += len(line) + 1
        else:
            self.dropped += 1

    def write(self, directory: Path, relative: str, tail: list[str], footer: list[str]) -> None:
        """Write it to directory/relative: the lines kept, then (when some were left
        out) the run's last lines, then `footer`."""
        lines = list(self.lines)
        if self.dropped and tail:
            lines.append(f"[... {self.dropped} lines left out; the last {len(tail)} follow ...]")
            lines += tail
        elif self.dropped:
            lines.append(f"[... {self.dropped} more lines left out ...]")
        path = Path(directory) / relative
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("\n".join(lines + footer) + "\n", encoding="utf-8", errors="replace")
        except OSError as e:
            raise ResultsError(f"cannot write the run's log {path}: {e.strerror}") from None


def run_logs(directory: Path, run: str) -> tuple[str, list[Path]]:
    """The run id that `run` names (the id or a unique prefix) and its log files."""
    root = Path(directory) / LOG_DIR
    runs = sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    matches = [r for r in runs if r == run] or [r for r in runs if r.startswith(run)]
    if len(matches) != 1:
        what = "no run" if not matches else f"{len(matches)} runs"
        known = f"; runs with logs: {', '.join(runs[-5:])}" if runs else ""
        raise UsageError(f"{what} matching '{run}' in {root}{known}")
    return matches[0], sorted((root / matches[0]).glob("*.log"), key=_order)


def for_count(logs: list[Path], count: int) -> list[Path]:
    """The logs of the runs at `count` GPUs (world size, any nodes, every repeat)."""
    return [p for p in logs if world_of(p) == count]


def world_of(path: Path) -> int | None:
    """The GPU count (world size) of a log file's run, from its name."""
    return _world(path.stem)


_LABEL = re.compile(r"^(?:(\d+)nodes-)?(\d+)gpus?(?:-r(\d+))?$")


def _world(stem: str) -> int | None:
    found = _LABEL.match(stem)
    if not found:
        return None
    nodes, gpus = int(found.group(1) or 1), int(found.group(2))
    return nodes * gpus


def _order(path: Path) -> tuple:
    found = _LABEL.match(path.stem)
    if not found:
        return (1, path.stem)
    return (0, int(found.group(1) or 1) * int(found.group(2)), int(found.group(1) or 1),
            int(found.group(3) or 1))
