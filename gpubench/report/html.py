"""One self-contained HTML page: the report's tables and its figures inlined as
base64 PNG, styles in the page, no scripts, nothing fetched from a network."""

from __future__ import annotations

import base64
import io
import time
from html import escape
from pathlib import Path

from gpubench.errors import ResultsError
from gpubench.report.compute import Report
from gpubench.report.tables import Section, workload_sections

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
h1 { font-size: 1.6em; } h2 { margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border: 1px solid #bbb; padding: 0.3em 0.6em; white-space: nowrap; }
th { background: #e8eef7; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.best td { background: #eaf7e6; }
section.stand-in { border-left: 4px solid #d9a400; padding-left: 1em; background: #fffbea; }
.figures img { max-width: 100%; width: 640px; margin: 0.5em 1em 0.5em 0; border: 1px solid #ddd; }
.notes li { color: #555; }
"""


def html_cell(value) -> tuple[str, bool]:
    from gpubench.format import format_cell as fmt

    return escape(fmt(value)), isinstance(value, (int, float)) and not isinstance(value, bool)


def table_html(section: Section) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for _, h in section.columns)
    body = []
    for row in section.rows:
        cls = ' class="best"' if row.get("best") else ""
        cells = []
        for key, _ in section.columns:
            text, numeric = html_cell(row.get(key))
            cells.append(f'<td class="num">{text}</td>' if numeric else f"<td>{text}</td>")
        body.append(f"<tr{cls}>{''.join(cells)}</tr>")
    return (f'<table data-section="{escape(section.title)}"><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table>")


def _png_data(figure) -> str:
    buf = io.BytesIO()
    figure.savefig(buf, format="png")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def render_html(report: Report, title: str = "gpubench report",
                extra: list[Section] | None = None) -> str:
    """The page: `extra` sections (a comparison) first, then each workload's
    table with its figures, then the failed runs and the notes."""
    from gpubench.report.plots import report_plots

    plots: dict[str, list] = {}
    for plot in report_plots(report):
        plots.setdefault(plot.workload, []).append(plot)
    parts = [f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
             f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>",
             f"<h1>{escape(title)}</h1>",
             f"<p>Generated {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. "
             f"Speedup is relative to {escape(report.baseline.describe())}. "
             "Highlighted rows are the fastest or the cheapest configuration of a workload.</p>"]
    for section in extra or []:
        parts.append(f"<h2>{escape(section.title)}</h2>")
        parts.append(table_html(section))
    for section in workload_sections(report):
        if section.stand_in:  # kept apart from GPU figures, and looking it
            parts.append('<section class="stand-in">')
        parts.append(f"<h2>{escape(section.title)}</h2>")
        if section.stand_in:
            parts.append("<p>These rows ran on a CPU with the gloo backend, one process per GPU "
                         "the machine advertises (the mock cloud, or a machine whose torch sees "
                         "no CUDA): they test the workflow, they do not measure a GPU.</p>")
        parts.append(table_html(section))
        figures = plots.pop(section.workload or section.title, [])
        if figures:
            parts.append('<div class="figures">')
            for plot in figures:
                parts.append(f'<img alt="{escape(plot.workload)} {plot.kind}" '
                             f'data-kind="{plot.kind}" src="data:image/png;base64,{_png_data(plot.figure)}">')
            parts.append("</div>")
        if section.stand_in:
            parts.append("</section>")
    if report.notes:
        parts.append('<h2>Notes</h2><ul class="notes">')
        parts.extend(f"<li>{escape(n)}</li>" for n in report.notes)
        parts.append("</ul>")
    parts.append("</body></html>")
    return "\n".join(parts)


def write_html(report: Report, path: Path, extra: list[Section] | None = None) -> Path:
    text = render_html(report, extra=extra)
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as e:
        raise ResultsError(f"--html: cannot write {path}: {e.strerror}") from None
    return Path(path)
