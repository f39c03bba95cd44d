"""The one place listings are rendered: a rich table in a terminal, or
markdown, csv and json for other programs. Every command uses it."""

from __future__ import annotations

import csv
import io
import json
import sys
from typing import Sequence

from gpubench.errors import UsageError
from gpubench.format import format_cell, format_dollars  # noqa: F401  (the commands' money and numbers)

FORMATS = ("table", "markdown", "csv", "json")


def err(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def out(message: str = "") -> None:
    print(message, flush=True)


def check_format(fmt: str, allowed: Sequence[str] = FORMATS) -> str:
    if fmt not in allowed:
        raise UsageError(f"--format: '{fmt}' is not one of {', '.join(allowed)}")
    return fmt


def render_rows(rows: list[dict], columns: list[tuple[str, str]], fmt: str,
                title: str | None = None) -> str:
    """Render `rows` (dicts) with `columns` given as (key, heading) pairs."""
    keys = [k for k, _ in columns]
    if fmt == "json":
        return json.dumps([{k: row.get(k) for k in keys} for row in rows], indent=2)
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(keys)
        for row in rows:
            writer.writerow(["" if row.get(k) is None else row.get(k) for k in keys])
        return buf.getvalue().rstrip("\n")
    headings = [h for _, h in columns]
    cells = [[format_cell(row.get(k)) for k in keys] for row in rows]
    if fmt == "markdown":
        from tabulate import tabulate

        return tabulate(cells, headers=headings, tablefmt="github", disable_numparse=True)
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, header_style="bold")
    for key, heading in columns:
        numeric = any(isinstance(row.get(key), (int, float)) for row in rows)
        table.add_column(heading, justify="right" if numeric else "left")
    for line in cells:
        table.add_row(*line)
    buf = io.StringIO()
    Console(file=buf, width=max(100, _terminal_width()), force_terminal=False,
            color_system=None).print(table)
    return buf.getvalue().rstrip("\n")


def _terminal_width() -> int:
    import shutil

    return shutil.get_terminal_size((140, 24)).columns
