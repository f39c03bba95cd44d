"""Vast.ai local volumes (the adapter's Volumes, providers/vast.py) against the in-process
mock cloud (gpubench/mock/vast_volumes.py), and against the answers vast.openapi.yaml
documents. A local volume lives on one machine: a machine rented with it is an offer on
the same machine_id, and what one machine wrote there the next one reads."""

from __future__ import annotations

import getpass
import subprocess
import time

import pytest
import requests

from gpubench.mock import vast_api
from gpubench.providers import registry, vast
from gpubench.providers.common import (VOLUME_MOUNT, InstanceState, InvalidRequestError, LaunchSpec,
                                       NotFoundError, Offer, Volume, VolumePlace, volumes_of)
from gpubench.providers.gpus import gpu_matches
from tests.helpers import mock_cloud

GPU = "RTX 4090"
SSH_OPTS = ["-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
            "-o", "BatchMode=yes", "-o", "ConnectTimeout=5", "-o", "LogLevel=ERROR"]


@pytest.fixture
def cloud(tmp_path, monkeypatch):
    yield from mock_cloud(tmp_path, monkeypatch, GPUBENCH_HTTP_RETRIES="1")


@pytest.fixture
def v(cloud) -> vast.Vast:
    adapter = registry.get("vast")
    assert volumes_of(adapter) is adapter
    return adapter


def _raw(cloud, method: str, path: str, **kw) -> requests.Response:
    """A call straight to the mock's Vast.ai API, as another client would make it."""
    return requests.request(method, cloud.base_url + path, headers={"Authorization": f"Bearer {vast_api.API_KEY}"},
                            timeout=10, **kw)


def _place(v, gpu: str = GPU, size: int = 20) -> VolumePlace:
    places = v.volume_places(gpu, size)
    assert places and places[0].offers > 0, places[:3]
    return places[0]


# -- places -------------------------------------------------------------------------

def test_places_are_machines_with_their_offers_most_first(v):
    places = v.volume_places(GPU, 50)
    by_machine: dict[str, int] = {}
    for o in v.offers(gpu_type=GPU):
        if gpu_matches(GPU, o.gpu_name):
            by_machine[str(o.extra["machine_id"])] = by_machine.get(str(o.extra["machine_id"]), 0) + 1
    assert len({p.place for p in places}) == len(places)          # one volume offer a machine
    assert all(p.offer_id and p.price_gb_month == 0.15 and p.place.isdigit() for p in places)
    assert [p.offers for p in places] == sorted((p.offers for p in places), reverse=True)
    assert {p.place: p.offers for p in places if p.offers} == by_machine
    assert all(p.offers == 0 for p in v.volume_places())           # no GPU type asked: none counted
    assert v.volume_places(None, 10_000) == []                     # no machine has 10 TB free


# -- create, list, delete -----------------------------------------------------------

def test_create_then_list_with_its_machine_size_and_cost(v, cloud):
    place = _place(v)
    vol = v.create_volume("data", 40, place)
    assert (vol.provider, vol.name, vol.place, vol.size_gb) == ("vast", "gpubench-data", place.place, 40.0)
    assert vol.launched_by_gpubench and vol.monthly_cost == pytest.approx(0.15 * 40)
    assert (vol.attached_to, vol.in_use, vol.status) == ((), False, "available")
    assert vol.extra["cost_basis"] == "storage_cost"
    assert [x.volume_id for x in v.list_volumes()] == [vol.volume_id]
    doc = cloud.engine.store.volume("vast", vol.volume_id)        # what the mock was sent
    assert (doc["label"], doc["machine_id"], doc["disk_space"]) == ("gpubench-data", int(place.place), 40.0)
    # the machine's free disk is less by the volume's size
    again = next(p for p in v.volume_places(GPU, 1) if p.place == place.place)
    assert again.extra["free_gb"] == place.extra["free_gb"] - 40


