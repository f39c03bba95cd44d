"""The providers' newer API surface in the mock: Lambda images, `terminating` and tags;
Vast.ai ports from a create's env and its charges; RunPod pod billing; the legacy
GraphQL catalog as other tools (gpuhunt) read it, without an API key."""

from __future__ import annotations

import json
import time

import requests

from gpubench.mock import MockCloud
from tests.mock.helpers import Api, pub, wait_for


def _lambda_launch(lam, keys, **more):
    lam("POST", "/ssh-keys", json={"name": "k", "public_key": pub(keys["good"])})
    return lam("POST", "/instance-operations/launch", json={
        "region_name": "us-east-1", "instance_type_name": "gpu_1x_h100_sxm5", "ssh_key_names": ["k"], **more})


def test_lambda_images(lam):
    images = lam("GET", "/images").json()["data"]
    assert images and {"id", "created_time", "updated_time", "name", "description", "family", "version",
                       "architecture", "region"} <= set(images[0])
    assert {i["region"]["name"] for i in images} >= {"us-east-1", "us-west-1"}


def test_lambda_tags_on_launch(lam, keys):
    resp = _lambda_launch(lam, keys, name="plain", tags=[{"key": "gpubench", "value": "t1"}])
    iid = resp.json()["data"]["instance_ids"][0]
    assert lam("GET", f"/instances/{iid}").json()["data"]["tags"] == [{"key": "gpubench", "value": "t1"}]
    bad = _lambda_launch(lam, keys, tags=[{"key": "Bad Key", "value": "x"}])
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "global/invalid-parameters"


def test_lambda_terminating_then_gone(tmp_path, keys):
    with MockCloud.start(state_dir=tmp_path / "s", boot_delay=0.5) as cloud:
        e = cloud.env()
        lam = Api(e["GPUBENCH_LAMBDA_URL"], {"Authorization": f"Bearer {e['LAMBDA_API_KEY']}"})
        iid = _lambda_launch(lam, keys).json()["data"]["instance_ids"][0]
        done = lam("POST", "/instance-operations/terminate", json={"instance_ids": [iid]}).json()
        assert done["data"]["terminated_instances"][0]["status"] == "terminating"
        assert lam("GET", f"/instances/{iid}").json()["data"]["status"] == "terminating"
        assert [i["status"] for i in lam("GET", "/instances").json()["data"]] == ["terminating"]
        wait_for(lambda: lam("GET", f"/instances/{iid}").status_code == 404, timeout=5)
        assert lam("GET", "/instances").json()["data"] == []


def test_vast_env_ports_and_charges(vast, keys):
    vast("POST", "/ssh/", json={"ssh_key": pub(keys["good"])})
    offer = vast("POST", "/bundles/", json={"num_gpus": {"eq": 1}, "limit": 1}).json()["offers"][0]
    created = vast("PUT", f"/asks/{offer['id']}/", json={
        "client_id": "me", "image": "img", "disk": 10, "label": "gpubench-p",
        "env": {"-p 10022:10022": "1", "-p 8080:8080/udp": "1", "FOO": "bar"}}).json()
    iid = created["new_contract"]
    row = wait_for(lambda: (vast("GET", f"/instances/{iid}/").json()["instances"] or {}).get("ports"))
    assert set(row) == {"22/tcp", "10022/tcp", "8080/udp"}
    inst = vast("GET", f"/instances/{iid}/").json()["instances"]
    host_ports = [int(m[0]["HostPort"]) for m in row.values()]
    assert inst["direct_port_start"] == min(host_ports) and inst["direct_port_end"] == max(host_ports)
    assert vast("DELETE", f"/instances/{iid}/").json()["success"]
    now = time.time()
    window = {"day": {"gte": int(now - 3600), "lte": int(now + 3600)}}
    charges = vast("GET", "/charges/", params={"select_filters": json.dumps(window)}).json()
    [entry] = [r for r in charges["results"] if r["source"] == f"instance-{iid}"]
    assert entry["type"] == "instance" and entry["amount"] >= 0 and entry["metadata"]["label"] == "gpubench-p"
    assert vast("GET", "/charges/").status_code == 400


