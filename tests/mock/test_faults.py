"""Each fault, for each provider, in that provider's own words; and the SPEC syntax."""

from __future__ import annotations

import time

import pytest
import requests

from gpubench.mock import FaultSpecError, parse_faults
from tests.mock.helpers import Api, pub, ssh, wait_for


class Driver:
    """Launch / look / terminate for one provider, so each fault test runs on all three."""

    def __init__(self, provider: str, cloud, key_pub: str) -> None:
        self.provider = provider
        e = cloud.env()
        if provider == "lambda":
            self.api = Api(e["GPUBENCH_LAMBDA_URL"], {"Authorization": f"Bearer {e['LAMBDA_API_KEY']}"})
            self.api("POST", "/ssh-keys", json={"name": "k", "public_key": key_pub})
        elif provider == "vast":
            self.api = Api(e["GPUBENCH_VAST_URL"], {"Authorization": f"Bearer {e['VAST_API_KEY']}"})
            self.api("POST", "/ssh/", json={"ssh_key": key_pub})
        else:
            self.api = Api(e["GPUBENCH_RUNPOD_URL"], {"Authorization": f"Bearer {e['RUNPOD_API_KEY']}"})
            self.api("PUT", "/account/ssh-keys", json={"keys": [key_pub]})

    def list(self) -> requests.Response:
        path = {"lambda": "/instances", "vast": "/instances/1/", "runpod": "/pods"}[self.provider]
        return self.api("GET", path)

    def launch(self) -> requests.Response:
        if self.provider == "lambda":
            return self.api("POST", "/instance-operations/launch",
                            json={"region_name": "us-east-1", "instance_type_name": "gpu_1x_h100_sxm5",
                                  "ssh_key_names": ["k"]})
        if self.provider == "vast":
            return self.api("PUT", "/asks/6000000/", json={"image": "img", "disk": 20.0})
        return self.api("POST", "/pods", json={"name": "p", "image": "img", "gpu": {"id": "NVIDIA L40S", "count": 1},
                                               "ports": ["22/tcp"], "startSsh": True})

    def launch_id(self) -> str:
        r = self.launch()
        assert r.status_code in (200, 201), r.text
        j = r.json()
        return {"lambda": lambda: j["data"]["instance_ids"][0], "vast": lambda: str(j["new_contract"]),
                "runpod": lambda: j["id"]}[self.provider]()

    def get(self, iid: str) -> dict | None:
        if self.provider == "lambda":
            r = self.api("GET", f"/instances/{iid}")
            return r.json()["data"] if r.status_code == 200 else None
        if self.provider == "vast":
            return self.api("GET", f"/instances/{iid}/").json()["instances"]
        r = self.api("GET", f"/pods/{iid}")
        return r.json() if r.status_code == 200 else None

    def status(self, iid: str):
        d = self.get(iid)
        key = {"lambda": "status", "vast": "actual_status", "runpod": "status"}[self.provider]
        return d[key] if d else "gone"

    RUNNING = {"lambda": "active", "vast": "running", "runpod": "RUNNING"}
    DEAD = {"lambda": "preempted", "vast": "offline", "runpod": "ERROR"}

    def port(self, iid: str) -> int:
        d = self.get(iid)
        return {"lambda": lambda: d["ssh_port"], "vast": lambda: d["ssh_port"],
                "runpod": lambda: d["ssh"]["direct"]["port"]}[self.provider]()

    def terminate(self, iid: str) -> requests.Response:
        if self.provider == "lambda":
            return self.api("POST", "/instance-operations/terminate", json={"instance_ids": [iid]})
        if self.provider == "vast":
            return self.api("DELETE", f"/instances/{iid}/", json={})
        return self.api("DELETE", f"/pods/{iid}")


PROVIDERS = ["lambda", "vast", "runpod"]


@pytest.fixture(params=PROVIDERS)
def drv(request, cloud, keys) -> Driver:
    return Driver(request.param, cloud, pub(keys["good"]))


def test_bad_key(drv, cloud):
    cloud.set_faults(f"{drv.provider}:bad-key")
    r = drv.list()
    assert r.status_code == 401
    j = r.json()
    assert {"lambda": lambda: j["error"]["code"] == "global/invalid-api-key",
            "vast": lambda: j["error"] == "auth_error",
            "runpod": lambda: j["title"] == "Unauthorized"}[drv.provider]()


@pytest.mark.parametrize("status", [429, 500, 503])
def test_http_status_faults(drv, cloud, status):
    cloud.set_faults(f"{drv.provider}:{status}=3")
    r = drv.list()
    assert r.status_code == status
    if status == 429:
        assert r.headers["Retry-After"] == "3"
    if drv.provider == "runpod":
        assert r.headers["Content-Type"] == "application/problem+json"


