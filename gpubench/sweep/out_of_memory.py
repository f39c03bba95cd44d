"""After a run that ran out of memory: which larger counts can still fit.

The kernel's out-of-memory killer acts on the machine's memory, which every process
of a count shares: a larger count on the same machines holds more, so it is not run.
On a GPU, each GPU holds the whole model under DDP at any count, so a larger count
runs out too; under FSDP each GPU holds a shard, smaller at a larger count, so the
sweep goes on to see where it fits."""

from __future__ import annotations

from gpubench.format import spoken
from gpubench.launch.base import SweepPoint
from gpubench.launch.failures import Failure

KERNEL, GPU = "out of memory", "out of gpu memory"   # Failure kinds (launch/failures.py)


def sharded(workload: str, record: dict) -> bool:
    """The run shards its model across the GPUs (FSDP): by its name, the workload's own
    word (sharding), or what the probe saw the script wrap its model in."""
    return ("fsdp" in workload.lower() or str(record.get("sharding") or "").startswith("FSDP")
            or "FSDP" in str(record.get("wrapped_in") or ""))


def larger_cannot_fit(failure: Failure | None, workload: str, record: dict) -> bool:
    if failure is None or failure.kind not in (KERNEL, GPU):
        return False
    return failure.kind == KERNEL or not sharded(workload, record)


def skipped(point: SweepPoint, failed_at: SweepPoint, kind: str) -> str:
    why = ("the machine's memory is shared by more processes there" if kind == KERNEL
           else "each GPU holds the whole model under DDP at any count")
    return f"skipping {point.describe()}: {failed_at.describe()} ran out of memory and {why}"


def stop_line(failed_at: SweepPoint, ahead: tuple[SweepPoint, ...]) -> str:
    counts = spoken([p.describe() for p in ahead], "and")
    return (f"{failed_at.describe()} ran out of memory; {counts} not run (they would hold as much "
            "or more): a smaller --batch-size, activation checkpointing or FSDP (gpt-fsdp) needs less")
