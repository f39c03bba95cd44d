"""Clusters end to end on the mock cloud's own instances in namespace mode (each
instance a host of its own on the mock's bridge): `provision --nodes 2`, the cluster in
`ls` and `ssh NAME:i`, `run --on CLUSTER --nodes 2` (every member's GPUs streamed as it
goes, by the mock's nvidia-smi), `down CLUSTER`, through the real
command line, on Vast.ai (the public internet between its machines) and RunPod (a
cluster of its own). Lambda's clusters go the same way in test_cluster_faults_mock.py
(a member lost mid-run). One cluster serves each provider's every check: the cluster
commands of tests/cli/test_cluster_cli.py (ls, ssh, down, a member not confirmed gone)
and, on Vast.ai, torchrun's c10d rendezvous and a gloo all-reduce across two instances
(once tests/mock/test_netns_mock.py's own run) run here on the cluster's members."""

from __future__ import annotations

import json
import re
import time

import pytest

from gpubench.store.results import ResultsStore
from tests.lifecycle.cluster_mock import (ALLREDUCE, NETWORK, TINY, assert_down,  # noqa: F401
                                          check_listed_and_reachable, cloud, provision, run_args)
from tests.remote.helpers import samplers_left, watch_gpu_samples

pytestmark = pytest.mark.slow

# One workload per provider: the allreduce workload on RunPod, and on Vast.ai a script of
# the user's (a gloo all-reduce that prints what each rank got). mnist-ddp across two
# nodes: tests/launch/test_cluster_e2e.py (two nodes of two processes) and bench over
# Vast.ai's overlay in test_vast_overlay.py (one node beside two, the node speedup).
CASES = ["vast", "runpod"]


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


def check_a_member_not_confirmed_gone_keeps_the_cluster_listed(cli, cloud, provider: str) -> None:
    """A terminate the provider answers but does not carry out: down says so, the cluster
    stays listed; with the fault gone, down finishes (assert_down)."""
    cloud.set_faults(f"{provider}:terminate-lies")
    code, out, err = cli("down", "c", "--yes", "--timeout", "1")
    assert code != 0 and "NOT confirmed gone" in err, out + err
    code, out, err = cli("ls", "--format", "json")
    assert {r["cluster"] for r in json.loads(out)} == {"c"}
    cloud.set_faults("")


def check_gpus_watched(samples: list, tmp_path) -> None:
    """Every GPU of every member streamed as the run went: the mock's nvidia-smi loops
    with no figure (a CPU stands in); and its sampler ended with the run on every node."""
    assert {(s.node, s.gpu["index"]) for s in samples} == {("node0", 0), ("node1", 0)}, samples
    assert all(s.gpu["util"] is None and s.gpu["power"] is None for s in samples)
    assert samplers_left(tmp_path) == []


@pytest.mark.parametrize("provider", CASES)
def test_provision_list_ssh_run_and_down_a_two_node_cluster(cloud, cli, tmp_path, provider, monkeypatch):
    out, err, members = provision(cli, cloud, provider)
    check_provisioned(provider, out, err, members)
    check_listed_and_reachable(cli, provider, out, members)
    if provider == "vast":
        script = tmp_path / "project" / "allreduce_check.py"
        script.parent.mkdir()
        script.write_text(ALLREDUCE)
        workload, args = str(script), []
    else:
        workload, args = "allreduce", TINY["allreduce"]
    started = time.monotonic()
    samples = watch_gpu_samples(monkeypatch)
    code, out, err = cli("run", workload, *run_args(tmp_path, "--nodes", "2", "--gpus", "1"), "--", *args)
    assert code == 0, out + err
    check_gpus_watched(samples, tmp_path)
    records = ResultsStore(tmp_path / "results").load().records
    assert [(r["nodes"], r["world_size"], r["status"]) for r in records] == [(2, 2, "ok")], out[-3000:]
    check_two_node_record(provider, records[0], members, out)
    if provider == "vast":       # each rank's sum over both instances: 1 + 2
        lines = sorted(line.split("] ")[-1] for line in out.splitlines() if "] allreduce " in line)
        assert lines == ["allreduce 0 2 3", "allreduce 1 2 3"], out[-3000:]
    print(f"{provider} {workload}: run -> records in {time.monotonic() - started:.1f} s")
    if provider == "runpod":
        check_a_member_not_confirmed_gone_keeps_the_cluster_listed(cli, cloud, provider)
    assert_down(cli, cloud)
