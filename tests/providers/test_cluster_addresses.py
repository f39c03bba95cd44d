"""How a cluster's members reach each other, read from what the providers send: Lambda's
`private_ip`, Vast.ai's docker-style `ports` mapping (no private network), RunPod's
`runtime.ports` and a cluster member's (or global network's) private address."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from gpubench.providers import lambda_cloud, runpod, vast

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real"


def real(name: str) -> str:
    return f"real/{name}.json"


def test_lambda_instances_carry_their_private_address(fake_api):
    lam = lambda_cloud.connect("KEY", fake_api.url)
    fake_api.route("GET", "/api/v1/instances", (200, real("lambda/instances.doc-1.10.0")))
    [inst] = lam.list()
    assert (inst.private_ip, inst.port_map) == ("10.0.2.100", {})
    fake_api.route("GET", "/api/v1/instances", (200, real("lambda/instances.live-2026-04-11")))
    assert all(i.private_ip is None or i.private_ip.count(".") == 3 for i in lam.list())


def test_vast_instances_map_ports_and_have_no_private_network(fake_api):
    v = vast.connect("KEY", fake_api.url)
    fake_api.route("GET", "/api/v1/instances/", (200, real("vast/instances-v1.doc")),
                   (200, {"success": True, "instances": [], "next_token": None}))
    [inst] = v.list()
    assert inst.private_ip is None
    assert inst.port_map == {8888: 8888, 22: 20000}


def _pod(**changes) -> dict:
    pod = json.loads((REAL / "runpod" / "pod.doc-v2.9.0.json").read_text())
    pod = copy.deepcopy(pod)
    pod.update(changes)
    return pod


@pytest.mark.parametrize("changes,private_ip", [
    ({}, None),                                                            # a plain pod
    ({"cluster": {"id": "cluster_abc123", "rank": 1, "ip": "10.65.0.3"}}, "10.65.0.3"),
    ({"globalNetworking": {"enabled": True, "ip": "10.65.1.42"}}, "10.65.1.42"),
    ({"cluster": {"id": "cluster_abc123", "rank": None}}, None),            # no address assigned yet
])
def test_runpod_pods_map_ports_and_carry_a_private_address_where_they_have_one(fake_api, changes, private_ip):
    rp = runpod.connect("KEY", fake_api.url)
    runtime = {"uptime": 60, "ports": [{"private": 22, "public": 34446, "type": "tcp", "ip": "195.26.233.3"},
                                       {"private": 29500, "public": 41000, "type": "tcp", "ip": "195.26.233.3"},
                                       {"private": 8888, "public": None, "type": "http", "ip": None}]}
    fake_api.route("GET", "/v2/pods/7h9k2m4n6p", (200, _pod(runtime=runtime, **changes)))
    inst = rp.get("7h9k2m4n6p")
    assert inst.private_ip == private_ip
    assert inst.port_map == {22: 34446, 29500: 41000}


def test_a_launch_asks_vast_and_runpod_to_expose_the_cluster_ports(fake_api):
    from gpubench.lifecycle.cluster_provision import CLUSTER_PORTS
    from gpubench.providers.common import LaunchSpec, Offer, SshKeyRef

    v = vast.connect("KEY", fake_api.url)
    fake_api.route("PUT", "/api/v0/asks/11684738/", (200, real("vast/create.doc")))
    v.launch(Offer("vast", "11684738", "RTX 4090", 1, 0.25),
             LaunchSpec(gpus=1, name="c-0", ssh_key=SshKeyRef("ssh-ed25519 AAAA k"), ports=CLUSTER_PORTS))
    env = fake_api.calls("PUT", "/api/v0/asks/11684738/")[0]["json"]["env"]
    assert set(env) == {f"-p {p}:{p}" for p in CLUSTER_PORTS}
