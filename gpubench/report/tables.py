"""What a report shows, as sections of rows and columns, for every output.

Machine formats (csv, json) get one flat list with every column and raw
values (unknown = null/empty). Tables for people (terminal, markdown, HTML)
get one section per workload with its unit in the headings, "unknown" for a
cost without a price, and the cheapest and fastest configuration marked.
Both take their columns from the record schema (workloads/record_schema.py):
every report column for programs, the columns with a heading for people. A
bandwidth test's table shows its bandwidth columns instead of speedup and
costs per unit of work; rows that ran on a CPU standing in for GPUs (the mock
cloud) get a table of their own; a "check" column says which rows are noisy,
suspect or measured on a busy machine (the notes say why).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from gpubench.format import format_cell, format_dollars
from gpubench.report.checks import BANDWIDTH_UNITS, is_stand_in
from gpubench.report.compare import Comparison
from gpubench.report.compute import Report, json_ready, report_rows
from gpubench.report.selectors import short_gpu
from gpubench.report.story import CostStory, cost_story
from gpubench.workloads import record_schema
from gpubench.workloads.record_schema import (ABOVE_ONE, BANDWIDTH_TABLES, MULTI_NODE, SOME_ROW,
                                              VARIES, WORK_TABLES, Field)

UNKNOWN = "unknown"
RUNS = "runs"  # the unit of work of a user's script timed as a whole (recording.script_record)


# The columns a table for people keeps longest when the terminal is narrow, most
# wanted first: what the configuration is, how fast, how well it scales, what it
# costs for the same work, and the marks. The others go first, from the right.
KEY_COLUMNS = ("provider", "gpu_name", "gpu_count", "nodes", "workload_args", "script_sha256",
               "throughput", "speedup", "efficiency", "price_per_hour", "cost_per_epoch",
               "cost_per_million_samples", "best", "peak_busbw", "largest_size_busbw",
               "check", "precision")
FAILED_KEY_COLUMNS = ("workload", "provider", "gpu_name", "gpu_count", "nodes", "error",
                      "failures", "precision")


@dataclass
class Section:
    title: str
    columns: list[tuple[str, str]]  # (key, heading)
    rows: list[dict]
    workload: str | None = None  # the workload a table of figures shows
    stand_in: bool = False  # its rows ran on a CPU standing in for GPUs
    keep: tuple[str, ...] = KEY_COLUMNS  # kept longest in a narrow terminal, in this order
    story: CostStory | None = None  # fastest against cheapest paid, in words
    footnotes: list[str] = field(default_factory=list)  # what a mark in a cell means
    below: str | None = None  # a column of long text a terminal table shows under each row


def machine_columns() -> list[tuple[str, str]]:
    """Every report column, headed by its name: the rows' columns, then those only
    failed runs carry."""
    names = (record_schema.report_columns(record_schema.EVERY_ROW)
             + record_schema.report_columns(record_schema.FAILED_ROWS))
    return [(c, c) for c in names]


def cost_columns() -> tuple[str, ...]:
    """The columns the report computes from the price: unknown when it is."""
    return tuple(f.name for f in record_schema.FIELDS
                 if f.filled_by == record_schema.REPORT and "$" in f.unit)


def machine_rows(report: Report, workload: str | None = None) -> list[dict]:
    rows = report_rows(report, include_failed=True)
    return [r for r in rows if workload is None or r["workload"] == workload]


def _display(row: dict) -> dict:
    shown = dict(row)
    if row.get("price_per_hour") is None:
        shown["price_per_hour"] = UNKNOWN
        for key in cost_columns():
            shown[key] = UNKNOWN
    elif row.get("price_per_hour") == 0 and row.get("samples_per_dollar") is None:
        shown["samples_per_dollar"] = "∞"  # free machine: unbounded work per dollar
    if row.get("epoch_seconds") is None and shown.get("cost_per_epoch") == UNKNOWN:
        shown["cost_per_epoch"] = None  # no epoch size: not a price question
    if row.get("gpu_name"):
        shown["gpu_name"] = short_gpu(row["gpu_name"])
    if row.get("script_sha256"):
        shown["script_sha256"] = row["script_sha256"][:8]
    if row.get("spread") is not None:
        shown["spread"] = f"{row['spread']:.0%}"
    if row.get("prediction_error") is not None:
        shown["prediction_error"] = f"{row['prediction_error']:+.1%}"     # -0.00884 reads -0.9%
    low, high = row.get("speedup_min"), row.get("speedup_max")
    if low is not None and high is not None and (row.get("repeats") or 1) > 1:
        shown["speedup"] = f"{row['speedup']:.2f} ({low:.2f}-{high:.2f})"  # its runs' range
    checks = [word for word, flagged in (("noisy", row.get("noisy")),
                                         ("superlinear: suspect", row.get("suspect")),
                                         ("busy", row.get("busy"))) if flagged]
    shown["check"] = ", ".join(checks)
    marks = [word for word, flagged in (("fastest", row.get("fastest")),
                                        ("cheapest paid", row.get("cheapest")),
                                        ("free", row.get("price_per_hour") == 0)) if flagged]
    shown["best"] = ", ".join(marks)
    if machine_share(row) is not None:
        shown["price_per_hour"] = f"{format_cell(row['price_per_hour'])}{SHARE_MARK}"
    return shown


SHARE_MARK = "*"


def machine_share(row: dict) -> tuple[float, float] | None:
    """(the row's share of the machine, the whole machine's $/h) where a run used
    part of a machine and paid that share of its price; None otherwise."""
    price, machine = row.get("price_per_hour"), row.get("instance_price_per_hour")
    if not price or not machine or machine <= 0:
        return None
    whole = machine * (row.get("nodes") or 1)
    return (price / whole, machine) if price < whole * (1 - 1e-9) else None


def share_footnote(rows: list[dict]) -> str | None:
    """The footnote for the prices marked SHARE_MARK, with the first one as the example."""
    shared = [r for r in rows if machine_share(r) is not None]
    if not shared:
        return None
    row = shared[0]
    part, machine = machine_share(row)
    per_node = row["gpu_count"] // (row.get("nodes") or 1)
    gpus = round(per_node / part) if part else per_node
    return (f"{SHARE_MARK} a share of the machine's price: a run pays for the GPUs it used "
            f"(here {row['gpu_count']} of {gpus} GPUs on {row['provider']} {row['instance_type']}"
            f" at {format_dollars(machine)}/h is priced {format_dollars(row['price_per_hour'])}/h)")


STAND_IN_TITLE = "{name}, on a CPU standing in for GPUs (not GPU figures)"


def workload_sections(report: Report, workload: str | None = None) -> list[Section]:
    """One table per workload (its rows that ran on a CPU standing in for GPUs in a
    table of their own), then the failed runs."""
    rows = report_rows(report)
    sections = []
    for name in dict.fromkeys(r["workload"] for r in rows):
        if workload is not None and name != workload:
            continue
        mine = [r for r in rows if r["workload"] == name]
        real = [r for r in mine if not is_stand_in(r.get("gpu_name") or "")]
        stand_ins = [r for r in mine if is_stand_in(r.get("gpu_name") or "")]
        for title, part in ((name, real), (STAND_IN_TITLE.format(name=name), stand_ins)):
            if part:
                section = _workload_section(title, part)
                section.workload, section.stand_in = name, part is stand_ins
                sections.append(section)
    failed = [{k: json_ready(v) for k, v in r.items()} for r in report.failed.to_dict("records")]
    failed = [r for r in failed if workload is None or r["workload"] == workload]
    if failed:
        nodes = [("nodes", "nodes")] if _above_one(failed, "nodes") else []
        # one workload's report (run, report --workload): its name in the title, not in a
        # column where a script's path would fold
        named = [] if workload is not None else [("workload", "workload")]
        columns = [*named, ("provider", "provider"), ("gpu_name", "gpu"),
                   ("precision", "precision"), ("gpu_count", "gpus"), *nodes, ("run_id", "run"),
                   ("time", "time"), ("failures", "failures"), ("error", "error")]
        for r in failed:
            for key in ("gpu_count", "nodes"):  # counts, NaN where a record had none
                if isinstance(r.get(key), float) and not math.isnan(r[key]):
                    r[key] = int(r[key])
            r["gpu_name"] = short_gpu(r.get("gpu_name") or "")
        # the error under its row, as wide as the terminal: in a column of its own it
        # would fold into narrow pieces, a snippet of code it suggests cut in two
        title = (f"failed runs of {workload}" if workload is not None
                 else "failed runs (not in the figures above)")
        sections.append(Section(title, columns, failed, keep=FAILED_KEY_COLUMNS, below="error"))
    return sections


def _workload_section(title: str, rows: list[dict]) -> Section:
    units = {r["work_unit"] for r in rows}
    unit = units.pop() if len(units) == 1 else "units"
    kind = BANDWIDTH_TABLES if all(r.get("throughput_unit") in BANDWIDTH_UNITS
                                   for r in rows) else WORK_TABLES
    shown = [_display(r) for r in rows]
    columns = [(f.name, _heading(f, unit)) for f in record_schema.shown_fields()
               if _shown(f, rows, unit, kind)]
    if any(r["check"] for r in shown):
        columns.append(("check", "check"))
    footnote = share_footnote(rows)
    return Section(title, columns + [("best", "best")], shown, keep=_key_columns(rows),
                   story=cost_story(rows), footnotes=[footnote] if footnote else [])


def _key_columns(rows: list[dict]) -> tuple[str, ...]:
    """KEY_COLUMNS for these rows: the precision early where it varies (then part of
    what a row is); the cost of an epoch not at all where no row knows its size; where
    a row was predicted (a bench), how far off the model was and what it predicted right
    after the speedup, before the figures the others are worked out from (efficiency
    is speedup over GPUs; the cost of an epoch stays ahead of the price it comes from)."""
    keep = KEY_COLUMNS
    if any(r.get("predicted_throughput") is not None for r in rows):
        first = ("speedup", "prediction_error", "cost_per_epoch", "predicted_throughput")
        at = keep.index("speedup")
        keep = keep[:at] + first + tuple(k for k in keep[at:] if k not in first)
    if len({r.get("precision") for r in rows}) > 1:
        keep = ("precision",) + tuple(k for k in keep if k != "precision")
    if all(r.get("epoch_seconds") is None for r in rows):
        keep = tuple(k for k in keep if k != "cost_per_epoch")
    return keep


def _shown(f: Field, rows: list[dict], unit: str, kind: str = WORK_TABLES) -> bool:
    if f.heading.tables is not None and f.heading.tables != kind:
        return False
    if unit == RUNS and not f.heading.per_run_shown:
        return False
    if f.heading.when == VARIES:
        return len({str(r.get(f.name)) for r in rows}) > 1
    if f.heading.when == ABOVE_ONE:
        return _above_one(rows, f.name)
    if f.heading.when == SOME_ROW:
        return any(r.get(f.name) not in (None, "") for r in rows)
    if f.heading.when == MULTI_NODE:
        return _above_one(rows, "nodes")
    return True


def _above_one(rows: list[dict], key: str) -> bool:
    return any(isinstance(r.get(key), (int, float)) and r[key] > 1 for r in rows)


def _heading(f: Field, unit: str) -> str:
    text = f.heading.per_run if unit == RUNS and f.heading.per_run else f.heading.text
    return text.format(unit=unit)


def compare_machine_rows(comparison: Comparison) -> list[dict]:
    return [{k: json_ready(v) for k, v in row.items()}
            for row in comparison.rows.to_dict("records")]


def compare_section(comparison: Comparison) -> Section:
    a, b = comparison.a.text, comparison.b.text
    keys = list(comparison.keys)
    if comparison.rows["workload_args"].nunique() <= 1:
        keys.remove("workload_args")
    columns = [(k, {"gpu_count": "gpus", "gpu_name": "gpu", "workload_args": "args"}.get(k, k))
               for k in keys]
    for side, label in (("a_", a), ("b_", b)):
        if "gpu_name" not in comparison.keys:
            columns.append((side + "gpu_name", f"{label} gpu"))
        if comparison.a.kind != "provider" or comparison.b.kind != "provider":
            columns.append((side + "provider", f"{label} provider"))
    for key, heading in (("throughput", "throughput"), ("speedup", "speedup"),
                         ("price_per_hour", "$/h"), ("cost_per_epoch", "$/epoch"),
                         ("cost_per_million_samples", "$/M")):
        columns += [("a_" + key, f"{a} {heading}"), ("b_" + key, f"{b} {heading}")]
    columns += [("throughput_ratio", f"{b}/{a} speed"), ("cost_ratio", f"{b}/{a} cost")]
    rows = []
    for row in compare_machine_rows(comparison):
        for key in ("gpu_name", "a_gpu_name", "b_gpu_name"):
            if row.get(key):
                row[key] = short_gpu(row[key])
        for side in ("a_", "b_"):
            if row.get(side + "throughput") is not None and row.get(side + "price_per_hour") is None:
                for key in ("price_per_hour", "cost_per_epoch", "cost_per_million_samples"):
                    row[side + key] = UNKNOWN
        rows.append(row)
    keep = [k for k, _ in columns[:len(keys)]] + ["a_throughput", "b_throughput",
                                                   "throughput_ratio", "cost_ratio"]
    keep += [side + key for key in ("cost_per_million_samples", "price_per_hour",
                                    "cost_per_epoch", "speedup", "gpu_name", "provider")
             for side in ("a_", "b_")]
    return Section(f"{a} against {b}", columns, rows, keep=tuple(keep))
