"""A cluster rented as the provider's own (RunPod Instant Clusters) against the mock cloud
in loopback mode: one create for every member, one row per member written before it and
filled in after, the provider's cluster id kept, the private network recorded; a member
that never boots deletes the whole cluster (it cannot be replaced alone); `down` of the
cluster, or of one member, deletes it and confirms every member gone."""

from __future__ import annotations

import pytest

from gpubench.lifecycle.cluster_placement import PlacementError
from gpubench.lifecycle.cluster_provision import ClusterError
from gpubench.lifecycle.down import DownRequest, plan_down, take_down
from gpubench.store.ledger import Ledger
from gpubench.remote.cluster import PRIVATE
from tests.lifecycle.test_cluster_provision import assert_all_gone, cloud, rent  # noqa: F401 (fixture)


@pytest.mark.slow
def test_two_nodes_are_one_provider_cluster_on_its_private_network(cloud):
    outcome = rent("runpod")
    members = outcome.members
    assert [(m.name, m.node_index, m.status) for m in members] == [("c-0", 0, "ready"), ("c-1", 1, "ready")]
    pods = {i.id: i for i in cloud.engine.store.instances("runpod")}
    assert {m.instance_id for m in members} == set(pods)
    cluster_ids = {m.provider_cluster_id for m in members}
    assert len(cluster_ids) == 1 and None not in cluster_ids
    assert {p.extra["cluster"]["id"] for p in pods.values()} == cluster_ids     # the mock's own cluster
    assert all(m.private_ip == "127.0.0.1" for m in members)                   # loopback mode
    assert outcome.hosts.network == PRIVATE and outcome.replaced == []
    assert {m.region for m in members} == {outcome.placement.region}

    with Ledger() as ledger:
        report = take_down(ledger, plan_down(ledger, DownRequest(name="c")))
    assert report.all_gone and len(report.results) == 2
    assert_all_gone(cloud)


@pytest.mark.slow
def test_a_member_that_never_boots_deletes_the_whole_cluster(cloud):
    """Member 1 never boots: the provider cannot replace it alone, so the cluster goes."""
    said = []

    def progress(phase, detail):
        said.append(f"{phase}: {detail}")
        if phase == "launch":
            cloud.set_faults("runpod:never-boots")        # read as each member pod is created
        elif phase == "created" and detail.startswith("c:0 "):
            cloud.set_faults("")
            pod = detail.rsplit(" ", 1)[1]
            cloud.engine.mutate("runpod", pod, lambda inst: setattr(inst, "never_boots", False))

    with pytest.raises(ClusterError) as e:
        rent("runpod", progress=progress)
    line = str(e.value)
    assert "\n" not in line and line.startswith("cluster c on runpod not completed: node 1 (")
    assert "not running after 1 s" in line and "cannot replace one member" in line
    assert line.endswith("every member was terminated and confirmed gone")
    assert any("deleting runpod cluster" in s for s in said)
    assert_all_gone(cloud)


@pytest.mark.slow
def test_a_cluster_the_provider_cannot_place_is_refused_in_its_words_and_leaves_no_row(cloud):
    def progress(phase, detail):
        if phase == "launch":
            cloud.set_faults("runpod:no-capacity")

    with pytest.raises(PlacementError) as e:
        rent("runpod", progress=progress)
    assert str(e.value).startswith("runpod cannot place 2 machines of 1x ")
    assert "There are no longer any instances available" in str(e.value)
    with Ledger() as ledger:
        assert ledger.cluster_members("c", include_done=True) == []
    assert cloud.engine.store.instances() == []


@pytest.mark.slow
def test_down_of_one_member_takes_the_whole_cluster(cloud):
    rent("runpod")
    warned = []
    with Ledger() as ledger:
        plan = plan_down(ledger, DownRequest(name="c-1"), warn=warned.append)
        assert [t.name for t in plan.targets] == ["c-0", "c-1"]
        assert "takes down only as a whole" in warned[0]
        assert take_down(ledger, plan).all_gone
    assert_all_gone(cloud)


@pytest.mark.slow
def test_one_node_is_a_plain_pod(cloud):
    """A provider cluster has two pods at least: one node is rented as a pod."""
    outcome = rent("runpod", nodes=1)
    [member] = outcome.members
    assert member.provider_cluster_id is None and member.private_ip is None
    assert "cluster" not in cloud.engine.store.instances("runpod")[0].extra
