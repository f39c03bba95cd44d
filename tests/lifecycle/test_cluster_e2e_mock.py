"""Clusters end to end on the mock cloud's own instances in namespace mode (each
instance a host of its own on the mock's bridge): `provision --nodes 2`, `run --on
CLUSTER --nodes 1,2`, `down CLUSTER`, for each provider, through the real command
line. Faults: test_cluster_faults_mock.py."""

from __future__ import annotations

import re
import time

import pytest

from gpubench.store.results import ResultsStore
from tests.lifecycle.cluster_mock import NETWORK, TINY, assert_down, cloud, provision, run_args  # noqa: F401

pytestmark = pytest.mark.slow

# One workload per provider: every provider's addresses, both workloads, in three
# clusters' time (two-node mnist-ddp without the mock: tests/launch/test_cluster_e2e.py);
# one node beside two once, for the sweep over node counts.
CASES = [("lambda", "mnist-ddp", "1,2"), ("vast", "allreduce", "2"), ("runpod", "mnist-ddp", "2")]

@pytest.mark.parametrize("provider, workload, nodes", CASES)
def test_provision_run_and_down_a_two_node_cluster(cloud, cli, tmp_path, provider, workload, nodes):
    out, err, members = provision(cli, cloud, provider)
    hosts = [m.ssh_host for m in members]
    words = "the private network" if NETWORK[provider] == "private" else "the public internet"
    link = re.search(rf"link head->node1: ([0-9.]+) Gb/s over {words}", out)
    assert link and float(link.group(1)) > 0, out + err
    print(f"{provider} link head->node1: {link.group(1)} Gb/s")
    assert len(set(hosts)) == 2 and "127.0.0.1" not in hosts      # hosts of their own
    started = time.monotonic()
    code, out, err = cli("run", workload, *run_args(tmp_path, "--nodes", nodes, "--gpus", "2"),
                         "--", *TINY[workload])
    assert code == 0, out + err
    records = ResultsStore(tmp_path / "results").load().records
    counts = [int(n) for n in nodes.split(",")]
    assert [(r["nodes"], r["world_size"], r["status"]) for r in records] == [
        (n, 2 * n, "ok") for n in counts], out[-3000:]
    two = records[-1]
    assert two["node_network"] == NETWORK[provider]
    want = [m.private_ip for m in members] if NETWORK[provider] == "private" else hosts
    assert two["node_addresses"] == want
    assert "[node0] " in out and "[node1] " in out
    assert [(x["node"], x["network"]) for x in two["links"]] == [(1, NETWORK[provider])]
    if len(records) > 1:
        assert "links" not in records[0]        # one node: no link in the run
    print(f"{provider} {workload}: run -> records in {time.monotonic() - started:.1f} s")
    assert_down(cli, cloud)
