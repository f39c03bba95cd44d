"""The RunPod adapter's Instant Clusters (NativeClusters) against the mock: one create for
every member, the members head first with their private address, delete, and the
provider's refusals as typed errors. Lambda and Vast.ai have no native clusters."""

from __future__ import annotations

import subprocess

import pytest

from gpubench.mock import MockCloud
from gpubench.providers import registry
from gpubench.providers.common import (CapacityError, InstanceState, LaunchSpec, NativeClusters, NotFoundError,
                                       native_clusters)
from tests.mock.helpers import wait_for


@pytest.fixture
def runpod(tmp_path, monkeypatch):
    with MockCloud.start(state_dir=tmp_path / "mock", boot_delay=0.0) as cloud:
        for k, v in cloud.env().items():
            monkeypatch.setenv(k, v)
        yield registry.get("runpod")


@pytest.fixture
def spec(tmp_path, runpod) -> LaunchSpec:
    key = tmp_path / "k"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True, timeout=30)
    ref = runpod.ensure_ssh_key(key.with_suffix(".pub").read_text().strip(), "gpubench")
    return LaunchSpec(gpus=1, name="c", ssh_key=ref, ports=(29500,))


def test_only_runpod_has_native_clusters(runpod, monkeypatch):
    assert isinstance(runpod, NativeClusters) and native_clusters(runpod) is runpod
    assert native_clusters(registry.get("lambda")) is None
    assert native_clusters(registry.get("vast")) is None


@pytest.mark.slow
def test_create_members_and_delete(runpod, spec):
    offer = next(o for o in runpod.offers(gpus=1) if o.available)
    created = runpod.create_cluster(offer, spec, 2)
    assert created.cluster_id and len(created.instances) == 2
    head, member = created.instances
    assert [i.name for i in created.instances] == ["gpubench-c-0", "gpubench-c-1"]
    assert [i.extra["rank"] for i in created.instances] == [0, 1]
    assert {i.extra["cluster_id"] for i in created.instances} == {created.cluster_id}
    assert head.private_ip == member.private_ip == "127.0.0.1"       # loopback mode
    assert head.region == member.region and head.gpu_count == 1
    # the plain list shows the members (the API leaves them out unless asked)
    assert {i.instance_id for i in runpod.list()} == {head.instance_id, member.instance_id}
    def all_running():
        found = runpod.cluster_instances(created.cluster_id)
        return found if all(i.status is InstanceState.RUNNING and i.ssh_host for i in found) else None
    running = wait_for(all_running)
    assert len(running) == 2 and all(i.port_map.get(22) for i in running)
    assert 29500 not in running[0].port_map         # peers use the private network, not public ports

    runpod.delete_cluster(created.cluster_id)
    for inst in created.instances:
        with pytest.raises(NotFoundError):
            runpod.get(inst.instance_id)
    with pytest.raises(NotFoundError):
        runpod.cluster_instances(created.cluster_id)


@pytest.mark.slow
def test_terminating_one_member_takes_its_cluster(runpod, spec):
    """RunPod refuses to terminate a member alone (409): it goes with its cluster."""
    offer = next(o for o in runpod.offers(gpus=1) if o.available)
    created = runpod.create_cluster(offer, spec, 2)
    runpod.terminate(created.instances[1].instance_id)
    assert runpod.list() == []


def test_a_cluster_that_cannot_be_placed_is_a_capacity_error_in_the_providers_words(runpod, spec):
    offer = next(o for o in runpod.offers(gpus=1) if o.available)
    with pytest.raises(CapacityError) as e:
        runpod.create_cluster(offer, spec, 200)
    assert "no longer any instances available" in e.value.message
    assert runpod.list() == []
