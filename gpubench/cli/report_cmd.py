"""`gpubench report`: the speedup and cost table computed from result records."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from gpubench.cli.render import check_format, err, out, render_rows
from gpubench.results import ResultsStore

REPORT_TABLE = [
    ("workload", "workload"), ("provider", "provider"), ("gpu_name", "gpu"),
    ("precision", "precision"), ("gpu_count", "gpus"), ("throughput", "throughput"),
    ("throughput_unit", "unit"), ("speedup", "speedup"), ("efficiency", "efficiency"),
    ("price_per_hour", "$/h"), ("epoch_seconds", "epoch s"), ("cost_per_epoch", "$/epoch"),
]
REPORT_MACHINE = REPORT_TABLE[:3] + [("instance_type", "instance")] + REPORT_TABLE[3:] + [
    ("cost_per_million_samples", "$/M samples"), ("samples_per_dollar", "samples/$"),
    ("median_step_s", "median_step_s"), ("run_id", "run_id")]


def render_report(records: list[dict], fmt: str, workload: str | None = None) -> str:
    from gpubench.report.compute import build_report, report_rows

    report = build_report(records)
    rows = report_rows(report)
    if workload is not None:
        rows = [r for r in rows if r["workload"] == workload]
    columns = REPORT_TABLE if fmt in ("table", "markdown") else REPORT_MACHINE
    text = render_rows(rows, columns, fmt, title="gpubench report")
    if fmt in ("table", "markdown"):
        for note in report.notes:
            text += f"\nnote: {note}"
        failed = report.failed
        if workload is not None:
            failed = failed[failed["workload"] == workload]
        for _, row in failed.iterrows():
            text += (f"\nfailed: {row['workload']} at {row['gpu_count']} GPUs on "
                     f"{row['provider']}: {row.get('error')}")
    return text


def report(
    results: Optional[Path] = typer.Option(None, "--results", help="Results directory [default: ./results]."),
    fmt: str = typer.Option("table", "--format", help="table, markdown, csv or json."),
) -> None:
    """Throughput, speedup, efficiency and cost per workload and machine type."""
    check_format(fmt)
    loaded = ResultsStore.existing(results).load()
    for warning in loaded.warnings:
        err(f"warning: {warning}")
    if not loaded.records and fmt in ("table", "markdown"):
        err(f"no result records in {results or 'results'}; run 'gpubench run mnist-ddp' first")
        raise typer.Exit(1)
    out(render_report(loaded.records, fmt))


def register(app: typer.Typer) -> None:
    app.command("report")(report)
