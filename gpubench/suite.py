"""The workload suite: what each standard workload is called, where its script
lives, and what it measures. A workload's identity is a `WorkloadRef` that
flows through the sweep, so a user's own script runs the same way."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gpubench.errors import UnknownWorkloadError


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
)


@dataclass(frozen=True)
class WorkloadRef:
    """A suite workload or a user's script: its name in records and its file."""

    name: str
    script: Path
    in_suite: bool


def workloads_dir() -> Path:
    import gpubench.workloads  # an empty package: cheap to import

    return Path(gpubench.workloads.__file__).resolve().parent


def suite_names() -> list[str]:
    return [e.name for e in SUITE]


def resolve(name_or_path: str) -> WorkloadRef:
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
