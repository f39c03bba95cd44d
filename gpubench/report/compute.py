"""Throughput, speedup, efficiency and cost from result records.

By default speedup and efficiency are measured against the 1-GPU record of
the same workload on the same machine type (provider, instance type, GPU,
precision); `Baseline` chooses another GPU count or another machine. Only
successful runs enter the arithmetic; failed ones are listed beside it. A row
is the median of its configuration's latest runs (repeats.py: as many as the
sweep's --repeat asked for; the latest record alone for a single run), with
their spread; checks.py marks what is suspect and what ran on a CPU standing in
for GPUs. A bandwidth test has no speedup and no per-sample cost.

Cost is price x time, so an unknown price gives an unknown cost (NaN, shown
as "unknown"), never zero; a price of 0.0 (the local machine) is a real zero.

Each row's step in parts (the record's step_shares: data, compute, exposed
communication, other) is its `breakdown`; above one GPU, `points_lost` says where the
efficiency lost against the 1-GPU row of the same workload and machine went, part by
part, and a note says it in a line per count ("-31 points against 1 GPU: exposed
all-reduce 24, data 5, other 2"). With efficiency E = (throughput / GPUs) / the 1-GPU
row's throughput, a part's lost points are 100 x (its share here - E x its share at one
GPU): its time here less the time it would take at perfect scaling, over this row's
step; they add up to 100 x (1 - E). Where the run was predicted, the model's parts are
its `predicted_breakdown`, and the line sets the exposed all-reduce beside the model's
(expected_parts.py); a rank the others waited for is its `slow_rank`, in a line of its
own (slow_rank.py).

The report's columns are the record schema's (workloads/record_schema.py);
a column the report computes has its formula in FORMULAS, or, when it needs
more than its own row (speedup, the marks), in a step of build_report.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pandas as pd

from gpubench.errors import UsageError
from gpubench.report import checks, repeats
from gpubench.report.expected_parts import expected_words
from gpubench.report.normalise import records_frame
from gpubench.report.selectors import Selector, parse_selector
from gpubench.report.slow_rank import slow_rank_column, slow_rank_words
from gpubench.workloads import record_schema, step_parts

# A machine type running one workload the same way; the workload's own
# arguments (batch size, steps) are part of "the same way".
# A user's script is also the environment it ran in (script_env: a row per environment),
# the step it was ended after (max_steps) and how it was timed: a run timed as a whole
# (runs/s) is no baseline for one timed by its steps (samples/s).
GROUP_KEYS = ["workload", "workload_args", "script_sha256", "script_env", "max_steps",
              "throughput_unit", "provider", "instance_type", "gpu_name", "precision"]
CONFIG_KEYS = GROUP_KEYS + ["gpu_count", "nodes"]
# The keys less the machine's: a --baseline picked on another machine is compared across them.
WORK_KEYS = [k for k in GROUP_KEYS if k not in ("provider", "instance_type", "gpu_name")]

FAILED_COLUMNS = CONFIG_KEYS + ["status", "run_id", "time", "error", "failures"]
FAILURES = ("none", "latest", "all")  # which failed runs a report lists (--failures)
# Columns without meaning for a bandwidth test (allreduce): blank on its rows.
PER_WORK_COLUMNS = ("speedup", "speedup_min", "speedup_max", "efficiency", "epoch_seconds",
                    "cost_per_epoch", "cost_per_million_samples", "cost_per_million_samples_min",
                    "cost_per_million_samples_max", "samples_per_dollar")


def report_columns() -> list[str]:
    """The columns of the report's rows, in order (the record schema's EVERY_ROW columns)."""
    return list(record_schema.report_columns(record_schema.EVERY_ROW))


def _work_unit(rows: pd.DataFrame) -> pd.Series:
    unit = rows["throughput_unit"].str.replace(r"/s$", "", regex=True)
    return unit.where(unit != "", "samples")


def _dollars_per_second(rows: pd.DataFrame) -> pd.Series:
    return rows["price_per_hour"] / 3600.0


def _shares(value) -> dict | None:
    """A record's step_shares as the report's breakdown: each part's share, rounded."""
    if not isinstance(value, dict):
        return None
    try:
        shares = {p: float(value.get(p) or 0.0) for p in step_parts.PARTS}
    except (TypeError, ValueError):
        return None
    total = sum(shares.values())
    if not total > 0 or any(math.isnan(v) or v < 0 for v in shares.values()):
        return None
    return {p: round(v / total, 4) for p, v in shares.items()}


