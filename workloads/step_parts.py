"""A training step in parts: waiting for the next batch, compute, the communication that
did not overlap the backward pass, and the rest. The arithmetic the suite's harness
(harness.StepParts) and the probe of a user's script (script_probe.py) share, and the
names the record and the report give the parts (record_schema: step_parts, step_shares).

Each timed step is split as it ran (split_step): its data wait and its exposed
communication as measured, its compute as the span from the model's first forward to
the end of the optimizer step (the backward's end where no optimizer steps) less the
exposed communication and any data wait inside it, and the rest (host work around the
model, synchronisation, idle) what is left of the step, so that the parts of each step
add up to it. A run's parts (summarise) are the medians of each measured part over its
timed steps, and the rest is its median step less them: they add up to the median step.

DDP measures the communication of the backward itself (torch's reducer: the time from
the first bucket's all-reduce to the last one's end, and how much of it overlapped the
backward's compute, at the iterations it samples: the first ten, then every
kDDPRuntimeLoggingSampleRate = 100th unless _set_ddp_runtime_logging_sample_rate says
otherwise); ddp_exposed reads it.

Standard library only: shipped to GPU machines beside the workloads, and installed in
gpubench as gpubench.workloads.step_parts.
"""

from __future__ import annotations

import statistics

DATA, COMPUTE, COMM, OTHER = "data", "compute", "exposed_comm", "other"
PARTS = (DATA, COMPUTE, COMM, OTHER)  # in this order everywhere: the record, the report
MEASURED = (DATA, COMPUTE, COMM)  # OTHER is what the step leaves of them
NS = 1e-9


def split_step(step: float, data: float = 0.0, span: float | None = None, comm: float = 0.0,
               data_in_span: float = 0.0) -> dict:
    """One step's parts, in seconds, adding up to `step`: `data` (waiting for batches),
    `comm` (exposed communication), compute (`span`, from the first forward to the
    optimizer's end, less the exposed communication and the data waited for inside it;
    None: no span seen, no compute) and the rest. A part measured on another clock or
    at another iteration (DDP's) never takes more than the step leaves it."""
    step = max(float(step), 0.0)
    data = min(max(float(data), 0.0), step)
    comm = min(max(float(comm), 0.0), step - data)
    compute = 0.0 if span is None else max(float(span) - comm - max(float(data_in_span), 0.0), 0.0)
    compute = min(compute, step - data - comm)
    return {DATA: data, COMPUTE: compute, COMM: comm, OTHER: step - data - comm - compute}


def summarise(steps: list[dict], median_step: float | None) -> dict | None:
    """A run's parts from its timed steps' (split_step's): the median of each measured
    part, and the rest the median step less them (where the medians of the parts add up
    to more than the median step, they are scaled down to it, and the rest is 0). None
    without a step or a median step."""
    if not steps or not median_step or median_step <= 0:
        return None
    medians = {p: statistics.median(s[p] for s in steps) for p in MEASURED}
    measured = sum(medians.values())
    if measured > median_step:
        scale = median_step / measured
        medians = {p: v * scale for p, v in medians.items()}
        measured = median_step
    return {**{p: medians.get(p, 0.0) for p in PARTS if p != OTHER},
            OTHER: max(median_step - measured, 0.0)}


def shares(parts: dict | None) -> dict | None:
    """Each part over their sum (the step): shares that add up to 1."""
    if not parts:
        return None
    total = sum(parts.get(p) or 0.0 for p in PARTS)
    if total <= 0:
        return None
    return {p: (parts.get(p) or 0.0) / total for p in PARTS}


def ddp_exposed(logging_data: dict) -> tuple[int | None, float | None]:
    """(the iteration DDP logged, the seconds of its backward communication that did not
    overlap the backward's compute) from DistributedDataParallel._get_ddp_logging_data():
    backward_comm_time less backward_compute_comm_overlap_time, nanoseconds of the
    latest sampled iteration (logged at the next forward's start). (None, None) where DDP
    has timed no iteration yet."""
    iteration = logging_data.get("iteration")
    comm = logging_data.get("backward_comm_time")
    if not iteration or comm is None:
        return None, None
    overlap = logging_data.get("backward_compute_comm_overlap_time") or 0
    return int(iteration), min(max(comm - overlap, 0), comm) * NS


def rounded(parts: dict | None, digits: int = 6) -> dict | None:
    return None if parts is None else {p: round(parts[p], digits) for p in PARTS}
