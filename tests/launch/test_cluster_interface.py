"""The interface NCCL and gloo bind to on a cluster member, and the record saying it.

A RunPod Instant Cluster pod has eth0 for the internet and ens1 on the cluster's network,
which holds the address RunPod gives as the member's `cluster.ip` (docs.runpod.io,
instant-clusters/configuration: "PRIMARY_ADDR corresponds to ens1"; NCCL on eth0 times
out). gpubench asks each member for the route to the head's address on the network
that joins the members: on a RunPod cluster that is the private one, so the route, and
NCCL_SOCKET_IFNAME, is ens1. Here a namespace is shaped as such a pod (eth0 and ens1)
and the member's own probe is run in it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from gpubench.launch.cluster_torchrun import (FROM_MACHINE, NodeFacts, comm_settings, endpoint_for,
                                              socket_ifname)
from gpubench.onhost import cluster_probe
from gpubench.remote.cluster import PRIVATE, ClusterHosts, ClusterNode
from gpubench.remote.targets import RemoteHost, SshTarget

PUBLIC = ["203.0.113.10", "203.0.113.11"]        # what SSH reaches (eth0)
CLUSTER = ["10.65.0.2", "10.65.0.3"]             # cluster.ip of each member (ens1)


def _runpod_cluster() -> ClusterHosts:
    """Two members as the ledger has them once RunPod created the cluster: SSH on the
    public address, the private address its `cluster.ip`."""
    return ClusterHosts("c", tuple(
        ClusterNode(RemoteHost(SshTarget(PUBLIC[i], 22, "root", Path("k")), "runpod", f"c-{i}"), i, CLUSTER[i])
        for i in range(2)))


def test_a_runpod_cluster_meets_on_its_private_network():
    hosts = _runpod_cluster()
    assert hosts.network == PRIVATE
    assert hosts.head.address_for_peers(hosts.network) == CLUSTER[0]     # what the probe routes to
    assert endpoint_for(hosts.head, hosts.network, 29500, on_head=False) == f"{CLUSTER[0]}:29500"


def test_socket_ifname_in_force():
    ens1 = comm_settings(NodeFacts("ens1"))
    assert ens1.env_set == {"GLOO_SOCKET_IFNAME": "ens1", "NCCL_SOCKET_IFNAME": "ens1"}
    assert socket_ifname([ens1, ens1]) == "ens1"
    own = comm_settings(NodeFacts("eth0", comm_env={"NCCL_SOCKET_IFNAME": "ib0", "GLOO_SOCKET_IFNAME": "ib0"}))
    assert own.interface_from == FROM_MACHINE and socket_ifname([own]) == "ib0"
    assert socket_ifname([ens1, own]) == "node0: ens1, node1: ib0"
    assert socket_ifname([comm_settings(NodeFacts(None))]) is None


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=20)


@pytest.fixture
def runpod_pod_namespace():
    """A namespace with eth0 (the public address, the default route) and ens1 (the
    cluster's /16), as a RunPod Instant Cluster pod has them."""
    if os.geteuid() != 0:
        pytest.skip("needs root for a network namespace")
    ns = f"gbrp{uuid.uuid4().hex[:8]}"
    _ip("netns", "add", ns)
    try:
        for name, address in (("eth0", f"{PUBLIC[1]}/24"), ("ens1", f"{CLUSTER[1]}/16")):
            _ip("-n", ns, "link", "add", name, "type", "veth", "peer", "name", f"{name}p")  # its far end
            _ip("-n", ns, "addr", "add", address, "dev", name)
            for end in (name, f"{name}p"):
                _ip("-n", ns, "link", "set", end, "up")
        _ip("-n", ns, "route", "add", "default", "dev", "eth0")
        yield ns
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=20)


def _probe(ns: str, head: str) -> NodeFacts:
    out = subprocess.run(["ip", "netns", "exec", ns, sys.executable, cluster_probe.__file__, head],
                         check=True, capture_output=True, text=True, timeout=60).stdout
    return NodeFacts.from_probe(json.loads(out.strip().splitlines()[-1]))


def test_the_route_to_the_heads_cluster_address_is_ens1(runpod_pod_namespace):
    hosts = _runpod_cluster()
    facts = _probe(runpod_pod_namespace, hosts.head.address_for_peers(hosts.network))
    assert (facts.interface, facts.source_address) == ("ens1", CLUSTER[1])
    settings = comm_settings(facts)
    assert settings.in_force["NCCL_SOCKET_IFNAME"] == "ens1" and socket_ifname([settings]) == "ens1"
    # the head's public address would have given the management interface NCCL must avoid
    assert _probe(runpod_pod_namespace, PUBLIC[0]).interface == "eth0"