def _samples_per_dollar(rows: pd.DataFrame) -> pd.Series:
    # At a price of 0 the work per dollar is unbounded: inf, shown as such.
    with np.errstate(divide="ignore"):
        return rows["throughput"] / _dollars_per_second(rows)


# Columns computed from their own row, in order (a formula may use those above
# it), after speedup and before the marks, which use them.
FORMULAS: dict[str, Callable[[pd.DataFrame], pd.Series]] = {
    "work_unit": _work_unit,
    "epoch_seconds": lambda rows: rows["epoch_samples"] / rows["throughput"],
    "cost_per_epoch": lambda rows: _dollars_per_second(rows) * rows["epoch_seconds"],
    "cost_per_million_samples": lambda rows: _dollars_per_second(rows) * 1e6 / rows["throughput"],
    "cost_per_million_samples_min": lambda rows: _dollars_per_second(rows) * 1e6 / rows["throughput_max"],
    "cost_per_million_samples_max": lambda rows: _dollars_per_second(rows) * 1e6 / rows["throughput_min"],
    "samples_per_dollar": _samples_per_dollar,
    "prediction_error": lambda rows: rows["throughput"] / rows["predicted_throughput"] - 1.0,
    # where the allocation is budgeted in GPU-hours (Slurm records carry gpu_hours)
    "gpu_hours_per_epoch": lambda rows: (rows["gpu_count"] * rows["epoch_seconds"] / 3600.0).where(
        rows["gpu_hours"].notna()),
    "breakdown": lambda rows: rows["step_shares"].map(_shares).astype(object),
    "predicted_breakdown": lambda rows: rows["predicted_step_shares"].map(_shares).astype(object),
    "slow_rank": slow_rank_column,
}


@dataclass(frozen=True)
class Baseline:
    """What speedup is relative to: the record at `count` GPUs (None: the
    smallest count present) of the same machine type, or of the machine
    `selector` names (then across machines: e.g. every GPU against one A100)."""

    count: int | None = 1
    selector: Selector | None = None

    def describe(self) -> str:
        at = "the smallest GPU count" if self.count is None else f"{self.count} GPU"
        where = f" on {self.selector.text}" if self.selector else " of the same machine type"
        return at + where


def parse_baseline(text: str | None, frame: pd.DataFrame) -> Baseline:
    """'1', '4', 'min', 'lambda', 'H100', 'lambda:H100', 'lambda:H100@1'."""
    if text is None or not text.strip():
        return Baseline()
    word, _, count_text = text.strip().partition("@")
    if count_text:
        if not count_text.isdigit() or int(count_text) < 1:
            raise UsageError(f"--baseline: '{count_text}' is not a GPU count (example: lambda:H100@1)")
    if word == "min":
        return Baseline(count=None)
    if word.isdigit():
        if int(word) < 1:
            raise UsageError("--baseline: GPU counts start at 1")
        return Baseline(count=int(word))
    count = int(count_text) if count_text else 1
    return Baseline(count=count, selector=parse_selector(word, frame, "--baseline"))


@dataclass
class Report:
    rows: pd.DataFrame  # one row per configuration, report_columns()
    failed: pd.DataFrame  # the latest failure of each configuration (--failures), FAILED_COLUMNS
    notes: list[str] = field(default_factory=list)
    baseline: Baseline = field(default_factory=Baseline)


