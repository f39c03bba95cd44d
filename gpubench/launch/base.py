"""The launcher interface the sweep talks to."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Protocol

from gpubench.suite import WorkloadRef


@dataclass(frozen=True)
class Machine:
    """What a sweep runs on, as the records and the report need it."""

    provider: str
    instance_type: str
    gpu_name: str
    gpu_count: int  # GPUs on the machine; 0 for a CPU-only machine
    price_per_hour: float | None  # for the whole machine; None when unknown
    accelerator: str = "cuda"  # "cuda" or "cpu"
    nodes: int = 1

    @property
    def max_procs(self) -> int | None:
        """The largest process count per node the machine can hold; None = no limit (CPU)."""
        return self.gpu_count if self.accelerator == "cuda" else None

    def price_for(self, procs: int) -> float | None:
        """The hourly price of the GPUs a run uses: a right-sized share of the machine."""
        if self.price_per_hour is None:
            return None
        if self.accelerator != "cuda" or self.gpu_count <= 0:
            return self.price_per_hour
        return self.price_per_hour * procs / self.gpu_count


@dataclass
class RunOutcome:
    """What one launch produced: the workload's record, or why there is none."""

    returncode: int
    record: dict | None
    command: list[str]
    elapsed_seconds: float
    error: str | None = None
    output_tail: list[str] = field(default_factory=list)
    beside: dict | None = None  # measured by gpubench beside a user's script (GPU sampling)


LineSink = Callable[[str], None]

# Every run is told where its record goes through this variable; suite workloads
# also take it as --record-file. A user's own script may write a JSON object
# there (rank 0 only), with at least "throughput" and "throughput_unit", or write
# nothing: the sweep then times the whole run.
RECORD_ENV = "GPUBENCH_RECORD_FILE"


def record_args(workload: WorkloadRef, record_file: str) -> list[str]:
    """The record flag for a suite workload; none for a user's script, whose own
    argument parser would refuse a flag it does not know."""
    return ["--record-file", record_file] if workload.in_suite else []


def shown_command(cmd: list[str], record_file: str) -> list[str]:
    """The command as the records keep it: the per-run record path left out."""
    return ["RECORD" if arg == record_file else arg for arg in cmd]


def cpu_threads_per_process(cpus: int, procs: int) -> str:
    """OMP_NUM_THREADS for CPU runs: the cores shared out between the processes, so
    one process is not compared with N processes that each think they own the machine."""
    return str(max(1, cpus // procs))


class Launcher(Protocol):
    def machine(self) -> Machine: ...

    def run(self, workload: WorkloadRef, procs: int, workload_args: list[str],
            on_line: LineSink, timeout: float) -> RunOutcome: ...
