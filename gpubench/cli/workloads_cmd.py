"""`gpubench workloads`: the standard suite, one line each."""

from __future__ import annotations

import typer

from gpubench.cli.render import out
from gpubench.suite import SUITE


def workloads() -> None:
    """List the workload suite: what each runs, measures, and its default sizes."""
    width = max(len(e.name) for e in SUITE)
    for entry in SUITE:
        out(f"{entry.name:<{width}}  {entry.summary}; measures {entry.measures}; defaults: {entry.defaults}")


def register(app: typer.Typer) -> None:
    app.command("workloads")(workloads)
