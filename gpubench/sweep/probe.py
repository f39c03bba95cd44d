"""What each process of a user's script really did, read from its run's output
(the lines workloads/script_probe.py writes as each process ends), and the verdict:
a run whose processes did not form one process group of the expected size is not a
measurement, whatever the script's exit code says.

Each of the ways a real script ends up training alone gets its reason in words:
a Lightning Trainer() that was not told to use DDP, an Accelerator() that saw no GPU,
a GPU guard that printed a message and exited 0, a script that never calls
init_process_group.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from gpubench.workloads.script_probe import PREFIX

ALONE = "alone"  # the failure kind of a run whose processes did not train together


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


def verdict(reports: ProbeReports, world_size: int, last_words: str = "") -> str | None:
    """Why the run is not a measurement of `world_size` processes training together,
    or None when it is (or when no process said: a probe that did not run proves
    nothing). One process needs no group."""
    if not reports.by_rank or world_size <= 1:
        return None
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
