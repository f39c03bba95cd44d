"""Repeated runs of one configuration as one row: the median and the spread.

A sweep with --repeat K measures each configuration K times (each record says
K as repeat_count). A row of the report stands for the latest K ok records of
its configuration, K as its latest record asks: the median throughput, its
lowest and highest, and their range over the median (the spread). A record
from before repeats existed asks for 1, so the latest record wins, as always.
A sweep stopped half-way and resumed later keeps its earlier runs: the latest
K records need not come from one sweep.
"""

from __future__ import annotations

import pandas as pd

# Figures a row takes as the median of its runs (throughput first; the bandwidth
# test's own figures beside it); everything else comes from the latest record.
MEDIAN_COLUMNS = ("throughput", "peak_busbw", "peak_algbw", "largest_size_busbw",
                  "largest_size_algbw")
NOISY_SPREAD = 0.10  # a spread above this share of the median marks a row noisy


def latest_runs(ok: pd.DataFrame, keys: list[str]) -> tuple[pd.DataFrame, int]:
    """The records that make up each configuration's row (`ok` sorted by time),
    and how many older records of those configurations are left out."""
    if ok.empty:
        return ok, 0
    groups = ok.groupby(keys, sort=False, dropna=False, observed=True)
    age = groups.cumcount(ascending=False)  # 0: the latest record of its configuration
    wanted = groups["repeat_count"].transform("last").fillna(1).clip(lower=1)
    kept = ok[age < wanted]
    return kept, len(ok) - len(kept)


def one_row_each(runs: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """One row per configuration: its latest record, with the median of each
    MEDIAN_COLUMNS figure over its runs, the throughput's range, how many runs,
    and whether any of them ran on a busy machine."""
    groups = runs.groupby(keys, sort=False, dropna=False, observed=True)
    latest = (groups.cumcount(ascending=False) == 0).to_numpy()
    rows = runs[latest].copy()
    for column in MEDIAN_COLUMNS:
        rows[column] = groups[column].transform("median")[latest]
    rows["throughput_min"] = groups["throughput"].transform("min")[latest]
    rows["throughput_max"] = groups["throughput"].transform("max")[latest]
    rows["repeats"] = groups["throughput"].transform("size")[latest]
    rows["busy"] = groups["machine_busy"].transform("first")[latest]  # the first one not null
    single = rows["repeats"] < 2
    rows["spread"] = ((rows["throughput_max"] - rows["throughput_min"])
                      / rows["throughput"]).mask(single)
    rows["noisy"] = rows["spread"].gt(NOISY_SPREAD)
    return rows


def spread_note(rows: pd.DataFrame) -> str | None:
    """What the spread column means, once a row has one; and which rows are noisy."""
    if not rows["spread"].notna().any():
        return None
    noisy = rows[rows["noisy"]]
    text = (f"spread: the range of a row's runs over their median throughput (cost per unit "
            f"of work spreads by about the same share); above {NOISY_SPREAD:.0%} a row is "
            "marked noisy")
    if len(noisy):
        text += (f"; {len(noisy)} noisy row(s): measure them again on a quieter machine, "
                 "or with more --repeat")
    return text
