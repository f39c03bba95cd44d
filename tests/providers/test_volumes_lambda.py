"""Lambda filesystems through the adapter (the Volumes protocol in common.py): against the
in-process mock cloud (create, list, delete, a mounted one refused, a launch in the wrong
region), against the documented answers of lambda.openapi.json 1.10.0 (a contract test of
the field names), and one slow test where a file written through one machine's mount is
read by the next machine rented with the filesystem."""

from __future__ import annotations

import getpass
import json
import re
from pathlib import Path

import pytest

from gpubench.providers import lambda_cloud, registry
from gpubench.providers.gpus import gpu_matches
from gpubench.providers.common import (NAME_PREFIX, VOLUME_MOUNT, InstanceState, InvalidRequestError,
                                       LaunchSpec, NotFoundError, Offer, ProviderError, SshKeyRef, Volume,
                                       VolumePlace, Volumes, volumes_of)
from tests.mock.helpers import Api, ssh, wait_for
from tests.providers.conftest import fixture

SPEC = Path(__file__).resolve().parents[3] / "shared" / "apis" / "lambda.openapi.json"

# The Filesystem of lambda.openapi.json 1.10.0, each field its schema's own example
# (the document gives none for the whole object; `created` and `created_by` have none:
# an ISO 8601 time and the User schema's examples).
DOC_FILESYSTEM = {
    "id": "398578a2336b49079e74043f0bd2cfe8",
    "name": "my-filesystem",
    "mount_point": "/lambda/nfs/my-filesystem",
    "created": "2024-11-15T10:00:00+00:00",
    "created_by": {"id": "3da5a70a57a7422ea8a7203f98b2198b", "email": "me@example.com", "status": "active"},
    "is_in_use": False,
    "region": {"name": "us-west-1", "description": "California, USA"},
    "bytes_used": 2_500_000_000,
}
DOC_DELETED = {"data": {"deleted_ids": ["398578a2336b49079e74043f0bd2cfe8"]}}
WRONG_REGION = "instance-operations/launch/file-system-in-wrong-region"


@pytest.fixture
def cloud(volume_cloud):
    return volume_cloud


@pytest.fixture
def lam(cloud):
    return registry.get("lambda")


@pytest.fixture
def api(cloud):
    """Lambda's API on the mock, called straight (as another tool of the account would)."""
    e = cloud.env()
    return Api(e["GPUBENCH_LAMBDA_URL"], {"Authorization": f"Bearer {e['LAMBDA_API_KEY']}"})


@pytest.fixture
def key(ssh_key) -> Path:
    return ssh_key


def _offer_with_two_regions(lam) -> tuple[Offer, Offer]:
    """Two offers of one instance type in two regions (the mock places each type in two)."""
    by_type: dict[str, list[Offer]] = {}
    for o in lam.offers(gpus=1):
        if o.region and o.available != 0:
            by_type.setdefault(o.instance_type, []).append(o)
    here, there = next(v for v in by_type.values() if len(v) >= 2)[:2]
    return here, there


# -- against the mock, no machine boots ---------------------------------------------------

def test_the_adapter_speaks_volumes(lam):
    assert isinstance(lam, Volumes) and volumes_of(lam) is lam
    assert registry.entry("lambda").volumes.bound_to == "region"


def test_places_are_regions_most_offers_of_the_type_first(lam):
    offers = [o for o in lam.offers() if o.region and o.available != 0]
    places = lam.volume_places("A10")           # the mock has A10s in two regions of four
    assert {p.place for p in places} == {o.region for o in offers}
    counts = [p.offers for p in places]
    assert counts == sorted(counts, reverse=True) and counts[0] > 0 and counts[-1] == 0
    for p in places:
        assert p.offers == sum(1 for o in offers if o.region == p.place and gpu_matches("A10", o.gpu_name))
        assert p.price_gb_month == lambda_cloud.PRICE_GB_MONTH
    assert all(p.offers == 0 for p in lam.volume_places())


