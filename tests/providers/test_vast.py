"""Vast.ai adapter against saved answers shaped after vast.openapi.yaml and the CLI's calls."""

import pytest

from gpubench.providers import vast
from gpubench.providers.common import (AuthError, CapacityError, InstanceState, LaunchSpec, NotFoundError,
                                       SshKeyRef)


@pytest.fixture
def v(fake_api):
    return vast.connect("KEY", fake_api.url)


def test_offers_only_direct_ssh_and_query_shape(fake_api, v):
    fake_api.route("POST", "/api/v0/bundles/", (200, "vast/bundles.json"))
    offers = v.offers(gpus=1)
    ids = {o.offer_id for o in offers}
    assert "5004" not in ids          # no direct SSH port
    assert "5003" not in ids          # 2 GPUs
    assert {o.gpu_name for o in offers} == {"RTX 4090", "H100 PCIe", "A100 SXM"}
    query = fake_api.calls("POST", "/api/v0/bundles/")[0]["json"]
    assert query["direct_port_count"] == {"gte": 1} and query["num_gpus"] == {"eq": 1}
    assert query["type"] == "on-demand"
    spot = v.offers(interruptible=True)
    assert all(o.interruptible for o in spot) and fake_api.requests[-1]["json"]["type"] == "bid"
    assert next(o for o in spot if o.offer_id == "5001").price_per_hour == 0.14


def test_launch_always_sends_a_sized_disk(fake_api, v):
    fake_api.route("PUT", "/api/v0/asks/5002/", (200, "vast/create.json"))
    from gpubench.providers.common import Offer

    inst = v.launch(Offer("vast", "5002", "H100 PCIe", 1, 1.89),
                    LaunchSpec(gpus=1, disk_gb=250, name="demo", image="img:1"))
    body = fake_api.calls("PUT", "/api/v0/asks/5002/")[0]["json"]
    assert body["disk"] == 250.0 and body["label"] == "gpubench-demo" and body["image"] == "img:1"
    assert "ssh_direc" in body["runtype"] and body["price"] is None
    assert inst.instance_id == "7001"


def test_offer_gone_is_capacity(fake_api, v):
    fake_api.route("PUT", "/api/v0/asks/5001/", (404, "vast/error_no_such_ask.json"))
    from gpubench.providers.common import Offer

    with pytest.raises(CapacityError, match="no_such_ask"):
        v.launch(Offer("vast", "5001", "RTX 4090", 1, 0.35), LaunchSpec(gpus=1, name="x"))


def test_bad_key(fake_api, v):
    fake_api.route("POST", "/api/v0/bundles/", (404, {"msg": "Invalid user key"}))
    with pytest.raises(AuthError, match="Invalid user key"):
        v.offers()
    fake_api.route("GET", "/api/v1/instances/", (401, "vast/error_auth.json"))
    with pytest.raises(AuthError, match="Invalid user key"):
        v.list()


def test_get_maps_direct_ssh(fake_api, v):
    fake_api.route("GET", "/api/v0/instances/7001/", (200, "vast/instance.json"))
    inst = v.get("7001")
    assert (inst.status, inst.ssh_host, inst.ssh_port, inst.ssh_user) == \
        (InstanceState.RUNNING, "203.0.113.9", 40022, "root")
    assert inst.name == "gpubench-demo" and inst.gpu_name == "H100 PCIe"
    fake_api.route("GET", "/api/v0/instances/7009/", (200, "vast/instance_gone.json"))
    with pytest.raises(NotFoundError):
        v.get("7009")


def test_list_follows_next_token(fake_api, v):
    fake_api.route("GET", "/api/v1/instances/", (200, "vast/instances_v1_page1.json"),
                   (200, "vast/instances_v1_page2.json"))
    listed = v.list()
    assert [i.instance_id for i in listed] == ["7001", "7002"]
    assert listed[1].status is InstanceState.PENDING
    assert fake_api.calls("GET", "/api/v1/instances/")[1]["query"]["after_token"] == ["tok2"]


@pytest.mark.parametrize("status,state", [("exited", InstanceState.FAILED), ("offline", InstanceState.FAILED),
                                          ("loading", InstanceState.PENDING), (None, InstanceState.PENDING)])
def test_poll_trap_statuses(status, state):
    from tests.providers.conftest import fixture

    raw = dict(fixture("vast/instance.json")["instances"], actual_status=status)
    assert vast.Vast(None)._instance(raw).status is state


def test_ssh_key_added_once(fake_api, v):
    fake_api.route("GET", "/api/v0/ssh/", (200, "vast/ssh_keys.json"))
    fake_api.route("POST", "/api/v0/ssh/", (200, "vast/ssh_key_created.json"))
    assert v.ensure_ssh_key("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOther x", "gpubench") == \
        SshKeyRef("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOther x", key_id="11")
    assert not fake_api.calls("POST", "/api/v0/ssh/")
    assert v.ensure_ssh_key("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMine gpubench", "gpubench").key_id == "12"
    assert fake_api.calls("POST", "/api/v0/ssh/")[0]["json"] == {
        "ssh_key": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMine gpubench"}


def test_terminate(fake_api, v):
    fake_api.route("DELETE", "/api/v0/instances/7001/", (200, {"success": True}))
    v.terminate("7001")
    assert len(fake_api.calls("DELETE", "/api/v0/instances/7001/")) == 1
