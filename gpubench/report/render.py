"""A built report as text: the tables for people (terminal, markdown), or every
column for programs (csv, json), or two machines side by side.

Notes (repeated records, unknown prices) end the text of a table; beside csv
and json they are returned apart, so that stdout stays machine-readable.
"""

from __future__ import annotations

import json
import sys
import textwrap
from dataclasses import dataclass, field, replace

from gpubench.errors import UsageError
from gpubench.format import TableFit, fill, render_rows
from gpubench.report.compare import Comparison
from gpubench.report.compute import Report, as_frame, build_report, parse_baseline
from gpubench.report.tables import (Section, compare_machine_rows, compare_section,
                                    machine_columns, machine_rows, workload_sections)
from gpubench.table_fit import check_column_names, named_columns, terminal_width

MACHINE_FORMATS = ("csv", "json")


@dataclass
class RenderedReport:
    text: str
    notes: list[str] = field(default_factory=list)  # for stderr; empty when the text holds them


# How a narrow table of the report says what it left out.
REPORT_HINT = "--wide shows every column, --columns a,b,c the ones named"


def render(report: Report, fmt: str, workload: str | None = None,
           compare: tuple[str, str] | None = None, fit: TableFit | None = None) -> RenderedReport:
    """The report in `fmt` (table, markdown, csv, json): one workload's rows, or
    the two machines `compare` names side by side. `fit`: how tables for people
    meet the terminal (--wide, --columns); --columns also picks csv and json keys."""
    fit = fit or TableFit(hint=REPORT_HINT)
    if compare:
        return _render_compare(report, compare, fmt, fit)
    if fmt in MACHINE_FORMATS:
        columns = _picked(machine_columns(), fit)
        rows = machine_rows(report, workload)
        if fmt == "csv":  # a mapping (breakdown, points_lost) in a cell: as JSON
            rows = [{k: json.dumps(v) if isinstance(v, dict) else v for k, v in r.items()} for r in rows]
        return RenderedReport(render_rows(rows, columns, fmt), list(report.notes))
    sections = workload_sections(report, workload)
    if fit.columns:
        check_column_names(fit.columns, [c for s in sections for c in s.columns])
    parts = [render_section(section, fmt, fit) for section in sections]
    said = [f"speedup is relative to {report.baseline.describe()}"] \
        if report.rows["speedup"].notna().any() else []  # a bandwidth test alone has none
    notes = report.notes + said
    return RenderedReport("\n\n".join(parts + ([note_lines(notes, fit)] if notes else [])))


NOTE, NOTE_INDENT = "note: ", "      "


def note_lines(notes: list[str], fit: TableFit | None = None) -> str:
    """Each note on lines of its own, wrapped at the terminal's width (fit.width),
    its later lines under its first word, never inside a snippet of code."""
    width = (fit.width if fit is not None else None) or terminal_width()
    return "\n".join(fill(NOTE + n, width, NOTE_INDENT) for n in notes)


def render_report(records, fmt: str, workload: str | None = None, *,
                  baseline: str | None = None, compare: tuple[str, str] | None = None,
                  notes_out=None, failures: str = "latest") -> str:
    """Records (dicts, or a frame from normalise) straight to text in `fmt`, as a
    sweep shows its result: with `workload`, that workload's records alone, so that
    its notes are its own (not those of another script in the same results
    directory). Notes beside csv and json go to `notes_out` (default stderr)."""
    frame = as_frame(records)
    if workload is not None and not frame.empty:
        frame = frame[frame["workload"] == workload]
    rendered = render(build_report(frame, parse_baseline(baseline, frame), failures), fmt,
                      workload, compare)
    for note in rendered.notes:
        print(note_lines([note]), file=notes_out or sys.stderr, flush=True)
    return rendered.text


def comparison(report: Report, compare: tuple[str, str]) -> tuple[Comparison, Section]:
    """The two machines `compare` names side by side, and that as a table for people."""
    from gpubench.report.compare import common_ground, nothing_shared
    from gpubench.report.compare import compare as compare_rows
    from gpubench.report.selectors import parse_selector

    a, b = (parse_selector(text, report.rows, "--compare") for text in compare)
    table = compare_rows(report.rows, a, b)
    if table.rows.empty:
        raise UsageError(f"--compare: no configuration of '{a.text}' or '{b.text}' "
                         "ran successfully in these records")
    if nothing_shared(table):
        raise UsageError(f"--compare: {common_ground(report.rows, a, b)}")
    return table, compare_section(table)


def render_section(section: Section, fmt: str, fit: TableFit | None = None) -> str:
    """The table, then its cost story and footnotes."""
    said = ([section.story.text] if section.story else []) + section.footnotes
    if fmt == "markdown":
        return (f"### {section.title}\n\n" + render_rows(section.rows, section.columns, fmt)
                + "".join(f"\n\n{line}" for line in said))
    fit = fit or TableFit(hint=REPORT_HINT)
    if fit.columns and not named_columns(section.columns, fit.columns):
        fit = replace(fit, columns=())  # none of this table's: it shows as it would
    below = section.below
    if below is not None and fit.columns and not named_columns(
            [c for c in section.columns if c[0] == below], fit.columns):
        below = None  # --columns left it out: render_rows drops it with the others
    table = render_rows(section.rows, section.columns, fmt, title=section.title,
                        keep=section.keep, fit=fit, below=below)
    width = max(len(line) for line in table.splitlines())
    return table + "".join("\n" + textwrap.fill(line, width=max(width, 60)) for line in said)


def _picked(columns: list[tuple[str, str]], fit: TableFit) -> list[tuple[str, str]]:
    """The csv/json columns --columns names, in its order (all without it)."""
    if not fit.columns:
        return columns
    check_column_names(fit.columns, columns)
    return [columns[i] for i in named_columns(columns, fit.columns)]


def _render_compare(report: Report, compare: tuple[str, str], fmt: str,
                    fit: TableFit) -> RenderedReport:
    table, section = comparison(report, compare)
    if fmt in MACHINE_FORMATS:
        rows = compare_machine_rows(table)
        columns = _picked([(k, k) for k in table.rows.columns], fit)
        return RenderedReport(render_rows(rows, columns, fmt), list(report.notes))
    if fit.columns:
        check_column_names(fit.columns, section.columns)
    notes = note_lines(report.notes, fit)
    return RenderedReport(render_section(section, fmt, fit) + (f"\n{notes}" if notes else ""))
