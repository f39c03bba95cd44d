"""More of the real services' answers (tests/fixtures/real/README.md) replayed through the
adapters, for what a user sees: older documented API versions an adapter must survive,
an odd catalog entry among good ones, the instance details the API documents (tags,
private address, extra ports) and the providers' billing answers."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from gpubench.providers import lambda_cloud, runpod, vast
from gpubench.providers.common import Instance, InstanceState, LaunchSpec, Offer, ProviderError, SshKeyRef

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def real(name: str):
    return json.loads((FIXTURES / "real" / f"{name}.json").read_text())


# -- Lambda ------------------------------------------------------------------------------

@pytest.fixture
def lam(fake_api):
    return lambda_cloud.connect("KEY", fake_api.url)


def test_lambda_1_5_3_catalog_string_prices_and_no_gpu_count(fake_api, lam):
    """API 1.5.3 wrote prices as strings and had no specs.gpus: the count comes from the
    type name's gpu_<N>x_ prefix, never 0."""
    fake_api.route("GET", "/api/v1/instance-types", (200, real("lambda/instance-types.doc-1.5.3")))
    seen = {(o.instance_type, o.gpu_name, o.gpu_count, o.price_per_hour, o.region, o.disk_gb)
            for o in lam.offers()}
    assert seen == {("gpu_1x_a100", "A100", 1, 0.8, "us-tx-1", 512),
                    ("gpu_4x_a6000", "RTX A6000", 4, 1.1, "us-az-1", 512)}
    assert [o.gpu_count for o in lam.offers(gpus=4)] == [4]


@pytest.mark.parametrize("path,answer", [("/api/v1/instances", "instances.doc-1.5.3"),
                                         ("/api/v1/instances/0920582c7ff041399e34823a0be62549",
                                          "instance.doc-1.5.3")])
def test_lambda_1_5_3_instances(fake_api, lam, path, answer):
    fake_api.route("GET", path, (200, real(f"lambda/{answer}")))
    inst = lam.list()[0] if path.endswith("instances") else lam.get("0920582c7ff041399e34823a0be62549")
    assert (inst.status, inst.ssh_host, inst.ssh_port, inst.ssh_user) == \
        (InstanceState.RUNNING, "10.10.10.1", 22, "ubuntu")
    assert (inst.gpu_name, inst.gpu_count, inst.price_per_hour, inst.region, inst.name) == \
        ("A100", 1, 1.1, "us-tx-1", "training-node-1")


def test_lambda_one_odd_catalog_entry_leaves_the_others(fake_api, lam):
    answer = real("lambda/instance-types.live-2026-04-11")
    answer["data"]["gpu_2x_broken"] = {"instance_type": {"name": "gpu_2x_broken", "price_cents_per_hour": "n/a"},
                                       "regions_with_capacity_available": [{"name": "us-east-3"}]}
    answer["data"]["gpu_1x_odd"] = "not an object"
    fake_api.route("GET", "/api/v1/instance-types", (200, answer))
    assert [(o.gpu_name, o.price_per_hour) for o in lam.offers()] == [("GH200", 2.29)]


def test_lambda_documented_instance_details(fake_api, lam):
    """Spec 1.10.0: private_ip, hostname and tags; `terminating` and `preempted` statuses."""
    answer = real("lambda/instances.doc-1.10.0")
    fake_api.route("GET", "/api/v1/instances", (200, answer))
    [inst] = lam.list()
    assert inst.extra["private_ip"] == "10.0.2.100" and inst.tags == {}
    assert not inst.launched_by_gpubench
    answer["data"][0]["tags"] = [{"key": "key1", "value": "value1"}]     # the TagEntry example
    fake_api.route("GET", "/api/v1/instances", (200, answer))
    assert lam.list()[0].tags == {"key1": "value1"}
    for word, state in (("terminating", InstanceState.TERMINATING), ("preempted", InstanceState.FAILED)):
        changed = copy.deepcopy(answer)
        changed["data"][0]["status"] = word
        fake_api.route("GET", "/api/v1/instances", (200, changed))
        assert lam.list()[0].status is state


def test_lambda_tagged_instance_is_gpubench_s_whatever_its_name(fake_api, lam):
    answer = real("lambda/instances.doc-1.10.0")
    answer["data"][0]["tags"] = [{"key": "gpubench", "value": "sweep-3"}]
    fake_api.route("GET", "/api/v1/instances", (200, answer))
    [inst] = lam.list()
    assert inst.launched_by_gpubench and inst.gpubench_name == "sweep-3"


def test_lambda_has_no_billing(lam):
    assert lam.billed_cost("0920582c7ff041399e34823a0be62549") is None


# -- Vast.ai -----------------------------------------------------------------------------

@pytest.fixture
def v(fake_api):
    return vast.connect("KEY", fake_api.url)


def test_vast_one_odd_offer_leaves_the_others(fake_api, v):
    answer = real("vast/bundles.live-2024-07")
    odd = dict(answer["offers"][0], id=1, num_gpus="one")
    answer["offers"].insert(0, odd)
    fake_api.route("POST", "/api/v0/bundles/", (200, answer))
    assert [(o.offer_id, o.gpu_name) for o in v.offers()] == [("11684738", "RTX 4090")]


