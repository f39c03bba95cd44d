"""The rank the others waited for: in DDP every rank's all-reduce ends when the last rank
reaches it, so a rank whose own work before it (its data wait and compute) is the longest
makes every other rank wait, and that wait shows in their step as exposed all-reduce and
what follows it.

A record carries each rank's step in parts as the medians over its timed steps
(step_parts_by_rank), so a rank is named when its median own work is the longest by more
than MARGIN over the median of the others', and the others' median wait (exposed
all-reduce and the rest of the step) is longer than its own by at least WAIT_SHARE of
that gap: a median step is the typical step, so the rank was the slowest step after step,
not in a few outliers.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass

import pandas as pd

from gpubench.format import say_duration
from gpubench.workloads import step_parts

MARGIN = 0.10       # its own work this much longer than the others' median
WAIT_SHARE = 0.5    # the others' extra wait at least this share of that gap
OWN = (step_parts.DATA, step_parts.COMPUTE)
WAIT = (step_parts.COMM, step_parts.OTHER)


@dataclass(frozen=True)
class SlowRank:
    rank: int
    node: str | None   # where it ran, where the record tells: a host name, "node 1 (10.0.0.2)"
    own_s: float       # its median data wait and compute a step
    others_s: float    # the median of the other ranks' own work
    wait_s: float      # how much longer the others' median wait was than its own


def slow_rank(by_rank, nodes: int = 1, host: str | None = None, rank0_node=None,
              node_addresses=None) -> SlowRank | None:
    """The rank the others waited for, from a record's step_parts_by_rank; None where no
    rank stood out, with fewer than two ranks, or with parts that do not read as seconds."""
    parts = _ranks(by_rank)
    if len(parts) < 2:
        return None
    own = {rank: sum(p[k] for k in OWN) for rank, p in parts.items()}
    slowest = max(own, key=own.get)
    others = [r for r in parts if r != slowest]
    others_own = statistics.median(own[r] for r in others)
    gap = own[slowest] - others_own
    if others_own <= 0 or gap <= MARGIN * others_own:
        return None
    waits = {rank: sum(p[k] for k in WAIT) for rank, p in parts.items()}
    wait = statistics.median(waits[r] for r in others) - waits[slowest]
    if wait < WAIT_SHARE * gap:
        return None   # longer work of its own, but nobody waited for it: not what slowed the step
    node = _node(slowest, len(parts), nodes, host, rank0_node, node_addresses)
    return SlowRank(slowest, node, round(own[slowest], 6), round(others_own, 6), round(wait, 6))


def _ranks(by_rank) -> dict[int, dict]:
    if not isinstance(by_rank, list):
        return {}
    found = {}
    for item in by_rank:
        try:
            rank = int(item["rank"])
            values = {p: float(item.get(p) or 0.0) for p in step_parts.PARTS}
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
        if all(math.isfinite(v) and v >= 0 for v in values.values()):
            found[rank] = values
    return found


def _node(rank: int, world: int, nodes, host, rank0_node, addresses) -> str | None:
    """Where `rank` ran: the host on one node; on several, the node of rank 0 holds the
    first ranks (torchrun gives each node a block), and of two nodes the other the rest;
    else the block of ranks it was in."""
    nodes = int(nodes) if _number(nodes) and nodes >= 1 else 1
    if nodes == 1:
        return str(host) if host else None
    per = world // nodes or 1
    if not _number(rank0_node):
        return None
    first = int(rank0_node)
    index = first if rank < per else (1 - first if nodes == 2 and first in (0, 1) else None)
    if index is None:
        block = rank // per * per
        return f"the node of ranks {block}-{block + per - 1}"
    address = addresses[index] if isinstance(addresses, list) and index < len(addresses) else None
    return f"node {index}" + (f" ({address})" if address else "")


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def slow_rank_column(rows: pd.DataFrame) -> pd.Series:
    """Each row's slow_rank (as a dict), from its latest record's parts per rank."""
    found = []
    for by_rank, nodes, host, first, addresses in zip(
            rows["step_parts_by_rank"], rows["nodes"], rows["host"], rows["rank0_node"],
            rows["node_addresses"]):
        slow = slow_rank(by_rank, nodes, host, first, addresses)
        found.append(asdict(slow) if slow else None)
    return pd.Series(found, index=rows.index, dtype=object)


def slow_rank_words(slow: dict) -> str:
    """'rank 1 on node X was the slowest: its own work ... 31.0 ms a step against 22.0 ms
    for the others; the others waited for it (...)' for a row's slow_rank."""
    where = f" on {slow['node']}" if slow.get("node") else ""
    return (f"rank {slow['rank']}{where} was the slowest: its own work (data and compute) "
            f"{say_duration(slow['own_s'])} a step against {say_duration(slow['others_s'])} for "
            f"the others; the others waited for it ({say_duration(slow['wait_s'])} more of their "
            "step in the all-reduce and after it)")
