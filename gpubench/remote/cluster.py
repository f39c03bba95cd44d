"""A cluster of rented machines (provision --nodes N) as the machines to SSH to.

The ledger keeps one row per member with the cluster's name and the member's
place in it (node_index, 0 = the head). This module turns those rows into what a
launcher spanning nodes needs: each member as a RemoteHost, head first, its
private address where the provider gives one, its port mapping where the provider
maps ports, and which network joins the members.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from gpubench.store.ledger import Ledger, LedgerEntry
from gpubench.remote.errors import BadTargetError
from gpubench.remote.targets import RemoteHost, host_from_entry

# Which network joins the members: the provider's private one (Lambda private_ip,
# RunPod clusters), the public internet through each host's address and port
# mapping (Vast.ai), or this machine's loopback (the mock without namespaces).
PRIVATE, PUBLIC, LOOPBACK = "private", "public", "loopback"


class MixedClusterError(BadTargetError):
    """A cluster whose members disagree on GPU type or count."""


@dataclass(frozen=True)
class ClusterNode:
    host: RemoteHost              # how gpubench reaches it over SSH
    index: int                    # 0 = the head, where the rendezvous runs
    private_ip: str | None = None
    port_map: dict[int, int] = field(default_factory=dict)  # container port -> public port
    link: dict | None = None      # the head -> this member link as measured at provisioning
    #                               (launch/cluster_link.LinkMeasure's JSON), where it was

    def address_for_peers(self, network: str) -> str:
        """The address the other members reach it at."""
        if network == PRIVATE and self.private_ip:
            return self.private_ip
        return self.host.target.host

    def port_for_peers(self, port: int) -> int:
        """The port the other members reach a container port at (mapped where the
        provider maps ports, else the port itself)."""
        return self.port_map.get(port, port)


@dataclass(frozen=True)
class ClusterHosts:
    name: str
    nodes: tuple[ClusterNode, ...]   # head first

    @property
    def size(self) -> int:
        return len(self.nodes)

    @property
    def head(self) -> ClusterNode:
        return self.nodes[0]

    def member(self, index: int) -> ClusterNode:
        """Member `index` (0 = the head); a BadTargetError naming the members there are."""
        for node in self.nodes:
            if node.index == index:
                return node
        raise BadTargetError(f"cluster '{self.name}' has no member {index} (members: "
                             f"{', '.join(str(n.index) for n in self.nodes)}; 0 is the head)")

    def check_uniform(self) -> "ClusterHosts":
        """The cluster itself, once every member has the same GPU type and count: a sweep
        over nodes compares like with like. A ledger edited by hand, or a provider that
        substituted a machine, is a MixedClusterError naming what each member has."""
        differ = self.disagreement()
        if differ:
            raise MixedClusterError(f"cluster '{self.name}': {differ}; its members must have the "
                                    f"same GPU type and count")
        return self

    @property
    def network(self) -> str:
        """private when every member has a private address, loopback when they all
        live on this machine, else public."""
        if all(n.private_ip for n in self.nodes):
            return PRIVATE
        if all(n.host.target.host in ("127.0.0.1", "localhost", "::1") for n in self.nodes):
            return LOOPBACK
        return PUBLIC

    def disagreement(self) -> str | None:
        """How the members differ in GPUs as the ledger knows them ('node 0: 8x A100,
        node 1: 4x A100'), or None when they are alike (or unknown: the machines are
        asked once connected)."""
        return gpu_disagreement([(n.index, n.host.gpu_name, n.host.gpu_count) for n in self.nodes])


def gpu_disagreement(members: list[tuple[int, str | None, int | None]]) -> str | None:
    """The one rule for a cluster's members: the same GPU type and count. `members` is
    (node index, GPU name, GPU count) as the ledger or the machines themselves say;
    None when they are alike, else how they differ ('its members differ in GPUs
    (node 0: 8x A100, node 1: 4x A100)')."""
    if len({(name, count) for _, name, count in members}) <= 1:
        return None
    shown = ", ".join(f"node {i}: {count}x {name or 'gpu'}" for i, name, count in members)
    return f"its members differ in GPUs ({shown})"


def node_from_entry(entry: LedgerEntry, key_file: Path | None = None,
                    price: float | None = None) -> ClusterNode:
    ports = {int(k): int(v) for k, v in json.loads(entry.port_map).items()} if entry.port_map else {}
    return ClusterNode(host_from_entry(entry, key_file, price), int(entry.node_index or 0),
                       entry.private_ip, ports, _link_of(entry))


def _link_of(entry: LedgerEntry) -> dict | None:
    """The measured link kept in a member's `gate` JSON (see launch/cluster_link.py)."""
    link = entry.gate_facts.get("link")
    return link if isinstance(link, dict) else None


def split_member(name: str) -> tuple[str, int | None]:
    """'train:1' -> ('train', 1); 'train' -> ('train', None). A bad index is a usage error."""
    base, sep, index = name.rpartition(":")
    if not sep or "@" in name:
        return name, None
    if not index.isdigit():
        raise BadTargetError(f"'{name}': the member index after ':' must be a number (0 = the head)")
    return base, int(index)


def find_cluster(name: str, key_file: Path | None = None, price: float | None = None,
                 ledger_path: Path | None = None) -> ClusterHosts | None:
    """The live cluster called `name`; None when no live cluster has that name (it
    may then name a single instance)."""
    with Ledger(ledger_path) as ledger:
        members = ledger.cluster_members(name)
    if not members:
        return None
    return ClusterHosts(name, tuple(node_from_entry(m, key_file, price) for m in members))


def member_instance(ledger: Ledger, name: str) -> str:
    """The instance a NAME given to `gpubench ssh` means: a live cluster's head for the
    cluster's name, its member i for NAME:i, else NAME itself (an instance)."""
    base, index = split_member(name)
    members = ledger.cluster_members(base)
    if not members:
        if index is not None:
            raise BadTargetError(f"'{name}': no live cluster named '{base}' (see 'gpubench ls')")
        return name
    by_index = {m.node_index: m for m in members}     # the newest row of each place
    if (index or 0) not in by_index:
        raise BadTargetError(f"cluster '{base}' has no live member {index or 0} (members: "
                             f"{', '.join(str(i) for i in sorted(by_index))}; 0 is the head)")
    return by_index[index or 0].name
