"""RunPod REST v2 adapter against saved answers shaped after runpod-v2.openapi.json."""

import pytest

from gpubench.providers import runpod
from gpubench.providers.common import (AuthError, CapacityError, InstanceState, InvalidRequestError,
                                       LaunchSpec, NotFoundError, Offer, SshKeyRef)


@pytest.fixture
def rp(fake_api):
    return runpod.connect("KEY", fake_api.url + "/v2")   # the documented base with /v2 works too


def test_catalog_to_offers(fake_api, rp):
    fake_api.route("GET", "/v2/catalog/gpus", (200, "runpod/catalog_gpus.json"))
    offers = rp.offers(gpus=2)
    q = fake_api.calls("GET", "/v2/catalog/gpus")[0]["query"]
    assert q["include"] == ["AVAILABILITY"] and q["product"] == ["POD"] and q["count"] == ["2"]
    by_name = {o.gpu_name: o for o in offers}
    assert "A100 PCIe" not in by_name            # maxCount 1 < 2
    assert by_name["H100 PCIe"].price_per_hour == pytest.approx(4.78)   # per GPU x count
    assert by_name["H100 SXM"].available == 0
    assert rp.offers(interruptible=True) == []


def test_launch_body_has_ssh_port_startssh_and_count(fake_api, rp):
    fake_api.route("POST", "/v2/pods", (201, "runpod/pod_provisioning.json"))
    inst = rp.launch(Offer("runpod", "NVIDIA H100 PCIe", "H100 PCIe", 1, 2.39),
                     LaunchSpec(gpus=1, disk_gb=80, name="demo", ssh_key=SshKeyRef("ssh-ed25519 AAAA x")))
    body = fake_api.calls("POST", "/v2/pods")[0]["json"]
    assert body["env"] == {"PUBLIC_KEY": "ssh-ed25519 AAAA x"}
    assert body["gpu"] == {"id": "NVIDIA H100 PCIe", "count": 1}
    assert "22/tcp" in body["ports"] and body["startSsh"] is True and body["disk"] == 80
    assert body["name"] == "gpubench-demo" and "interruptible" not in body
    assert inst.status is InstanceState.PENDING and inst.ssh_host is None


def test_400_on_create_is_capacity_422_is_not(fake_api, rp):
    offer = Offer("runpod", "NVIDIA H100 PCIe", "H100 PCIe", 1, 2.39)
    fake_api.route("POST", "/v2/pods", (400, "runpod/error_capacity.json"))
    with pytest.raises(CapacityError, match="no longer any instances"):
        rp.launch(offer, LaunchSpec(gpus=1, name="x"))
    fake_api.route("POST", "/v2/pods", (422, "runpod/error_422.json"))
    with pytest.raises(InvalidRequestError, match="additional properties 'bogus'"):
        rp.launch(offer, LaunchSpec(gpus=1, name="x"))


def test_states_and_direct_ssh(fake_api, rp):
    fake_api.route("GET", "/v2/pods/7h9k2m4n6p", (200, "runpod/pod_running.json"))
    fake_api.route("GET", "/v2/pods/err", (200, "runpod/pod_error.json"))
    fake_api.route("GET", "/v2/pods/gone", (404, "runpod/error_not_found.json"))
    inst = rp.get("7h9k2m4n6p")
    assert (inst.status, inst.ssh_host, inst.ssh_port, inst.ssh_user, inst.price_per_hour) == \
        (InstanceState.RUNNING, "195.26.233.3", 34446, "root", 2.39)
    assert rp.get("err").status is InstanceState.FAILED      # ERROR never becomes RUNNING
    with pytest.raises(NotFoundError, match="pod not found"):
        rp.get("gone")


def test_list_envelope_and_terminate(fake_api, rp):
    fake_api.route("GET", "/v2/pods", (200, "runpod/pods.json"))
    fake_api.route("DELETE", "/v2/pods/7h9k2m4n6p", (204, None))
    assert [p.name for p in rp.list()] == ["gpubench-demo", "notebook"]
    rp.terminate("7h9k2m4n6p")


def test_ssh_keys_read_add_write(fake_api, rp):
    fake_api.route("GET", "/v2/account/ssh-keys", (200, "runpod/ssh_keys.json"))
    fake_api.route("PUT", "/v2/account/ssh-keys", (200, {"keys": []}))
    ref = rp.ensure_ssh_key("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOther again", "gpubench")
    assert ref == SshKeyRef("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOther again")
    assert not fake_api.calls("PUT", "/v2/account/ssh-keys")
    assert rp.ensure_ssh_key("ssh-ed25519 AAAAMine gpubench", "gpubench").public_key == \
        "ssh-ed25519 AAAAMine gpubench"
    put = fake_api.calls("PUT", "/v2/account/ssh-keys")[0]["json"]
    assert put == {"keys": ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOther me@laptop",
                            "ssh-ed25519 AAAAMine gpubench"]}


def test_bad_key(fake_api, rp):
    fake_api.route("GET", "/v2/catalog/gpus", (401, "runpod/error_auth.json"))
    with pytest.raises(AuthError, match="missing bearer token"):
        rp.offers()
