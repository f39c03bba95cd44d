"""How numbers, money and tables of rows read, wherever gpubench prints them:
the terminal, the report files and the HTML page all use these."""

from __future__ import annotations

import csv
import io
import json
import math
from typing import Sequence

from gpubench.table_fit import TableFit  # noqa: F401  (how callers say --wide, --columns)
from gpubench.table_fit import fill  # noqa: F401  (text wrapped, never inside a snippet of code)

FORMATS = ("table", "markdown", "csv", "json")


def spoken(words, conjunction: str = "or") -> str:
    """['a', 'b', 'c'] -> 'a, b or c': a list as a sentence (help texts, messages)."""
    words = list(words)
    if len(words) < 2:
        return "".join(words)
    return f"{', '.join(words[:-1])} {conjunction} {words[-1]}"


def format_cell(value, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if value != value:  # NaN
            return "-"
        if value == 0:
            return "0"
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        return f"{value:.{digits}g}" if abs(value) < 1 else f"{value:,.{max(digits - 1, 1)}f}"
    return str(value)


SMALLEST_DOLLARS = 1e-8     # less than this reads "<$0.00000001"


def format_dollars(dollars: float) -> str:
    """A cost to the cent; a fraction of a cent (a short mock or test run) to 4 places;
    less than that to two significant digits ('$0.0000056'): never '$0.0000' for a cost
    that is not nothing."""
    if dollars >= 0.01 or dollars <= 0:
        return f"${dollars:.2f}"
    if dollars >= 0.0001:
        return f"${dollars:.4f}"
    if dollars < SMALLEST_DOLLARS:
        return f"<${SMALLEST_DOLLARS:.8f}"
    digits = 1 - math.floor(math.log10(dollars))
    return f"${dollars:.{digits}f}"


def say_duration(seconds: float) -> str:
    """A time as people read it: below a second in milliseconds ('115.7 ms', '3.2 ms', never
    '0.1 s' for a step), below a millisecond in µs ('45 µs', '<1 µs', never '0.0'), then
    '1.2 s', '40 s', '12 min', '2.5 h', '3.2 days'. Each unit is kept while the number,
    rounded as shown, stays below the next unit's one ('999.96 ms' reads '1.0 s')."""
    if seconds < 1e-6:
        return "<1 µs"
    if round(seconds * 1e6) < 1000:
        return f"{seconds * 1e6:.0f} µs"
    if round(seconds * 1e3, 1) < 1000:
        return f"{seconds * 1e3:.1f} ms"
    if round(seconds, 1) < 10:
        return f"{seconds:.1f} s"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 120 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def say_flops(value: float) -> str:
    """2048 -> '2.05 kFLOP', 1.87e6 -> '1.87 MFLOP', 3.1e9 -> '3.1 GFLOP'."""
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= scale:
            return f"{value / scale:.3g} {prefix}FLOP"
    return f"{value:.3g} FLOP"


def render_rows(rows: list[dict], columns: list[tuple[str, str]], fmt: str,
                title: str | None = None, *, keep: Sequence[str] = (),
                fit: TableFit | None = None, below: str | None = None) -> str:
    """Render `rows` (dicts) with `columns` given as (key, heading) pairs, in one of
    FORMATS: a rich table for people, markdown, or csv and json (raw values, keys
    as headings) for programs. A table for people fits `fit`'s width (the
    terminal's by default): `keep` names the columns it keeps longest, in order of
    priority; the others go from the right, and a line under the table names them.
    `below`: the key of a column of long text (an error) that a table for people
    shows under each row instead, indented, wrapped at the whole width (fill)."""
    if fmt == "table" and below is not None and any(k == below for k, _ in columns):
        texts = [format_cell(row.get(below)) if row.get(below) is not None else "" for row in rows]
        columns = [(k, h) for k, h in columns if k != below]
    else:
        texts = None
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
    from gpubench.table_fit import fit_table, rich_table

    fit = fit or TableFit()
    numeric = [any(isinstance(row.get(k), (int, float)) and not isinstance(row.get(k), bool)
                   for row in rows) for k in keys]
    layout = fit_table(columns, cells, numeric, keep, fit)
    return rich_table(layout, title, texts)