def as_frame(records) -> pd.DataFrame:
    return records if isinstance(records, pd.DataFrame) else records_frame(list(records))


def build_report(records, baseline: Baseline | None = None, failures: str = "latest") -> Report:
    """`records`: result dicts, or a frame from normalise.records_frame. `failures`
    (FAILURES): list no failed runs, those not followed by an ok run of their
    configuration, or all."""
    baseline = baseline or Baseline()
    frame = as_frame(records)
    if frame.empty:
        return Report(pd.DataFrame(columns=report_columns()), pd.DataFrame(columns=FAILED_COLUMNS),
                      [], baseline)
    frame = checks.label_stand_ins(frame)
    notes: list[str] = checks.moves_nothing_notes(frame)
    usable = (frame["status"] == "ok") & frame["throughput"].gt(0) & frame["gpu_count"].ge(1)
    ok = frame[usable].sort_values("time", kind="stable")
    failed = _failed(frame[~usable & ~checks.moves_nothing(frame)], ok, failures)

    runs, left_out = repeats.latest_runs(ok, CONFIG_KEYS)
    if left_out:
        notes.append(f"{left_out} repeated record(s) of the same configuration left out: "
                     "each row is the median of its latest run(s), as many as its --repeat asked for")
    latest = repeats.one_row_each(runs, CONFIG_KEYS)
    latest["gpu_count"] = latest["gpu_count"].astype(int)
    latest["nodes"] = latest["nodes"].astype(int)

    latest = _speedup(latest, baseline, notes)
    latest = _node_speedup(latest)
    for column, formula in FORMULAS.items():
        latest[column] = formula(latest)
    bandwidth = checks.is_bandwidth(latest)
    latest.loc[bandwidth, list(PER_WORK_COLUMNS)] = np.nan
    latest["suspect"] = checks.suspects(latest)
    latest = _marks(latest)
    latest = _points_lost(latest)
    unpriced = latest["price_per_hour"].isna().sum()
    if unpriced:
        notes.append(f"{unpriced} configuration(s) have no price on record: their cost is unknown")
    notes += _trust_notes(latest)
    notes += _timing_notes(latest)
    notes += _network_notes(latest)
    latest["baseline"] = baseline.describe()
    ordered = latest.sort_values(GROUP_KEYS + ["gpu_count", "nodes"], kind="stable")
    notes += breakdown_notes(ordered)
    notes += [f"{at_count(row)}: {slow_rank_words(row['slow_rank'])}"
              for _, row in ordered[ordered["slow_rank"].notna()].iterrows()]
    rows = ordered[report_columns()]
    return Report(rows.reset_index(drop=True), failed, notes, baseline)


# How a note names each part of the step (step_parts.PARTS): DDP's timing is the only
# source of exposed communication, and what it times is the gradients' all-reduce.
PART_WORDS = {step_parts.DATA: "data", step_parts.COMPUTE: "compute",
              step_parts.COMM: "exposed all-reduce", step_parts.OTHER: "other"}


def _points_lost(latest: pd.DataFrame) -> pd.DataFrame:
    """Each row above one GPU with a breakdown, against the 1-GPU row (one node) of its
    workload and machine (GROUP_KEYS) with one: the efficiency points lost per part (see
    the module's docstring); None elsewhere."""
    one = latest[(latest["gpu_count"] == 1) & (latest["nodes"] == 1) & latest["breakdown"].notna()]
    base = one.drop_duplicates(GROUP_KEYS).set_index(GROUP_KEYS)[["throughput", "breakdown"]].rename(
        columns={"throughput": "one_throughput", "breakdown": "one_breakdown"})
    joined = latest.join(base, on=GROUP_KEYS)
    lost = []
    for count, throughput, mine, single, at_one in zip(
            joined["gpu_count"], joined["throughput"], joined["breakdown"], joined["one_breakdown"],
            joined["one_throughput"]):
        lost.append(points_lost(mine, single, throughput / count / at_one)
                    if count > 1 and isinstance(mine, dict) and isinstance(single, dict)
                    and at_one > 0 else None)
    latest["points_lost"] = pd.Series(lost, index=latest.index, dtype=object)
    return latest


