"""What each process of a user's script really did, read from its run's output
(the lines workloads/script_probe.py writes as each process ends), and the verdict:
a run whose processes did not form one process group of the expected size, did not
train together in it, or took no training step is not a measurement, whatever the
script's exit code says.

Each of the ways a real script ends up training alone gets its reason in words:
a Lightning Trainer() that was not told to use DDP, an Accelerator() that saw no GPU,
a GPU guard that printed a message and exited 0, a script that never calls
init_process_group, a model used unwrapped in a group.

The processes' training steps become the record's throughput (step_fields): each
process's samples (or tokens) per step over its median step time, summed over the
processes, so that a script that takes a fixed number of steps per process and one
that shares an epoch between them are measured alike.
Their steps in parts (data, compute, exposed communication, other: step_parts.py) are
the record's step_parts and step_shares, those of the process whose median step is the
record's, and step_parts_by_rank, every process's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from gpubench.workloads.script_probe import PREFIX

ALONE = "alone"  # the failure kind of a run whose processes did not train together
NO_STEP = "no step"  # ... of a run whose processes took no training step
STEPS = "training steps"  # a script's `timing` when its steps were timed
WHOLE = "whole process"  # ... when the run was timed as a whole


@dataclass
class ProbeReports:
    """The probe's lines of one run, one per process that ended normally."""

    by_rank: dict[int, dict] = field(default_factory=dict)

    def take(self, line: str) -> bool:
        """Keep `line` if it is a probe line (True: it is not the script's output)."""
        at = line.find(PREFIX)
        if at < 0:
            return False
        try:
            report = json.loads(line[at + len(PREFIX):])
            self.by_rank[int(report["rank"])] = report
        except (ValueError, KeyError, TypeError):
            return False
        return True

    def record_fields(self) -> dict:
        """What the records keep of it: the group rank 0 saw, and every model wrapping."""
        if not self.by_rank:
            return {}
        first = self.by_rank[min(self.by_rank)]
        group = first.get("group")
        wrapped = sorted({w for r in self.by_rank.values() for w in r.get("wrapped") or []})
        return {"process_group": f"{group['backend']} x {group['size']}" if group else "none",
                "wrapped_in": ",".join(wrapped) or "none",
                "frameworks": ",".join(sorted(k for k in first.get("frameworks") or {}
                                              if not k.endswith("_type"))) or None}


    def step_fields(self) -> dict:
        """The record's timing from the processes' steps: throughput summed over them
        (tokens/s where every timed process saw tokens), the steps, the slowest
        process's median step time and spread, start-up; or, where no step can be
        read, `timing` 'whole process' and `timing_note` saying why."""
        steps = [r.get("steps") or {} for r in self.by_rank.values()]
        timed = [s for s in steps if s.get("kind") and s.get("timed") and s.get("median_s")]
        if not steps:
            return {}
        if not timed:
            return {"timing": WHOLE, "timing_note": _untimed(steps)}
        if not all(s.get("samples_per_step") for s in timed):
            return {"timing": WHOLE, "timing_note": "the probe timed the steps but saw no samples "
                    "in them (no module's forward ran with gradients on)"}
        tokens = all(s.get("tokens_per_step") for s in timed)
        per_step = "tokens_per_step" if tokens else "samples_per_step"
        first = min(self.by_rank)
        epoch = max((s.get("epoch_samples") or 0 for s in timed), default=0) or None
        if epoch and tokens:  # an epoch in tokens: its samples at this run's tokens a sample
            epoch = round(epoch * timed[0]["tokens_per_step"] / timed[0]["samples_per_step"])
        return {"timing": STEPS,
                "throughput": sum(s[per_step] / s["median_s"] for s in timed),
                "throughput_unit": "tokens/s" if tokens else "samples/s",
                "step_kind": timed[0]["kind"],
                "steps": min(s["timed"] for s in timed),
                "warmup_steps": max(s["warmup"] for s in timed),
                "median_step_s": max(s["median_s"] for s in timed),
                "p10_step_s": max(s["p10_s"] for s in timed),
                "p90_step_s": max(s["p90_s"] for s in timed),
                "global_batch": round(sum(s["samples_per_step"] for s in timed)),
                "tokens_per_step": sum(s["tokens_per_step"] for s in timed) if tokens else None,
                "samples": round(sum(s["samples_per_step"] * s["timed"] for s in timed)),
                "startup_s": max(s.get("startup_s") or 0.0 for s in timed),
                "step_processes": len(timed),
                "epoch_samples": epoch,
                # run --max-steps ended the script there, not the script itself
                "ended_after_steps": max((s.get("ended_at") or 0 for s in timed), default=0) or None,
                "process_wall_s": (self.by_rank[first].get("steps") or {}).get("wall_s"),
                # run --trace: steps under the profiler, left out of the figures above
                "traced_steps": max((s.get("traced") or 0 for s in timed), default=0) or None,
                **self._parts(timed)}

    def _parts(self, timed: list[dict]) -> dict:
        """The step in parts of the process with the slowest median step (whose median is
        the record's median_step_s: its parts add up to it), and every process's."""
        slowest = max(timed, key=lambda s: s["median_s"])
        by_rank = [{"rank": rank, **r["steps"]["parts"]} for rank, r in sorted(self.by_rank.items())
                   if (r.get("steps") or {}).get("parts")]
        return {"step_parts": slowest.get("parts"), "step_shares": slowest.get("shares"),
                "step_parts_by_rank": by_rank or None, "step_parts_note": slowest.get("parts_note")}

    def took_steps(self) -> bool:
        """Some process took a training step (an optimizer step or a backward pass), or
        a probe from before steps were counted said nothing of them."""
        if any("steps" not in r for r in self.by_rank.values()):
            return True
        return any((r.get("steps") or {}).get("count") or (r.get("steps") or {}).get("backwards")
                   for r in self.by_rank.values())


