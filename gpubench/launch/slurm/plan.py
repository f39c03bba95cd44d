"""Which points a Slurm sweep runs, and what --dry-run shows instead of running them."""

from __future__ import annotations

from gpubench.launch.base import Machine, SweepPoint
from gpubench.launch.slurm.errors import SlurmUsageError
from gpubench.sweep.run import grid

DEFAULT_NODES = (1, 2)


def node_points(machine: Machine, nodes: list[int] | None, per_node: list[int] | None) -> list[SweepPoint]:
    """Every node count with every GPUs-per-node count. Unset: 1 and 2 nodes (as
    far as the partition goes) with all the GPUs of a node, since clusters give
    out whole nodes. A count the partition cannot hold is a usage error, not a
    skipped point: Slurm would keep such a job pending for ever."""
    most = machine.max_procs
    for n in nodes or []:
        if n > machine.max_nodes:
            raise SlurmUsageError(f"--nodes {n}: {machine.instance_type} has {machine.max_nodes} "
                                  f"node{'s' if machine.max_nodes != 1 else ''}")
    for p in per_node or []:
        if most is not None and p > most:
            raise SlurmUsageError(f"--gpus-per-node {p}: {machine.instance_type} has {most} per node")
    chosen_nodes = nodes or [n for n in DEFAULT_NODES if n <= machine.max_nodes]
    chosen_per_node = per_node or [max(1, machine.gpu_count)]
    return grid(chosen_nodes, chosen_per_node)


def dry_run_text(launcher, workload, points: list[SweepPoint], workload_args: list[str]) -> str:
    """The script of every point, as it would be submitted; nothing is."""
    parts = []
    for point in points:
        spec, text = launcher.script(workload, point, workload_args)
        parts.append(f"# ---- {point.describe()}: would be submitted as sbatch {spec.script_path}\n{text}")
    return "\n".join(parts) + "# --dry-run: nothing was submitted\n"
