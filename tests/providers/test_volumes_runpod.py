"""RunPod network volumes through the adapter (the Volumes protocol in common.py): against
the in-process mock cloud (create, list, delete, the data centres that take them, a pod in
the wrong data centre or in Community Cloud refused, a mounted one not deleted), against
the documented answers of runpod-v2.openapi.json (Frontdoor v2.9.0: a contract test of the
field names), and one slow test where a file written through one pod's mount is read by
the next pod created with the volume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpubench.providers import registry, runpod
from gpubench.providers.common import (NAME_PREFIX, VOLUME_MOUNT, InstanceState, InvalidRequestError,
                                       LaunchSpec, NotFoundError, Offer, ProviderError, SshKeyRef,
                                       TransportError, Volume, VolumePlace, Volumes, volumes_of)
from tests.mock.helpers import Api, ssh, wait_for
from tests.providers.conftest import fixture

SPEC = Path(__file__).resolve().parents[3] / "shared" / "apis" / "runpod-v2.openapi.json"

# The NetworkVolume example of runpod-v2.openapi.json (GET /v2/network-volumes/{id}), and
# its DataCenter example (GET /v2/catalog/datacenters), as the document gives them.
DOC_VOLUME = {"id": "2q9m7x4c", "name": "training-dataset", "size": 100, "dataCenter": "US-KS-2",
              "type": "HIGH_PERFORMANCE"}
DOC_DATACENTER = {"id": "US-KS-2", "name": "US Kansas 2", "region": "NORTH_AMERICA", "globalNetwork": True,
                  "networkVolumeTypes": ["STANDARD", "HIGH_PERFORMANCE"],
                  "compliance": ["SOC_2_TYPE_2", "ISO_IEC_27001"],
                  "gpuAvailability": [{"id": "NVIDIA GeForce RTX 4090", "name": "RTX 4090", "availability": "HIGH"}],
                  "cpuAvailability": [{"id": "cpu3c-2-4", "name": "Compute-Optimized", "availability": "MEDIUM"}]}
# Where the mock makes network volumes (runpod_volumes.NETWORK_VOLUME_TYPES): not CA-MTL-1.
VOLUME_DCS = {"US-KS-2", "US-TX-3", "EU-RO-1"}
H100_SXM = "NVIDIA H100 80GB HBM3"       # Secure Cloud in US-KS-2 and US-TX-3 on the mock


@pytest.fixture
def cloud(volume_cloud):
    return volume_cloud


@pytest.fixture
def rp(cloud):
    return registry.get("runpod")


@pytest.fixture
def api(cloud):
    """RunPod's API on the mock, called straight (as another tool of the account would)."""
    e = cloud.env()
    return Api(e["GPUBENCH_RUNPOD_URL"], {"Authorization": f"Bearer {e['RUNPOD_API_KEY']}"})


@pytest.fixture
def key(ssh_key) -> Path:
    return ssh_key


def _h100(rp) -> Offer:
    return next(o for o in rp.offers(gpus=1) if o.offer_id == H100_SXM)


# -- against the mock, no pod boots -------------------------------------------------------

def test_the_adapter_speaks_volumes(rp):
    assert isinstance(rp, Volumes) and volumes_of(rp) is rp
    assert registry.entry("runpod").volumes.bound_to == "data centre"


def test_places_are_the_data_centres_with_network_volumes_most_offers_first(rp):
    places = rp.volume_places("H100")
    assert {p.place for p in places} == VOLUME_DCS            # CA-MTL-1's networkVolumeTypes is empty
    offers = [o for o in rp.offers(gpus=1) if "H100" in o.gpu_name]
    for p in places:
        assert p.offers == sum(1 for o in offers if p.place in o.extra["data_centers"])
        assert p.price_gb_month == runpod.STANDARD_FIRST_TB_GB_MONTH and "STANDARD" in p.extra["types"]
    counts = [p.offers for p in places]
    assert counts == sorted(counts, reverse=True)
    # H100 SXM is in US-KS-2 and US-TX-3, H100 PCIe in US-TX-3 and EU-RO-1 (Secure Cloud)
    assert (places[0].place, places[0].offers) == ("US-TX-3", 2)
    assert all(p.offers == 0 for p in rp.volume_places())
    assert next(p for p in rp.volume_places(None, 2000) if p.place == "US-TX-3").price_gb_month == 0.06


