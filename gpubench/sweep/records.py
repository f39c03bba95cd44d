"""A result record completed: the workload's own half (or, for a user's script
that wrote none, its training steps as the probe timed them, else its timing as a
whole) plus what only gpubench knows: where it
ran, what that costs, how it was launched, how busy the machine was, which
transport NCCL chose (from its log, which the launchers bring back), why a run
failed. Every field either side writes is listed in workloads/record_schema.py."""

from __future__ import annotations

import socket
import time
from typing import TYPE_CHECKING

from gpubench.launch import nccl_log
from gpubench.launch.base import Machine, RunOutcome, SweepPoint
from gpubench.sweep.probe import STEPS, WHOLE
from gpubench.workloads import record_schema
from gpubench.workloads.record_schema import SCHEMA_VERSION

if TYPE_CHECKING:
    from gpubench.sweep.plan import SweepPlan

SCRIPT_UNIT = "runs/s"
SCRIPT_PRECISION = "-"  # a user's script's precision is its own affair, ok or failed


def script_record(outcome: RunOutcome, world_size: int) -> dict:
    """The record of a user's own script that ran to the end. What the script wrote
    to $GPUBENCH_RECORD_FILE wins (the probe's figure kept beside it as
    step_throughput); else its training steps as the probe timed them
    (outcome.steps: throughput summed over the processes, steps, median step time
    and spread, start-up); else, where the probe saw no step it could time, the run
    is timed as a whole: one run is the unit of work, the throughput 1 / wall time of
    the whole process (interpreter start and rendezvous included), so the speedup is
    the baseline's wall time over this one's. wall_seconds is the whole process in
    every case: what the run held the machine for."""
    own = outcome.record or {}
    steps = dict(outcome.steps or {})
    record = {"status": "ok", "error": None, "world_size": world_size,
              "wall_seconds": outcome.elapsed_seconds,
              "precision": SCRIPT_PRECISION}  # the script's own affair
    timed = steps.get("timing") == STEPS
    if own.get("throughput"):
        if timed:
            steps["step_throughput"] = steps.pop("throughput")
            record.update({k: v for k, v in steps.items() if k not in ("timing", "throughput_unit")})
        record.update(timing="script", throughput_unit="samples/s")
    elif timed:
        record.update(steps)
    elif outcome.elapsed_seconds > 0:
        record.update(timing=WHOLE, throughput=1.0 / outcome.elapsed_seconds,
                      throughput_unit=SCRIPT_UNIT, epoch_samples=1,  # the report's s/run, $/run
                      timing_note=steps.get("timing_note"))
    record.update(outcome.beside or {})
    record.update(own)
    return record


def finish_record(outcome: RunOutcome, plan: "SweepPlan", machine: Machine, point: SweepPoint,
                  repeat: int = 1, identity: dict | None = None, log_file: str | None = None) -> dict:
    """The workload's record completed with what only gpubench knows: where it ran,
    what that costs, how it was launched, which of the plan's runs it was, what the
    script was (identity: suite.script_identity), where its output is kept. A suite
    run without a record becomes a failed one; a user's script that ran to the end is
    timed (script_record). Every gpubench field is written, null where unknown."""
    record = dict(outcome.record or {})
    if outcome.error is None and not plan.workload.in_suite:
        record = script_record(outcome, point.world_size)
    if not plan.workload.in_suite:  # failed too: its precision is no more fp32 than an ok run's
        record.setdefault("precision", SCRIPT_PRECISION)
    measured = dict(outcome.measured)
    nccl = nccl_log.record_fields(measured.pop(nccl_log.LOGS, None))  # what NCCL said, per node
    for key, value in measured.items():
        record.setdefault(key, value)  # the workload's own word (device, threads) wins
    for key, value in nccl.items():
        if value is not None:
            record.setdefault(key, value)
    if outcome.failure is not None:
        record.update(failure_kind=outcome.failure.kind, exit_signal=outcome.failure.signal)
    if outcome.files is not None and outcome.files.left_behind:
        record["left_behind"] = list(outcome.files.left_behind)
    record.setdefault("schema_version", SCHEMA_VERSION)
    record.setdefault("time", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    record.setdefault("workload", plan.workload.name)
    if outcome.error or not record.get("status"):
        record["status"] = "failed"
        record["error"] = outcome.error or "the workload exited without writing a result record"
    record["workload"] = plan.workload.name  # the name the user knows it by
    record["workload_args"] = list(plan.workload_args)  # what a rerun is matched on
    record["device_name"] = record.get("gpu_name")
    price = machine.price_for(point)
    record.update({
        "run_id": plan.run_id,
        "provider": machine.provider,
        "instance_type": machine.instance_type,
        "gpu_name": machine.gpu_name,
        "gpu_count": point.world_size,  # one process per GPU
        "nodes": point.nodes,
        "world_size": record.get("world_size", point.world_size),
        "price_per_hour": price,
        "instance_price_per_hour": machine.price_per_hour,
        "launch_command": " ".join(outcome.command),
        "invocation": plan.invocation,
        "process_seconds": outcome.elapsed_seconds,
        "controller_host": socket.gethostname(),
    })
    wall = record.get("wall_seconds")
    record["cost"] = price * wall / 3600.0 if price is not None and wall else None
    record.update(identity or {}, repeat=repeat, repeat_count=plan.repeat, log_file=log_file)
    for name in record_schema.names(record_schema.GPUBENCH):
        record.setdefault(name, None)
    return record
