"""A built report as text: the tables for people (terminal, markdown), or every
column for programs (csv, json), or two machines side by side.

Notes (repeated records, unknown prices) end the text of a table; beside csv
and json they are returned apart, so that stdout stays machine-readable.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from gpubench.errors import UsageError
from gpubench.format import render_rows
from gpubench.report.compare import Comparison
from gpubench.report.compute import Report, as_frame, build_report, parse_baseline
from gpubench.report.tables import (Section, compare_machine_rows, compare_section,
                                    machine_columns, machine_rows, workload_sections)

MACHINE_FORMATS = ("csv", "json")


@dataclass
class RenderedReport:
    text: str
    notes: list[str] = field(default_factory=list)  # for stderr; empty when the text holds them


def render(report: Report, fmt: str, workload: str | None = None,
           compare: tuple[str, str] | None = None) -> RenderedReport:
    """The report in `fmt` (table, markdown, csv, json): one workload's rows, or
    the two machines `compare` names side by side."""
    if compare:
        return _render_compare(report, compare, fmt)
    if fmt in MACHINE_FORMATS:
        return RenderedReport(render_rows(machine_rows(report, workload), machine_columns(), fmt),
                              list(report.notes))
    parts = [render_section(section, fmt) for section in workload_sections(report, workload)]
    said = [f"speedup is relative to {report.baseline.describe()}"] \
        if report.rows["speedup"].notna().any() else []  # a bandwidth test alone has none
    notes = report.notes + said
    return RenderedReport("\n\n".join(parts + ["\n".join(f"note: {n}" for n in notes)]))


def render_report(records, fmt: str, workload: str | None = None, *,
                  baseline: str | None = None, compare: tuple[str, str] | None = None,
                  notes_out=None, failures: str = "latest") -> str:
    """Records (dicts, or a frame from normalise) straight to text in `fmt`, as a
    sweep shows its result. Notes beside csv and json go to `notes_out` (default stderr)."""
    frame = as_frame(records)
    rendered = render(build_report(frame, parse_baseline(baseline, frame), failures), fmt,
                      workload, compare)
    for note in rendered.notes:
        print(f"note: {note}", file=notes_out or sys.stderr, flush=True)
    return rendered.text


def comparison(report: Report, compare: tuple[str, str]) -> tuple[Comparison, Section]:
    """The two machines `compare` names side by side, and that as a table for people."""
    from gpubench.report.compare import compare as compare_rows
    from gpubench.report.selectors import parse_selector

    a, b = (parse_selector(text, report.rows, "--compare") for text in compare)
    table = compare_rows(report.rows, a, b)
    if table.rows.empty:
        raise UsageError(f"--compare: no configuration of '{a.text}' or '{b.text}' "
                         "ran successfully in these records")
    return table, compare_section(table)


def render_section(section: Section, fmt: str) -> str:
    if fmt == "markdown":
        return f"### {section.title}\n\n" + render_rows(section.rows, section.columns, fmt)
    return render_rows(section.rows, section.columns, fmt, title=section.title)


def _render_compare(report: Report, compare: tuple[str, str], fmt: str) -> RenderedReport:
    table, section = comparison(report, compare)
    if fmt in MACHINE_FORMATS:
        rows = compare_machine_rows(table)
        return RenderedReport(render_rows(rows, [(k, k) for k in table.rows.columns], fmt),
                              list(report.notes))
    return RenderedReport(render_section(section, fmt) + "".join(f"\nnote: {n}" for n in report.notes))
