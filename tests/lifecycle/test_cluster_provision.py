"""Renting a cluster: where it can go (placements), all or nothing against the mock
cloud in loopback mode (a member that never boots is replaced; when it cannot be,
every member is terminated and confirmed gone; Ctrl-C the same), and a cluster whose
members disagree refused."""

from __future__ import annotations

import dataclasses
import json

import pytest

from gpubench.lifecycle.cluster_placement import (ClusterRequest, PlacementError, choose_placement,
                                                  connect_and_place, member_name, placements)
from gpubench.lifecycle.cluster_provision import CLUSTER_PORTS, ClusterError, network_line, provision_cluster
from gpubench.store.ledger import Ledger
from gpubench.lifecycle.provision import Deadlines, ProvisionRequest
from gpubench.providers.common import Offer
from gpubench.remote.cluster import ClusterHosts, MixedClusterError, node_from_entry
from gpubench.remote.errors import BadTargetError
from tests.helpers import mock_cloud

PROVIDERS = ["lambda", "vast", "runpod"]
QUICK = Deadlines(running_s=1.0, ssh_s=10.0, terminate_s=20.0)


def vast(oid: str, price: float, region: str, gpu: str = "H100 SXM", count: int = 8) -> Offer:
    return Offer("vast", oid, gpu, count, price, region=region, available=1,
                 instance_type=f"{count}x {gpu}")


# -- where a cluster can go (no machine rented) ----------------------------------

def test_vast_counts_machines_per_region_and_names_its_reason():
    offers = [vast("1", 20.0, "Texas, US"), vast("2", 21.0, "Texas, US"), vast("3", 19.0, "Oslo, NO")]
    place = choose_placement("vast", offers, 2)
    assert (place.region, place.machines, [o.offer_id for o in place.offers]) == ("Texas, US", 2, ["1", "2"])
    assert choose_placement("vast", offers, 1).region == "Oslo, NO"       # the cheapest fits one
    with pytest.raises(PlacementError) as e:
        choose_placement("vast", offers, 4)
    assert str(e.value) == "vast has 2 machines of 8x H100 SXM in one region, asked for 4"


def test_lambda_and_runpod_do_not_say_how_many_so_the_launch_decides():
    lam = [Offer("lambda", "gpu_8x_h100@us-east-1", "H100 SXM", 8, 24.0, region="us-east-1", available=1),
           Offer("lambda", "gpu_8x_h100@", "H100 SXM", 8, 24.0, region="", available=0)]
    place = choose_placement("lambda", lam, 16)
    assert (place.region, place.machines) == ("us-east-1", None)
    pod = Offer("runpod", "NVIDIA H100", "H100 SXM", 8, 20.0, region="US-KS-2,EU-RO-1", available=3,
                extra={"data_centers": ["US-KS-2", "EU-RO-1"]})
    assert [p.region for p in placements("runpod", [pod])] == ["US-KS-2", "EU-RO-1"]


def test_bad_requests_are_refused_before_anything_is_rented():
    with pytest.raises(Exception, match="--nodes must be at least 1"):
        ClusterRequest(ProvisionRequest("vast", 1, name="c"), 0).validate()
    with pytest.raises(Exception, match="--name"):
        ClusterRequest(ProvisionRequest("vast", 1, name="x" * 40), 12).validate()
    req = ClusterRequest(ProvisionRequest("vast", 1), 2).validate()
    assert req.machine.name.startswith("vast-")       # a cluster without a name gets one


def _entry(ledger, name, index, gpu="H100 SXM", count=8, **columns):
    key = ledger.path.parent / "id_test"
    key.write_text("not read here\n")
    row = ledger.begin(member_name(name, index), "vast", f"gpubench-{name}-{index}", cluster=name,
                       node_index=index, gpu_name=gpu, gpu_count=count, key_path=str(key), **columns)
    return ledger.update(row.row_id, status="running", instance_id=f"i{index}", ssh_host="203.0.113.9",
                         ssh_port=40000 + index, ssh_user="root")


def test_members_that_disagree_are_refused_in_one_line(tmp_path):
    with Ledger(tmp_path / "l.db") as ledger:
        a = _entry(ledger, "c", 0)
        b = _entry(ledger, "c", 1, count=4)
    hosts = ClusterHosts("c", (node_from_entry(a), node_from_entry(b)))
    with pytest.raises(MixedClusterError) as e:
        hosts.check_uniform()
    assert str(e.value) == ("cluster 'c': its members differ in GPUs (node 0: 8x H100 SXM, node 1: 4x "
                            "H100 SXM); its members must have the same GPU type and count")
    assert isinstance(e.value, BadTargetError)
    same = ClusterHosts("c", (node_from_entry(a), node_from_entry(a)))
    assert same.check_uniform() is same
    with pytest.raises(BadTargetError, match="has no member 5"):
        hosts.member(5)


