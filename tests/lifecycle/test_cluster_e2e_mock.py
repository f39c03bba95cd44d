"""Clusters end to end on the mock cloud's own instances in namespace mode (each
instance a host of its own on the mock's bridge): `provision --nodes 2`, `run --on
CLUSTER --nodes 1,2`, `down CLUSTER`, for each provider, through the real command
line; a member that dies mid-run; a member that never boots."""

from __future__ import annotations

import json
import threading
import time

import pytest

from gpubench.launch import cluster as cluster_launcher
from gpubench.launch.cluster import ClusterOptions
from gpubench.launch.cluster_torchrun import Rendezvous
from gpubench.lifecycle.ledger import Ledger
from gpubench.results import ResultsStore
from tests.lifecycle.test_cluster_provision import second_vast_machine
from tests.mock.helpers import netns_mock_cloud

pytestmark = pytest.mark.slow

TINY = {"mnist-ddp": ["--steps", "3", "--warmup", "1", "--batch-size", "16"],
        "allreduce": ["--steps", "2", "--warmup", "1", "--max-bytes", "65536"]}
# Lambda runs both workloads, Vast.ai and RunPod one each: every provider's addresses,
# both workloads, in three clusters' time.
CASES = [("lambda", ["mnist-ddp", "allreduce"]), ("vast", ["allreduce"]), ("runpod", ["mnist-ddp"])]
NETWORK = {"lambda": "private", "vast": "public", "runpod": "public"}
# short enough for a test, long enough for two torch start-ups on a loaded 2-core machine
QUICK = ClusterOptions(Rendezvous(join_timeout=90, read_timeout=30, collective_timeout=30),
                       keepalive_s=1, dead_link_s=5, rejoin_wait_s=2)


@pytest.fixture
def cloud(tmp_path, monkeypatch):
    monkeypatch.setattr(cluster_launcher, "DEFAULTS", QUICK)
    with netns_mock_cloud(tmp_path / "mock", monkeypatch) as c:
        yield c


def provision(cli, cloud, provider: str, name: str = "c", *extra: str):
    second_vast_machine(cloud, 2)
    code, out, err = cli("provision", provider, "--gpus", "2", "--nodes", "2", "--name", name,
                         "--yes", "--ssh-timeout", "60", *extra)
    assert code == 0, out + err
    with Ledger() as ledger:
        members = ledger.cluster_members(name)
    assert [(m.node_index, m.status) for m in members] == [(0, "ready"), (1, "ready")]
    return out, err, members


def run_args(tmp_path, *extra: str) -> list[str]:
    return ["--on", "c", "--connect-wait", "20", "--repeat", "1",
            "--results", str(tmp_path / "results"), *extra]


def assert_down(cli, cloud, name: str = "c") -> None:
    code, out, err = cli("down", name, "--yes")
    assert code == 0, out + err
    assert f"{name}-0: terminated" in out and f"{name}-1: terminated" in out, out
    assert cloud.engine.store.instances() == []
    with Ledger() as ledger:
        rows = ledger.cluster_members(name, include_done=True)
        assert rows and all(r.status == "terminated" and r.terminated_confirmed_at for r in rows)
        assert ledger.cluster_members(name) == []


@pytest.mark.parametrize("provider, workloads", CASES)
def test_provision_run_and_down_a_two_node_cluster(cloud, cli, tmp_path, provider, workloads):
    out, err, members = provision(cli, cloud, provider)
    hosts = [m.ssh_host for m in members]
    assert len(set(hosts)) == 2 and "127.0.0.1" not in hosts      # hosts of their own
    for workload in workloads:
        started = time.monotonic()
        code, out, err = cli("run", workload, *run_args(tmp_path, "--nodes", "1,2", "--gpus", "2"),
                             "--", *TINY[workload])
        assert code == 0, out + err
        records = [r for r in ResultsStore(tmp_path / "results").load().records
                   if r["workload"] == workload]
        assert [(r["nodes"], r["world_size"], r["status"]) for r in records] == [
            (1, 2, "ok"), (2, 4, "ok")], out[-3000:]
        two = records[1]
        assert two["node_network"] == NETWORK[provider]
        want = [m.private_ip for m in members] if provider == "lambda" else hosts
        assert two["node_addresses"] == want
        assert "[node0] " in out and "[node1] " in out
        print(f"{provider} {workload}: run -> records in {time.monotonic() - started:.1f} s")
    assert_down(cli, cloud)
