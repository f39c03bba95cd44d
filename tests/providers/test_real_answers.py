"""The adapters against answers the real services gave (tests/fixtures/real/README.md):
every value gpubench relies on comes out of fields the providers actually send, not
out of anything only the mock cloud adds."""

from __future__ import annotations

import pytest

from gpubench.providers import lambda_cloud, runpod, vast
from gpubench.providers.common import InstanceState, LaunchSpec, Offer, SshKeyRef


def real(name: str) -> str:
    return f"real/{name}.json"


# -- Lambda ------------------------------------------------------------------------------

@pytest.fixture
def lam(fake_api):
    return lambda_cloud.connect("KEY", fake_api.url)


def test_lambda_offers_from_a_live_catalog(fake_api, lam):
    fake_api.route("GET", "/api/v1/instance-types", (200, real("lambda/instance-types.live-2026-04-11")))
    [offer] = lam.offers(gpus=1)
    assert (offer.offer_id, offer.gpu_name, offer.gpu_count, offer.price_per_hour, offer.region,
            offer.disk_gb, offer.available) == \
        ("gpu_1x_gh200@us-east-3", "GH200", 1, 2.29, "us-east-3", 4096, 1)


def test_lambda_offers_from_the_documented_catalog(fake_api, lam):
    fake_api.route("GET", "/api/v1/instance-types", (200, real("lambda/instance-types.doc-1.10.0")))
    [offer] = lam.offers()
    assert (offer.instance_type, offer.gpu_count, offer.price_per_hour, offer.region) == \
        ("gpu_8x_example", 8, 15.92, "us-west-1")


@pytest.mark.parametrize("answer,expected", [
    ("instances.doc-1.10.0", ("198.51.100.2", "H100 SXM", 8, 35.92, "us-west-1", "gpu_8x_h100_sxm5gdr")),
    # the live listing leaves `specs` and `gpu_description` out: the type's name says both
    ("instances.live-2026-04-11", ("104.171.203.123", "A100 SXM", 1, 1.99, "us-east-1", "gpu_1x_a100_sxm4")),
])
def test_lambda_instances_reach_ssh_as_ubuntu_on_22(fake_api, lam, answer, expected):
    fake_api.route("GET", "/api/v1/instances", (200, real(f"lambda/{answer}")))
    [inst] = lam.list()
    assert inst.status is InstanceState.RUNNING and (inst.ssh_port, inst.ssh_user) == (22, "ubuntu")
    assert (inst.ssh_host, inst.gpu_name, inst.gpu_count, inst.price_per_hour, inst.region,
            inst.instance_type) == expected


def test_lambda_key_and_launch(fake_api, lam):
    fake_api.route("GET", "/api/v1/ssh-keys", (200, real("lambda/ssh-keys.doc-1.10.0")))
    fake_api.route("POST", "/api/v1/instance-operations/launch", (200, real("lambda/launch.doc-1.10.0")))
    public = ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAICN+lJwsONkwrdsSnQsu1ydUkIuIg5oOC+Eslvmtt60T "
              "me@laptop")
    ref = lam.ensure_ssh_key(public, "gpubench")
    assert (ref.name, ref.key_id) == ("my-public-key", "ddf9a910ceb744a0bb95242cbba6cb50")
    inst = lam.launch(Offer("lambda", "gpu_8x_example@us-west-1", "X", 8, 15.92),
                      LaunchSpec(gpus=8, name="r", ssh_key=ref))
    assert inst.instance_id == "0920582c7ff041399e34823a0be62549"


# -- Vast.ai -----------------------------------------------------------------------------

@pytest.fixture
def v(fake_api):
    return vast.connect("KEY", fake_api.url)


@pytest.mark.parametrize("answer,expected", [
    ("bundles.live-2024-07", ("11684738", "RTX 4090", 0.2467, "Guangxi, CN")),
    ("bundles.live-2022-11", ("5006600", "RTX 3090", 0.3228, "Norway")),
])
def test_vast_offers_from_live_searches(fake_api, v, answer, expected):
    fake_api.route("POST", "/api/v0/bundles/", (200, real(f"vast/{answer}")))
    [offer] = v.offers(gpus=1)
    assert (offer.offer_id, offer.gpu_name, round(offer.price_per_hour, 4), offer.region) == expected
    assert offer.gpu_count == 1 and offer.disk_gb > 0


