"""What the report says about how far a row's numbers can be trusted, and where
they ran.

- A row whose record says it ran on a CPU while the machine advertises GPUs (the
  mock cloud, a GPU machine whose torch sees no CUDA) is labelled as such in its
  GPU name, "RTX 3090 (mock, CPU)", so every output says it and such rows never
  share a baseline with real GPU rows.
- A speedup above the process count is suspect: data-parallel training cannot
  do more than N times the work on N processes unless the baseline was slowed
  down or this run did less work. The row says so, with the likely cause read
  from the records.
- A bandwidth test (allreduce) has no speedup, epoch or cost per unit of work, and
  on one process no bandwidth: a note, neither a row nor a failure.
"""

from __future__ import annotations

import pandas as pd

CPU_NAMES = {"", "cpu"}
MOCK_CPU, CPU_ONLY = " (mock, CPU)", " (CPU)"
SUPERLINEAR_MARGIN = 0.05  # a speedup this share above the process count is suspect
BANDWIDTH_UNITS = {"GB/s"}  # throughput units of a bandwidth test: no speedup, no per-sample cost


def label_stand_ins(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with " (mock, CPU)" or " (CPU)" after the GPU name of every record
    that ran on a CPU standing in for the machine's GPUs."""
    gpu = frame["gpu_name"].astype(str)
    stand_in = frame["device"].astype(str).eq("cpu") & ~gpu.str.lower().isin(CPU_NAMES)
    if not stand_in.any():
        return frame
    frame = frame.copy()
    mock = frame["mock_instance"].fillna(0).astype(bool)
    suffix = pd.Series(CPU_ONLY, index=frame.index).where(~mock, MOCK_CPU)
    frame["gpu_name"] = gpu.where(~stand_in, gpu + suffix)
    return frame


def is_stand_in(gpu_name: str) -> bool:
    """A GPU name label_stand_ins marked."""
    return str(gpu_name).endswith((MOCK_CPU, CPU_ONLY))


def is_bandwidth(rows: pd.DataFrame) -> pd.Series:
    return rows["throughput_unit"].astype(str).isin(BANDWIDTH_UNITS)


def moves_nothing(frame: pd.DataFrame) -> pd.Series:
    """Per record, a bandwidth test that ran on one process: it has no figure to show
    (allreduce says so in its record), and it did not fail."""
    return ((frame["status"] == "ok") & is_bandwidth(frame) & frame["gpu_count"].eq(1)
            & frame["throughput"].isna())


def moves_nothing_notes(frame: pd.DataFrame) -> list[str]:
    return [f"{w} on 1 GPU: one process moves nothing; no bandwidth to measure"
            for w in sorted(set(frame.loc[moves_nothing(frame), "workload"].astype(str)))]


def suspects(rows: pd.DataFrame) -> pd.Series:
    """Per row, why its speedup is suspect (None when it is not): the speedup, what
    the process count allows, and the likely cause. `rows` carries the baseline's
    own figures beside each row (baseline_gpu_count, baseline_threads, baseline_busy)."""
    ratio = rows["gpu_count"] / rows["baseline_gpu_count"]
    over = rows["speedup"].gt(ratio * (1 + SUPERLINEAR_MARGIN)) & ~is_bandwidth(rows)
    out = pd.Series([None] * len(rows), index=rows.index, dtype=object)
    for i in rows.index[over]:
        row = rows.loc[i]
        out[i] = (f"speedup {row['speedup']:.2f} on {row['gpu_count']:g} processes is above the "
                  f"{ratio[i]:g}x that {ratio[i]:g} times the processes can give; likely: "
                  f"{likely_cause(row)}")
    return out


def likely_cause(row: pd.Series) -> str:
    """The likeliest reason a speedup came out above the process count, from what
    the records of the row and of its baseline say."""
    causes = []
    if isinstance(row.get("baseline_busy"), str) and row["baseline_busy"]:
        causes.append(f"the baseline ran on a busy machine ({row['baseline_busy']})")
    mine, theirs = row.get("threads_per_process"), row.get("baseline_threads")
    if pd.notna(mine) and pd.notna(theirs) and theirs > mine and row.get("device") == "cpu":
        causes.append(f"the baseline ran {theirs:g} threads per process against {mine:g} here: "
                      "on a CPU shared with other work, more threads can be slower")
    if row.get("work_unit") == "runs":
        causes.append("a script timed as a whole may have done less work at this count "
                      "(resumed from a checkpoint an earlier count left, fewer epochs)")
    if not causes:
        causes.append("the baseline was slowed down (other work on the machine, a cold cache) "
                      "or this run did less work; run it again with --repeat to see the spread")
    return "; ".join(causes)
