"""`--compare A B`: two providers, two GPU types or two machines side by side.

Rows are matched on workload (and its arguments), precision and GPU count; when both sides name
providers only, also on the GPU (the same GPU on two clouds). Where one side
still has several machines for a row (a GPU type offered by two providers),
the cheapest for the same amount of work stands for it.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from gpubench.report.selectors import Selector

SIDE_COLUMNS = ["provider", "gpu_name", "instance_type", "throughput", "speedup", "efficiency",
                "price_per_hour", "cost_per_epoch", "cost_per_million_samples"]


@dataclass
class Comparison:
    a: Selector
    b: Selector
    keys: list[str]
    rows: pd.DataFrame  # keys, a_*/b_* for SIDE_COLUMNS, throughput_ratio, cost_ratio


def compare(rows: pd.DataFrame, a: Selector, b: Selector) -> Comparison:
    keys = ["workload", "workload_args", "precision", "gpu_count"]
    if a.kind == "provider" and b.kind == "provider":
        keys = ["workload", "workload_args", "gpu_name", "precision", "gpu_count"]
    sides = []
    for prefix, selector in (("a_", a), ("b_", b)):
        side = rows[selector.mask(rows)]
        side = side.sort_values(["cost_per_million_samples", "throughput"],
                                ascending=[True, False], na_position="last", kind="stable")
        side = side.drop_duplicates(keys, keep="first")
        side = side[keys + [c for c in SIDE_COLUMNS if c not in keys]]
        sides.append(side.rename(columns={c: prefix + c for c in side.columns if c not in keys}))
    table = sides[0].merge(sides[1], on=keys, how="outer").sort_values(keys, kind="stable")
    table["throughput_ratio"] = table["b_throughput"] / table["a_throughput"]
    table["cost_ratio"] = table["b_cost_per_million_samples"] / table["a_cost_per_million_samples"]
    table.insert(0, "b", b.text)
    table.insert(0, "a", a.text)
    return Comparison(a, b, keys, table.reset_index(drop=True))


def nothing_shared(comparison: Comparison) -> bool:
    """No row has figures from both sides."""
    rows = comparison.rows
    return not (rows["a_throughput"].notna() & rows["b_throughput"].notna()).any()


def common_ground(rows: pd.DataFrame, a: Selector, b: Selector) -> str:
    """Why two sides have no row in common, and what they could be compared on
    instead: the workloads, GPU types, GPU counts or precisions both have."""
    import shlex

    from gpubench.format import spoken
    from gpubench.report.selectors import short_gpu

    sides = {a.text: rows[a.mask(rows)], b.text: rows[b.mask(rows)]}
    (na, ra), (nb, rb) = sides.items()

    def ran(frame: pd.DataFrame, column: str, short=lambda v: str(v)) -> list[str]:
        return list(dict.fromkeys(short(v) for v in sorted(frame[column].unique(), key=str)))

    workloads = set(ra["workload"]) & set(rb["workload"])
    if not workloads:
        return (f"{na} and {nb} share no workload; {na} ran {spoken(ran(ra, 'workload'), 'and')}, "
                f"{nb} ran {spoken(ran(rb, 'workload'), 'and')}")
    ra, rb = ra[ra["workload"].isin(workloads)], rb[rb["workload"].isin(workloads)]
    shared = spoken(sorted(workloads), "and")
    if a.kind == "provider" and b.kind == "provider" \
            and not set(ra["gpu_name"]) & set(rb["gpu_name"]):
        ga, gb = ran(ra, "gpu_name", short_gpu), ran(rb, "gpu_name", short_gpu)
        return (f"{na} and {nb} ran no GPU type in common ({na}: {', '.join(ga)}; {nb}: "
                f"{', '.join(gb)}); they share {shared}: compare their GPUs, e.g. "
                f"--compare {shlex.quote(f'{na}:{ga[0]}')} {shlex.quote(f'{nb}:{gb[0]}')}")
    for column, what in (("precision", "precision"), ("gpu_count", "GPU count")):
        if not set(ra[column]) & set(rb[column]):
            return (f"{na} and {nb} share {shared} but no {what}: {na} ran "
                    f"{', '.join(ran(ra, column))}, {nb} ran {', '.join(ran(rb, column))}")
    return (f"{na} and {nb} share {shared} but no configuration (workload arguments, "
            "precision and GPU count) ran on both")