def test_create_list_delete(rp, api, cloud):
    place = rp.volume_places("H100 SXM")[0]
    vol = rp.create_volume("data-1", 50, place)
    assert isinstance(vol, Volume) and vol.provider == "runpod" and vol.volume_id
    assert (vol.name, vol.place, vol.size_gb, vol.monthly_cost, vol.status) == \
        (NAME_PREFIX + "data-1", place.place, 50.0, 3.5, "")
    assert (vol.extra["type"], vol.attached_to, vol.in_use, vol.launched_by_gpubench) == ("STANDARD", (), False, True)
    assert api("GET", f"/network-volumes/{vol.volume_id}").json() == {
        "id": vol.volume_id, "name": "gpubench-data-1", "size": 50, "dataCenter": place.place, "type": "STANDARD"}
    (listed,) = rp.list_volumes()
    assert listed == vol
    rp.delete_volume(vol.volume_id)
    assert rp.list_volumes() == []
    assert not cloud.engine.host.volume_dir("runpod", vol.volume_id).exists()
    with pytest.raises(NotFoundError) as e:
        rp.delete_volume(vol.volume_id)
    assert e.value.status == 404 and "network volume not found" in e.value.message


def test_a_volume_made_outside_gpubench_is_listed_as_not_its_own(rp, api):
    r = api("POST", "/network-volumes", json={"name": "team-datasets", "size": 2000, "dataCenter": "US-KS-2",
                                              "type": "HIGH_PERFORMANCE"})
    assert r.status_code == 201, r.text
    assert set(r.json()) == set(DOC_VOLUME)
    mine = rp.create_volume("mine", 10, VolumePlace("EU-RO-1"))
    listed = {v.name: v for v in rp.list_volumes()}
    assert set(listed) == {"team-datasets", mine.name}
    team = listed["team-datasets"]
    assert not team.launched_by_gpubench and (team.place, team.size_gb) == ("US-KS-2", 2000.0)
    assert (team.extra["type"], team.monthly_cost) == ("HIGH_PERFORMANCE", 280.0)     # $0.14 a GB-month
    assert listed[mine.name].launched_by_gpubench


@pytest.mark.parametrize("size", [0, 9, 4097, 10_000, 12.5, None, True])
def test_a_size_out_of_range_is_refused_before_any_call(fake_api, size):
    rp = runpod.connect("KEY", fake_api.url)
    with pytest.raises(InvalidRequestError) as e:
        rp.create_volume("data", size, VolumePlace("US-KS-2"))
    assert "10 to 4096 GB" in str(e.value) and "\n" not in str(e.value) and e.value.launch_refused
    with pytest.raises(InvalidRequestError, match="10 to 4096 GB"):
        rp.volume_places("H100", size if size is not None else -1)
    assert not fake_api.requests


def test_the_ends_of_the_range_are_made(rp):
    assert rp.create_volume("small", 10, VolumePlace("US-TX-3")).size_gb == 10
    big = rp.create_volume("big", 4096, VolumePlace("US-TX-3"))
    assert (big.size_gb, big.monthly_cost) == (4096, round(1000 * 0.07 + 3096 * 0.05, 2))