def test_a_volume_made_outside_gpubench_is_listed_as_not_its_own(v, cloud):
    offer = _raw(cloud, "POST", "/api/v0/volumes/search/", json={"limit": 1}).json()["offers"][0]
    answer = _raw(cloud, "PUT", "/api/v0/volumes/", json={"id": offer["id"], "size": 12, "name": "scratch"})
    assert answer.status_code == 200 and answer.json()["volume_name"].startswith("V.")
    [vol] = v.list_volumes()
    assert (vol.name, vol.place, vol.size_gb) == ("scratch", str(offer["machine_id"]), 12.0)
    assert not vol.launched_by_gpubench
    # the CLI's default size (15 GB) and no name
    _raw(cloud, "PUT", "/api/v0/volumes/", json={"id": offer["id"]})
    unnamed = [x for x in v.list_volumes() if x.volume_id != vol.volume_id]
    assert [(x.name, x.size_gb, x.launched_by_gpubench) for x in unnamed] == [("", 15.0, False)]


def test_delete_removes_it_and_an_unknown_one_is_not_found(v):
    vol = v.create_volume("gone", 10, _place(v))
    v.delete_volume(vol.volume_id)
    assert v.list_volumes() == []
    with pytest.raises(NotFoundError, match="does not exist"):
        v.delete_volume(vol.volume_id)
    with pytest.raises(NotFoundError):
        v.delete_volume("not-a-number")


def test_the_cli_s_delete_with_the_id_in_the_query_works_too(v, cloud):
    vol = v.create_volume("q", 10, _place(v))
    assert _raw(cloud, "DELETE", f"/api/v0/volumes/?id={vol.volume_id}").json()["success"] is True
    assert v.list_volumes() == []
    bad = _raw(cloud, "DELETE", "/api/v0/volumes/")
    assert (bad.status_code, bad.json()["msg"]) == (400, "Please provide a valid volume ID.")


def test_an_unknown_volume_offer_or_a_size_the_machine_lacks_is_refused(v):
    with pytest.raises(NotFoundError, match="not available"):
        v.create_volume("x", 10, VolumePlace("1", offer_id="999"))
    with pytest.raises(InvalidRequestError, match="free on machine"):
        v.create_volume("x", 9000, _place(v))
    assert v.list_volumes() == []


@pytest.mark.parametrize("size", [None, 0, -5, 2.5, True, "10"])
def test_a_bad_size_is_refused_before_any_call(fake_api, size):
    adapter = vast.connect("KEY", fake_api.url)
    with pytest.raises(InvalidRequestError, match="size"):
        adapter.create_volume("x", size, VolumePlace("20001", offer_id="28920001"))
    assert fake_api.requests == []


def test_offer_at_is_the_same_machine():
    vol = Volume("vast", "24100001", "gpubench-d", "20001")
    here = Offer("vast", "1", "RTX 4090", 1, 0.3, extra={"machine_id": 20001})
    there = Offer("vast", "2", "RTX 4090", 1, 0.3, extra={"machine_id": 20002})
    unknown = Offer("vast", "3", "RTX 4090", 1, 0.3)
    v = vast.Vast(client=None)
    assert v.offer_at(here, vol) and not v.offer_at(there, vol) and not v.offer_at(unknown, vol)
    assert not v.offer_at(here, Volume("lambda", "f", "gpubench-d", "20001"))


def test_launch_with_a_volume_sends_volume_info(fake_api):
    fake_api.route("PUT", "/api/v0/asks/5002/", (200, "vast/create.json"))
    adapter = vast.connect("KEY", fake_api.url)
    vol = Volume("vast", "24100001", "gpubench-d", "20001")
    adapter.launch(Offer("vast", "5002", "H100 PCIe", 1, 1.89, extra={"machine_id": 20001}),
                   LaunchSpec(gpus=1, name="v", volume=vol))
    body = fake_api.calls("PUT", "/api/v0/asks/5002/")[0]["json"]
    assert body["volume_info"] == {"create_new": False, "volume_id": 24100001, "mount_path": VOLUME_MOUNT}
    with pytest.raises(InvalidRequestError, match="not a Vast.ai one"):
        adapter.launch(Offer("vast", "5002", "H100 PCIe", 1, 1.89),
                       LaunchSpec(gpus=1, name="v", volume=Volume("lambda", "f", "gpubench-d", "us-east-1")))
    assert len(fake_api.calls("PUT", "/api/v0/asks/5002/")) == 1