def test_vast_list_reaches_the_direct_ssh_port(fake_api, v):
    fake_api.route("GET", "/api/v1/instances/", (200, real("vast/instances-v1.doc")),
                   (200, {"success": True, "instances": [], "next_token": None}))
    [inst] = v.list()
    assert (inst.instance_id, inst.status, inst.ssh_host, inst.ssh_port, inst.ssh_user) == \
        ("312", InstanceState.RUNNING, "192.0.2.45", 20000, "root")
    assert (inst.name, inst.gpu_name, inst.gpu_count, inst.price_per_hour) == \
        ("ML Training Job 2025", "RTX 4090", 1, 0.8021)
    assert fake_api.calls("GET", "/api/v1/instances/")[1]["query"]["after_token"] == \
        ["eyJ2YWx1ZXMiOiB7ImlkIjogMTIzfX0="]


def test_vast_instance_without_a_mapped_ssh_port_is_not_yet_reachable(fake_api, v):
    # the documented single-instance example lists `ports` as [8080, 8081]: no 22/tcp mapping
    fake_api.route("GET", "/api/v0/instances/883/", (200, real("vast/instance.doc")))
    inst = v.get("883")
    assert inst.raw_status == "running" and inst.status is InstanceState.PENDING and inst.ssh_host is None
    assert inst.extra["proxy"] == ("ssh2281.vast.ai", 10882)


def test_vast_key_and_launch(fake_api, v):
    fake_api.route("GET", "/api/v0/ssh/", (200, []))
    fake_api.route("POST", "/api/v0/ssh/", (200, real("vast/ssh-key-add.doc")))
    fake_api.route("PUT", "/api/v0/asks/11684738/", (200, real("vast/create.doc")))
    ref = v.ensure_ssh_key("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMine gpubench", "gpubench")
    assert ref.key_id == "123"
    inst = v.launch(Offer("vast", "11684738", "RTX 4090", 1, 0.25), LaunchSpec(gpus=1, name="r", ssh_key=ref))
    assert inst.instance_id == "1234568"


# -- RunPod ------------------------------------------------------------------------------

@pytest.fixture
def rp(fake_api):
    return runpod.connect("KEY", fake_api.url)


def test_runpod_offers_from_the_documented_catalog(fake_api, rp):
    fake_api.route("GET", "/v2/catalog/gpus", (200, real("runpod/gpus.doc-v2.9.0")))
    [offer] = rp.offers(gpus=1)
    assert (offer.offer_id, offer.gpu_name, offer.price_per_hour, offer.available, offer.region) == \
        ("NVIDIA GeForce RTX 4090", "RTX 4090", 0.44, 3, "US-KS-2")


@pytest.mark.parametrize("path,answer", [("/v2/pods", "pods.doc-v2.9.0"), ("/v2/pods/7h9k2m4n6p", "pod.doc-v2.9.0")])
def test_runpod_pods_reach_direct_ssh(fake_api, rp, path, answer):
    fake_api.route("GET", path, (200, real(f"runpod/{answer}")))
    inst = rp.list()[0] if path == "/v2/pods" else rp.get("7h9k2m4n6p")
    assert (inst.instance_id, inst.status, inst.ssh_host, inst.ssh_port, inst.ssh_user) == \
        ("7h9k2m4n6p", InstanceState.RUNNING, "195.26.233.3", 34446, "root")
    assert (inst.gpu_name, inst.gpu_count, inst.price_per_hour, inst.region, inst.created_at) == \
        ("RTX 4090", 1, 0.44, "US-KS-2", "2026-06-01T12:00:00Z")


def test_runpod_key_and_launch(fake_api, rp):
    fake_api.route("GET", "/v2/account/ssh-keys", (200, real("runpod/ssh-keys.doc-v2.9.0")))
    fake_api.route("POST", "/v2/pods", (201, real("runpod/pod-create.doc-v2.9.0")))
    public = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAILXGDN/SclOozk1xsDztpmhGiKkkrfQB9SKoO8dSIQQZ gpubench"
    assert rp.ensure_ssh_key(public, "gpubench") == SshKeyRef(public)
    assert not fake_api.calls("PUT", "/v2/account/ssh-keys")
    inst = rp.launch(Offer("runpod", "NVIDIA GeForce RTX 4090", "RTX 4090", 1, 0.44),
                     LaunchSpec(gpus=1, name="r", ssh_key=SshKeyRef(public)))
    assert (inst.instance_id, inst.status, inst.ssh_host) == ("7h9k2m4n6p", InstanceState.PENDING, None)