def test_the_mock_refuses_as_the_api_does(api):
    def create(**body):
        return api("POST", "/network-volumes", json={"name": "v", "size": 20, "dataCenter": "US-KS-2", **body})

    for body, status, words in [
        ({"size": 5}, 422, "$.size: must be >= 10"),
        ({"size": 5000}, 422, "$.size: must be <= 4096"),
        ({"bogus": 1}, 422, "additional properties 'bogus' not allowed"),
        ({"type": "FAST"}, 422, "$.type"),
        ({"dataCenter": "CA-MTL-1"}, 400, "does not support network volumes"),
        ({"dataCenter": "US-TX-3", "type": "HIGH_PERFORMANCE"}, 400, "does not support HIGH_PERFORMANCE"),
        ({"dataCenter": "MARS-1"}, 400, "unknown data center"),
    ]:
        r = create(**body)
        assert r.status_code == status, (body, r.text)
        assert r.headers["Content-Type"] == "application/problem+json"
        problem = r.json()
        assert {"title", "status", "detail"} <= set(problem) and problem["status"] == status
        assert words in problem["detail"] + " ".join(problem.get("errors", [])), (body, problem)
    r = api("POST", "/network-volumes", json={"name": "v"})
    assert r.status_code == 422 and "$: missing property 'size'" in r.json()["errors"]
    vid = create().json()["id"]
    assert api("PATCH", f"/network-volumes/{vid}", json={"size": 15}).status_code == 400   # grow only
    grown = api("PATCH", f"/network-volumes/{vid}", json={"size": 30, "name": "w"}).json()
    assert (grown["size"], grown["name"]) == (30, "w")
    for method in ("GET", "PATCH", "DELETE"):
        r = api(method, "/network-volumes/nope", json={"size": 40})
        assert (r.status_code, r.json()["detail"]) == (404, "network volume not found")


def test_the_catalog_says_which_data_centres_take_network_volumes(api):
    dcs = {d["id"]: d for d in api("GET", "/catalog/datacenters").json()["dataCenters"]}
    assert {k for k, d in dcs.items() if d["networkVolumeTypes"]} == VOLUME_DCS
    assert dcs["CA-MTL-1"]["networkVolumeTypes"] == [] and "gpuAvailability" not in dcs["US-KS-2"]
    assert set(dcs["US-KS-2"]) == set(DOC_DATACENTER) - {"gpuAvailability", "cpuAvailability"}
    filtered = api("GET", "/catalog/datacenters", params={"networkVolumeTypes": "STANDARD,HIGH_PERFORMANCE"})
    assert [d["id"] for d in filtered.json()["dataCenters"]] == ["US-KS-2"]      # AND within the filter
    one = api("GET", "/catalog/datacenters/US-KS-2", params={"include": "GPU_AVAILABILITY"}).json()
    assert {g["id"] for g in one["gpuAvailability"]} >= {H100_SXM}
    assert all(set(g) == {"id", "name", "availability"} for g in one["gpuAvailability"])
    assert api("GET", "/catalog/datacenters", params={"include": "NOPE"}).status_code == 422


def test_offer_at_is_the_volumes_data_centre_in_secure_cloud(rp):
    offer = _h100(rp)
    assert set(offer.extra["data_centers"]) == {"US-KS-2", "US-TX-3"} and offer.extra["cloud"] == "SECURE"
    assert rp.offer_at(offer, Volume("runpod", "v1", "gpubench-x", "US-KS-2"))
    assert not rp.offer_at(offer, Volume("runpod", "v1", "gpubench-x", "EU-RO-1"))
    assert not rp.offer_at(offer, Volume("lambda", "f1", "gpubench-x", "US-KS-2"))
    community = Offer("runpod", H100_SXM, "H100 SXM", 1, 2.39, extra={"data_centers": ["US-KS-2"],
                                                                        "cloud": "COMMUNITY"})
    assert not rp.offer_at(community, Volume("runpod", "v1", "gpubench-x", "US-KS-2"))