def test_an_ask_with_a_volume_of_another_machine_is_refused_by_the_mock(v, cloud):
    vol = v.create_volume("pinned", 10, _place(v))
    elsewhere = next(o for o in v.offers(gpus=1) if not v.offer_at(o, vol))
    with pytest.raises(InvalidRequestError, match=f"local volume of machine {vol.place}"):
        v.launch(elsewhere, LaunchSpec(gpus=1, disk_gb=10, name="far", volume=vol))
    missing = Volume("vast", "99999999", "gpubench-none", str(elsewhere.extra["machine_id"]))
    with pytest.raises(InvalidRequestError, match="does not exist"):
        v.launch(elsewhere, LaunchSpec(gpus=1, disk_gb=10, name="none", volume=missing))
    assert v.list() == []                       # nothing was rented


def test_an_ask_may_make_its_volume_from_a_volume_offer_on_its_machine(v, cloud):
    cloud.set_faults("ssh-refuses")            # no sshd: the instance is only looked at
    offer = next(o for o in v.offers(gpus=1))
    place = next(p for p in v.volume_places() if p.place == str(offer.extra["machine_id"]))
    other = next(p for p in v.volume_places() if p.place != place.place)
    ask = {"client_id": "me", "image": "img", "disk": 10, "volume_info": {
        "create_new": True, "volume_id": int(other.offer_id), "size": 10, "mount_path": "/workspace"}}
    refused = _raw(cloud, "PUT", f"/api/v0/asks/{offer.offer_id}/", json=ask)
    assert refused.status_code == 400 and "not on this offer's machine" in refused.json()["msg"]
    assert v.list_volumes() == [] and v.list() == []
    ask["volume_info"]["volume_id"] = int(place.offer_id)
    made = _raw(cloud, "PUT", f"/api/v0/asks/{offer.offer_id}/", json=ask).json()
    [vol] = v.list_volumes()
    assert (vol.place, vol.size_gb, vol.attached_to) == (place.place, 10.0, (str(made["new_contract"]),))
    row = _raw(cloud, "GET", f"/api/v0/instances/{made['new_contract']}/").json()["instances"]
    assert row["volume_info"] == [{"volume_id": int(vol.volume_id), "mount_path": "/workspace"}]


# -- the answers vast.openapi.yaml documents ---------------------------------------

# The spec's examples (vast.openapi.yaml, vast-ai/docs e758d350): components.schemas.VolumeOffer's
# property examples; the Volume schema has none, so its row is the VolumeOffer examples under
# the Volume schema's field names; the rentVolume and deleteVolume answers' examples.
SPEC_VOLUME_OFFER = {
    "cpu_arch": "amd64", "cpu_name": "AMD EPYC 7K62 48-Core Processor", "cuda_max_good": 12.8,
    "disk_name": "FIKWOT FN955 4TB", "disk_space": 10.0, "driver_version": "570.124.04",
    "host_id": 166946, "inet_down": 654.6, "inet_up": 78.9, "machine_id": 36683,
    "mobo_name": "ROME2D32GM-2T", "reliability2": 0.9649497, "start_date": 1747341046.4320989,
    "static_ip": True, "storage_total_cost": 0.0005555555555555557, "verification": "verified",
}
SPEC_VOLUME_FIELDS = ("instances", "driver_version", "cuda_max_good", "machine_id", "public_ipaddr",
                      "reliability2", "host_id", "cpu_name", "mobo_name", "disk_space", "disk_name",
                      "inet_up", "inet_down", "storage_total_cost", "os_version", "verification",
                      "static_ip", "cpu_arch", "start_date", "id", "status")