def test_create_list_delete(lam, cloud):
    place = lam.volume_places("A10")[0]
    vol = lam.create_volume("data-1", 500, place)        # the size is not Lambda's: ignored
    assert isinstance(vol, Volume) and vol.provider == "lambda" and vol.volume_id
    assert (vol.name, vol.place, vol.size_gb, vol.used_bytes) == (NAME_PREFIX + "data-1", place.place, None, 0)
    assert (vol.in_use, vol.monthly_cost, vol.launched_by_gpubench) == (False, 0.0, True)
    assert vol.extra["mount_point"] == "/lambda/nfs/gpubench-data-1" and vol.extra["created"]
    (listed,) = lam.list_volumes()
    assert listed == vol
    # Lambda bills the bytes used: 2.5 GB at $0.20 a GB-month (a sparse file: no disk spent)
    with open(cloud.engine.host.volume_dir("lambda", vol.volume_id) / "big", "wb") as f:
        f.truncate(2_500_000_000)
    (listed,) = lam.list_volumes()
    assert (listed.used_bytes, listed.monthly_cost) == (2_500_000_000, 0.5)
    lam.delete_volume(vol.volume_id)
    assert lam.list_volumes() == []
    assert not cloud.engine.host.volume_dir("lambda", vol.volume_id).exists()


def test_a_filesystem_made_outside_gpubench_is_listed_as_not_its_own(lam, api):
    r = api("POST", "/filesystems", json={"name": "team-datasets", "region": "us-south-1"})
    assert r.status_code == 200, r.text
    made = r.json()["data"]
    assert {k: type(v) for k, v in made.items()} == {k: type(v) for k, v in DOC_FILESYSTEM.items()}
    mine = lam.create_volume("mine", None, VolumePlace("us-east-1"))
    listed = {v.name: v for v in lam.list_volumes()}
    assert set(listed) == {"team-datasets", mine.name}
    assert not listed["team-datasets"].launched_by_gpubench and listed["team-datasets"].place == "us-south-1"
    assert listed[mine.name].launched_by_gpubench


@pytest.mark.parametrize("name", ["", "has_underscore", "ünïcode", "dots.in.it", "spaced name", "x" * 52])
def test_a_name_lambda_refuses_is_refused_before_any_call(fake_api, name):
    lam = lambda_cloud.connect("KEY", fake_api.url)
    with pytest.raises(InvalidRequestError) as e:
        lam.create_volume(name, None, VolumePlace("us-east-1"))
    assert "^[a-zA-Z]+[0-9a-zA-Z-]*$" in str(e.value) and "\n" not in str(e.value)
    assert not fake_api.requests


def test_the_longest_name_lambda_takes_is_made(lam):
    name = "9" * (60 - len(NAME_PREFIX))         # after the prefix a digit may lead
    assert lam.create_volume(name, None, VolumePlace("us-east-1")).name == NAME_PREFIX + name


def test_duplicate_and_unknown_region_come_back_typed(lam, api):
    lam.create_volume("twice", None, VolumePlace("us-east-1"))
    with pytest.raises(InvalidRequestError) as e:
        lam.create_volume("twice", None, VolumePlace("us-west-1"))
    assert e.value.code == "global/duplicate" and e.value.status == 400
    with pytest.raises(InvalidRequestError) as e:
        lam.create_volume("nowhere", None, VolumePlace("mars-north-1"))
    assert e.value.code == "global/invalid-parameters"
    r = api("POST", "/filesystems", json={"name": "bad_name", "region": "us-east-1"})
    assert (r.status_code, r.json()["error"]["code"]) == (400, "global/invalid-parameters")
    assert len(lam.list_volumes()) == 1


def test_delete_unknown_is_not_found(lam, api):
    with pytest.raises(NotFoundError) as e:
        lam.delete_volume("0123456789abcdef0123456789abcdef")
    assert e.value.code == "global/object-does-not-exist"
    assert api("DELETE", "/filesystems/nope").json() == {
        "error": {"code": "global/object-does-not-exist", "message": "Filesystem was not found."}}


