"""The launcher interface the sweep talks to."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Protocol, runtime_checkable

from gpubench.remote.pull import RunFiles
from gpubench.suite import WorkloadRef

if TYPE_CHECKING:
    from gpubench.launch.failures import Failure


@dataclass(frozen=True, order=True)
class SweepPoint:
    """One configuration of a sweep: how many nodes, how many processes on each.
    One process per GPU (per "GPU" on a CPU), so the world is nodes x procs_per_node."""

    nodes: int
    procs_per_node: int

    @property
    def world_size(self) -> int:
        """Processes in all: the records' gpu_count and world_size."""
        return self.nodes * self.procs_per_node

    def describe(self) -> str:
        """'1 gpu', '4 gpus'; across nodes '2 nodes x 4 gpus'."""
        gpus = f"{self.procs_per_node} gpu{'s' if self.procs_per_node > 1 else ''}"
        return gpus if self.nodes == 1 else f"{self.nodes} nodes x {gpus}"


@dataclass(frozen=True)
class NodeSpan:
    """How a launcher that gives out whole nodes (a Slurm partition, a rented cluster)
    spans them, for the points of its sweeps (launch/points.py)."""

    called: str                                 # in messages: "cluster duo", a partition
    default_nodes: tuple[int, ...] | None = None  # None: 1, the powers of two and all nodes
    gpus_per_node: bool = False                 # --gpus counts each node's GPUs (a cluster)


@dataclass(frozen=True)
class Machine:
    """What a sweep runs on, as the records and the report need it. Every node
    of it is alike: the GPUs and the price are those of one node."""

    provider: str
    instance_type: str
    gpu_name: str
    gpu_count: int  # GPUs on one node; 0 for a CPU-only machine
    price_per_hour: float | None  # for one whole node; None when unknown
    accelerator: str = "cuda"  # "cuda" or "cpu"
    max_nodes: int = 1  # how many nodes the launcher can span
    span: NodeSpan | None = None  # set where nodes are given out whole (launch/points.py)

    @property
    def max_procs(self) -> int | None:
        """The largest process count per node the machine can hold; None = no limit (CPU)."""
        return self.gpu_count if self.accelerator == "cuda" else None

    def price_for(self, point: SweepPoint) -> float | None:
        """The hourly price of the GPUs a run uses: on each node a right-sized share
        of it (all of it on a CPU, whose cores every process shares), times the nodes."""
        if self.price_per_hour is None:
            return None
        if self.accelerator != "cuda" or self.gpu_count <= 0:
            per_node = self.price_per_hour
        else:
            per_node = self.price_per_hour * point.procs_per_node / self.gpu_count
        return per_node * point.nodes


@dataclass
class FileChanges:
    """What a run of a user's script did to its working directory (workdir_guard)."""

    watched: bool = True  # False: the directory was too large to list
    left_behind: list[str] = field(default_factory=list)  # created, now moved aside
    kept_in: str | None = None  # where they were moved, on the machine that ran it
    changed: list[str] = field(default_factory=list)  # were there before, changed by the run
    why_unwatched: str | None = None  # when not watched


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
    measured: dict = field(default_factory=dict)  # record fields gpubench measured around any
    #   run: the machine's load and memory, threads and pinning, device (record_schema)
    failure: Failure | None = None  # the error explained, and whether it will repeat
    files: FileChanges | None = None  # a user's script: what it left in its working directory
    steps: dict | None = None  # a user's script: record fields from its training steps, as the
    #   sweep read them from the probe (sweep/probe.py step_fields)


LineSink = Callable[[str], None]

# Every run is told where its record goes through this variable; suite workloads
# also take it as --record-file. A user's own script may write a JSON object
# there (rank 0 only), with at least "throughput" and "throughput_unit", or write
# nothing: the sweep then times the whole run.
RECORD_ENV = "GPUBENCH_RECORD_FILE"


PROBE = "script_probe.py"  # beside the suite's workloads (workloads/script_probe.py)


