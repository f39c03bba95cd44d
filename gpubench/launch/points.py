"""The points of a sweep, for every launcher: the one reader of the counts a user
gives (--gpus, --nodes, --gpus-per-node, bench's --counts) and the one builder of
sweep points from them and the machine a launcher opened.

On one machine --gpus is the process counts on it: --gpus 1,2,4 -> (1,1), (1,2),
(1,4); unset, 1 and the powers of two up to its GPUs (1 and 2 processes on a CPU),
and a count it cannot hold is skipped by the sweep, saying why. A launcher that
gives out whole nodes (a Slurm partition, a rented cluster: Machine.span) sweeps
each node count with each per-node count, by default all of a node's GPUs, and a
count it cannot hold is a usage error: Slurm would keep such a job pending for ever.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from gpubench.errors import UsageError
from gpubench.launch.base import Machine, NodeSpan, SweepPoint

# What a count of each flag counts, for its messages.
_COUNTED = {"--nodes": "node count", "--gpus-per-node": "count"}
_EXAMPLE = {"--nodes": "1,2"}


class PointsError(UsageError):
    """Counts that cannot be swept: malformed, given together with a flag they exclude,
    or more nodes or GPUs per node than a launcher that gives out whole nodes has."""


@dataclass(frozen=True)
class CountsAsked:
    """The counts the user gave, parsed; None where a flag was not given."""

    gpus: list[int] | None = None       # --gpus (bench: --counts)
    nodes: list[int] | None = None      # --nodes
    per_node: list[int] | None = None   # --gpus-per-node
    per_node_flag: str = "--gpus-per-node"  # the flag that gave per_node, for messages


def parse_counts(text: str, flag: str = "--gpus") -> list[int]:
    """'1,2,4' -> [1, 2, 4] (repeats dropped, order kept); anything else is a usage
    error naming `flag`."""
    counts = []
    for part in text.split(","):
        part = part.strip()
        try:
            n = int(part)
        except ValueError:
            raise PointsError(f"{flag}: '{part}' is not a whole number "
                              f"(example: {flag} {_EXAMPLE.get(flag, '1,2,4')})") from None
        if n < 1:
            raise PointsError(f"{flag}: {n} is not a valid {_COUNTED.get(flag, 'GPU count')}; "
                              "counts start at 1")
        if n not in counts:
            counts.append(n)
    return counts


def counts_asked(gpus: str | None = None, nodes: str | None = None,
                 gpus_per_node: str | None = None) -> CountsAsked:
    """The counts of `run`'s three flags, each parsed in its own name."""
    def parsed(text: str | None, flag: str) -> list[int] | None:
        return None if text is None else parse_counts(text, flag)

    return CountsAsked(parsed(gpus, "--gpus"), parsed(nodes, "--nodes"),
                       parsed(gpus_per_node, "--gpus-per-node"))


def check_asked(asked: CountsAsked, span: NodeSpan | None, max_nodes: int | None = None) -> None:
    """What can be refused before anything is connected: flags that exclude each
    other, and (where the launcher says how many it has) more nodes than it has."""
    if asked.gpus is not None and (asked.nodes or asked.per_node) and not (
            span is not None and span.gpus_per_node and not asked.per_node):
        raise PointsError("--gpus is the counts on one machine; with --nodes give --gpus-per-node")
    if span is not None and max_nodes is not None:
        _check_nodes(asked.nodes, span, max_nodes)


def sweep_points(machine: Machine, asked: CountsAsked = CountsAsked()) -> list[SweepPoint]:
    """The points a sweep on `machine` runs, from what was asked (CountsAsked()
    asks for nothing: the machine's defaults)."""
    span = machine.span
    check_asked(asked, span)
    if asked.gpus is not None and not (span is not None and span.gpus_per_node):
        return _grid([1], asked.gpus)
    per_node, per_node_flag = asked.per_node, asked.per_node_flag
    if asked.gpus is not None:      # a rented cluster: --gpus counts each node's GPUs
        per_node, per_node_flag = asked.gpus, "--gpus"
    if span is None:
        if asked.nodes or per_node:
            return _grid(asked.nodes or [1], per_node or [1])
        return _grid(_one_and_powers_of_two(max(1, machine.max_nodes)), _default_per_node(machine))
    _check_nodes(asked.nodes, span, machine.max_nodes)
    most = machine.max_procs
    for p in per_node or []:
        if most is not None and p > most:
            raise PointsError(f"{per_node_flag} {p}: {span.called} has {most} GPUs per node")
    return _grid(asked.nodes or _default_nodes(span, machine.max_nodes),
                 per_node or [max(1, machine.gpu_count)])


def _check_nodes(nodes: list[int] | None, span: NodeSpan, max_nodes: int) -> None:
    for n in nodes or []:
        if n > max_nodes:
            raise PointsError(f"--nodes {n}: {span.called} has {max_nodes} "
                              f"node{'s' if max_nodes != 1 else ''}")


def _default_nodes(span: NodeSpan, max_nodes: int) -> list[int]:
    """The launcher's own node counts that it can hold; else 1, the powers of two
    and all of its nodes (node scaling up to the whole cluster)."""
    if span.default_nodes is not None:
        return [n for n in span.default_nodes if n <= max_nodes]
    return sorted({1, max_nodes, *_one_and_powers_of_two(max_nodes)})


def _default_per_node(machine: Machine) -> list[int]:
    """1 and the powers of two up to the machine's GPUs; 1 and 2 processes on a CPU."""
    if machine.accelerator != "cuda" or machine.gpu_count < 1:
        return [1, 2]
    return _one_and_powers_of_two(machine.gpu_count)


def _one_and_powers_of_two(limit: int) -> list[int]:
    counts, n = [], 1
    while n <= limit:
        counts.append(n)
        n *= 2
    return counts


def _grid(nodes: Iterable[int], per_node: Iterable[int]) -> list[SweepPoint]:
    """Every node count with every per-node count, node counts first."""
    per_node = list(per_node)
    return [SweepPoint(n, p) for n in nodes for p in per_node]