def test_a_mounted_filesystem_is_in_use_and_not_deleted(lam, cloud, key):
    cloud.set_faults("lambda:never-boots")      # a live machine without an sshd: quick
    ref = lam.ensure_ssh_key(key.with_suffix(".pub").read_text(), "vol")
    here, _ = _offer_with_two_regions(lam)
    vol = lam.create_volume("held", None, VolumePlace(here.region))
    inst = lam.launch(here, LaunchSpec(gpus=1, name="held", ssh_key=ref, volume=vol))
    got = lam.get(inst.instance_id)
    assert got.extra["file_system_names"] == [vol.name]
    assert got.extra["file_system_mounts"] == [{"mount_point": VOLUME_MOUNT, "file_system_id": vol.volume_id}]
    assert lam.list_volumes()[0].in_use is True
    with pytest.raises(InvalidRequestError) as e:
        lam.delete_volume(vol.volume_id)
    assert e.value.code == "filesystems/filesystem-in-use" and "in use" in e.value.message
    lam.terminate(inst.instance_id)
    assert lam.list_volumes()[0].in_use is False
    lam.delete_volume(vol.volume_id)
    assert lam.list_volumes() == []


def test_a_launch_in_another_region_is_refused_and_rents_nothing(lam, key):
    ref = lam.ensure_ssh_key(key.with_suffix(".pub").read_text(), "vol")
    here, there = _offer_with_two_regions(lam)
    vol = lam.create_volume("pinned", None, VolumePlace(here.region))
    assert lam.offer_at(here, vol) and not lam.offer_at(there, vol)
    with pytest.raises(InvalidRequestError) as e:
        lam.launch(there, LaunchSpec(gpus=1, name="elsewhere", ssh_key=ref, volume=vol))
    assert e.value.code == WRONG_REGION and here.region in e.value.message and e.value.launch_refused
    assert lam.list() == []


def test_offer_at_is_the_volumes_region_and_provider():
    lam = lambda_cloud.connect("KEY", "http://127.0.0.1:9")    # never called
    vol = Volume("lambda", "f1", "gpubench-x", "us-east-1")
    assert lam.offer_at(Offer("lambda", "t@us-east-1", "A10", 1, 1.0, region="us-east-1"), vol)
    assert not lam.offer_at(Offer("lambda", "t@us-west-1", "A10", 1, 1.0, region="us-west-1"), vol)
    assert not lam.offer_at(Offer("lambda", "t@", "A10", 1, 1.0, region=""), Volume("lambda", "f", "n", ""))
    assert not lam.offer_at(Offer("lambda", "t@us-east-1", "A10", 1, 1.0, region="us-east-1"),
                            Volume("runpod", "v1", "gpubench-x", "us-east-1"))


# -- the documented answers (lambda.openapi.json 1.10.0) ----------------------------------

def test_documented_filesystem_answers_parse(fake_api):
    fake_api.route("GET", "/api/v1/file-systems", (200, {"data": [DOC_FILESYSTEM]}))
    fake_api.route("POST", "/api/v1/filesystems", (200, {"data": DOC_FILESYSTEM}))
    fake_api.route("DELETE", "/api/v1/filesystems/[0-9a-f]+", (200, DOC_DELETED))
    lam = lambda_cloud.connect("KEY", fake_api.url)
    (vol,) = lam.list_volumes()
    assert vol == Volume("lambda", "398578a2336b49079e74043f0bd2cfe8", "my-filesystem", "us-west-1",
                         size_gb=None, used_bytes=2_500_000_000, monthly_cost=0.5, in_use=False)
    assert vol.extra == {"mount_point": "/lambda/nfs/my-filesystem", "created": "2024-11-15T10:00:00+00:00"}
    assert not vol.launched_by_gpubench
    made = lam.create_volume("my-filesystem", 10, VolumePlace("us-west-1"))
    assert fake_api.calls("POST", "/api/v1/filesystems")[0]["json"] == \
        {"name": "gpubench-my-filesystem", "region": "us-west-1"}
    assert made.volume_id == vol.volume_id
    lam.delete_volume(vol.volume_id)
    assert fake_api.calls("DELETE", f"/api/v1/filesystems/{vol.volume_id}")


