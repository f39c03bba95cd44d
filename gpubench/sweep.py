"""The sweep: run one workload at each GPU count and record every run.

It knows nothing of where the machine is: a Launcher runs each count, and the
sweep turns what came back into one result record per count.
"""

from __future__ import annotations

import socket
import sys
import time
from dataclasses import dataclass, field
from typing import Callable

from gpubench.errors import UsageError
from gpubench.launch.base import Launcher, Machine, RunOutcome
from gpubench.results import SCHEMA_VERSION, ResultsStore
from gpubench.suite import WorkloadRef

DEFAULT_TIMEOUT_S = 3600.0


def parse_counts(text: str) -> list[int]:
    """'1,2,4' -> [1, 2, 4]; anything else is a usage error."""
    counts = []
    for part in text.split(","):
        part = part.strip()
        try:
            n = int(part)
        except ValueError:
            raise UsageError(f"--gpus: '{part}' is not a whole number (example: --gpus 1,2,4)") from None
        if n < 1:
            raise UsageError(f"--gpus: {n} is not a valid GPU count; counts start at 1")
        if n not in counts:
            counts.append(n)
    return counts


def default_counts(machine: Machine) -> list[int]:
    """1 and the powers of two up to the machine's GPUs; 1 and 2 processes on a CPU."""
    if machine.accelerator != "cuda" or machine.gpu_count < 1:
        return [1, 2]
    counts, n = [], 1
    while n <= machine.gpu_count:
        counts.append(n)
        n *= 2
    return counts


@dataclass
class SweepPlan:
    workload: WorkloadRef
    counts: list[int]
    workload_args: list[str] = field(default_factory=list)
    run_id: str = ""
    timeout: float = DEFAULT_TIMEOUT_S
    invocation: str = field(default_factory=lambda: " ".join(["gpubench", *sys.argv[1:]]))


def finish_record(outcome: RunOutcome, plan: SweepPlan, machine: Machine, procs: int) -> dict:
    """The workload's record completed with what only gpubench knows: where it ran,
    what that costs, how it was launched. A run without a record becomes a failed one."""
    record = dict(outcome.record or {})
    record.setdefault("schema_version", SCHEMA_VERSION)
    record.setdefault("time", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    record.setdefault("workload", plan.workload.name)
    if outcome.error or outcome.record is None:
        record["status"] = "failed"
        record["error"] = outcome.error or "no result record"
    record["workload"] = plan.workload.name  # the name the user knows it by
    record["device_name"] = record.get("gpu_name")
    price = machine.price_for(procs)
    record.update({
        "run_id": plan.run_id,
        "provider": machine.provider,
        "instance_type": machine.instance_type,
        "gpu_name": machine.gpu_name,
        "gpu_count": procs * machine.nodes,
        "nodes": machine.nodes,
        "world_size": record.get("world_size", procs * machine.nodes),
        "price_per_hour": price,
        "instance_price_per_hour": machine.price_per_hour,
        "launch_command": " ".join(outcome.command),
        "invocation": plan.invocation,
        "process_seconds": outcome.elapsed_seconds,
        "controller_host": socket.gethostname(),
    })
    wall = record.get("wall_seconds")
    record["cost"] = price * wall / 3600.0 if price is not None and wall else None
    return record


def run_sweep(launcher: Launcher, plan: SweepPlan, store: ResultsStore,
              echo: Callable[[str], None]) -> list[dict]:
    """Run each count of the plan in turn; every count gets a record, ok or failed."""
    machine = launcher.machine()
    records = []
    for procs in plan.counts:
        if machine.max_procs is not None and procs > machine.max_procs:
            echo(f"skipping {procs} GPUs: {machine.instance_type} has {machine.max_procs}")
            continue
        prefix = f"[{procs} gpu{'s' if procs > 1 else ''}] "
        echo(f"{prefix}{plan.workload.name} on {machine.provider} ({machine.gpu_name})")
        outcome = launcher.run(plan.workload, procs, plan.workload_args,
                               lambda line, p=prefix: echo(p + line), plan.timeout)
        record = finish_record(outcome, plan, machine, procs)
        store.append(plan.run_id, record)
        if record["status"] != "ok":
            echo(f"{prefix}failed: {record['error']}")
        records.append(record)
    return records