def test_a_pod_with_the_volume_goes_where_it_is_and_holds_it(rp, cloud, api, key):
    cloud.set_faults("runpod:never-boots")       # a live pod without an sshd: quick
    ref = rp.ensure_ssh_key(key.with_suffix(".pub").read_text(), "vol")
    vol = rp.create_volume("held", 20, VolumePlace("US-TX-3"))
    inst = rp.launch(_h100(rp), LaunchSpec(gpus=1, name="held", ssh_key=ref, volume=vol))
    assert inst.region == "US-TX-3"
    pod = api("GET", f"/pods/{inst.instance_id}").json()
    assert pod["mounts"] == {"network": [{"volumeId": vol.volume_id, "path": VOLUME_MOUNT}]}
    assert (pod["dataCenterId"], pod["cloud"]) == ("US-TX-3", "SECURE")
    assert cloud.engine.store.get("runpod", inst.instance_id).extra["volume"] == vol.volume_id
    (listed,) = rp.list_volumes()
    assert (listed.attached_to, listed.in_use) == ((inst.instance_id,), True)
    r = api("DELETE", f"/network-volumes/{vol.volume_id}")
    assert r.status_code == 400 and inst.instance_id in r.json()["detail"]
    with pytest.raises(InvalidRequestError, match="attached to pod"):
        rp.delete_volume(vol.volume_id)
    rp.terminate(inst.instance_id)               # the pod goes; the volume is only detached
    (listed,) = rp.list_volumes()
    assert (listed.attached_to, listed.in_use) == ((), False)
    rp.delete_volume(vol.volume_id)
    assert rp.list_volumes() == []


def test_every_member_of_a_cluster_mounts_it(rp, cloud, key):
    cloud.set_faults("runpod:never-boots")
    ref = rp.ensure_ssh_key(key.with_suffix(".pub").read_text(), "vol")
    vol = rp.create_volume("shared", 20, VolumePlace("US-TX-3"))
    created = rp.create_cluster(_h100(rp), LaunchSpec(gpus=1, name="c", ssh_key=ref, volume=vol), 2)
    assert [i.region for i in created.instances] == ["US-TX-3", "US-TX-3"]
    assert [cloud.engine.store.get("runpod", i.instance_id).extra["volume"] for i in created.instances] == \
        [vol.volume_id, vol.volume_id]
    assert set(rp.list_volumes()[0].attached_to) == {i.instance_id for i in created.instances}
    rp.delete_cluster(created.cluster_id)
    assert rp.list_volumes()[0].attached_to == ()


def test_the_mock_refuses_a_pod_away_from_its_volume(rp, api):
    vol = rp.create_volume("pinned", 20, VolumePlace("US-KS-2"))
    pod = {"name": "p", "image": "img", "gpu": {"id": H100_SXM, "count": 1}, "ports": ["22/tcp"],
           "mounts": {"network": [{"volumeId": vol.volume_id, "path": VOLUME_MOUNT}]}}
    for extra, status, words in [
        ({"dataCenterIds": ["US-TX-3"]}, 400, "is in data center US-KS-2"),
        ({"cloud": "COMMUNITY"}, 400, "Secure Cloud only"),
        ({"mounts": {"network": [{"volumeId": vol.volume_id, "path": "/d"}],
                     "persistent": {"size": 20, "path": "/workspace"}}}, 400, "mutually exclusive"),
        ({"mounts": {"network": [{"volumeId": "nope", "path": "/d"}]}}, 404, "network volume nope not found"),
        ({"mounts": {"network": [{"volumeId": vol.volume_id}]}}, 422, "missing property 'path'"),
        ({"mounts": {"network": [{"volumeId": vol.volume_id, "path": "/a"}] * 2}}, 422, "at most 1"),
    ]:
        r = api("POST", "/pods", json={**pod, **extra})
        assert r.status_code == status, (extra, r.text)
        assert words in r.json()["detail"] + " ".join(r.json().get("errors", [])), (extra, r.json())
    assert rp.list() == []


def test_a_launch_away_from_the_volume_is_refused_before_any_call(fake_api):
    rp = runpod.connect("KEY", fake_api.url)
    vol = Volume("runpod", "v1", "gpubench-d", "US-KS-2")
    offer = Offer("runpod", H100_SXM, "H100 SXM", 1, 2.69, extra={"data_centers": ["US-KS-2"], "cloud": "SECURE"})
    ref = SshKeyRef("ssh-ed25519 AAAA x")
    for spec, words in [
        (LaunchSpec(gpus=1, name="x", ssh_key=ref, volume=vol, region="US-TX-3"), "is in US-KS-2"),
        (LaunchSpec(gpus=1, name="x", ssh_key=ref, volume=Volume("lambda", "f", "gpubench-d", "us-east-1")),
         "RunPod network volumes only"),
    ]:
        with pytest.raises(InvalidRequestError, match=words):
            rp.launch(offer, spec)
    community = Offer("runpod", H100_SXM, "H100 SXM", 1, 2.39, extra={"cloud": "COMMUNITY"})
    with pytest.raises(InvalidRequestError, match="Secure Cloud only"):
        rp.launch(community, LaunchSpec(gpus=1, name="x", ssh_key=ref, volume=vol))
    assert not fake_api.requests


