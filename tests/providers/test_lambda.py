"""Lambda Cloud v1 adapter against saved answers shaped after lambda.openapi.json."""

import pytest

from gpubench.providers import lambda_cloud
from gpubench.providers.common import (AuthError, CapacityError, InstanceState, InvalidRequestError,
                                       LaunchSpec, NotFoundError, SshKeyRef)

KEY = SshKeyRef("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMine gpubench", name="gpubench")


@pytest.fixture
def lam(fake_api):
    return lambda_cloud.connect("KEY", fake_api.url)


def test_offers_map_types_and_regions(fake_api, lam):
    fake_api.route("GET", "/api/v1/instance-types", (200, "lambda/instance_types.json"))
    offers = lam.offers()
    h100 = [o for o in offers if o.instance_type == "gpu_1x_h100_pcie"]
    assert {o.region for o in h100} == {"us-west-1", "us-east-1"}
    assert h100[0].gpu_name == "H100 PCIe" and h100[0].price_per_hour == 2.49
    sold_out = [o for o in offers if o.instance_type == "gpu_2x_a100"]
    assert sold_out[0].available == 0
    assert {o.gpu_count for o in lam.offers(gpus=8)} == {8}
    assert lam.offers(interruptible=True) == []
    assert fake_api.requests[0]["headers"]["Authorization"] == "Bearer KEY"


def test_launch_sends_one_key_name_and_prefixed_name(fake_api, lam):
    fake_api.route("GET", "/api/v1/instance-types", (200, "lambda/instance_types.json"))
    fake_api.route("POST", "/api/v1/instance-operations/launch", (200, "lambda/launch.json"))
    offer = next(o for o in lam.offers() if o.region == "us-east-1" and o.gpu_count == 1)
    inst = lam.launch(offer, LaunchSpec(gpus=1, name="demo", ssh_key=KEY))
    body = fake_api.calls("POST", "/api/v1/instance-operations/launch")[0]["json"]
    assert body == {"region_name": "us-east-1", "instance_type_name": "gpu_1x_h100_pcie",
                    "ssh_key_names": ["gpubench"], "name": "gpubench-demo",
                    "tags": [{"key": "gpubench", "value": "demo"}]}
    assert inst.instance_id == "0920582c7ff041399e34823a0be62549"
    assert inst.status is InstanceState.PENDING


def test_capacity_error_is_typed(fake_api, lam):
    fake_api.route("POST", "/api/v1/instance-operations/launch", (400, "lambda/error_capacity.json"))
    with pytest.raises(CapacityError) as e:
        lam.launch(_offer(), LaunchSpec(gpus=1, name="x", ssh_key=KEY))
    assert "Not enough capacity" in str(e.value)


def test_bad_key_gives_lambdas_own_words(fake_api, lam):
    fake_api.route("GET", "/api/v1/instance-types", (401, "lambda/error_auth.json"))
    with pytest.raises(AuthError) as e:
        lam.offers()
    assert "API key was invalid, expired, or deleted." in str(e.value)
    assert e.value.code == "global/invalid-api-key"


def test_get_list_terminate(fake_api, lam):
    fake_api.route("GET", r"/api/v1/instances/[0-9a-f]+", (200, "lambda/instance.json"))
    fake_api.route("GET", "/api/v1/instances", (200, "lambda/instances.json"))
    fake_api.route("POST", "/api/v1/instance-operations/terminate", (200, "lambda/terminate.json"))
    inst = lam.get("0920582c7ff041399e34823a0be62549")
    assert (inst.status, inst.ssh_host, inst.ssh_port, inst.ssh_user) == \
        (InstanceState.RUNNING, "198.51.100.2", 22, "ubuntu")
    listed = lam.list()
    assert [i.status for i in listed] == [InstanceState.RUNNING, InstanceState.PENDING,
                                          InstanceState.TERMINATED]
    assert listed[1].ssh_host is None
    lam.terminate(inst.instance_id)
    assert fake_api.calls("POST", "/api/v1/instance-operations/terminate")[0]["json"] == \
        {"instance_ids": [inst.instance_id]}


def test_unknown_instance_is_not_found(fake_api, lam):
    fake_api.route("GET", "/api/v1/instances/nope", (404, "lambda/error_not_found.json"))
    with pytest.raises(NotFoundError):
        lam.get("nope")


def test_ssh_key_reused_by_public_key_else_added(fake_api, lam):
    fake_api.route("GET", "/api/v1/ssh-keys", (200, "lambda/ssh_keys.json"))
    fake_api.route("POST", "/api/v1/ssh-keys", (200, "lambda/ssh_key_created.json"))
    theirs = lam.ensure_ssh_key("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOther other-comment", "gpubench")
    assert (theirs.name, theirs.key_id) == ("laptop", "ddf9a910ceb744a0bb95242cbba6cb50")
    assert not fake_api.calls("POST", "/api/v1/ssh-keys")
    mine = lam.ensure_ssh_key("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMine gpubench", "gpubench")
    assert mine == SshKeyRef("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMine gpubench", name="gpubench",
                             key_id="0920582c7ff041399e34823a0be62549")
    assert fake_api.calls("POST", "/api/v1/ssh-keys")[0]["json"]["name"] == "gpubench"


def test_name_taken_by_another_key_gets_a_stable_suffix(fake_api, lam):
    fake_api.route("GET", "/api/v1/ssh-keys", (200, {"data": [
        {"id": "k1", "name": "gpubench", "public_key": "ssh-ed25519 AAAAOld old"}]}))
    fake_api.route("POST", "/api/v1/ssh-keys", (200, {"data": {"id": "k2", "name": "x", "public_key": "y"}}))
    first = lam.ensure_ssh_key("ssh-ed25519 AAAANew new", "gpubench")
    again = lam.ensure_ssh_key("ssh-ed25519 AAAANew other-comment", "gpubench")
    assert first.name.startswith("gpubench-") and first.name == again.name


def test_launch_without_a_key_name_is_refused_before_sending(fake_api, lam):
    for spec in (LaunchSpec(gpus=1, name="x"), LaunchSpec(gpus=1, name="x", ssh_key=SshKeyRef("ssh-ed25519 A"))):
        with pytest.raises(InvalidRequestError, match="SSH key name"):
            lam.launch(_offer(), spec)
    assert not fake_api.requests


def test_ssh_is_ubuntu_on_port_22_or_the_configured_user(fake_api, monkeypatch):
    fake_api.route("GET", r"/api/v1/instances/[0-9a-f]+", (200, "lambda/instance.json"))
    monkeypatch.setenv("GPUBENCH_LAMBDA_SSH_USER", "me")
    inst = lambda_cloud.connect("KEY", fake_api.url).get("0920582c7ff041399e34823a0be62549")
    assert (inst.ssh_host, inst.ssh_port, inst.ssh_user) == ("198.51.100.2", 22, "me")


def _offer():
    from gpubench.providers.common import Offer

    return Offer("lambda", "gpu_1x_h100_pcie@us-west-1", "H100 PCIe", 1, 2.49, region="us-west-1")