SPEC_CREATED = {"success": True, "volume_name": "V.20118481"}
SPEC_NO_SUCH_VOLUME = {"success": False, "error": "no_such_volume", "msg": "Volume with that ID does not exist."}
SPEC_BAD_ID = {"success": False, "error": "invalid_args", "msg": "Please provide a valid volume ID."}


def test_the_documented_answers(fake_api):
    adapter = vast.connect("KEY", fake_api.url)
    offer = {"id": 420, **SPEC_VOLUME_OFFER}                # rentVolume's example id
    fake_api.route("POST", "/api/v0/volumes/search/", (200, {"offers": [offer]}))
    [place] = adapter.volume_places(size_gb=15)
    assert (place.place, place.offer_id, place.offers, place.price_gb_month) == ("36683", "420", 0, None)
    search = fake_api.calls("POST", "/api/v0/volumes/search/")[0]["json"]
    assert search["disk_space"] == {"gte": 15} and search["allocated_storage"] == 15.0

    row = {k: SPEC_VOLUME_OFFER[k] for k in SPEC_VOLUME_FIELDS if k in SPEC_VOLUME_OFFER}
    row.update({"id": 20118481, "instances": [], "status": "ready"})
    fake_api.route("PUT", "/api/v0/volumes/", (200, SPEC_CREATED))
    fake_api.route("GET", "/api/v0/volumes/", (200, {"volumes": [row]}))
    vol = adapter.create_volume("d", 15, place)
    put = fake_api.calls("PUT", "/api/v0/volumes/")[0]["json"]
    assert put == {"id": 420, "size": 15, "name": "gpubench-d"}
    listing = fake_api.calls("GET", "/api/v0/volumes/")[0]["query"]
    assert listing == {"owner": ["me"], "type": ["local_volume"]}
    # no per-GB storage_cost in a documented Volume: storage_total_cost, read as $ an hour
    assert (vol.volume_id, vol.place, vol.size_gb, vol.attached_to, vol.in_use, vol.status) == \
        ("20118481", "36683", 10.0, (), False, "ready")
    assert vol.monthly_cost == pytest.approx(0.4) and "unverified" in vol.extra["cost_basis"]
    assert vol.name == "" and not vol.launched_by_gpubench    # the spec's Volume has no name field

    fake_api.route("DELETE", "/api/v0/volumes/", (404, SPEC_NO_SUCH_VOLUME))
    with pytest.raises(NotFoundError, match="does not exist"):
        adapter.delete_volume("20118481")
    sent = fake_api.calls("DELETE", "/api/v0/volumes/")[0]
    assert sent["json"] == {"id": 20118481} and sent["query"] == {"id": ["20118481"]}
    fake_api.route("DELETE", "/api/v0/volumes/", (400, SPEC_BAD_ID))
    with pytest.raises(InvalidRequestError, match="valid volume ID"):
        adapter.delete_volume("1")


def test_a_volume_made_but_not_listed_is_what_the_create_said(fake_api):
    adapter = vast.connect("KEY", fake_api.url)
    fake_api.route("PUT", "/api/v0/volumes/", (200, SPEC_CREATED))
    fake_api.route("GET", "/api/v0/volumes/", (500, {"success": False, "error": "server_error", "msg": "down"}))
    vol = adapter.create_volume("d", 30, VolumePlace("36683", offer_id="420", price_gb_month=0.1))
    assert (vol.volume_id, vol.name, vol.place, vol.size_gb, vol.monthly_cost, vol.extra) == \
        ("20118481", "gpubench-d", "36683", 30.0, 3.0, {"listed": False})
    assert len(fake_api.calls("PUT", "/api/v0/volumes/")) == 1        # a create is never sent twice