def test_launch_and_cluster_bodies_mount_it_and_nothing_without_one(fake_api):
    fake_api.route("POST", "/v2/pods", (201, fixture("runpod/pod_provisioning.json")))
    fake_api.route("POST", "/v2/clusters", (400, fixture("runpod/error_capacity.json")))
    rp = runpod.connect("KEY", fake_api.url)
    vol = Volume("runpod", "v1", "gpubench-d", "US-KS-2")
    offer = Offer("runpod", H100_SXM, "H100 SXM", 1, 2.69, extra={"data_centers": ["US-KS-2"], "cloud": "SECURE"})
    rp.launch(offer, LaunchSpec(gpus=1, name="a", volume=vol))
    rp.launch(offer, LaunchSpec(gpus=1, name="b"))
    with_it, without = (c["json"] for c in fake_api.calls("POST", "/v2/pods"))
    assert with_it["mounts"] == {"network": [{"volumeId": "v1", "path": VOLUME_MOUNT}]}
    assert (with_it["dataCenterIds"], with_it["cloud"]) == (["US-KS-2"], "SECURE")
    assert "persistent" not in with_it["mounts"]
    assert "mounts" not in without and "dataCenterIds" not in without
    with pytest.raises(ProviderError):
        rp.create_cluster(offer, LaunchSpec(gpus=1, name="c", volume=vol), 2)
    cluster = fake_api.calls("POST", "/v2/clusters")[0]["json"]
    assert cluster["mounts"] == with_it["mounts"] and cluster["dataCenterIds"] == ["US-KS-2"]
    assert "cloud" not in cluster                 # CreateClusterRequest has no cloud field


# -- the documented answers (runpod-v2.openapi.json, Frontdoor v2.9.0) -------------------

def test_documented_volume_answers_parse(fake_api):
    fake_api.route("GET", "/v2/network-volumes", (200, {"networkVolumes": [DOC_VOLUME]}))
    fake_api.route("GET", "/v2/pods", (200, "real/runpod/pods.doc-v2.9.0.json"))
    fake_api.route("POST", "/v2/network-volumes", (201, {**DOC_VOLUME, "size": 50}))
    fake_api.route("DELETE", "/v2/network-volumes/[a-z0-9]+", (204, None))
    fake_api.route("GET", "/v2/catalog/datacenters", (200, {"dataCenters": [DOC_DATACENTER]}))
    rp = runpod.connect("KEY", fake_api.url)
    (vol,) = rp.list_volumes()
    assert vol == Volume("runpod", "2q9m7x4c", "training-dataset", "US-KS-2", size_gb=100.0,
                         monthly_cost=14.0, in_use=False)
    assert vol.extra == {"type": "HIGH_PERFORMANCE"} and not vol.launched_by_gpubench
    (place,) = rp.volume_places()
    assert (place.place, place.offers, place.extra["types"]) == ("US-KS-2", 0, ["STANDARD", "HIGH_PERFORMANCE"])
    made = rp.create_volume("training-dataset", 50, place)
    assert fake_api.calls("POST", "/v2/network-volumes")[0]["json"] == \
        {"name": "gpubench-training-dataset", "size": 50, "dataCenter": "US-KS-2", "type": "STANDARD"}
    assert (made.volume_id, made.size_gb) == ("2q9m7x4c", 50.0)
    rp.delete_volume(vol.volume_id)
    assert fake_api.calls("DELETE", "/v2/network-volumes/2q9m7x4c")


