"""A user's script at each GPU count `advise` ranks, each counted as rank 0 of that world.

A script may divide its work by the world (nanoGPT's gradient accumulation, a
DistributedSampler's share of the data, a mesh that shards its model), so the step a
GPU takes at 8 GPUs need not be the one it takes at 1. Each world (GPUs, nodes) is
calibrated as `predict --gpus N --nodes M` calibrates it, and kept. To stay bounded, the
smallest and the largest world are counted first; where their steps are the same
(operations, samples and tokens alike) the script is taken to do the same work a rank at
every count between, and those reuse the smallest's count. A world whose calibration
fails (a script that needs two GPUs, at one; nn.DataParallel above one) is left out with
its reason; the others are still ranked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from gpubench.predict.advise import Subject
from gpubench.suite import WorkloadRef

World = tuple[int, int]   # (GPUs in all, nodes)


@dataclass
class ScriptWorlds:
    """The script's Subject at each world, or the one line saying why there is none."""

    subjects: dict[World, Subject] = field(default_factory=dict)
    refused: dict[World, str] = field(default_factory=dict)
    shared: list[World] = field(default_factory=list)   # worlds that reuse the smallest's count

    @property
    def first(self) -> Subject | None:
        """The subject of the smallest world counted: what the work and the title read."""
        return self.subjects[min(self.subjects)] if self.subjects else None


def script_worlds(ref: WorkloadRef, args: tuple, worlds: list[World], say: Callable[[str], None]) -> ScriptWorlds:
    from gpubench.predict import calibrate

    found = ScriptWorlds()
    order = sorted(set(worlds))
    counted: dict[World, calibrate.Calibration] = {}

    def count(world: World) -> None:
        try:
            counted[world] = calibrate.calibration_for(ref, tuple(args), say, world)
            found.subjects[world] = calibrate.subject_of(ref, tuple(args), counted[world])
        except calibrate.CalibrationError as why:
            found.refused[world] = str(why)

    for world in dict.fromkeys((order[0], order[-1])):
        count(world)
    low, high = counted.get(order[0]), counted.get(order[-1])
    between = order[1:-1]
    if between and low is not None and high is not None and same_step(low, high):
        for world in between:
            found.subjects[world] = found.subjects[order[0]]
            found.shared.append(world)
        say(f"calibration: the same step at {_gpus(order[0])} and {_gpus(order[-1])}: taken as the same at "
            + ", ".join(_gpus(w) for w in between))
    else:
        for world in between:
            count(world)
    return found


def same_step(a, b) -> bool:
    """Two calibrations counted the same step: the same operations, samples and tokens."""
    return (sorted(map(tuple, a.ops)) == sorted(map(tuple, b.ops)) and a.samples == b.samples
            and a.tokens == b.tokens and a.params == b.params)


def _gpus(world: World) -> str:
    gpus, nodes = world
    return f"{gpus} GPU{'s' if gpus != 1 else ''}" + (f" over {nodes} nodes" if nodes > 1 else "")
