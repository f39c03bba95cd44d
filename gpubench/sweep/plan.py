"""What a sweep is asked to do: one workload at each of its points, with its arguments,
run id, time limit and repeats (the sweep itself is run.py; its records, records.py)."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from gpubench.launch.base import SweepPoint
from gpubench.suite import WorkloadRef
from gpubench.sweep.waits import QUIET_AFTER_S

DEFAULT_TIMEOUT_S = 3600.0


@dataclass
class SweepPlan:
    workload: WorkloadRef
    points: list[SweepPoint]
    workload_args: list[str] = field(default_factory=list)
    run_id: str = ""
    timeout: float = DEFAULT_TIMEOUT_S
    invocation: str = field(default_factory=lambda: " ".join(["gpubench", *sys.argv[1:]]))
    force: bool = False  # run points that already have an ok record too
    repeat: int = 1  # runs of each point
    quiet_after: float = QUIET_AFTER_S  # seconds without a line of output before a run says so

    def __post_init__(self) -> None:
        bad = [p for p in self.points if not isinstance(p, SweepPoint)]
        if bad:  # a bare count would otherwise fail deep inside a launcher
            raise TypeError(f"SweepPlan.points holds SweepPoints, not {bad[0]!r} "
                            "(launch.points.sweep_points makes them)")