def test_bytes_used_is_optional(fake_api):
    doc = {k: v for k, v in DOC_FILESYSTEM.items() if k != "bytes_used"}
    fake_api.route("GET", "/api/v1/file-systems", (200, {"data": [doc]}))
    (vol,) = lambda_cloud.connect("KEY", fake_api.url).list_volumes()
    assert (vol.used_bytes, vol.monthly_cost) == (None, None)


def test_an_answer_of_the_wrong_shape_is_a_provider_error(fake_api):
    fake_api.route("GET", "/api/v1/file-systems", (200, {"data": [{"name": "no-id"}]}))
    with pytest.raises(ProviderError) as e:
        lambda_cloud.connect("KEY", fake_api.url).list_volumes()
    assert "GET /api/v1/file-systems" in str(e.value) and "'id'" in str(e.value)


def test_documented_errors_are_typed(fake_api):
    lam = lambda_cloud.connect("KEY", fake_api.url)
    fake_api.route("DELETE", "/api/v1/filesystems/.+", (400, {"error": {
        "code": "filesystems/filesystem-in-use", "message": "Filesystem is in use."}}))
    fake_api.route("POST", "/api/v1/filesystems", (400, {"error": {
        "code": "global/quota-exceeded", "message": "Quota exceeded.",
        "suggestion": "Contact Support to increase your quota."}}))
    with pytest.raises(InvalidRequestError, match="Filesystem is in use.") as e:
        lam.delete_volume("f1")
    assert e.value.code == "filesystems/filesystem-in-use"
    with pytest.raises(InvalidRequestError, match="Contact Support") as e:
        lam.create_volume("more", None, VolumePlace("us-east-1"))
    assert e.value.code == "global/quota-exceeded"


def test_documented_instance_names_its_filesystems(fake_api):
    fake_api.route("GET", "/api/v1/instances", (200, "real/lambda/instances.doc-1.10.0.json"))
    (inst,) = lambda_cloud.connect("KEY", fake_api.url).list()
    assert inst.extra["file_system_names"] == ["my-filesystem"] and "file_system_mounts" not in inst.extra


def test_launch_mounts_the_volume_and_sends_nothing_without_one(fake_api):
    fake_api.route("POST", "/api/v1/instance-operations/launch", (200, fixture("lambda/launch.json")))
    lam = lambda_cloud.connect("KEY", fake_api.url)
    ref = SshKeyRef("ssh-ed25519 AAAA k", name="k")
    offer = Offer("lambda", "gpu_1x_a10@us-east-1", "A10", 1, 0.75, region="us-east-1")
    vol = Volume("lambda", "398578a2336b49079e74043f0bd2cfe8", "gpubench-d", "us-east-1")
    lam.launch(offer, LaunchSpec(gpus=1, name="a", ssh_key=ref, volume=vol))
    lam.launch(offer, LaunchSpec(gpus=1, name="b", ssh_key=ref))
    with_volume, without = (c["json"] for c in fake_api.calls("POST", "/api/v1/instance-operations/launch"))
    assert with_volume["file_system_mounts"] == [{"mount_point": "/data/gpubench",
                                                  "file_system_id": vol.volume_id}]
    assert "file_system_names" not in with_volume
    assert not {"file_system_names", "file_system_mounts"} & set(without)
    with pytest.raises(InvalidRequestError, match="not a Lambda filesystem"):
        lam.launch(offer, LaunchSpec(gpus=1, name="c", ssh_key=ref,
                                     volume=Volume("runpod", "v1", "gpubench-d", "us-east-1")))
    assert len(fake_api.calls("POST", "/api/v1/instance-operations/launch")) == 2


