"""`gpubench workloads`: the standard suite, one line each (or rows for programs)."""

from __future__ import annotations

import typer

from gpubench.cli.options import FormatOpt
from gpubench.cli.render import check_format, out, render_rows
from gpubench.suite import SUITE

COLUMNS = [("name", "name"), ("summary", "summary"), ("measures", "measures"),
           ("defaults", "defaults"), ("script", "script")]


def workloads(fmt: FormatOpt = "table") -> None:
    """List the workload suite: what each runs, measures, and its default sizes."""
    check_format(fmt)
    if fmt != "table":
        out(render_rows([vars(entry) for entry in SUITE], COLUMNS, fmt))
        return
    width = max(len(e.name) for e in SUITE)
    for entry in SUITE:
        out(f"{entry.name:<{width}}  {entry.summary}; measures {entry.measures}; defaults: {entry.defaults}")


def register(app: typer.Typer) -> None:
    app.command("workloads")(workloads)
