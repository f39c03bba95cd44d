"""The workload suite: what each standard workload is called, where its script
lives, and what it measures. A workload's identity is a `WorkloadRef` that
flows through the sweep, so a user's own script runs the same way."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gpubench.errors import UnknownWorkloadError, UsageError


@dataclass(frozen=True)
class SuiteEntry:
    name: str
    script: str  # file name inside workloads/
    measures: str
    defaults: str
    summary: str


SUITE: tuple[SuiteEntry, ...] = (
    SuiteEntry("mnist-ddp", "mnist_ddp.py", "images/s, epoch time",
               "batch 64/GPU, 60k images, 1 epoch",
               "the pytorch/examples MNIST CNN under DDP (synthetic or real IDX data)"),
    SuiteEntry("resnet-ddp", "resnet_ddp.py", "images/s, epoch time (ImageNet-1k)",
               "ResNet-50, batch 256/GPU, 224x224 synthetic, channels_last, 200 steps; "
               "--depth/--width/--image-size",
               "ResNet-50 in plain PyTorch on synthetic ImageNet-shaped batches"),
    SuiteEntry("gpt-ddp", "gpt_ddp.py", "tokens/s, model TFLOP/s, MFU",
               "GPT-2 small (12 layers, 12 heads, 768 wide), 1024-token context, batch 8 "
               "sequences/GPU, 50 steps; --n-layer/--n-head/--n-embd/--block-size/--vocab-size",
               "a GPT-2-small-shaped decoder LM (nanoGPT) on synthetic tokens"),
    SuiteEntry("recsys-ddp", "recsys_ddp.py", "ratings/s, epoch time",
               "ml-1m shape (6,040 users, 3,706 movies, 1M ratings), batch 1024/GPU, 32-dim embeddings, "
               "1 epoch",
               "the MovieLens user/movie embedding model (synthetic, or ratings.csv/.dat via --data)"),
    SuiteEntry("allreduce", "allreduce.py", "all_reduce algbw and busbw per size (nccl-tests), peak",
               "float32, 1 KB to 1 GB doubling (capped by memory), 5 warm-up + 20 timed per size",
               "torch.distributed all_reduce bandwidth curve"),
)


@dataclass(frozen=True)
class WorkloadRef:
    """A suite workload or a user's script: its name in records and its file."""

    name: str
    script: Path
    in_suite: bool
    workdir: Path | None = None  # a user's project directory, sent whole to a remote machine


def with_workdir(ref: WorkloadRef, workdir: Path) -> WorkloadRef:
    """The user's script together with the project directory it lives in (its
    modules, configs), which remote runs send along and run in."""
    if ref.in_suite:
        raise UsageError(f"--workdir is for your own scripts; {ref.name} is a suite workload")
    directory = workdir.expanduser().resolve()
    if not directory.is_dir():
        raise UsageError(f"--workdir: no such directory: {workdir}")
    if not ref.script.is_relative_to(directory):
        raise UsageError(f"--workdir: {ref.script} is not inside {directory}")
    return WorkloadRef(ref.name, ref.script, False, directory)


def workloads_dir() -> Path:
    import gpubench.workloads  # an empty package: cheap to import

    return Path(gpubench.workloads.__file__).resolve().parent


def suite_names() -> list[str]:
    return [e.name for e in SUITE]


def resolve(name_or_path: str, workdir: Path | None = None) -> WorkloadRef:
    """A suite workload by name, or a user's .py script by path; with `workdir`
    (a script only), the project directory the script is sent and run in."""
    ref = _resolve_one(name_or_path)
    return with_workdir(ref, workdir) if workdir is not None else ref


def resolve_list(names: str, workdir: Path | None = None) -> list[WorkloadRef]:
    """`--workload mnist-ddp,train.py`: each name or script in turn. `workdir` goes
    with the user's scripts among them; with none among them it is a usage error."""
    refs = [_resolve_one(name.strip()) for name in names.split(",") if name.strip()]
    if not refs:
        raise UsageError("--workload: name at least one workload (see 'gpubench workloads')")
    if workdir is None:
        return refs
    if all(ref.in_suite for ref in refs):
        raise UsageError("--workdir is for your own scripts; --workload names only suite workloads")
    return [ref if ref.in_suite else with_workdir(ref, workdir) for ref in refs]


def _resolve_one(name_or_path: str) -> WorkloadRef:
    for entry in SUITE:
        if entry.name == name_or_path:
            return WorkloadRef(entry.name, workloads_dir() / entry.script, True)
    path = Path(name_or_path).expanduser()
    if path.suffix == ".py" and path.is_file():
        return WorkloadRef(str(path), path.resolve(), False)
    if path.suffix == ".py":
        raise UnknownWorkloadError(f"no such script: {name_or_path}")
    raise UnknownWorkloadError(
        f"unknown workload '{name_or_path}'; known workloads: {', '.join(suite_names())}"
        " (or give the path of a .py script)")