def test_documented_errors_are_typed(fake_api):
    rp = runpod.connect("KEY", fake_api.url)
    fake_api.route("DELETE", "/v2/network-volumes/.+", (404, {"title": "Not Found", "status": 404,
                                                              "detail": "resource not found"}))
    fake_api.route("POST", "/v2/network-volumes", (400, {"title": "Bad Request", "status": 400,
                                                         "detail": "request could not be processed"}))
    with pytest.raises(NotFoundError, match="resource not found"):
        rp.delete_volume("gone")
    with pytest.raises(InvalidRequestError, match="request could not be processed") as e:
        rp.create_volume("x", 20, VolumePlace("US-KS-2"))
    assert e.value.launch_refused


def test_an_answer_of_the_wrong_shape_is_a_provider_error(fake_api):
    fake_api.route("GET", "/v2/pods", (200, {"pods": []}))
    fake_api.route("GET", "/v2/network-volumes", (200, {"networkVolumes": [{"name": "no-id", "size": 10}]}))
    fake_api.route("POST", "/v2/network-volumes", (201, {"name": "no-id"}))
    rp = runpod.connect("KEY", fake_api.url)
    with pytest.raises(ProviderError) as e:
        rp.list_volumes()
    assert "GET /v2/network-volumes" in str(e.value) and "'id'" in str(e.value)
    with pytest.raises(TransportError) as e:         # it may have been made all the same
        rp.create_volume("x", 20, VolumePlace("US-KS-2"))
    assert not e.value.launch_refused


@pytest.mark.skipif(not SPEC.exists(), reason=f"{SPEC} is not in this checkout's workspace")
def test_the_documents_examples_parse_and_the_field_names_are_the_specs(fake_api):
    """Every network-volume example of the OpenAPI document itself through the adapter,
    and the adapter's rules (sizes, mount, data centres) against its schemas."""
    spec = json.loads(SPEC.read_text())
    schemas = spec["components"]["schemas"]
    paths = spec["paths"]

    def examples(path: str, method: str, status: str) -> list:
        content = paths[path][method]["responses"][status]["content"]["application/json"]
        return [e["value"] for e in content["examples"].values()]

    listed = examples("/v2/network-volumes", "get", "200")
    singles = [*examples("/v2/network-volumes", "post", "201"), *examples("/v2/network-volumes/{id}", "get", "200"),
               *examples("/v2/network-volumes/{id}", "patch", "200")]
    assert listed and singles and DOC_VOLUME in listed[0]["networkVolumes"]
    fake_api.route("GET", "/v2/pods", (200, {"pods": []}))
    rp = runpod.connect("KEY", fake_api.url)
    for answer in [*listed, {"networkVolumes": singles}]:
        fake_api.route("GET", "/v2/network-volumes", (200, answer))
        for doc, vol in zip(answer["networkVolumes"], rp.list_volumes(), strict=True):
            assert (vol.volume_id, vol.name, vol.place, vol.size_gb, vol.extra["type"]) == \
                (doc["id"], doc["name"], doc["dataCenter"], doc["size"], doc["type"])
            assert vol.monthly_cost == runpod.volume_monthly_cost(doc["size"], doc["type"])
    for doc in examples("/v2/network-volumes", "post", "201"):
        fake_api.route("POST", "/v2/network-volumes", (201, doc))
        assert rp.create_volume("x", doc["size"], VolumePlace(doc["dataCenter"])).volume_id == doc["id"]
    centres = examples("/v2/catalog/datacenters", "get", "200")
    assert DOC_DATACENTER in centres[0]["dataCenters"]
    fake_api.route("GET", "/v2/catalog/datacenters", (200, centres[0]))
    assert [p.place for p in rp.volume_places()] == [d["id"] for d in centres[0]["dataCenters"]
                                                     if d["networkVolumeTypes"]]

    volume = schemas["NetworkVolume"]
    assert set(volume["required"]) == set(DOC_VOLUME) == set(volume["properties"])
    create = schemas["CreateNetworkVolumeRequest"]
    assert set(create["properties"]) == {"name", "size", "dataCenter", "type"}
    assert (create["properties"]["size"]["minimum"], create["properties"]["size"]["maximum"]) == \
        (runpod.VOLUME_MIN_GB, runpod.VOLUME_MAX_GB)
    assert schemas["VolumeType"]["enum"] == ["STANDARD", "HIGH_PERFORMANCE"]
    assert set(schemas["ListNetworkVolumesResponse"]["properties"]) == {"networkVolumes"}
    assert "networkVolumeTypes" in schemas["DataCenter"]["required"]
    mounts = schemas["Mounts"]
    assert mounts["properties"]["network"]["maxItems"] == 1
    assert set(schemas["NetworkMount"]["required"]) == {"volumeId", "path"}
    pod_create = schemas["CreatePodRequest"]["allOf"][1]["properties"]
    assert {"mounts", "dataCenterIds", "cloud"} <= set(pod_create)
    assert schemas["Cloud"]["enum"] == ["SECURE", "COMMUNITY"]
    cluster_create = schemas["CreateClusterRequest"]["allOf"][1]["properties"]
    assert {"mounts", "dataCenterIds"} <= set(cluster_create) and "cloud" not in cluster_create
    assert "204" in paths["/v2/network-volumes/{id}"]["delete"]["responses"]


