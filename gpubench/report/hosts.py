"""Two report sections about the machines themselves, from the records alone:

- the spread across hosts: per workload and GPU count, where two or more hosts of one
  GPU type ran it (bench --hosts K), the lowest, median and highest throughput and
  cost per unit of work over the hosts, the highest over the lowest, and the hosts
  from slowest to fastest. A host is the provider's id for the machine (host_id),
  else the instance's (every instance is a machine of its own there).
- what each machine cost: the estimate (price x time up) beside what the provider
  billed, where the records carry them (added after teardown: results_billing.py).

host_sections() is the one entry point: the command prints its sections after the
workloads' tables and the HTML page shows them as extra sections.
"""

from __future__ import annotations

import pandas as pd

from gpubench.report.compute import as_frame
from gpubench.report.tables import Section

SPREAD_KEYS = ["workload", "provider", "gpu_name", "precision", "gpu_count", "nodes"]


def host_sections(records, workload: str | None = None) -> list[Section]:
    """The spread across hosts (one section per workload that has one) and what each
    machine cost (when any record says); [] when neither applies."""
    frame = as_frame(records)
    if frame.empty:
        return []
    if workload is not None:
        frame = frame[frame["workload"] == workload]
    return spread_sections(frame) + cost_sections(frame)


def _host_column(frame: pd.DataFrame) -> pd.Series:
    host = frame["host_id"].astype(object).fillna("").astype(str)
    instance = frame["instance_id"].astype(object).fillna("").astype(str)
    return host.where(host != "", instance)


def spread_rows(frame: pd.DataFrame) -> list[dict]:
    """One row per (workload, machine type, GPU count) run on two or more hosts."""
    usable = (frame["status"] == "ok") & frame["throughput"].gt(0) & frame["gpu_count"].ge(1)
    ok = frame[usable].assign(host=_host_column(frame[usable]))
    ok = ok[ok["host"] != ""]
    if ok.empty:
        return []
    keys = [k for k in SPREAD_KEYS if k in ok.columns]
    for k in keys:
        ok[k] = ok[k].astype(object)
    per_host = (ok.groupby(keys + ["host"], sort=True, dropna=False)
                .agg(throughput=("throughput", "median"), price=("price_per_hour", "median"),
                     unit=("throughput_unit", "first"))
                .reset_index())
    per_host["cost_per_million"] = per_host["price"] / 3600.0 / per_host["throughput"] * 1e6
    rows = []
    for group, hosts in per_host.groupby(keys, sort=True, dropna=False):
        if len(hosts) < 2:
            continue
        key = dict(zip(keys, group))
        order = hosts.sort_values("throughput", kind="stable")
        tput, cost = order["throughput"], order["cost_per_million"]
        rows.append({
            **key, "gpu_count": int(key["gpu_count"]), "hosts": len(order),
            "unit": str(order["unit"].iloc[0] or "samples/s"),
            "throughput_min": float(tput.min()), "throughput_median": float(tput.median()),
            "throughput_max": float(tput.max()), "throughput_ratio": _ratio(tput),
            "cost_min": _number(cost.min()), "cost_median": _number(cost.median()),
            "cost_max": _number(cost.max()), "cost_ratio": _ratio(cost),
            "slowest_first": ", ".join(order["host"]),
        })
    return rows


def spread_sections(frame: pd.DataFrame) -> list[Section]:
    rows = spread_rows(frame)
    sections = []
    for workload in dict.fromkeys(r["workload"] for r in rows):
        mine = [r for r in rows if r["workload"] == workload]
        unit = mine[0]["unit"]
        work = unit.removesuffix("/s")
        columns = [("provider", "provider"), ("gpu_name", "gpu"), ("gpu_count", "gpus"),
                   ("hosts", "hosts"), ("throughput_min", f"{unit} min"),
                   ("throughput_median", "median"), ("throughput_max", "max"),
                   ("throughput_ratio", "max/min"), ("cost_min", f"$/M {work} min"),
                   ("cost_median", "median"), ("cost_max", "max"), ("cost_ratio", "max/min"),
                   ("slowest_first", "hosts, slowest first")]
        sections.append(Section(f"{workload}: spread across hosts", columns, mine))
    return sections


def cost_rows(frame: pd.DataFrame) -> list[dict]:
    """One row per machine whose records say what it cost."""
    priced = frame[frame["estimated_cost"].notna() | frame["billed_cost"].notna()]
    if priced.empty:
        return []
    priced = priced.assign(host=_host_column(priced),
                           instance=priced["instance_id"].astype(object).fillna("").astype(str))
    rows = []
    for (provider, instance), runs in priced.groupby(
            [priced["provider"].astype(object), "instance"], sort=True):
        rows.append({"provider": provider, "gpu_name": str(runs["gpu_name"].iloc[0]),
                     "host": str(runs["host"].iloc[0]), "instance": instance,
                     "records": len(runs),
                     "estimated_cost": _number(runs["estimated_cost"].max()),
                     "billed_cost": _number(runs["billed_cost"].max())})
    return rows


def cost_sections(frame: pd.DataFrame) -> list[Section]:
    rows = cost_rows(frame)
    if not rows:
        return []
    columns = [("provider", "provider"), ("gpu_name", "gpu"), ("host", "host"),
               ("instance", "instance"), ("records", "records"),
               ("estimated_cost", "estimated $"), ("billed_cost", "billed $")]
    return [Section("what each machine cost (billed where the provider says)", columns, rows)]


def _ratio(values: pd.Series) -> float | None:
    low, high = values.min(), values.max()
    return float(high / low) if pd.notna(low) and low > 0 and pd.notna(high) else None


def _number(value) -> float | None:
    return None if value is None or pd.isna(value) else float(value)
