"""Lambda Cloud v1 against the running mock: catalog, keys, launch, SSH, list, terminate, errors."""

from __future__ import annotations

import pytest
import requests

from tests.mock.helpers import pub, ssh, wait_for

H100 = "gpu_1x_h100_sxm5"


def _launch(lam, key_name="k", itype="gpu_1x_a10", region=None, **more):
    types = lam("GET", "/instance-types").json()["data"]
    region = region or types[itype]["regions_with_capacity_available"][0]["name"]
    return lam("POST", "/instance-operations/launch",
               json={"region_name": region, "instance_type_name": itype, "ssh_key_names": [key_name],
                     "name": "bench", **more})


def test_catalog_shape_and_prices(lam):
    data = lam("GET", "/instance-types").json()["data"]
    assert isinstance(data, dict) and H100 in data and "gpu_8x_h100_sxm5" in data
    it = data[H100]["instance_type"]
    assert set(it) >= {"name", "description", "gpu_description", "price_cents_per_hour", "specs"}
    assert isinstance(it["price_cents_per_hour"], int) and 200 <= it["price_cents_per_hour"] <= 430
    assert it["specs"]["gpus"] == 1
    assert data[H100]["regions_with_capacity_available"][0].keys() == {"name", "description"}


@pytest.mark.slow
def test_launch_ssh_list_terminate(lam, keys, cloud):
    r = lam("POST", "/ssh-keys", json={"name": "k", "public_key": pub(keys["good"])})
    assert r.status_code == 200 and r.json()["data"]["name"] == "k"
    r = _launch(lam)
    assert r.status_code == 200, r.text
    (iid,) = r.json()["data"]["instance_ids"]
    assert len(iid) == 32
    inst = wait_for(lambda: (d := lam("GET", f"/instances/{iid}").json()["data"])["status"] == "active" and d)
    assert inst["ip"] == "127.0.0.1" and inst["instance_type"]["specs"]["gpus"] == 1
    out = ssh(inst["ssh_port"], keys["good"], "pwd; echo $GPUBENCH_MOCK_GPU_COUNT; python -c 'import sys'")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[0].endswith("/home") and out.stdout.split()[1] == "1"
    assert ssh(inst["ssh_port"], keys["other"], "true").returncode == 255
    assert [i["id"] for i in lam("GET", "/instances").json()["data"]] == [iid]
    r = lam("POST", "/instance-operations/terminate", json={"instance_ids": [iid]})
    assert r.status_code == 200 and r.json()["data"]["terminated_instances"][0]["status"] == "terminating"
    assert lam("GET", "/instances").json()["data"] == []
    assert lam("GET", f"/instances/{iid}").status_code == 404
    assert ssh(inst["ssh_port"], keys["good"], "true").returncode == 255


def test_booting_has_no_ip(tmp_path, keys):
    from gpubench.mock import MockCloud
    from tests.mock.helpers import Api
    with MockCloud.start(state_dir=tmp_path / "s", boot_delay=30) as c:
        e = c.env()
        lam = Api(e["GPUBENCH_LAMBDA_URL"], {"Authorization": f"Bearer {e['LAMBDA_API_KEY']}"})
        lam("POST", "/ssh-keys", json={"name": "k", "public_key": pub(keys["good"])})
        iid = _launch(lam).json()["data"]["instance_ids"][0]
        d = lam("GET", f"/instances/{iid}").json()["data"]
        assert d["status"] == "booting" and "ip" not in d
        assert d["actions"]["restart"]["reason_code"] == "vm-has-not-launched"


def test_auth_forms_and_errors(cloud, lam):
    e = cloud.env()
    url, key = e["GPUBENCH_LAMBDA_URL"] + "/instances", e["LAMBDA_API_KEY"]
    assert requests.get(url, auth=(key, ""), timeout=10).status_code == 200          # Basic KEY:
    bare = {"Authorization": f"Basic {key}"}
    assert requests.get(url, headers=bare, timeout=10).status_code == 200
    r = requests.get(url, headers={"Authorization": "Bearer wrong"}, timeout=10)
    assert r.status_code == 401 and r.json()["error"]["code"] == "global/invalid-api-key"
    r = requests.get(url, auth=("wrong", ""), timeout=10)
    assert r.status_code == 401
    r = lam("GET", "/instances/0123456789abcdef0123456789abcdef")
    assert r.status_code == 404 and r.json()["error"]["code"] == "global/object-does-not-exist"
    r = lam("POST", "/instance-operations/launch", json={"region_name": "us-east-1"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "global/invalid-parameters"
    r = _launch(lam, key_name="nope")
    assert r.status_code == 404


@pytest.mark.slow
def test_capacity_runs_out(lam, keys):
    lam("POST", "/ssh-keys", json={"name": "k", "public_key": pub(keys["good"])})
    t = lam("GET", "/instance-types").json()["data"]["gpu_8x_h100_sxm5"]
    region = t["regions_with_capacity_available"][0]["name"]
    assert _launch(lam, itype="gpu_8x_h100_sxm5", region=region).status_code == 200
    r = _launch(lam, itype="gpu_8x_h100_sxm5", region=region)
    assert r.status_code == 400
    assert r.json()["error"] == {"code": "instance-operations/launch/insufficient-capacity",
                                 "message": "Not enough capacity to fulfill launch request."}
    regions = lam("GET", "/instance-types").json()["data"]["gpu_8x_h100_sxm5"]["regions_with_capacity_available"]
    assert region not in [x["name"] for x in regions]


def test_generated_key_and_delete(lam):
    r = lam("POST", "/ssh-keys", json={"name": "gen"})
    d = r.json()["data"]
    assert "PRIVATE KEY" in d["private_key"] and d["public_key"].startswith("ssh-ed25519")
    assert lam("DELETE", f"/ssh-keys/{d['id']}").json() == {"data": {}}
    assert lam("GET", "/ssh-keys").json()["data"] == []


def test_regions(lam):
    names = [r["name"] for r in lam("GET", "/regions").json()["data"]]
    assert "us-east-1" in names