# -- one pod writes, the next one reads ---------------------------------------------------

@pytest.mark.slow
def test_a_file_outlives_the_pod_that_wrote_it(rp, cloud, api, key):
    ref = rp.ensure_ssh_key(key.with_suffix(".pub").read_text(), "vol")
    offer = _h100(rp)
    place = next(p for p in rp.volume_places("H100 SXM") if p.place in offer.extra["data_centers"])
    vol = rp.create_volume("keeps", 20, place)
    assert rp.offer_at(offer, vol)

    def boot(name: str):
        inst = rp.launch(offer, LaunchSpec(gpus=1, name=name, ssh_key=ref, volume=vol))
        return wait_for(lambda: (g := rp.get(inst.instance_id)).status is InstanceState.RUNNING
                        and g.ssh_host and g)

    def on(inst, command: str) -> str:
        out = ssh(inst.ssh_port, key, command, user=inst.ssh_user, host=inst.ssh_host)
        assert out.returncode == 0, out.stderr
        return out.stdout

    mount = f'"$GPUBENCH_MOCK_ROOT{VOLUME_MOUNT}"'
    first = boot("writer")
    assert first.region == vol.place
    on(first, f"echo made-by-{first.instance_id} > {mount}/hello.txt")
    assert (cloud.engine.host.volume_dir("runpod", vol.volume_id) / "hello.txt").read_text() == \
        f"made-by-{first.instance_id}\n"
    assert rp.list_volumes()[0].attached_to == (first.instance_id,)
    with pytest.raises(InvalidRequestError, match="attached to pod"):
        rp.delete_volume(vol.volume_id)
    rp.terminate(first.instance_id)
    wait_for(lambda: not rp.list_volumes()[0].in_use)

    second = boot("reader")
    assert second.region == vol.place and second.instance_id != first.instance_id
    assert on(second, f"cat {mount}/hello.txt").strip() == f"made-by-{first.instance_id}"
    other = next(dc for dc in VOLUME_DCS if dc != vol.place)
    with pytest.raises(InvalidRequestError, match=f"is in {vol.place}"):     # the adapter refuses
        rp.launch(offer, LaunchSpec(gpus=1, name="elsewhere", ssh_key=ref, volume=vol, region=other))
    r = api("POST", "/pods", json={"name": "elsewhere", "image": "img", "gpu": {"id": offer.offer_id, "count": 1},
                                   "dataCenterIds": [other], "ports": ["22/tcp"],
                                   "mounts": {"network": [{"volumeId": vol.volume_id, "path": VOLUME_MOUNT}]}})
    assert r.status_code == 400 and f"is in data center {vol.place}" in r.json()["detail"]   # and so does RunPod
    assert {i.instance_id for i in rp.list()} == {second.instance_id}
    rp.terminate(second.instance_id)
    wait_for(lambda: not rp.list_volumes()[0].in_use)
    rp.delete_volume(vol.volume_id)
    assert rp.list_volumes() == []