def test_vast_documented_instance_ports(fake_api, v):
    """The list example maps 8888/tcp and 22/tcp; gpubench reads both."""
    fake_api.route("GET", "/api/v1/instances/", (200, real("vast/instances-v1.doc")),
                   (200, {"success": True, "instances": [], "next_token": None}))
    inst = v.list()[0]
    assert inst.extra["ports"] == {8888: 8888, 22: 20000} and inst.ssh_port == 20000


def test_vast_launch_asks_for_extra_ports_in_env(fake_api, v):
    fake_api.route("PUT", "/api/v0/asks/11684738/", (200, real("vast/create.doc-hello-world")))
    inst = v.launch(Offer("vast", "11684738", "RTX 4090", 1, 0.25),
                    LaunchSpec(gpus=1, name="r", ssh_key=SshKeyRef("ssh-ed25519 A", key_id="1"), ports=(10022, 22)))
    assert inst.instance_id == "12345678"
    assert fake_api.calls("PUT", "/api/v0/asks/11684738/")[0]["json"]["env"] == {"-p 10022:10022": "1"}


CHARGES = {"success": True, "count": 2, "total": 2, "next_token": None, "results": [
    {"start": 1730419200, "end": 1730678400, "type": "instance", "source": "instance-12345678",
     "description": "Instance 12345678 Charges - 4 days", "amount": 38.421, "metadata": {}, "items": []},
    {"start": 1730419200, "end": 1730678400, "type": "instance", "source": "instance-99",
     "description": "Instance 99 Charges", "amount": 1.0, "metadata": {}, "items": []}]}


def test_vast_billed_cost_from_charges(fake_api, v):
    """The shape of `GET /api/v0/charges/` as the 2026 document gives it."""
    fake_api.route("GET", "/api/v0/charges/", (200, CHARGES))
    assert v.billed_cost("12345678", since=1730419200) == 38.421
    query = fake_api.calls("GET", "/api/v0/charges/")[0]["query"]
    window = json.loads(query["select_filters"][0])["day"]
    assert window["gte"] <= 1730419200 <= window["lte"]
    assert v.billed_cost("555", since=1730419200) is None


# -- RunPod ------------------------------------------------------------------------------

@pytest.fixture
def rp(fake_api):
    return runpod.connect("KEY", fake_api.url)


POD_BILLING = {"records": [{"startTime": "2026-06-01T00:00:00Z", "endTime": "2026-06-02T00:00:00Z",
                            "podId": "7h9k2m4n6p", "totalAmount": 12.34, "gpuAmount": 11.1, "cpuAmount": 0,
                            "diskAmount": 1.24}],
               "metadata": {"query": {"startTime": "2026-06-01T00:00:00Z", "endTime": "2026-06-02T00:00:00Z",
                                      "bucketSize": "day", "podId": "7h9k2m4n6p"},
                            "recordCount": 1, "uniquePodCount": 1,
                            "totals": {"totalAmount": 12.34, "gpuAmount": 11.1, "cpuAmount": 0, "diskAmount": 1.24}}}


def test_runpod_billed_cost_from_pod_billing(fake_api, rp):
    """The documented example of GET /v2/billing/pods (Frontdoor v2.9.0)."""
    fake_api.route("GET", "/v2/billing/pods", (200, POD_BILLING))
    assert rp.billed_cost("7h9k2m4n6p", since=1780000000) == 12.34
    assert fake_api.calls("GET", "/v2/billing/pods")[0]["query"]["podId"] == ["7h9k2m4n6p"]
    empty = {"records": [], "metadata": {"recordCount": 0, "totals": {"totalAmount": 0}}}
    fake_api.route("GET", "/v2/billing/pods", (200, empty))
    assert rp.billed_cost("other") is None
    fake_api.route("GET", "/v2/billing/pods", (200, {"records": [{"totalAmount": "lots"}], "metadata": {}}))
    with pytest.raises(ProviderError):
        rp.billed_cost("7h9k2m4n6p")


def test_runpod_one_odd_gpu_leaves_the_others(fake_api, rp):
    answer = real("runpod/gpus.doc-v2.9.0")
    answer["gpus"].append({"id": "NVIDIA Odd", "price": {"secure": "cheap"}})
    fake_api.route("GET", "/v2/catalog/gpus", (200, answer))
    assert [o.offer_id for o in rp.offers(gpus=1)] == ["NVIDIA GeForce RTX 4090"]


def test_runpod_extra_ports_and_mapped_ports(fake_api, rp):
    fake_api.route("POST", "/v2/pods", (201, real("runpod/pod-create.doc-v2.9.0")))
    fake_api.route("GET", "/v2/pods/7h9k2m4n6p", (200, real("runpod/pod.doc-v2.9.0")))
    rp.launch(Offer("runpod", "NVIDIA GeForce RTX 4090", "RTX 4090", 1, 0.44),
              LaunchSpec(gpus=1, name="r", ssh_key=SshKeyRef("ssh-ed25519 A"), ports=(10022,)))
    assert fake_api.calls("POST", "/v2/pods")[0]["json"]["ports"] == ["22/tcp", "10022/tcp"]
    assert rp.get("7h9k2m4n6p").extra["ports"] == {22: 34446}


def test_gpubench_name_by_name_prefix():
    inst = Instance("x", "1", "gpubench-a", InstanceState.RUNNING)
    assert inst.launched_by_gpubench and inst.gpubench_name == "a"