def test_runpod_pod_billing(rp, keys):
    gpu = rp("GET", "/catalog/gpus").json()["gpus"][0]["id"]
    pod = rp("POST", "/pods", json={"name": "gpubench-b", "image": "img", "gpu": {"id": gpu, "count": 1},
                                    "env": {"PUBLIC_KEY": pub(keys["good"])}}).json()
    time.sleep(0.2)
    assert rp("DELETE", f"/pods/{pod['id']}").status_code == 204
    bill = rp("GET", "/billing/pods", params={"podId": pod["id"]}).json()
    assert bill["metadata"]["recordCount"] >= 1 and bill["metadata"]["query"]["podId"] == pod["id"]
    assert {r["podId"] for r in bill["records"]} == {pod["id"]}
    assert bill["metadata"]["totals"]["totalAmount"] >= 0
    assert rp("GET", "/billing/pods", params={"podId": "nope"}).json()["records"] == []


GPUHUNT_CATALOG = """query GpuTypes { countryCodes dataCenters { id name listed __typename }
  gpuTypes { maxGpuCount maxGpuCountCommunityCloud maxGpuCountSecureCloud minPodGpuCount
             id displayName memoryInGb secureCloud communityCloud __typename } }"""
GPUHUNT_PRICES = """query GpuTypes($lowestPriceInput: GpuLowestPriceInput, $gpuTypesInput: GpuTypeFilter) {
  gpuTypes(input: $gpuTypesInput) {
    lowestPrice(input: $lowestPriceInput) { minimumBidPrice uninterruptablePrice minVcpu minMemory
                                            stockStatus compliance countryCode availableGpuCounts }
    maxGpuCount id displayName memoryInGb securePrice secureSpotPrice communityPrice communitySpotPrice
    oneMonthPrice threeMonthPrice sixMonthPrice } }"""


def test_graphql_catalog_without_a_key(cloud):
    url = cloud.env()["GPUBENCH_RUNPOD_URL"].removesuffix("/v2") + "/graphql"
    body = requests.post(url, json={"query": GPUHUNT_CATALOG}, timeout=15).json()["data"]
    assert "US" in body["countryCodes"] and all(d["listed"] for d in body["dataCenters"])
    assert max(g["maxGpuCount"] for g in body["gpuTypes"]) == 8
    dc = body["dataCenters"][0]["id"]
    prices = requests.post(url, json={"query": GPUHUNT_PRICES, "variables": {"lowestPriceInput": {
        "dataCenterId": dc, "gpuCount": 1, "minDisk": None, "minMemoryInGb": None, "minVcpuCount": None,
        "secureCloud": None}}}, timeout=15).json()["data"]["gpuTypes"]
    stocked = [g for g in prices if g["lowestPrice"]["stockStatus"]]
    assert stocked and all(g["lowestPrice"]["availableGpuCounts"][0] == 1 for g in stocked)
    # the account's own things still need the key
    for query in ("query { myself { id } }", 'mutation { podTerminate(input: {podId: "x"}) }'):
        assert requests.post(url, json={"query": query}, timeout=15).status_code == 401


def test_orphans_found_by_tag(cloud, lam, keys, tmp_path, monkeypatch):
    """An untracked machine tagged gpubench is an orphan, whatever it is named."""
    from gpubench.lifecycle import fleet
    from gpubench.store.ledger import Ledger

    for k, val in cloud.env().items():
        monkeypatch.setenv(k, val)
    _lambda_launch(lam, keys, name="renamed-by-hand", tags=[{"key": "gpubench", "value": "sweep-7"}])
    _lambda_launch(lam, keys, name="someone-elses")
    with Ledger(tmp_path / "ledger.sqlite") as ledger:
        rows = fleet.reconcile(ledger, fleet.connect_all(["lambda"]))
    assert [(r.name, r.note) for r in rows] == [("sweep-7", "not in ledger (orphan)")]