@pytest.mark.skipif(not SPEC.exists(), reason=f"{SPEC} is not in this checkout's workspace")
def test_the_field_names_are_the_specs():
    """DOC_FILESYSTEM and the adapter's rules against the OpenAPI document itself."""
    spec = json.loads(SPEC.read_text())
    schemas = spec["components"]["schemas"]
    fs = schemas["Filesystem"]
    assert set(DOC_FILESYSTEM) == set(fs["properties"]) and set(fs["required"]) <= set(DOC_FILESYSTEM)
    for field, prop in fs["properties"].items():
        if prop.get("examples"):
            assert DOC_FILESYSTEM[field] == prop["examples"][0]
    assert set(DOC_FILESYSTEM["created_by"]) == set(schemas["User"]["properties"])
    assert set(DOC_DELETED["data"]) == set(schemas["FilesystemDeleteResponse"]["properties"])
    assert "/api/v1/file-systems" in spec["paths"] and "get" in spec["paths"]["/api/v1/file-systems"]
    create = spec["paths"]["/api/v1/filesystems"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert set(create["required"]) == {"name", "region"}
    assert create["properties"]["name"]["pattern"] == lambda_cloud.FILESYSTEM_NAME.pattern
    assert create["properties"]["name"]["maxLength"] == lambda_cloud.FILESYSTEM_NAME_MAX
    assert "delete" in spec["paths"]["/api/v1/filesystems/{id}"]
    launch = spec["paths"]["/api/v1/instance-operations/launch"]["post"]
    body = launch["requestBody"]["content"]["application/json"]["schema"]["properties"]
    mount = schemas["RequestedFilesystemMountEntry"]
    assert body["file_system_mounts"]["items"]["$ref"].endswith("/RequestedFilesystemMountEntry")
    assert set(mount["properties"]) == {"mount_point", "file_system_id"}
    assert re.match(mount["properties"]["mount_point"]["pattern"], VOLUME_MOUNT)
    assert WRONG_REGION in json.dumps(launch["responses"]["400"]) or \
        schemas["ApiErrorFileSystemInWrongRegion"]["properties"]["code"]["const"] == WRONG_REGION


# -- one machine writes, the next one reads -----------------------------------------------

@pytest.mark.slow
def test_a_file_outlives_the_machine_that_wrote_it(lam, cloud, key):
    ref = lam.ensure_ssh_key(key.with_suffix(".pub").read_text(), "vol")
    here, there = _offer_with_two_regions(lam)
    place = next(p for p in lam.volume_places(here.gpu_name) if p.place == here.region)
    vol = lam.create_volume("keeps", None, place)

    def boot(name: str):
        inst = lam.launch(here, LaunchSpec(gpus=1, name=name, ssh_key=ref, volume=vol))
        return wait_for(lambda: (g := lam.get(inst.instance_id)).status is InstanceState.RUNNING and g)

    def on(inst, command: str) -> str:
        out = ssh(inst.ssh_port, key, command, user=getpass.getuser(), host=inst.ssh_host)
        assert out.returncode == 0, out.stderr
        return out.stdout

    mount = f'"${{GPUBENCH_MOCK_ROOT:?}}{VOLUME_MOUNT}"'    # never the host's own /data
    first = boot("writer")
    on(first, f"echo made-by-{first.instance_id} > {mount}/hello.txt")
    assert lam.list_volumes()[0].in_use and lam.list_volumes()[0].used_bytes > 0
    with pytest.raises(InvalidRequestError) as e:
        lam.delete_volume(vol.volume_id)
    assert e.value.code == "filesystems/filesystem-in-use"
    lam.terminate(first.instance_id)
    wait_for(lambda: not lam.list_volumes()[0].in_use)

    second = boot("reader")
    assert second.region == vol.place and second.instance_id != first.instance_id
    assert on(second, f"cat {mount}/hello.txt").strip() == f"made-by-{first.instance_id}"
    with pytest.raises(InvalidRequestError) as e:
        lam.launch(there, LaunchSpec(gpus=1, name="elsewhere", ssh_key=ref, volume=vol))
    assert e.value.code == WRONG_REGION
    lam.terminate(second.instance_id)
    wait_for(lambda: not lam.list_volumes()[0].in_use)
    lam.delete_volume(vol.volume_id)
    assert lam.list_volumes() == []