def test_instances_are_read_as_ids_or_objects(fake_api):
    adapter = vast.connect("KEY", fake_api.url)
    rows = [{"id": 1, "machine_id": 2, "disk_space": 20, "storage_cost": 0.1, "instances": [24100001]},
            {"id": 3, "machine_id": 2, "disk_space": 20, "instances": [{"id": 24100002}], "label": "gpubench-x"}]
    fake_api.route("GET", "/api/v0/volumes/", (200, {"volumes": rows}))
    a, b = adapter.list_volumes()
    assert (a.attached_to, a.in_use, a.monthly_cost) == (("24100001",), True, 2.0)
    assert (b.attached_to, b.monthly_cost, b.launched_by_gpubench) == (("24100002",), None, True)
    fake_api.route("GET", "/api/v0/volumes/", (200, {"volumes": [{"machine_id": 2}]}))
    with pytest.raises(Exception, match="unexpected answer"):
        adapter.list_volumes()


# -- the data stays (instances boot an sshd) -----------------------------------------

def _ssh(inst, key, command: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ssh", *SSH_OPTS, "-i", str(key), "-p", str(inst.ssh_port),
                           f"{getpass.getuser()}@{inst.ssh_host}", command],
                          capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)


def _running(v, iid: str, deadline_s: float = 30.0):
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        inst = v.get(iid)
        if inst.status is InstanceState.RUNNING and inst.ssh_host:
            return inst
        time.sleep(0.05)
    pytest.fail(f"instance {iid} not running within {deadline_s:g} s")


def _gone(v, iid: str, deadline_s: float = 15.0) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if all(i.instance_id != iid for i in v.list()):
            return
        time.sleep(0.05)
    pytest.fail(f"instance {iid} still listed after {deadline_s:g} s")


@pytest.mark.slow
def test_a_file_written_on_one_machine_is_read_on_the_next_on_the_same_machine(v, cloud, tmp_path):
    key = tmp_path / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    ref = v.ensure_ssh_key(key.with_suffix(".pub").read_text(), "gpubench")
    vol = v.create_volume("data", 20, _place(v))
    here = [o for o in v.offers(gpus=1) if v.offer_at(o, vol)]
    assert here, "the volume's machine has an offer"
    data = f'"$GPUBENCH_MOCK_ROOT{VOLUME_MOUNT}"'

    first = v.launch(here[0], LaunchSpec(gpus=1, disk_gb=20, name="vol-a", ssh_key=ref, volume=vol))
    first = _running(v, first.instance_id)
    assert first.extra["volumes"] == (vol.volume_id,)
    wrote = _ssh(first, key, f"echo kept > {data}/note.txt && echo $GPUBENCH_MOCK_ROOT")
    assert wrote.returncode == 0, wrote.stderr
    [listed] = v.list_volumes()
    assert (listed.attached_to, listed.in_use, listed.status) == ((first.instance_id,), True, "in_use")

    with pytest.raises(InvalidRequestError, match="must be destroyed before deletion"):
        v.delete_volume(vol.volume_id)
    elsewhere = next(o for o in v.offers(gpus=1) if not v.offer_at(o, vol))
    with pytest.raises(InvalidRequestError, match="its own machine"):
        v.launch(elsewhere, LaunchSpec(gpus=1, disk_gb=20, name="vol-far", ssh_key=ref, volume=vol))

    v.terminate(first.instance_id)
    _gone(v, first.instance_id)
    # the mock lists one offer a machine: renting the volume's machine again is that offer
    second = v.launch(here[0], LaunchSpec(gpus=1, disk_gb=20, name="vol-b", ssh_key=ref, volume=vol))
    second = _running(v, second.instance_id)
    read = _ssh(second, key, f"cat {data}/note.txt && echo $GPUBENCH_MOCK_ROOT")
    assert read.returncode == 0, read.stderr
    text, root = read.stdout.split()
    assert text == "kept" and root != wrote.stdout.strip()      # another machine's root, the same data

    v.terminate(second.instance_id)
    _gone(v, second.instance_id)
    v.delete_volume(vol.volume_id)
    assert v.list_volumes() == []
    assert not cloud.engine.host.volume_dir("vast", vol.volume_id).exists()
