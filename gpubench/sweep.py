"""The sweep: run one workload at each GPU count and record every run.

It knows nothing of where the machine is: a Launcher runs each count, and the
sweep turns what came back into one result record per count.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, replace
from typing import Callable

from gpubench.errors import UsageError
from gpubench.launch.base import Launcher, Machine
from gpubench.recording import finish_record
from gpubench.results import ResultsStore
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
    force: bool = False  # run counts that already have an ok record too


@dataclass
class SweepResult:
    records: list[dict] = field(default_factory=list)  # appended by this sweep
    skipped: dict[int, dict] = field(default_factory=dict)  # count -> its earlier ok record


def recorded_counts(records: list[dict], plan: SweepPlan, machine: Machine) -> dict[int, dict]:
    """Counts of this plan that already have an ok record: same workload, provider,
    instance type, GPU, workload arguments and count. The newest record wins."""
    found: dict[int, dict] = {}
    wanted = {procs * machine.nodes: procs for procs in plan.counts}
    for record in records:
        if (record.get("status") == "ok"
                and record.get("workload") == plan.workload.name
                and record.get("provider") == machine.provider
                and record.get("instance_type") == machine.instance_type
                and record.get("gpu_name") == machine.gpu_name
                and record.get("nodes", 1) == machine.nodes
                and record.get("workload_args") == list(plan.workload_args)
                and record.get("gpu_count") in wanted):
            procs = wanted[record["gpu_count"]]
            if procs not in found or str(record.get("time")) >= str(found[procs].get("time")):
                found[procs] = record
    return found


def sweep(launcher: Launcher, plan: SweepPlan, store: ResultsStore,
          echo: Callable[[str], None]) -> SweepResult:
    """Run each count of the plan in turn; every count run gets a record, ok or failed.

    A count that already has an ok record is skipped unless plan.force, so a sweep
    that stopped half-way (a lost machine, Ctrl-C) resumes at its first count
    without one when it is run again.
    """
    machine = launcher.machine()
    result = SweepResult()
    if not plan.force:
        result.skipped = recorded_counts(store.load().records, plan, machine)
    for procs in plan.counts:
        if machine.max_procs is not None and procs > machine.max_procs:
            echo(f"skipping {procs} GPUs: {machine.instance_type} has {machine.max_procs}")
            continue
        prefix = f"[{procs} gpu{'s' if procs > 1 else ''}] "
        if procs in result.skipped:
            earlier = result.skipped[procs]
            echo(f"{prefix}already recorded (run {earlier.get('run_id')}, {earlier.get('time')}); "
                 "skipping (--force runs it again)")
            continue
        echo(f"{prefix}{plan.workload.name} on {machine.provider} ({machine.gpu_name})")
        outcome = launcher.run(plan.workload, procs, plan.workload_args,
                               lambda line, p=prefix: echo(p + line), plan.timeout)
        record = finish_record(outcome, plan, machine, procs)
        store.append(plan.run_id, record)
        if record["status"] != "ok":
            echo(f"{prefix}failed: {record['error']}")
        result.records.append(record)
    return result


def run_sweep(launcher: Launcher, plan: SweepPlan, store: ResultsStore,
              echo: Callable[[str], None]) -> list[dict]:
    """Run every count of the plan, recorded or not, and return the new records."""
    return sweep(launcher, replace(plan, force=True), store, echo).records
