"""Throughput, speedup, efficiency and cost from result records.

Speedup and efficiency are measured against the 1-GPU record of the same
workload on the same machine type (provider, instance type, GPU, precision).
Only successful runs enter the arithmetic; for repeated runs of one
configuration the latest record wins.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

GROUP_KEYS = ["workload", "provider", "instance_type", "gpu_name", "precision"]
CONFIG_KEYS = GROUP_KEYS + ["gpu_count"]

REPORT_COLUMNS = [
    "workload", "provider", "instance_type", "gpu_name", "precision", "gpu_count",
    "throughput", "throughput_unit", "speedup", "efficiency", "price_per_hour",
    "epoch_seconds", "cost_per_epoch", "cost_per_million_samples", "samples_per_dollar",
    "median_step_s", "run_id",
]


@dataclass
class Report:
    rows: pd.DataFrame
    failed: pd.DataFrame
    notes: list[str] = field(default_factory=list)


def records_frame(records: list[dict]) -> pd.DataFrame:
    frame = pd.DataFrame.from_records(records)
    defaults = {"status": "ok", "precision": "fp32", "instance_type": "", "provider": "",
                "gpu_name": "", "throughput_unit": "samples/s", "price_per_hour": None,
                "epoch_samples": None, "time": "", "run_id": "", "median_step_s": None,
                "error": None, "gpu_count": None, "throughput": None}
    for column, value in defaults.items():
        if column not in frame.columns:
            frame[column] = value
    frame["precision"] = frame["precision"].fillna("fp32")
    for column in ("instance_type", "provider", "gpu_name", "time", "run_id"):
        frame[column] = frame[column].fillna("").astype(str)
    for column in ("throughput", "price_per_hour", "epoch_samples", "median_step_s"):
        frame[column] = pd.to_numeric(frame[column], errors="coerce")
    frame["gpu_count"] = pd.to_numeric(frame["gpu_count"], errors="coerce")
    return frame


def build_report(records: list[dict]) -> Report:
    if not records:
        return Report(pd.DataFrame(columns=REPORT_COLUMNS), pd.DataFrame(columns=CONFIG_KEYS + ["error"]))
    frame = records_frame(records)
    usable = (frame["status"] == "ok") & frame["throughput"].gt(0) & frame["gpu_count"].ge(1)
    failed = frame[~usable]
    ok = frame[usable].sort_values("time", kind="stable")
    latest = ok.drop_duplicates(CONFIG_KEYS, keep="last").copy()
    notes = []
    dropped = len(ok) - len(latest)
    if dropped:
        notes.append(f"{dropped} repeated record(s) of the same configuration: the latest of each is shown")

    baseline = (latest[latest["gpu_count"] == 1]
                .set_index(GROUP_KEYS)["throughput"].rename("baseline_throughput"))
    latest = latest.join(baseline, on=GROUP_KEYS)
    latest["speedup"] = latest["throughput"] / latest["baseline_throughput"]
    latest["efficiency"] = latest["speedup"] / latest["gpu_count"]
    latest["epoch_seconds"] = latest["epoch_samples"] / latest["throughput"]
    price_per_second = latest["price_per_hour"] / 3600.0
    latest["cost_per_epoch"] = price_per_second * latest["epoch_seconds"]
    latest["cost_per_million_samples"] = price_per_second * 1e6 / latest["throughput"]
    dollars_per_sample = price_per_second / latest["throughput"]
    latest["samples_per_dollar"] = (1.0 / dollars_per_sample).where(dollars_per_sample > 0)
    latest["gpu_count"] = latest["gpu_count"].astype(int)
    rows = latest.sort_values(GROUP_KEYS + ["gpu_count"], kind="stable")[REPORT_COLUMNS]
    return Report(rows.reset_index(drop=True), failed, notes)


def json_ready(value):
    """NaN and missing values become None, numpy scalars plain Python."""
    if value is None:
        return None
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    return value


def report_rows(report: Report) -> list[dict]:
    return [{k: json_ready(v) for k, v in row.items()} for row in report.rows.to_dict("records")]
