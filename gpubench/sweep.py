"""The sweep: run one workload at each point of a plan (nodes, processes per node)
and record every run.

It knows nothing of where the machine is: a Launcher gets the workload there and
runs each point, and the sweep turns what came back into one result record per
point. A launcher that spans nodes says so in its Machine (max_nodes); the plan,
the skips and the records need nothing more from it.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, replace
from typing import Callable, Iterable

from gpubench.errors import GpubenchError, UsageError
from gpubench.launch.base import Launcher, Machine, SweepPoint
from gpubench.recording import finish_record
from gpubench.results import ResultsStore, new_run_id
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


def on_one_node(counts: Iterable[int]) -> list[SweepPoint]:
    """Process counts on one machine as points: --gpus 1,2,4 -> (1,1), (1,2), (1,4)."""
    return [SweepPoint(1, n) for n in counts]


def grid(nodes: Iterable[int], procs_per_node: Iterable[int]) -> list[SweepPoint]:
    """Every node count with every per-node count, node counts first: nodes 1,2 and
    processes 1,2 -> (1,1), (1,2), (2,1), (2,2)."""
    per_node = list(procs_per_node)
    return [SweepPoint(n, p) for n in nodes for p in per_node]


def _one_and_powers_of_two(limit: int) -> list[int]:
    counts, n = [], 1
    while n <= limit:
        counts.append(n)
        n *= 2
    return counts


def default_points(machine: Machine) -> list[SweepPoint]:
    """On each node 1 and the powers of two up to its GPUs (1 and 2 processes on a
    CPU), on 1 and the powers of two up to the nodes the launcher can span."""
    if machine.accelerator != "cuda" or machine.gpu_count < 1:
        per_node = [1, 2]
    else:
        per_node = _one_and_powers_of_two(machine.gpu_count)
    return grid(_one_and_powers_of_two(max(1, machine.max_nodes)), per_node)


def misfit(point: SweepPoint, machine: Machine) -> str | None:
    """Why `point` does not fit the machine, or None when it does."""
    if point.nodes > machine.max_nodes:
        spans = f"{machine.max_nodes} node{'s' if machine.max_nodes > 1 else ''}"
        return f"skipping {point.describe()}: {machine.instance_type} spans at most {spans}"
    most = machine.max_procs
    if most is not None and point.procs_per_node > most:
        if point.nodes == 1:
            return f"skipping {point.procs_per_node} GPUs: {machine.instance_type} has {most}"
        return f"skipping {point.describe()}: {machine.instance_type} has {most} per node"
    return None


@dataclass
class SweepPlan:
    workload: WorkloadRef
    points: list[SweepPoint]
    workload_args: list[str] = field(default_factory=list)
    run_id: str = ""
    timeout: float = DEFAULT_TIMEOUT_S
    invocation: str = field(default_factory=lambda: " ".join(["gpubench", *sys.argv[1:]]))
    force: bool = False  # run points that already have an ok record too

    def __post_init__(self) -> None:
        bad = [p for p in self.points if not isinstance(p, SweepPoint)]
        if bad:  # a bare count would otherwise fail deep inside a launcher
            raise TypeError(f"SweepPlan.points holds SweepPoints, not {bad[0]!r} "
                            "(on_one_node(counts) makes them)")


@dataclass
class SweepResult:
    records: list[dict] = field(default_factory=list)  # appended by this sweep
    skipped: dict[SweepPoint, dict] = field(default_factory=dict)  # point -> its earlier ok record

    @property
    def all_ok(self) -> bool:
        """No run of this sweep failed (points skipped as already recorded count as ok)."""
        return all(r["status"] == "ok" for r in self.records)


def point_of(record: dict) -> SweepPoint | None:
    """The point a record was run at; records from before nodes were kept ran on one."""
    nodes, world = record.get("nodes", 1) or 1, record.get("gpu_count")
    if not isinstance(nodes, int) or not isinstance(world, int) or nodes < 1 or world % nodes:
        return None
    return SweepPoint(nodes, world // nodes)


def recorded_points(records: list[dict], plan: SweepPlan, machine: Machine) -> dict[SweepPoint, dict]:
    """Points of this plan that already have an ok record: same workload, provider,
    instance type, GPU, workload arguments, nodes and GPUs per node. The newest
    record wins."""
    found: dict[SweepPoint, dict] = {}
    wanted = set(plan.points)
    for record in records:
        if (record.get("status") == "ok"
                and record.get("workload") == plan.workload.name
                and record.get("provider") == machine.provider
                and record.get("instance_type") == machine.instance_type
                and record.get("gpu_name") == machine.gpu_name
                and record.get("workload_args") == list(plan.workload_args)):
            point = point_of(record)
            if point in wanted and (point not in found
                                    or str(record.get("time")) >= str(found[point].get("time"))):
                found[point] = record
    return found


def sweep(launcher: Launcher, plan: SweepPlan, store: ResultsStore,
          echo: Callable[[str], None]) -> SweepResult:
    """Get the workload to the machine, then run each point of the plan in turn;
    every point run gets a record, ok or failed.

    A point that already has an ok record is skipped unless plan.force, so a sweep
    that stopped half-way (a lost machine, Ctrl-C) resumes at its first point
    without one when it is run again. Points the machine cannot hold are skipped
    with a line saying why.
    """
    machine = launcher.machine()
    result = SweepResult()
    if not plan.force:
        result.skipped = recorded_points(store.load().records, plan, machine)
    launcher.prepare(plan.workload)
    for point in plan.points:
        why_not = misfit(point, machine)
        if why_not:
            echo(why_not)
            continue
        prefix = f"[{point.describe()}] "
        if point in result.skipped:
            earlier = result.skipped[point]
            echo(f"{prefix}already recorded (run {earlier.get('run_id')}, {earlier.get('time')}); "
                 "skipping (--force runs it again)")
            continue
        echo(f"{prefix}{plan.workload.name} on {machine.provider} ({machine.gpu_name})")
        outcome = launcher.run(plan.workload, point, plan.workload_args,
                               lambda line, p=prefix: echo(p + line), plan.timeout)
        record = finish_record(outcome, plan, machine, point)
        store.append(plan.run_id, record)
        if record["status"] != "ok":
            echo(f"{prefix}failed: {record['error']}")
        result.records.append(record)
    return result


def run_sweep(launcher: Launcher, plan: SweepPlan, store: ResultsStore,
              echo: Callable[[str], None]) -> list[dict]:
    """Run every point of the plan, recorded or not, and return the new records."""
    return sweep(launcher, replace(plan, force=True), store, echo).records


class NothingFitsError(GpubenchError):
    """No point of a sweep fits the machine, so nothing ran and nothing was recorded."""


def sweep_new_run(launcher: Launcher, workload: WorkloadRef, points: list[SweepPoint] | None,
                  workload_args: list[str], store: ResultsStore, echo: Callable[[str], None],
                  timeout: float = DEFAULT_TIMEOUT_S, force: bool = False) -> tuple[SweepPlan, SweepResult]:
    """Sweep `workload` as a new run over `points` (None: the machine's default
    points) and return the plan (its run id) and what was recorded. A sweep whose
    every point was already recorded runs nothing and is no error; one whose no
    point fits the machine raises NothingFitsError."""
    chosen = points or default_points(launcher.machine())
    plan = SweepPlan(workload, chosen, list(workload_args), new_run_id(), timeout, force=force)
    result = sweep(launcher, plan, store, echo)
    if not result.records and not result.skipped:
        raise NothingFitsError("no GPU count of the sweep fits this machine")
    return plan, result
