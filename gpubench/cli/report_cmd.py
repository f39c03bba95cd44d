"""`gpubench report`: speedup and cost tables, plots and an HTML page from result records.

pandas and matplotlib are imported inside the functions, so that importing the
CLI stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, List, Optional, Tuple

import typer

from gpubench.cli.options import ColumnsOpt, FormatOpt, ResultsOpt, WideOpt, table_fit
from gpubench.cli.render import check_format, err, out
from gpubench.errors import UsageError
from gpubench.store.results import ResultsStore

BASELINE_HELP = (
    "What speedup and efficiency are relative to. A GPU count (default 1: the 1-GPU record "
    "of the same workload on the same machine type), 'min' (the smallest GPU count of each "
    "machine type), or a machine: a provider, a GPU or provider:gpu, optionally @COUNT "
    "(e.g. 'lambda:A100@1': every configuration against one A100 on Lambda; efficiency is "
    "then speedup per GPU added).")
COMPARE_HELP = (
    "Two providers (lambda vast), two GPU types (H100 A100; part of the GPU name is enough) "
    "or two machines (lambda:H100 runpod:H100) side by side, matched on workload, precision "
    "and GPU count (and GPU, when comparing providers).")
SINCE_HELP = ("Only records made at or after DATE: 2026-01-31, 2026-01-31T12:00 (UTC), "
              "or an age: 12h, 7d, 2w.")
FAILURES_HELP = ("Which failed runs to list: none, latest (those of configurations that have "
                 "not run ok since) or all.")


def _print(rendered) -> None:
    """The text on stdout, the notes beside csv and json on stderr."""
    for note in rendered.notes:
        err(f"note: {note}")
    out(rendered.text)


def report(
    results: ResultsOpt = None,
    fmt: FormatOpt = "table",
    workload: Annotated[Optional[str], typer.Option("--workload", help="Only this workload.")] = None,
    run: Annotated[Optional[List[str]], typer.Option(
        "--run", metavar="ID",
        help="Only records of this run (a unique prefix is enough); repeatable.")] = None,
    since: Annotated[Optional[str], typer.Option("--since", metavar="DATE", help=SINCE_HELP)] = None,
    baseline: Annotated[Optional[str], typer.Option("--baseline", help=BASELINE_HELP)] = None,
    compare: Annotated[Optional[Tuple[str, str]], typer.Option(
        "--compare", metavar="A B", help=COMPARE_HELP)] = None,
    html: Annotated[Optional[Path], typer.Option(
        "--html", metavar="FILE",
        help="Also write one self-contained HTML page: tables and plots inlined, opens offline.")] = None,
    plot: Annotated[Optional[Path], typer.Option(
        "--plot", metavar="DIR",
        help="Also write figures per workload into DIR: throughput, efficiency, cost against time.")] = None,
    plot_format: Annotated[str, typer.Option("--plot-format", help="png, svg or both.")] = "png",
    failures: Annotated[str, typer.Option("--failures", help=FAILURES_HELP)] = "latest",
    wide: WideOpt = False,
    columns: ColumnsOpt = None,
) -> None:
    """Throughput, speedup, efficiency and cost per workload, GPU, provider and precision.

    Marks the fastest configuration of each workload and the cheapest (the least money
    for the same amount of work; a machine without a price has an unknown cost, never 0).
    Failed runs are listed, never counted. A configuration run several times (--repeat)
    shows the median of its latest runs and their spread, marked noisy above 10%; a
    speedup above the process count is marked suspect, with its likely cause.
    Tokens replace samples for workloads that measure tokens/s.
    Tables fit the terminal: the columns that do not fit are named under the table
    (--wide or --columns shows them); a number is never cut.
    The columns of a long history (64 MB of records and up) are cached in the state
    directory, so the next report reads only the files that changed.
    """
    from gpubench.report.plots import plot_file_formats, require_matplotlib

    check_format(fmt)
    from gpubench.report.compute import FAILURES

    if failures not in FAILURES:
        raise UsageError(f"--failures: '{failures}' is not one of {', '.join(FAILURES)}")
    plot_formats = plot_file_formats(plot_format)
    if html is not None:
        require_matplotlib("--html")
    if plot is not None:
        require_matplotlib("--plot")
    from gpubench.report.cache import load_frame_cached
    from gpubench.report.filters import filter_records, only_workload, parse_since

    from gpubench.cli.settings import flag_or_default

    results = flag_or_default("results", results)
    where = str(results or "results")
    since_text = parse_since(since) if since else None
    loaded = load_frame_cached(ResultsStore.existing(results))
    for warning in loaded.warnings:
        err(f"warning: {warning}")
    frame = filter_records(loaded.frame, run, since_text)
    if workload is not None:
        from gpubench.suite import canonical_name

        workload = canonical_name(workload)  # ./train.py as its records name it
        frame = only_workload(frame, workload, where)
    if frame.empty and fmt in ("csv", "json") and not compare:
        err(f"note: no result records {'matching these filters ' if (run or since) else ''}in {where}")
        from gpubench.report.render import render_report

        out(render_report(frame, fmt))  # an empty list for the program reading it
        _say_skipped(loaded.warnings)
        return
    if frame.empty:
        what = "matching these filters " if (run or since) else ""
        raise UsageError(f"no result records {what}in {where}; run 'gpubench run mnist-ddp' first")
    from gpubench.report.compute import build_report, parse_baseline
    from gpubench.report.render import render

    built = build_report(frame, parse_baseline(baseline, frame), failures)
    compare = tuple(compare) if compare else None
    from gpubench.report.render import REPORT_HINT

    fit = table_fit(wide, columns, REPORT_HINT)
    _print(render(built, fmt, workload, compare, fit))
    from gpubench.report.hosts import host_sections

    machines = [] if compare else host_sections(frame, workload)   # spread across hosts, costs
    if fmt not in ("csv", "json"):
        from dataclasses import replace

        from gpubench.report.render import render_section

        host_fit = replace(fit, columns=())   # --columns names the report's own columns
        for section in machines:
            out("\n" + render_section(section, fmt, host_fit))
    _write_extras(built, html, plot, plot_formats, compare, machines)
    _say_skipped(loaded.warnings)


def _say_skipped(warnings: list[str]) -> None:
    from gpubench.store.results import load_summary

    if (summary := load_summary(warnings)) is not None:
        err(f"warning: {summary}")


def _write_extras(report, html: Path | None, plot: Path | None, plot_formats: tuple[str, ...],
                  compare: tuple[str, str] | None, machines: list | None = None) -> None:
    if plot is not None:
        from gpubench.report.plots import write_plots

        written = write_plots(report, plot, plot_formats)
        err(f"wrote {len(written)} figure(s) to {plot}")
    if html is not None:
        from gpubench.report.html import write_html

        from gpubench.report.render import comparison

        extra = ([comparison(report, compare)[1]] if compare else []) + list(machines or [])
        write_html(report, html, extra or None)
        err(f"wrote {html}")


def register(app: typer.Typer) -> None:
    app.command("report")(report)
