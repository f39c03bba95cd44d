"""After run --trace (and bench --trace): each traced count's ranks in one table (the
window, compute, communication, their overlap, idle: gpubench.report.traces), where
the files are, and what opens them."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

COLUMNS = [("count", "count"), ("rank", "rank"), ("steps", "steps"), ("window", "window ms"),
           ("compute", "compute ms"), ("comm", "comm ms"), ("overlap", "overlap ms"),
           ("idle", "idle ms")]


def _ms(value: float, share: float | None = None) -> str:
    """'12.3', '12.3 (45%)' with its share of the window."""
    text = f"{value:,.1f}" if value >= 0.05 or value == 0 else f"{value:.3f}"
    return text if share is None else f"{text} ({share:.0%})"


def rows(counts) -> list[dict]:
    """One row per rank of every count (CountTraces)."""
    out = []
    for count in counts:
        for r in count.ranks:
            out.append({"count": count.label, "rank": r.rank, "steps": r.steps or "-",
                        "window": _ms(r.window_ms), "compute": _ms(r.compute_ms, r.share(r.compute_ms)),
                        "comm": _ms(r.comm_ms, r.share(r.comm_ms)), "overlap": _ms(r.overlap_ms),
                        "idle": _ms(r.idle_ms, r.share(r.idle_ms))})
    return out


def trace_lines(results: Path, records: list[dict], run_ids: list[str]) -> list[str]:
    """What is said after a traced sweep: the table, then for each count whatever is
    missing, then where the files are and how to open them. Nothing where no record of
    the sweep was traced."""
    from gpubench.cli.render import render_rows
    from gpubench.format import fill
    from gpubench.table_fit import terminal_width
    from gpubench.report.traces import OPEN_WITH, for_records

    counts = for_records(results, records)
    if not counts:
        return []
    lines = []
    found = rows(counts)
    if found:
        bases = sorted({r.basis for c in counts for r in c.ranks})
        how = "; ".join(_basis_words(b) for b in bases)
        lines += ["", render_rows(found, COLUMNS, "table",
                                  title=f"traced steps per rank ({how})")]
    for count in counts:
        if not count.ranks and not count.unreadable:
            lines.append(f"{count.label}: no trace came back (see the run's log: gpubench logs "
                         f"{' '.join(run_ids[:1])} {count.world_size or ''})".rstrip())
        elif count.missing:
            lines.append(f"{count.label}: {count.missing} rank(s) of {count.world_size} left no trace")
        for problem in count.unreadable:
            lines.append(f"{count.label}: {problem}")
    folders = sorted({str(c.folder) for c in counts if c.ranks or c.unreadable})
    if folders:
        where = os.path.commonpath(folders)
        lines.append(fill(f"traces (one gzipped Chrome trace per rank) in {where}; open one in "
                          f"{OPEN_WITH}", terminal_width()))
    return lines


def _basis_words(basis: str) -> str:
    from gpubench.report.traces import GPU

    if basis == GPU:
        return "from the GPU's kernels: NCCL's are communication"
    return "from the CPU ops: the collectives' are communication"


def say_traces(say: Callable[[str], None], results: Path, records: list[dict],
               run_ids: list[str]) -> None:
    for line in trace_lines(results, records, run_ids):
        say(line)