def test_the_network_line_says_plainly_when_it_is_the_public_internet(tmp_path):
    with Ledger(tmp_path / "l.db") as ledger:
        nodes = [node_from_entry(_entry(ledger, "p", i, port_map=json.dumps({"22": 4000 + i, "29500": 5000 + i})))
                 for i in range(2)]
        private = [node_from_entry(_entry(ledger, "q", i, private_ip=f"10.0.0.{i + 1}")) for i in range(2)]
    line = network_line("vast", ClusterHosts("p", tuple(nodes)))
    assert "gives no private network" in line and "the link between nodes is the public internet" in line
    assert "rendezvous port 29500 is mapped to 5000" in line
    assert network_line("lambda", ClusterHosts("q", tuple(private))) == \
        "network: lambda's private network (10.0.0.1, 10.0.0.2)"


# -- against the mock cloud ------------------------------------------------------

@pytest.fixture
def cloud(tmp_path, monkeypatch):
    yield from mock_cloud(tmp_path, monkeypatch)


def second_vast_machine(cloud, count: int) -> None:
    """The mock lists one Vast.ai machine per GPU type and place; a cluster needs two in
    one place, so a second host joins the cheapest one's."""
    offers = cloud.engine.vast_offers
    first = min((o for o in offers.values() if o.count == count), key=lambda o: o.dph)
    offers[first.id + 1000] = dataclasses.replace(first, id=first.id + 1000, machine_id=first.machine_id + 1000)


def rent(provider: str, nodes: int = 2, attempts: int = 3, progress=lambda phase, detail: None,
         name: str = "c"):
    req = ClusterRequest(ProvisionRequest(provider, 1, name=name, attempts=attempts, deadlines=QUICK), nodes)
    prov, place = connect_and_place(req)
    with Ledger() as ledger:
        return provision_cluster(prov, req, place, ledger, progress)


def fault_on_member(cloud, provider: str, index: int, fault: str, *, clear_after: bool):
    """A progress hook that sets `fault` just before member `index` is launched (the
    mock reads it at launch), and clears it once that launch answered."""
    state = {"launches": 0}

    def progress(phase, detail):
        if detail.startswith(f"c:{index} "):
            if phase == "launch":
                state["launches"] += 1
                if state["launches"] == 1:
                    cloud.set_faults(f"{provider}:{fault}")
            elif phase == "created" and clear_after:
                cloud.set_faults("")
    return progress


def assert_all_gone(cloud, name="c"):
    assert cloud.engine.store.instances() == []
    with Ledger() as ledger:
        rows = ledger.cluster_members(name, include_done=True)
        assert rows and all(r.status == "terminated" and r.terminated_confirmed_at for r in rows)
        assert ledger.cluster_members(name) == []


# RunPod rents a cluster as its own (one create), which cannot replace one member:
# test_cluster_native.py has what happens there instead.
@pytest.mark.slow
@pytest.mark.parametrize("provider", [p for p in PROVIDERS if p != "runpod"])
def test_a_member_that_never_boots_is_replaced_from_the_same_placement(cloud, provider):
    second_vast_machine(cloud, 1)
    progress = fault_on_member(cloud, provider, 1, "never-boots", clear_after=True)
    outcome = rent(provider, progress=progress)
    assert [(m.name, m.node_index, m.status) for m in outcome.members] == [("c-0", 0, "ready"), ("c-1", 1, "ready")]
    assert len(outcome.replaced) == 1 and outcome.replaced[0].startswith("node 1: ")
    assert {m.region for m in outcome.members} == {outcome.placement.region}
    with Ledger() as ledger:
        rows = ledger.cluster_members("c", include_done=True)
    # the one that never booted: terminated, confirmed, and still in the ledger as member 1
    assert [(r.node_index, r.status) for r in rows] == [(0, "ready"), (1, "terminated"), (1, "ready")]
    assert len(cloud.engine.store.instances()) == 2
    if provider == "vast":     # the cluster's ports were asked for and their mapping recorded
        mapped = json.loads(outcome.members[0].port_map)
        assert {str(p) for p in CLUSTER_PORTS} <= set(mapped)
    if provider == "lambda":
        assert all(m.private_ip for m in outcome.members)


@pytest.mark.slow
def test_when_a_member_cannot_be_had_every_member_is_terminated_and_confirmed_gone(cloud):
    progress = fault_on_member(cloud, "lambda", 1, "never-boots", clear_after=False)
    with pytest.raises(ClusterError) as e:
        rent("lambda", attempts=2, progress=progress)
    line = str(e.value)
    assert "\n" not in line and line.startswith("cluster c on lambda not completed: ")
    assert "not running after 1 s" in line and "every member was terminated and confirmed gone" in line
    assert_all_gone(cloud)


@pytest.mark.slow
def test_too_few_machines_at_launch_is_the_providers_own_reason(cloud):
    """Lambda does not say how many machines a region has: the third launch is refused
    with Lambda's capacity error, and the two rented are taken down."""
    with pytest.raises(ClusterError) as e:
        rent("lambda", nodes=3)
    assert "insufficient" in str(e.value).lower() or "capacity" in str(e.value).lower()
    assert_all_gone(cloud)


@pytest.mark.slow
def test_ctrl_c_while_provisioning_takes_every_member_down(cloud):
    def progress(phase, detail):
        if phase == "created" and detail.startswith("c:1 "):
            raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        rent("runpod", progress=progress)
    assert_all_gone(cloud)
