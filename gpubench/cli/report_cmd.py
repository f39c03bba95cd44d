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
RUN_HELP = "Only records of this run (a unique prefix is enough); repeatable."
HTML_HELP = "Also write one self-contained HTML page: tables and plots inlined, opens offline."
PLOT_HELP = ("Also write figures per workload into DIR: throughput, efficiency, the step in parts "
             "per count, cost against time.")

# The options only report takes, one alias each (the shared ones are in options.py).
OnlyWorkloadOpt = Annotated[Optional[str], typer.Option("--workload", help="Only this workload.")]
RunIdsOpt = Annotated[Optional[List[str]], typer.Option("--run", metavar="ID", help=RUN_HELP)]
SinceOpt = Annotated[Optional[str], typer.Option("--since", metavar="DATE", help=SINCE_HELP)]
BaselineOpt = Annotated[Optional[str], typer.Option("--baseline", help=BASELINE_HELP)]
CompareOpt = Annotated[Optional[Tuple[str, str]], typer.Option("--compare", metavar="A B", help=COMPARE_HELP)]
HtmlOpt = Annotated[Optional[Path], typer.Option("--html", metavar="FILE", help=HTML_HELP)]
PlotOpt = Annotated[Optional[Path], typer.Option("--plot", metavar="DIR", help=PLOT_HELP)]
PlotFormatOpt = Annotated[str, typer.Option("--plot-format", help="png, svg or both.")]
FailuresOpt = Annotated[str, typer.Option("--failures", help=FAILURES_HELP)]


def _print(rendered) -> None:
    """The text on stdout, the notes beside csv and json on stderr."""
    for note in rendered.notes:
        err(f"note: {note}")
    out(rendered.text)


def report(
    results: ResultsOpt = None,
    fmt: FormatOpt = "table",
    workload: OnlyWorkloadOpt = None,
    run: RunIdsOpt = None,
    since: SinceOpt = None,
    baseline: BaselineOpt = None,
    compare: CompareOpt = None,
    html: HtmlOpt = None,
    plot: PlotOpt = None,
    plot_format: PlotFormatOpt = "png",
    failures: FailuresOpt = "latest",
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
    plot_formats = _check_flags(fmt, failures, plot_format, html, plot)
    loaded, frame, workload, where = _load(results, run, since, workload)
    if frame.empty:
        _no_records(frame, fmt, compare, bool(run or since), where, loaded.warnings)
        return
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
        _print_hosts(machines, fmt, fit)
    _write_extras(built, html, plot, plot_formats, compare, machines)
    _say_skipped(loaded.warnings)


def _check_flags(fmt: str, failures: str, plot_format: str, html: Path | None,
                 plot: Path | None) -> tuple[str, ...]:
    """Refuse a flag out of its range before anything is read; the plots' file formats."""
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
    return plot_formats


def _load(results: Path | None, run: list[str] | None, since: str | None, workload: str | None):
    """The records the filters leave: (what was loaded, the frame filtered, the workload
    as its records name it, the results directory as the messages name it)."""
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
    return loaded, frame, workload, where


def _no_records(frame, fmt: str, compare: tuple[str, str] | None, filtered: bool, where: str,
                warnings: list[str]) -> None:
    """No record is left: an empty list for a program reading csv or json, else an error."""
    if fmt in ("csv", "json") and not compare:
        err(f"note: no result records {'matching these filters ' if filtered else ''}in {where}")
        from gpubench.report.render import render_report

        out(render_report(frame, fmt))  # an empty list for the program reading it
        _say_skipped(warnings)
        return
    what = "matching these filters " if filtered else ""
    raise UsageError(f"no result records {what}in {where}; run 'gpubench run mnist-ddp' first")


def _print_hosts(machines: list, fmt: str, fit) -> None:
    """The sections per machine (spread across hosts, costs) under the tables for people."""
    from dataclasses import replace

    from gpubench.report.render import render_section

    host_fit = replace(fit, columns=())   # --columns names the report's own columns
    for section in machines:
        out("\n" + render_section(section, fmt, host_fit))


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
