"""`gpubench run W --on CLUSTER`: torchrun's c10d rendezvous across two hosts of their
own (sshd in network namespaces, a private link between them), CPU and gloo, each
run on every node at once; a node cut mid-run fails that run in bounded time and
the sweep goes on without it."""

from __future__ import annotations

import sys
import threading
import time

import pytest

from gpubench.launch import cluster as cluster_launcher
from gpubench.launch.cluster import ClusterOptions
from gpubench.launch.cluster_torchrun import Rendezvous
from gpubench.results import ResultsStore
from tests.helpers import LOOPING
from tests.launch.cluster_netns import INSTANCE_TYPE, two_node_cluster

pytestmark = pytest.mark.slow

TINY_MNIST = ["--steps", "3", "--warmup", "1", "--batch-size", "16"]
TINY_ALLREDUCE = ["--steps", "2", "--warmup", "1", "--max-bytes", "65536"]
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


@pytest.mark.parametrize("workload, args", [("mnist-ddp", TINY_MNIST),
                                            ("allreduce", TINY_ALLREDUCE)])
def test_two_nodes_of_two_processes_end_to_end(pair, tmp_path, cli, workload, args):
    code, out, err = cli("run", workload, *run_args(tmp_path, "--nodes", "1,2"), "--", *args)
    assert code == 0, out + err
    records = ResultsStore(tmp_path / "results").load().records
    assert [(r["nodes"], r["gpu_count"], r["world_size"], r["status"]) for r in records] == [
        (1, 2, 2, "ok"), (2, 4, 4, "ok")]
    two = records[1]
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
    assert [n["ibstat"] for n in two["interconnect"]] == ["absent", "absent"]
    assert two["instance_type"] == INSTANCE_TYPE and two["price_per_hour"] == pytest.approx(3.0)
    assert "--rdzv_backend=c10d" in two["launch_command"]
    assert "[node0] " in out and "[node1] " in out
    if workload == "mnist-ddp":
        assert "node speedup" in out  # the report's node scaling beside the GPU scaling




def cut_once_marked(node, marker, cut_at: list[float], limit_s: float = 180) -> threading.Thread:
    def watch() -> None:
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline and not marker.exists():
            time.sleep(0.2)
        if marker.exists():
            node.cut()
            cut_at.append(time.monotonic())

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def test_a_node_cut_mid_run_fails_that_run_and_the_sweep_goes_on(pair, tmp_path, cli):
    script = tmp_path / "looping_allreduce.py"
    script.write_text(LOOPING)
    marker = tmp_path / "two-nodes-running"
    cut_at: list[float] = []
    watcher = cut_once_marked(pair.nodes[1], marker, cut_at)
    started = time.monotonic()
    # (2,1) loses node 1; (2,2) then no longer fits; (1,1) and (1,2) run on the head
    code, out, err = cli("run", str(script), *run_args(tmp_path, "--nodes", "2,1", "--gpus", "1,2",
                                                      "--timeout", "600"), "--", "--marker", str(marker))
    watcher.join(1)
    assert cut_at, out[-3000:]
    assert code == 1, out + err
    records = ResultsStore(tmp_path / "results").load().records
    assert [(r["nodes"], r["gpu_count"], r["status"]) for r in records] == [
        (2, 2, "failed"), (1, 1, "ok"), (1, 2, "ok")], out[-3000:]
    node1 = f"node 1 ({pair.nodes[1].sshd.host})"
    failed = records[0]
    assert node1 in failed["error"] and failed["lost_nodes"] == [node1], failed["error"]
    assert failed["process_seconds"] < (time.monotonic() - started)
    # noticed within the dead-link time (5 s) plus a reconnect attempt, not the 600 s timeout
    ended = started + failed["process_seconds"]
    assert ended - cut_at[0] < 60, (ended - cut_at[0], out[-3000:])
    assert "skipping 2 nodes x 2 gpus: " in out and "spans at most 1 node now" in out
    assert f"pair: {node1} lost" in out
