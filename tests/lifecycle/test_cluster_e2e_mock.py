"""Clusters end to end on the mock cloud's own instances in namespace mode (each
instance a host of its own on the mock's bridge): `provision --nodes 2`, `run --on
CLUSTER --nodes 2`, `down CLUSTER`, through the real command line, on Vast.ai (the
public internet between its machines) and RunPod (a cluster of its own). Lambda's
clusters go the same way in test_cluster_faults_mock.py (a member lost mid-run, and
bench sweeping node counts 1 and 2)."""

from __future__ import annotations

import re
import time

import pytest

from gpubench.store.results import ResultsStore
from tests.lifecycle.cluster_mock import NETWORK, TINY, assert_down, cloud, provision, run_args  # noqa: F401

pytestmark = pytest.mark.slow

# One workload per provider, both workloads in two clusters' time: each node runs one
# process (two nodes of two processes: tests/launch/test_cluster_e2e.py; one node beside
# two, and the report's node speedup: bench on Lambda in test_cluster_faults_mock.py).
CASES = [("vast", "allreduce"), ("runpod", "mnist-ddp")]


def check_provisioned(provider: str, out: str, err: str, members) -> list[str]:
    """What `provision --nodes 2` said and left: the link measured between the two
    members over the provider's network, and two hosts of their own. Their hosts."""
    hosts = [m.ssh_host for m in members]
    words = "the private network" if NETWORK[provider] == "private" else "the public internet"
    link = re.search(rf"link head->node1: ([0-9.]+) Gb/s over {words}", out)
    assert link and float(link.group(1)) > 0, out + err
    print(f"{provider} link head->node1: {link.group(1)} Gb/s")
    assert len(set(hosts)) == 2 and "127.0.0.1" not in hosts      # hosts of their own
    return hosts


def check_two_node_record(provider: str, record: dict, members, out: str) -> None:
    """A run over both members: the addresses they reached each other on, and the link."""
    assert record["node_network"] == NETWORK[provider]
    hosts = [m.ssh_host for m in members]
    want = [m.private_ip for m in members] if NETWORK[provider] == "private" else hosts
    assert record["node_addresses"] == want
    assert "[node0] " in out and "[node1] " in out
    assert [(x["node"], x["network"]) for x in record["links"]] == [(1, NETWORK[provider])]


@pytest.mark.parametrize("provider, workload", CASES)
def test_provision_run_and_down_a_two_node_cluster(cloud, cli, tmp_path, provider, workload):
    out, err, members = provision(cli, cloud, provider)
    check_provisioned(provider, out, err, members)
    started = time.monotonic()
    code, out, err = cli("run", workload, *run_args(tmp_path, "--nodes", "2", "--gpus", "1"),
                         "--", *TINY[workload])
    assert code == 0, out + err
    records = ResultsStore(tmp_path / "results").load().records
    assert [(r["nodes"], r["world_size"], r["status"]) for r in records] == [(2, 2, "ok")], out[-3000:]
    check_two_node_record(provider, records[0], members, out)
    print(f"{provider} {workload}: run -> records in {time.monotonic() - started:.1f} s")
    assert_down(cli, cloud)
