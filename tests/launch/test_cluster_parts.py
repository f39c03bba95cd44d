"""The cluster launcher's parts without a host: each member's torchrun command and
rendezvous endpoint, the NCCL/gloo interface it is given and why, what a member
says of itself, the points of a cluster sweep, the sweep going on with fewer
nodes, and `gpubench run --on CLUSTER` refusing what cannot work before it connects."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpubench.onhost import cluster_probe
from gpubench.launch.base import Launcher, Machine, RunOutcome, SweepPoint as P

from gpubench.launch.cluster_torchrun import (FROM_MACHINE, FROM_ROUTE, NodeFacts, Rendezvous,
                                              comm_settings, endpoint_for, torchrun_command)
from gpubench.store.ledger import Ledger
from gpubench.store.status import LedgerStatus
from gpubench.remote.cluster import PRIVATE, PUBLIC, ClusterHosts, ClusterNode
from gpubench.remote.target import SshTarget
from gpubench.remote.targets import RemoteHost
from gpubench.store.results import ResultsStore
from gpubench.suite import resolve
from gpubench.sweep.run import SweepPlan, sweep


def node(index: int, host: str, private: str | None = None, ports: dict | None = None,
         gpus: tuple[str, int] = ("A100", 8)) -> ClusterNode:
    target = SshTarget(host, 22, "root", Path("/k"))
    return ClusterNode(RemoteHost(target, "lambda", f"c-{index}", "gpu_8x_a100", *gpus, 10.0),
                       index, private, ports or {})


# ---------------------------------------------------------------------- command
def test_each_member_runs_the_same_rendezvous_with_its_own_address():
    head, peer = node(0, "203.0.113.1", "10.0.0.1"), node(1, "203.0.113.2", "10.0.0.2")
    rdzv = Rendezvous(port=29500, join_timeout=120, read_timeout=60, collective_timeout=300)
    common = dict(nnodes=2, procs_per_node=8, run_id="r1", rendezvous=rdzv)
    on_head = torchrun_command("python3", "workloads/mnist_ddp.py", ["--steps", "3"], node_rank=0,
                               endpoint=endpoint_for(head, PRIVATE, 29500, on_head=True),
                               local_addr=head.address_for_peers(PRIVATE), **common)
    assert on_head == [
        "python3", "-m", "torch.distributed.run", "--nnodes=2", "--nproc_per_node=8", "--node_rank=0",
        "--rdzv_backend=c10d", "--rdzv_endpoint=10.0.0.1:29500", "--rdzv_id=r1",
        "--rdzv_conf=join_timeout=120,read_timeout=60,last_call_timeout=1,close_timeout=10,is_host=1",
        "--local_addr=10.0.0.1", "--max_restarts=0", "workloads/mnist_ddp.py", "--steps", "3"]
    on_peer = torchrun_command("python3", "w.py", [], node_rank=1,
                               endpoint=endpoint_for(head, PRIVATE, 29500, on_head=False),
                               local_addr=peer.address_for_peers(PRIVATE), **common)
    assert "--rdzv_endpoint=10.0.0.1:29500" in on_peer and "--local_addr=10.0.0.2" in on_peer
    assert any(a.endswith("is_host=0") for a in on_peer)


def test_over_the_public_internet_peers_go_through_the_heads_port_mapping():
    head = node(0, "198.51.100.7", ports={29500: 41234})
    assert endpoint_for(head, PUBLIC, 29500, on_head=False) == "198.51.100.7:41234"
    assert endpoint_for(head, PUBLIC, 29500, on_head=True) == "198.51.100.7:29500"  # binds its own
    hosts = ClusterHosts("v", (head, node(1, "198.51.100.9")))
    assert hosts.network == PUBLIC and hosts.head.address_for_peers(hosts.network) == "198.51.100.7"


# ---------------------------------------------------------------------- NCCL / gloo
def test_the_interface_comes_from_the_route_to_the_head_and_is_said_so():
    chosen = comm_settings(NodeFacts(interface="ens5", source_address="10.0.0.2",
                                     comm_env={"NCCL_IB_DISABLE": "1"}))
    assert chosen.env_set == {"GLOO_SOCKET_IFNAME": "ens5", "NCCL_SOCKET_IFNAME": "ens5"}
    assert chosen.in_force == {**chosen.env_set, "NCCL_IB_DISABLE": "1"}  # recorded, not changed
    assert chosen.interface_from == FROM_ROUTE
    said = chosen.as_record(1, "10.0.0.2", "10.0.0.1")
    assert said["interface_chosen_by"] == "the route to the head's address 10.0.0.1"


def test_the_machines_own_settings_win_and_a_missing_route_sets_nothing():
    own = {"GLOO_SOCKET_IFNAME": "ib0", "NCCL_SOCKET_IFNAME": "ib0"}
    kept = comm_settings(NodeFacts(interface="eth0", comm_env=own))
    assert kept.env_set == {} and kept.in_force == own and kept.interface_from == FROM_MACHINE
    none = comm_settings(NodeFacts())
    assert none.env_set == {} and none.interface_from.startswith("none: ")


def test_a_member_says_its_route_and_that_it_has_no_interconnect_tools():
    found = cluster_probe.probe("127.0.0.1")
    assert found["source_address"] == "127.0.0.1" and found["interface"] == "lo"
    assert set(found) == {"interface", "source_address", "comm_env", "nvidia_smi_topo", "ibstat"}
    assert cluster_probe.tool_output(["/nonexistent/ibstat"]) is None
    facts = NodeFacts.from_probe(found)
    assert facts.interface == "lo" and isinstance(facts.comm_env, dict)


def test_members_that_differ_in_gpus_are_told_apart():
    alike = ClusterHosts("c", (node(0, "a"), node(1, "b")))
    assert alike.disagreement() is None
    differ = ClusterHosts("c", (node(0, "a"), node(1, "b", gpus=("A100", 4))))
    assert differ.disagreement() == "its members differ in GPUs (node 0: 8x A100, node 1: 4x A100)"


class ShrinkingLauncher(Launcher):
    """Two nodes until its first 2-node run, which loses one."""

    def __init__(self) -> None:
        self.nodes = 2
        self.ran: list[P] = []

    def machine(self) -> Machine:
        return Machine("fake", "pair", "A10", 2, 1.0, "cuda", max_nodes=self.nodes)

    def prepare(self, workload) -> None:
        pass

    def run(self, workload, point, workload_args, on_line, timeout) -> RunOutcome:
        self.ran.append(point)
        if point.nodes == 2:
            self.nodes = 1
            return RunOutcome(1, None, ["torchrun"], 5.0, "lost node 1 (10.0.0.2)")
        return RunOutcome(0, {"status": "ok", "throughput": 10.0, "wall_seconds": 1.0,
                              "world_size": point.world_size}, ["torchrun"], 1.0)

    def close(self) -> None:
        pass


def test_the_sweep_goes_on_with_the_node_counts_that_remain(tmp_path):
    launcher = ShrinkingLauncher()
    lines: list[str] = []
    plan = SweepPlan(resolve("mnist-ddp"), [P(2, 1), P(2, 2), P(1, 1), P(1, 2)], [], "r1", 60, repeat=1)
    result = sweep(launcher, plan, ResultsStore(tmp_path), lines.append)
    assert launcher.ran == [P(2, 1), P(1, 1), P(1, 2)]
    assert result.dropped == {P(2, 2): "skipping 2 nodes x 2 gpus: pair spans at most 1 node now"}
    assert "skipping 2 nodes x 2 gpus: pair spans at most 1 node now" in lines
    assert [(r["nodes"], r["status"]) for r in result.records] == [(2, "failed"), (1, "ok"), (1, "ok")]


# ---------------------------------------------------------------------- the run command
def write_cluster(name: str, gpus: list[tuple[str, int]], key: Path) -> None:
    key.write_text("not a real key")
    with Ledger() as ledger:
        for i, (gpu, count) in enumerate(gpus):
            row = ledger.begin(f"{name}-{i}", "lambda", f"gpubench-{name}-{i}", gpu_name=gpu,
                               gpu_count=count, instance_type="gpu_8x_a100", cluster=name,
                               node_index=i, price_per_hour=10.0)
            ledger.update(row.row_id, status=LedgerStatus.LAUNCHED, instance_id=f"i{i}")
            ledger.update(row.row_id, status=LedgerStatus.READY, ssh_host=f"192.0.2.{i + 1}",
                          ssh_port=22, ssh_user="ubuntu", key_path=str(key),
                          private_ip=f"10.0.0.{i + 1}")


@pytest.mark.parametrize("gpus, argv, message", [
    ([("A100", 8)] * 2, ["--nodes", "1,3"], "error: --nodes 3: cluster big has 2 nodes"),
    ([("A100", 8), ("A100", 4)], [],
     "error: --on big: its members differ in GPUs (node 0: 8x A100, node 1: 4x A100); "
     "gpubench runs only on alike members"),
    ([("A100", 8), ("H100", 8)], ["--nodes", "2", "--gpus", "8"],
     "error: --on big: its members differ in GPUs (node 0: 8x A100, node 1: 8x H100); "
     "gpubench runs only on alike members"),
])
def test_run_on_a_cluster_refuses_before_connecting(cli, tmp_path, gpus, argv, message):
    write_cluster("big", gpus, tmp_path / "key")
    results = tmp_path / "results"
    results.mkdir()
    code, out, err = cli("run", "mnist-ddp", "--on", "big", "--results", str(results),
                         "--connect-wait", "1", *argv)
    assert code == 2 and err == message + "\n", (out, err)
    assert list(results.iterdir()) == []


def test_a_members_index_opens_that_member_alone(cli, tmp_path, monkeypatch):
    from gpubench.launch import factory

    write_cluster("big", [("A100", 8)] * 2, tmp_path / "key")
    opened = []
    monkeypatch.setattr(factory, "_open_ssh", lambda host, options: opened.append(host) or 1 / 0)
    with pytest.raises(ZeroDivisionError):
        factory.open_launcher("big:1", factory.LaunchOptions())
    assert opened[0].target.host == "192.0.2.2" and opened[0].name == "big-1"
    with pytest.raises(factory.BadTargetError, match="cluster big has members 0 to 1"):
        factory.open_launcher("big:2", factory.LaunchOptions())