def _untimed(steps: list[dict]) -> str:
    counted = max((s.get("count") or 0 for s in steps), default=0)
    if counted:
        least = max(s.get("warmup") or 0 for s in steps) + 1
        return (f"{counted} step(s): too few to time after the warm-up (at least {least} "
                "are needed)")
    return ("no optimizer step, nor a backward pass through a model wrapped in DDP or FSDP, "
            "for the probe to time")


def judge(reports: ProbeReports, world_size: int, last_words: str = "",
          own_figure: bool = False) -> tuple[str, str] | None:
    """(failure kind, reason) of a run that is no measurement (verdict), or None."""
    why = verdict(reports, world_size, last_words, own_figure)
    if why is None:
        return None
    return (NO_STEP if why == _no_step(reports, world_size, last_words) else ALONE), why


def verdict(reports: ProbeReports, world_size: int, last_words: str = "",
            own_figure: bool = False) -> str | None:
    """Why the run is not a measurement of `world_size` processes training together,
    or None when it is (or when no process said: a probe that did not run proves
    nothing). One process needs no group, but it must take a training step, unless the
    script reports its own throughput (`own_figure`)."""
    if not reports.by_rank:
        return None
    if world_size <= 1:
        return None if own_figure else _no_step(reports, 1, last_words)
    groups = [r.get("group") for r in reports.by_rank.values()]
    if all(g is None for g in groups):
        return (f"each of the {world_size} processes trained alone: no process group was formed"
                f"{_why_alone(reports, last_words)}")
    sizes = sorted({g["size"] for g in groups if g})
    if sizes != [world_size] or any(g is None for g in groups):
        alone = sum(1 for g in groups if g is None)
        said = f"{alone} of them formed none; " if alone else ""
        return (f"the {world_size} processes did not form one group of {world_size}: {said}"
                f"group size {' and '.join(str(s) for s in sizes)}")
    return _not_distributed(reports, world_size) or (
        None if own_figure else _no_step(reports, world_size, last_words))


def _no_step(reports: ProbeReports, world_size: int, last_words: str) -> str | None:
    """A run in which no process took a training step (a GPU guard that exits 0,
    evaluation only) measured nothing but its start-up."""
    if reports.took_steps():
        return None
    who = ("the process took no" if world_size == 1
           else f"none of the {world_size} processes took a")
    said = f"; its last words: {last_words[:160]}" if last_words else "; it printed nothing"
    return f"{who} training step{said}"


def _not_distributed(reports: ProbeReports, world_size: int) -> str | None:
    """Processes in one group that each trained on their own: Accelerate's
    DistributedType.NO (no model wrapped, no data sharded), or a model trained
    unwrapped with no collective called by any process."""
    frameworks = {k: v for r in reports.by_rank.values() for k, v in (r.get("frameworks") or {}).items()}
    formed = f"the {world_size} processes formed a group of {world_size} but did not train together"
    if frameworks.get("accelerate_distributed_type") == "NO":
        return (f"{formed}: Accelerate ran as DistributedType.NO (no model wrapped, no data "
                "sharded); on a CPU, Accelerator(cpu=True) or ACCELERATE_USE_CPU=1 runs it "
                "distributed (on GPUs, Accelerate sees one per process)")
    wrapped = any(r.get("wrapped") for r in reports.by_rank.values())
    shared = any(r.get("collective") for r in reports.by_rank.values())
    known = all("collective" in r for r in reports.by_rank.values())  # older probes did not say
    if known and not wrapped and not shared and reports.took_steps():
        return (f"{formed}: the model was used unwrapped and no process called a collective; wrap "
                "it in DistributedDataParallel (or FSDP), or all-reduce its gradients")
    return None


def _why_alone(reports: ProbeReports, last_words: str) -> str:
    """The reason, where the script's framework or its last words say it."""
    frameworks = {k: v for r in reports.by_rank.values() for k, v in (r.get("frameworks") or {}).items()}
    if "lightning" in frameworks or "pytorch_lightning" in frameworks:
        return ("; Lightning's Trainer() needs strategy='ddp' and devices from torchrun: "
                "Trainer(strategy='ddp', devices=int(os.environ['LOCAL_WORLD_SIZE']), "
                "num_nodes=int(os.environ['WORLD_SIZE']) // int(os.environ['LOCAL_WORLD_SIZE']))")
    if "accelerate" in frameworks:
        kind = frameworks.get("accelerate_distributed_type", "NO")
        return (f"; Accelerator() ran as DistributedType.{kind} in each process: on a machine "
                "without GPUs, Accelerator(cpu=True) forms a gloo group")
    said = f" (its last words: {last_words[:160]})" if last_words else ""
    return f"; it never called torch.distributed.init_process_group{said}"
