"""What one training step of a suite workload costs: FLOPs per unit of work, parameters and
the gradient bytes DDP all-reduces, as workloads/model_profile.py counted them from the
models themselves (torch's FlopCounterMode) and shipped in workloads/profiles.json.

No torch here: the file is read as package data of gpubench.workloads. A profile holds for
the workload's default arguments (the sizes a GPU run takes) and for arguments that change
neither the model nor the batch (the number of steps, the seed, the precision: FLOPs and
the fp32 gradients do not depend on it); for any others there is no profile (None), and the
caller says so. A missing or damaged profiles.json is no profile either, never a traceback.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING

from gpubench.workloads import flags

if TYPE_CHECKING:
    from importlib.abc import Traversable

PACKAGE, FILE_NAME = "gpubench.workloads", "profiles.json"
SCRIPT = "workloads/model_profile.py"
# flags (argparse dests) that change neither the model nor the batch: a run with other
# values of these has the same profile. --data must stay what the profile was made with.
NEUTRAL = frozenset({"steps", "epochs", "warmup", "seed", "record_file", "profile", "compile",
                     "precision", "tf32"})


@dataclass(frozen=True)
class WorkloadProfile:
    workload: str
    args: tuple[str, ...]  # the arguments the profile was counted at (() for the defaults)
    flops_per_sample: float  # per unit of work (an image, a token, a rating), forward + backward
    unit: str  # the unit of work: the record's throughput_unit without "/s"
    params: int  # parameters, each once (a tied weight is one)
    grad_bytes: int  # bytes DDP all-reduces per step: the parameters requiring grad, fp32
    epoch_samples: int | None  # units of work in one epoch
    batch_per_gpu: int  # the record's batch_per_gpu (sequences, for gpt-ddp)
    source: str  # how and when it was counted
    work_per_gpu_step: int | None = None  # units of work one GPU does per step (gpt-ddp:
    #                                        batch_per_gpu x tokens per sequence)

    @property
    def flops_per_gpu_step(self) -> float | None:
        """FLOPs one GPU computes in one step (forward + backward, no optimizer)."""
        if self.work_per_gpu_step is None:
            return None
        return self.flops_per_sample * self.work_per_gpu_step


def profiles_file() -> "Traversable":
    """Where the shipped profiles are (a test points it elsewhere)."""
    return resources.files(PACKAGE).joinpath(FILE_NAME)


def _document() -> dict | None:
    try:
        document = json.loads(profiles_file().read_text(encoding="utf-8"))
    except (OSError, ValueError, ModuleNotFoundError):
        return None
    return document if isinstance(document, dict) else None


def _profile(entry: object, document: dict) -> WorkloadProfile | None:
    """One entry of the file as a WorkloadProfile; None where it is damaged."""
    if not isinstance(entry, dict) or not isinstance(entry.get("args"), list):
        return None
    try:
        counted_on = entry.get("counted_on", "meta")
        where = "the meta device" if counted_on == "meta" else f"the {counted_on} at a small batch"
        source = (f"counted by torch's FlopCounterMode on {where}, torch {entry['torch']}, "
                  f"{document.get('date', 'undated')} ({SCRIPT})")
        epoch = entry.get("epoch_samples")
        work = entry.get("work_per_gpu_step")
        profile = WorkloadProfile(
            workload=str(entry["workload"]), args=tuple(str(a) for a in entry["args"]),
            flops_per_sample=float(entry["flops_per_sample"]), unit=str(entry["unit"]),
            params=int(entry["params"]), grad_bytes=int(entry["grad_bytes"]),
            epoch_samples=None if epoch is None else int(epoch),
            batch_per_gpu=int(entry["batch_per_gpu"]), source=source,
            work_per_gpu_step=None if work is None else int(work))
    except (KeyError, TypeError, ValueError, OverflowError):
        return None
    if not (profile.flops_per_sample > 0 and profile.batch_per_gpu > 0 and profile.params > 0):
        return None  # also NaN
    return profile


def suite_profiles() -> dict[str, WorkloadProfile]:
    """Every shipped profile by workload; {} when the file is missing or damaged."""
    document = _document()
    entries = document.get("profiles") if document else None
    if not isinstance(entries, dict):
        return {}
    found = {name: _profile(entry, document) for name, entry in entries.items()}
    return {name: p for name, p in found.items() if p is not None and p.workload == name}


def _gpu_args(workload: str, argv) -> argparse.Namespace | None:
    """The arguments as a GPU run has them (its device sizes filled); None if refused."""
    argv = [str(a) for a in argv]
    if {"-h", "--help"} & set(argv):  # argparse would print the usage and exit
        return None
    try:
        args = flags.parse(workload, argv, raising=True)
    except (flags.FlagError, SystemExit):
        return None
    flags.size_for_device(workload, args, "cuda")
    return args


def model_args(args: argparse.Namespace, *also: str) -> dict:
    """What makes the model and its batch: the arguments less the neutral ones (and `also`)."""
    return {k: v for k, v in vars(args).items() if k not in NEUTRAL and k not in also}


def profile_for(workload: str, args: list[str] | tuple = ()) -> WorkloadProfile | None:
    """The shipped profile of `workload` when `args` give the same model and batch as the
    arguments it was counted at (the defaults); None otherwise, for a workload without one
    (allreduce, a user's script), and when profiles.json is missing or damaged."""
    profile = suite_profiles().get(workload)
    if profile is None or workload not in flags.WORKLOADS:
        return None
    given, counted = _gpu_args(workload, args), _gpu_args(workload, profile.args)
    if given is None or counted is None or model_args(given) != model_args(counted):
        return None
    return profile
