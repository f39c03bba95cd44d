"""A launcher that spans two nodes, as a later one (Slurm, a cluster of rented
machines) will: this module and one entry in gpubench.launch.factory.SCHEMES are
all it takes. It runs nothing: each run returns the record a workload would
write, with a throughput that scales a little worse across nodes than within one.
"""

from __future__ import annotations

from gpubench.launch.base import Launcher, LineSink, Machine, RunOutcome, SweepPoint
from gpubench.launch.factory import LaunchOptions
from gpubench.suite import WorkloadRef

PER_PROCESS = 100.0  # samples/s of one process alone
NODE_PRICE = 4.0     # $/h of one node of 2 GPUs


class TwoNodeLauncher(Launcher):
    def __init__(self, name: str, fail: SweepPoint | None = None) -> None:
        self.name = name
        self.fail = fail
        self.prepared: list[str] = []
        self.ran: list[SweepPoint] = []
        self.closed = False

    def machine(self) -> Machine:
        return Machine("fake", f"{self.name}: 2x A10", "A10", 2, NODE_PRICE, "cuda", max_nodes=2)

    def prepare(self, workload: WorkloadRef) -> None:
        self.prepared.append(workload.name)

    def run(self, workload: WorkloadRef, point: SweepPoint, workload_args: list[str],
            on_line: LineSink, timeout: float) -> RunOutcome:
        self.ran.append(point)
        command = ["torchrun", f"--nnodes={point.nodes}", f"--nproc_per_node={point.procs_per_node}",
                   workload.script.name, *workload_args]
        on_line(f"world {point.world_size}")
        if point == self.fail:
            return RunOutcome(1, None, command, 1.0, "RuntimeError: NCCL timeout", ["NCCL timeout"])
        scaling = 0.9 ** (point.nodes - 1)  # the network between nodes costs something
        record = {"status": "ok", "world_size": point.world_size, "wall_seconds": 10.0,
                  "throughput": PER_PROCESS * point.world_size * scaling,
                  "throughput_unit": "samples/s", "backend": "nccl"}
        return RunOutcome(0, record, command, 10.0)

    def close(self) -> None:
        self.closed = True


def open_launcher(spec: str, options: LaunchOptions) -> TwoNodeLauncher:
    """The factory's entry: `--on fake2:NAME`."""
    options.echo(f"{spec}: two nodes")
    return TwoNodeLauncher(spec)
