"""The torchrun command and environment of each member of a cluster run, and the
settings that bound its waits: pure functions of the cluster, the point and what
each member said of itself (cluster_probe), so that they are tested without a host.

Every member runs the same torchrun with the c10d rendezvous at the head; torch
hands out the ranks. Waits are bounded at every level: the rendezvous must gather
every node within join_timeout, a store read gives up after read_timeout, and a
collective that waits for a rank that is gone fails after the collective timeout
(GPUBENCH_PG_TIMEOUT_S, which the suite's workloads give init_process_group).

Over a port mapping (public hosts, Vast.ai) only the rendezvous port is mapped
here: the workers' own store and gloo/NCCL connections use further ports, which
the provider must forward at the same numbers (or the hosts must share a network).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from gpubench.remote.cluster import ClusterNode
from gpubench.workloads.pg_timeout import PG_TIMEOUT_ENV  # noqa: F401  (cluster.py sets it)

IFNAME_VARS = ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")  # the interface gloo / NCCL bind to
FROM_ROUTE = "route"      # gpubench chose the interface: the route to the head's address
FROM_MACHINE = "machine"  # the member's own environment set it; gpubench left it alone


@dataclass(frozen=True)
class Rendezvous:
    """torchrun's c10d rendezvous and the collective timeout, in seconds."""

    port: int = 29500          # the head's container port for the rendezvous store
    join_timeout: int = 120    # every node must have joined within this
    read_timeout: int = 60     # one store operation
    last_call_timeout: int = 1  # nnodes is fixed (min = max): no point waiting for more
    close_timeout: int = 10
    collective_timeout: int = 300  # a collective waiting for a lost rank fails after this

    def conf(self, is_host: bool) -> str:
        """--rdzv_conf: the timeouts, and which member runs the store. is_host is said
        outright: a head reached at a mapped public address does not recognise it as
        its own, and a member that guessed wrong would wait for a store nobody runs."""
        return (f"join_timeout={self.join_timeout},read_timeout={self.read_timeout},"
                f"last_call_timeout={self.last_call_timeout},close_timeout={self.close_timeout},"
                f"is_host={int(is_host)}")

    def as_record(self, endpoint: str, run_id: str) -> dict:
        return {"backend": "c10d", "endpoint": endpoint, "id": run_id,
                "join_timeout_s": self.join_timeout, "read_timeout_s": self.read_timeout,
                "last_call_timeout_s": self.last_call_timeout,
                "close_timeout_s": self.close_timeout}


@dataclass(frozen=True)
class NodeFacts:
    """What a member said of itself (cluster_probe's JSON), for one head address."""

    interface: str | None = None
    source_address: str | None = None
    comm_env: dict = field(default_factory=dict)  # NCCL_*/GLOO_* already set there
    nvidia_smi_topo: str | None = None
    ibstat: str | None = None

    @classmethod
    def from_probe(cls, found: dict) -> "NodeFacts":
        env = found.get("comm_env")
        return cls(found.get("interface"), found.get("source_address"),
                   dict(env) if isinstance(env, dict) else {}, found.get("nvidia_smi_topo"),
                   found.get("ibstat"))


@dataclass(frozen=True)
class CommSettings:
    """The NCCL/gloo variables in force on one member, and where each came from."""

    env_set: dict          # what gpubench puts in the run's environment
    in_force: dict         # everything NCCL_*/GLOO_* the run sees (the machine's and gpubench's)
    interface_from: str    # FROM_ROUTE or FROM_MACHINE, or "none: why"

    def as_record(self, index: int, address: str, head: str) -> dict:
        how = {FROM_ROUTE: f"the route to the head's address {head}",
               FROM_MACHINE: "the machine's own environment"}.get(self.interface_from,
                                                                   self.interface_from)
        return {"node": index, "address": address, "env": dict(self.in_force),
                "interface_chosen_by": how}


def comm_settings(facts: NodeFacts) -> CommSettings:
    """GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME from the route to the head, unless the
    machine's environment sets them already (then it wins and is only recorded).
    Without them gloo binds to the address the host name resolves to, which another
    machine may not reach (a private network beside a public one), or a loopback one."""
    machine = dict(facts.comm_env or {})
    if all(var in machine for var in IFNAME_VARS):
        return CommSettings({}, machine, FROM_MACHINE)
    if not facts.interface:
        return CommSettings({}, machine, "none: no route to the head's address was found")
    chosen = {var: facts.interface for var in IFNAME_VARS if var not in machine}
    return CommSettings(chosen, {**machine, **chosen}, FROM_ROUTE)


def socket_ifname(settings: list[CommSettings]) -> str | None:
    """The interface NCCL binds to (else gloo's) on the run's nodes, head first: one name
    where they agree ("ens1": a RunPod Instant Cluster's network), else each node's
    ("node0: ens1, node1: eth1"); None where no node has one in force."""
    names = [next((s.in_force[v] for v in reversed(IFNAME_VARS) if s.in_force.get(v)), None)
             for s in settings]
    if not any(names):
        return None
    if len(set(names)) == 1:
        return names[0]
    return ", ".join(f"node{i}: {name or 'unset'}" for i, name in enumerate(names))


def endpoint_for(head: ClusterNode, network: str, port: int, on_head: bool) -> str:
    """HOST:PORT of the rendezvous as one member reaches it: the head's address for
    its peers on `network`, through its port mapping where the provider maps ports;
    the head itself binds the container port."""
    address = head.address_for_peers(network)
    host = f"[{address}]" if ":" in address else address
    return f"{host}:{port if on_head else head.port_for_peers(port)}"


def torchrun_command(python: str, script: str, script_args: list[str], *, nnodes: int,
                     procs_per_node: int, node_rank: int, endpoint: str, run_id: str,
                     local_addr: str, rendezvous: Rendezvous) -> list[str]:
    """One member's torchrun. --node_rank is informational under c10d (torch gives the
    ranks out); --local_addr is the address its peers reach it at, which rank 0's
    member publishes as MASTER_ADDR (else it would be the host name, which the other
    machines may not resolve)."""
    return [*shlex.split(python), "-m", "torch.distributed.run", f"--nnodes={nnodes}",
            f"--nproc_per_node={procs_per_node}", f"--node_rank={node_rank}",
            "--rdzv_backend=c10d", f"--rdzv_endpoint={endpoint}", f"--rdzv_id={run_id}",
            f"--rdzv_conf={rendezvous.conf(is_host=node_rank == 0)}",
            f"--local_addr={local_addr}", "--max_restarts=0", script, *script_args]