def test_counted_fault_then_recovers(drv, cloud):
    cloud.set_faults(f"{drv.provider}:503@2")
    assert [drv.list().status_code for _ in range(3)][:2] == [503, 503]
    assert drv.list().status_code in (200,)


def test_slow(drv, cloud):
    cloud.set_faults(f"{drv.provider}:slow=0.3")
    t = time.monotonic()
    assert drv.list().status_code == 200
    assert time.monotonic() - t >= 0.3


def test_no_capacity(drv, cloud):
    cloud.set_faults(f"{drv.provider}:no-capacity")
    r = drv.launch()
    j = r.json()
    if drv.provider == "lambda":
        assert r.status_code == 400 and j["error"]["code"] == "instance-operations/launch/insufficient-capacity"
        types = drv.api("GET", "/instance-types").json()["data"]
        assert all(not t["regions_with_capacity_available"] for t in types.values())
    elif drv.provider == "vast":
        assert r.status_code == 404 and "no_such_ask" in j["msg"]
        assert drv.api("POST", "/bundles/", json={"rentable": {"eq": True}}).json()["offers"] == []
    else:
        assert r.status_code == 400 and j["detail"].startswith("There are no longer any instances")


def test_never_boots(drv, cloud):
    cloud.set_faults(f"{drv.provider}:never-boots")
    iid = drv.launch_id()
    time.sleep(0.4)
    assert drv.status(iid) in ("booting", None, "loading", "PROVISIONING", "STARTING")


def test_ssh_refuses(drv, cloud, keys):
    cloud.set_faults(f"{drv.provider}:ssh-refuses")
    iid = drv.launch_id()
    wait_for(lambda: drv.status(iid) == Driver.RUNNING[drv.provider])
    out = ssh(drv.port(iid), keys["good"], "true")
    assert out.returncode == 255 and "refused" in out.stderr.lower()


@pytest.mark.slow
def test_dies_mid_run(drv, cloud, keys):
    iid = drv.launch_id()
    wait_for(lambda: drv.status(iid) == Driver.RUNNING[drv.provider])
    port = drv.port(iid)
    assert ssh(port, keys["good"], "true").returncode == 0
    cloud.set_faults(f"{drv.provider}:dies")
    wait_for(lambda: drv.status(iid) == Driver.DEAD[drv.provider])
    assert ssh(port, keys["good"], "true").returncode == 255


@pytest.mark.slow
def test_terminate_lies(drv, cloud, keys):
    iid = drv.launch_id()
    wait_for(lambda: drv.status(iid) == Driver.RUNNING[drv.provider])
    cloud.set_faults(f"{drv.provider}:terminate-lies")
    assert drv.terminate(iid).status_code in (200, 204)
    assert drv.status(iid) == Driver.RUNNING[drv.provider]
    assert ssh(drv.port(iid), keys["good"], "true").returncode == 0
    cloud.set_faults("")
    assert drv.terminate(iid).status_code in (200, 204)
    assert drv.status(iid) in ("gone", None)


def test_admin_endpoint(cloud):
    j = cloud.admin("/_mock/faults", {"spec": "vast:429@1,runpod:slow=0.1"})
    assert {(f["provider"], f["fault"]) for f in j["faults"]} == {("vast", "429"), ("runpod", "slow")}
    r = requests.post(cloud.base_url + "/_mock/faults", json={"spec": "vast:explode"}, timeout=10)
    assert r.status_code == 400 and "unknown fault" in r.json()["error"]
    assert cloud.admin("/_mock/faults", {"spec": ""})["faults"] == []


def test_fault_applies_to_its_provider_only(cloud, lam, vast):
    cloud.set_faults("lambda:500")
    assert lam("GET", "/instances").status_code == 500
    assert vast("GET", "/instances/1/").status_code == 200


@pytest.mark.parametrize("spec,words", [
    ("aws:429", "unknown provider"), ("vast:boom", "unknown fault"), ("vast:no-capacity=3", "takes no value"),
    ("vast:slow=x", "must be a number"), ("vast:429@0", "at least 1"), ("vast:dies@2", "applies only"),
])
def test_bad_specs(spec, words):
    with pytest.raises(FaultSpecError, match=words):
        parse_faults(spec)


def test_spec_without_provider_hits_all():
    assert {f.provider for f in parse_faults("503")} == set(PROVIDERS)
    assert [(f.name, f.value, f.remaining) for f in parse_faults("runpod:429=5@3")] == [("429", 5.0, 3)]