def script_argv(workload: WorkloadRef, script: str, probe: str) -> list[str]:
    """What torchrun starts in each process: a suite workload itself; a user's script
    under the probe (`probe`, the path of PROBE as the run sees it), which runs it
    unchanged and reports whether its processes formed one group (sweep/probe.py), and
    ends it after --max-steps training steps where asked."""
    if workload.in_suite:
        return [script]
    ending = ["--max-steps", str(workload.max_steps)] if workload.max_steps else []
    return [probe, *ending, script]


def record_args(workload: WorkloadRef, record_file: str) -> list[str]:
    """The record flag for a suite workload; none for a user's script, whose own
    argument parser would refuse a flag it does not know."""
    return ["--record-file", record_file] if workload.in_suite else []


def shown_command(cmd: list[str], record_file: str) -> list[str]:
    """The command as the records keep it: the per-run record path left out."""
    return ["RECORD" if arg == record_file else arg for arg in cmd]


def cpu_threads_per_process(cpus: int, procs: int) -> str:
    """OMP_NUM_THREADS for CPU runs, the same for every launcher: one thread per
    process (gpubench.launch.cpu_policy says why and what was measured)."""
    from gpubench.launch import cpu_policy

    return cpu_policy.threads_per_process(cpus, procs)


def visible_gpus(procs: int, visible: str | None = None) -> str:
    """CUDA_VISIBLE_DEVICES for a count of `procs` on a GPU machine: the first `procs`
    of the GPUs already visible (`visible`, indices or UUIDs), else 0..procs-1, so a
    script that uses every visible GPU (Lightning's devices="auto",
    torch.cuda.device_count()) follows the sweep."""
    listed = [p.strip() for p in (visible or "").split(",") if p.strip()]
    return ",".join(listed[:procs] if len(listed) >= procs else [str(i) for i in range(procs)])


def one_node_procs(point: SweepPoint) -> int:
    """The process count of a point a single-node launcher runs; the sweep never hands
    it more nodes than its Machine.max_nodes, so more is a caller's mistake."""
    if point.nodes != 1:
        raise ValueError(f"this launcher runs on one node, not {point.nodes}")
    return point.procs_per_node


@runtime_checkable
class Launcher(Protocol):
    """How the sweep gets a workload run at one point, wherever the machine is.

    A launcher is opened ready to use (connected, its machine known) and is a
    context manager: leaving the `with` closes it. A new way of launching is one
    module whose class implements these methods, subclassing this protocol for the
    context-manager methods, plus its entry in gpubench.launch.factory.
    """

    def machine(self) -> Machine:
        """What the runs execute on: the records' provider, type, GPUs and price,
        and how many GPUs per node and nodes a point may ask for. Cheap; no I/O."""
        ...

    def prepare(self, workload: WorkloadRef) -> None:
        """Get the workload (and its project, its packages) where it runs, before its
        first run; repeating it costs little. A no-op where it already is (locally).
        Raises GpubenchError subclasses (SshError, RunError, ...) when it cannot."""
        ...

    def run(self, workload: WorkloadRef, point: SweepPoint, workload_args: list[str],
            on_line: LineSink, timeout: float) -> RunOutcome:
        """Run the workload once at `point` (within machine()'s limits), passing each
        output line to `on_line`, and stop all of it after `timeout` seconds.

        A run that fails or times out is an outcome (returncode != 0, error set), not
        an exception. Raises when no outcome can be had: ConnectionLostError for a
        link that could not be re-established, KeyboardInterrupt after stopping the
        run; ValueError for a point the machine cannot hold."""
        ...

    def files_at(self, workload: WorkloadRef) -> RunFiles | None:
        """Where a run of `workload` leaves its files (its working directory), for pulling
        its outputs back; None where gpubench does not reach them."""
        return None

    def prepare_log(self) -> list[str]:
        """What prepare did on the machine that is no run's (requirements installed, the
        setup step), for the sweep's logs; taken once."""
        return []

    def close(self) -> None:
        """Let go of what the launcher holds (connections, leases). Never raises
        for a link already gone; calling it twice is harmless."""
        ...

    def __enter__(self) -> Launcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