def points_lost(shares: dict, one_gpu: dict, efficiency: float) -> dict | None:
    """Points of efficiency lost per part: 100 x (share - efficiency x the 1-GPU share);
    they add up to 100 x (1 - efficiency) (the shares each add up to 1)."""
    if efficiency is None or not math.isfinite(efficiency):
        return None
    return {p: round(100.0 * (shares[p] - efficiency * one_gpu[p]), 2) + 0.0  # never -0.0
            for p in step_parts.PARTS}


def breakdown_notes(rows: pd.DataFrame) -> list[str]:
    """A line per count above one: the efficiency points it lost, and to which parts of
    the step, largest first (those under half a point left out); where the run was
    predicted, its exposed all-reduce beside the one the model expected."""
    notes = []
    for _, row in rows[rows["points_lost"].notna()].iterrows():
        lost = row["points_lost"]
        total = sum(lost.values())
        named = sorted(((points, PART_WORDS[p]) for p, points in lost.items() if abs(points) >= 0.5),
                       reverse=True)
        where = ", ".join(f"{word} {points:.0f}" for points, word in named) or "no part above half a point"
        expected = expected_words(row["breakdown"], row["predicted_breakdown"], row.get("predicted_basis"))
        notes.append(f"{at_count(row)}: efficiency {1 - total / 100:.0%}, "
                     f"{round(-total):+d} points against 1 {_unit(row)}: {where}"
                     + (f"; {expected}" if expected else ""))
    return notes


def _unit(row: pd.Series) -> str:
    return "GPU" if str(row.get("device")) == "cuda" else "process"


def at_count(row: pd.Series) -> str:
    """'mnist-ddp at 2 GPUs on lambda NVIDIA A100' (processes on a CPU)."""
    unit = _unit(row)
    return (f"{row['workload']} at {int(row['gpu_count'])} {unit}{'es' if unit == 'process' else 's'} "
            f"on {row['provider']} {row['gpu_name']}")


def _trust_notes(rows: pd.DataFrame) -> list[str]:
    """The spread's meaning, and each suspect or busy row in words."""
    notes = []
    spread = repeats.spread_note(rows)
    if spread:
        notes.append(spread)
    for _, row in rows[rows["suspect"].notna()].iterrows():
        notes.append(f"suspect: {_config(row)}: {row['suspect']}")
    for _, row in rows[rows["busy"].notna()].iterrows():
        notes.append(f"busy machine: {_config(row)}: {row['busy']}; its figures may be low")
    return notes


def _timing_notes(rows: pd.DataFrame) -> list[str]:
    """A user's script timed as whole runs, where the probe could not time its steps."""
    whole = rows[rows["timing"].astype(str) == "whole process"]
    notes = []
    for (workload, why), group in whole.groupby(["workload", whole["timing_note"].fillna("")],
                                                sort=False, observed=True):
        counts = ", ".join(f"{n:g}" for n in sorted(group["gpu_count"]))
        notes.append(f"{workload} at {counts} process(es) is timed as whole runs (runs/s: start-up "
                     f"included), not by its training steps" + (f": {why}" if why else ""))
    return notes


def _network_notes(rows: pd.DataFrame) -> list[str]:
    """A row whose nodes fell back to TCP sockets where a faster fabric could have served
    (its latest record's nccl_fallback, from NCCL's own log): how many, and why."""
    if "nccl_fallback" not in rows:
        return []
    notes = []
    said = rows["nccl_fallback"].notna() & rows["nccl_fallback"].astype(str).ne("")
    for _, row in rows[said].iterrows():
        count = row["nccl_fallback_nodes"]
        count = int(count) if pd.notna(count) and count > 0 else 1
        notes.append(f"{count} node{'s' if count != 1 else ''} of {row['gpu_name']} fell back to TCP "
                     f"sockets: {row['nccl_fallback']} ({_config(row)})")
    return notes


