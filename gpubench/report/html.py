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
.scroll { overflow-x: auto; max-width: 100%; }
table { border-collapse: collapse; margin: 1em 0 0.4em; font-size: 0.9em; }
th, td { border: 1px solid #bbb; padding: 0.3em 0.6em; }
td.num { white-space: nowrap; text-align: right; font-variant-numeric: tabular-nums; }
th { background: #e8eef7; }
tr.free td { background: #efefef; }
tr.fastest td { background: #fff1c1; } tr.cheapest td { background: #eaf7e6; }
tr.fastest.cheapest td { background: linear-gradient(90deg, #fff1c1 50%, #eaf7e6 50%); }
.key { font-size: 0.85em; color: #444; margin: 0.2em 0 0.6em; }
.swatch { display: inline-block; width: 0.9em; height: 0.9em; border: 1px solid #999;
          vertical-align: middle; margin: 0 0.3em 0 0.9em; }
.swatch.fastest { background: #fff1c1; } .swatch.cheapest { background: #eaf7e6; }
.swatch.free { background: #efefef; }
.story { font-size: 1.05em; max-width: 60em; }
.footnote { font-size: 0.85em; color: #555; max-width: 60em; }
section.stand-in { border-left: 4px solid #d9a400; padding-left: 1em; background: #fffbea; }
.figures { display: grid; gap: 1em; margin: 1em 0;
           grid-template-columns: repeat(auto-fill, minmax(min(100%, 520px), 1fr)); }
.figures img { width: 100%; max-width: 760px; height: auto; border: 1px solid #ddd; }
.notes li { color: #555; }
@media (max-width: 700px) { body { margin: 0.8em; } table { font-size: 0.8em; } }
"""

def html_cell(value) -> tuple[str, bool]:
    from gpubench.format import format_cell as fmt

    return escape(fmt(value)), isinstance(value, (int, float)) and not isinstance(value, bool)


# The marks of the "best" column: each has its colour in the table and in the key.
MARKS = (("fastest", "fastest"), ("cheapest", "cheapest paid"), ("free", "free"))
KEY_TEXT = {"fastest": "fastest: the most work per second",
            "cheapest": "cheapest paid: the least money for the same work, of the machines "
                        "that cost money",
            "free": "free: a machine with a price of 0 (your own), never counted as cheapest"}


def row_marks(row: dict) -> list[str]:
    words = str(row.get("best") or "").split(", ")
    return [cls for cls, word in MARKS if word in words]


def key_html(section: Section) -> str:
    """A key for every highlight the table uses."""
    used = [cls for cls, _ in MARKS if any(cls in row_marks(r) for r in section.rows)]
    if not used:
        return ""
    items = "".join(f'<span class="swatch {cls}"></span>{escape(KEY_TEXT[cls])}' for cls in used)
    return f'<p class="key" data-key="{" ".join(used)}">Key:{items}</p>'


def table_html(section: Section) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for _, h in section.columns)
    body = []
    for row in section.rows:
        marks = row_marks(row)
        cls = f' class="{" ".join(marks)}"' if marks else ""
        cells = []
        for key, _ in section.columns:
            text, numeric = html_cell(row.get(key))
            cells.append(f'<td class="num">{text}</td>' if numeric else f"<td>{text}</td>")
        body.append(f"<tr{cls}>{''.join(cells)}</tr>")
    table = (f'<div class="scroll"><table data-section="{escape(section.title)}"><thead><tr>'
             f"{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>")
    story = (f'<p class="story">{escape(section.story.text)}</p>' if section.story else "")
    notes = "".join(f'<p class="footnote">{escape(n)}</p>' for n in section.footnotes)
    return table + key_html(section) + story + notes


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
             '<meta name="viewport" content="width=device-width, initial-scale=1">'
             f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>",
             f"<h1>{escape(title)}</h1>",
             f"<p>Generated {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. "
             f"Speedup is relative to {escape(report.baseline.describe())}. "
             "Under each table, a key to its highlighted rows and, in one sentence, the fastest "
             "configuration against the cheapest paid one.</p>"]
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
                title = f' title="{escape(chr(10).join(plot.caption))}"' if plot.caption else ""
                parts.append(f'<img alt="{escape(plot.workload)} {plot.kind}" '
                             f'data-kind="{plot.kind}"{title} '
                             f'src="data:image/png;base64,{_png_data(plot.figure)}">')
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
