"""`gpubench run W --on CLUSTER`: torchrun's c10d rendezvous across two hosts of their
own (sshd in network namespaces, a private link between them), CPU and gloo, each
run on every node at once, with the settings and interconnect each node reports."""

from __future__ import annotations

import sys

import pytest

from gpubench.launch import cluster as cluster_launcher
from gpubench.launch.cluster import ClusterOptions
from gpubench.launch.cluster_torchrun import Rendezvous
from gpubench.store.results import ResultsStore
from tests.launch.cluster_netns import INSTANCE_TYPE, two_node_cluster

pytestmark = pytest.mark.slow

TINY_MNIST = ["--steps", "3", "--warmup", "1", "--batch-size", "16"]
# short enough for a test, long enough for two torch start-ups on a loaded 2-core machine
QUICK = ClusterOptions(Rendezvous(port=29511, join_timeout=90, read_timeout=30,
                                  collective_timeout=30), keepalive_s=1, dead_link_s=5,
                       rejoin_wait_s=2)


@pytest.fixture
def pair(tmp_path, monkeypatch):
    cluster = two_node_cluster(tmp_path)
    cluster.write_ledger()
    monkeypatch.setattr(cluster_launcher, "DEFAULTS", QUICK)
    try:
        yield cluster
    finally:
        cluster.destroy()


def run_args(tmp_path, *extra: str) -> list[str]:
    (tmp_path / "results").mkdir(exist_ok=True)
    return ["--on", "pair", "--remote-python", sys.executable, "--remote-dir",
            str(tmp_path / "remote"), "--connect-wait", "10", "--repeat", "1",
            "--results", str(tmp_path / "results"), *extra]


# allreduce across two nodes, a node lost mid-run, and a sweep of one node beside two
# (with the report's node speedup), on the mock's own instances:
# tests/lifecycle/test_cluster_e2e_mock.py and test_cluster_faults_mock.py
@pytest.mark.parametrize("workload, args", [("mnist-ddp", TINY_MNIST)])
def test_two_nodes_of_two_processes_end_to_end(pair, tmp_path, cli, workload, args):
    code, out, err = cli("run", workload, *run_args(tmp_path, "--nodes", "2", "--trace-steps", "1"),
                         "--", *args)
    assert code == 0, out + err
    records = ResultsStore(tmp_path / "results").load().records
    assert [(r["nodes"], r["gpu_count"], r["world_size"], r["status"]) for r in records] == [
        (2, 4, 4, "ok")]
    two = records[0]
    a, b = (n.private_ip for n in pair.nodes)
    assert two["node_addresses"] == [a, b] and two["node_network"] == "private"
    assert two["rendezvous"]["endpoint"] == f"{a}:29511" and two["rendezvous"]["backend"] == "c10d"
    # c10d ranks the nodes itself (torchrun's --node_rank is not used by it): the record
    # comes from whichever node rank 0 landed on, and says which
    assert two["collective_timeout_s"] == 30.0 and two["rank0_node"] in (0, 1)
    for i, node in enumerate(pair.nodes):  # the interface on the route to the head, said so
        said = two["comm_settings"][i]
        assert said["env"] == {"GLOO_SOCKET_IFNAME": node.private_link,
                               "NCCL_SOCKET_IFNAME": node.private_link}, said
        assert said["interface_chosen_by"] == f"the route to the head's address {a}"
    assert two["socket_ifname"] == ", ".join(f"node{i}: {n.private_link}" for i, n in enumerate(pair.nodes))
    assert f"[node1] collectives bind to {pair.nodes[1].private_link} (the route to the head's address {a})" in out
    assert [n["ibstat"] for n in two["interconnect"]] == ["absent", "absent"]
    assert two["instance_type"] == INSTANCE_TYPE and two["price_per_hour"] == pytest.approx(3.0)
    assert "--rdzv_backend=c10d" in two["launch_command"]
    assert "[node0] " in out and "[node1] " in out
    # --trace: every rank's trace, from both nodes, in one folder
    names = sorted(p.name.split("-")[0] for p in (tmp_path / "results" / two["trace_dir"]).iterdir())
    assert names == ["rank0", "rank1", "rank2", "rank3"] and two["trace_files"] == 4