def _config(row: pd.Series) -> str:
    procs = f"{row['gpu_count']:g} process{'es' if row['gpu_count'] != 1 else ''}"
    return f"{row['workload']} on {row['provider']} {row['gpu_name']}, {procs}"


def _failed(frame: pd.DataFrame, ok: pd.DataFrame, which: str = "latest") -> pd.DataFrame:
    """The latest failure of each failed configuration, with how many there were:
    all of them, none, or (latest) those whose configuration has not run ok since."""
    if which not in FAILURES:
        raise UsageError(f"--failures: '{which}' is not one of {', '.join(FAILURES)}")
    if frame.empty or which == "none":
        return pd.DataFrame(columns=FAILED_COLUMNS)
    frame = frame.sort_values("time", kind="stable").copy()
    frame["status"] = "failed"
    frame["error"] = frame["error"].where(frame["error"].notna(), "no throughput in the record")
    keys = [frame[k].fillna(-1) if k in ("gpu_count", "nodes") else frame[k] for k in CONFIG_KEYS]
    frame["failures"] = frame.groupby(keys, sort=False)["status"].transform("size")
    last = frame.drop_duplicates(CONFIG_KEYS, keep="last")
    if which == "latest" and not ok.empty:
        since = ok.drop_duplicates(CONFIG_KEYS, keep="last").set_index(CONFIG_KEYS)["time"]
        fixed = last.join(since.rename("ok_since"), on=CONFIG_KEYS)["ok_since"]
        last = last[~(fixed.notna() & (fixed > last["time"]))]  # a tie: still listed
    return last.sort_values(GROUP_KEYS + ["gpu_count"], kind="stable")[FAILED_COLUMNS].reset_index(drop=True)


def _speedup(latest: pd.DataFrame, baseline: Baseline, notes: list[str]) -> pd.DataFrame:
    if baseline.selector is None:
        keys = GROUP_KEYS
        pool = latest[latest["nodes"] == 1]
    else:
        keys = WORK_KEYS
        pool = latest[baseline.selector.mask(latest)]
    if baseline.count is None:
        pool = pool[pool["gpu_count"] == pool.groupby(keys)["gpu_count"].transform("min")]
    else:
        pool = pool[pool["gpu_count"] == baseline.count]
    if baseline.selector is not None:
        clash = pool[pool.duplicated(keys, keep=False)]
        if not clash.empty:
            row = clash.iloc[0]
            names = sorted(set(clash["provider"] + ":" + clash["gpu_name"]))
            raise UsageError(f"--baseline: '{baseline.selector.text}' matches several machines for "
                             f"{row['workload']} ({', '.join(names)}); name one as provider:gpu")
    base = pool.set_index(keys)[["throughput", "throughput_min", "throughput_max", "gpu_count",
                                 "threads_per_process", "busy"]].rename(
        columns={"throughput": "baseline_throughput", "throughput_min": "baseline_min",
                 "throughput_max": "baseline_max", "gpu_count": "baseline_gpu_count",
                 "threads_per_process": "baseline_threads", "busy": "baseline_busy"})
    latest = latest.join(base, on=keys)
    latest["speedup"] = latest["throughput"] / latest["baseline_throughput"]
    latest["speedup_min"] = latest["throughput_min"] / latest["baseline_max"]
    latest["speedup_max"] = latest["throughput_max"] / latest["baseline_min"]
    latest["efficiency"] = latest["speedup"] / (latest["gpu_count"] / latest["baseline_gpu_count"])
    missing = latest[latest["baseline_throughput"].isna() & ~checks.is_bandwidth(latest)]
    missing = missing.drop_duplicates(keys)
    for _, row in missing.iterrows():
        where = (f"{row['workload']} on {row['provider']} {row['gpu_name']} {row['precision']}"
                 if baseline.selector is None else f"{row['workload']} {row['precision']}")
        notes.append(f"no baseline record ({baseline.describe()}) for {where}: speedup unknown")
    return latest


def _node_speedup(latest: pd.DataFrame) -> pd.DataFrame:
    """Node scaling beside GPU scaling: each row against the 1-node record of its
    machine type with the same GPUs per node (2 nodes x 4 GPUs against 1 x 4)."""
    per_node = latest["gpu_count"] // latest["nodes"]
    one_node = latest[latest["nodes"] == 1].assign(per_node=lambda rows: rows["gpu_count"])
    base = one_node.set_index(GROUP_KEYS + ["per_node"])["throughput"].rename("node_baseline")
    joined = latest.assign(per_node=per_node).join(base, on=GROUP_KEYS + ["per_node"])
    latest["node_speedup"] = joined["throughput"] / joined["node_baseline"]
    latest["node_efficiency"] = latest["node_speedup"] / latest["nodes"]
    return latest


def pareto_front(seconds, dollars) -> np.ndarray:
    """Which points no other point beats on both time and cost (NaN cost: never).
    A point equal to an earlier one on both is not repeated on the front."""
    seconds = np.asarray(seconds, dtype=float)
    dollars = np.asarray(dollars, dtype=float)
    front = np.zeros(len(seconds), dtype=bool)
    known = np.flatnonzero(~np.isnan(seconds) & ~np.isnan(dollars))
    best = math.inf
    for i in known[np.lexsort((dollars[known], seconds[known]))]:
        if dollars[i] < best:
            front[i] = True
            best = dollars[i]
    return front


# What makes rows the same work, which the marks compare: the workload run with the
# same arguments (a script: the same script), never 30 steps against 200.
SAME_WORK = ["workload", "workload_args", "script_sha256"]


def _marks(latest: pd.DataFrame) -> pd.DataFrame:
    """Per workload and its arguments (SAME_WORK; its rows on a CPU standing in for
    GPUs apart, as their table is): the fastest configuration, the cheapest of
    those that cost money for the same amount of work (a free machine is free, not
    cheapest: the question is what to rent), and the cost/time Pareto front (the
    same for any fixed amount)."""
    latest["fastest"] = False
    latest["cheapest"] = False
    latest["pareto"] = False
    work = latest[~checks.is_bandwidth(latest)]  # a bandwidth test has no cost per unit of work
    stand_in = work["gpu_name"].astype(str).map(checks.is_stand_in)
    keys = [work[k].astype(str) for k in SAME_WORK] + [stand_in]
    for _, group in work.groupby(keys, sort=False, observed=True):
        latest.loc[group["throughput"].idxmax(), "fastest"] = True
        cost = group["cost_per_million_samples"]
        paid = cost.notna() & group["price_per_hour"].gt(0)
        if paid.any():
            # Of equally cheap configurations the fastest.
            priced = group[paid].sort_values(
                ["cost_per_million_samples", "throughput"], ascending=[True, False], kind="stable")
            latest.loc[priced.index[0], "cheapest"] = True
        front = pareto_front(1e6 / group["throughput"], cost)
        latest.loc[group.index[front], "pareto"] = True
    return latest


def json_ready(value):
    """NaN, inf and missing values become None, numpy scalars plain Python."""
    if value is None:
        return None
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    return value


def report_rows(report: Report, include_failed: bool = False) -> list[dict]:
    """Rows as plain dicts; with include_failed the failures follow, status 'failed'."""
    rows = [{k: json_ready(v) for k, v in row.items()} for row in report.rows.to_dict("records")]
    if include_failed:
        columns = report_columns()
        for row in report.failed.to_dict("records"):
            item = {k: None for k in columns}
            item.update({k: json_ready(v) for k, v in row.items()})
            rows.append(item)
    return rows
