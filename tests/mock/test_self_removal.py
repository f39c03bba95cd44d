"""Machines that remove themselves, as the mock serves them: a Vast.ai instance and a
RunPod pod carry their own id and key (the providers' documented variables), and that
key may delete that machine and nothing else; `shutdown` on a mock machine stops that
instance and never the machine the mock runs on."""

from __future__ import annotations

import pytest

from gpubench.mock import MockCloud
from tests.mock.helpers import Api, pub, ssh, wait_for

GPU = "NVIDIA GeForce RTX 4090"


@pytest.fixture
def booting(tmp_path):
    """A mock whose instances stay booting: the API only, no sshd started."""
    with MockCloud.start(state_dir=tmp_path / "state", boot_delay=600.0) as c:
        yield c


def _apis(cloud: MockCloud) -> tuple[Api, Api]:
    e = cloud.env()
    return (Api(e["GPUBENCH_VAST_URL"], {"Authorization": f"Bearer {e['VAST_API_KEY']}"}),
            Api(e["GPUBENCH_RUNPOD_URL"], {"Authorization": f"Bearer {e['RUNPOD_API_KEY']}"}))


def _vast_instance(vast: Api) -> str:
    body = {"rentable": {"eq": True}, "num_gpus": {"eq": 1}, "order": [["dph_total", "asc"]]}
    offers = vast("POST", "/bundles/", json=body).json()["offers"]
    for offer in offers:
        r = vast("PUT", f"/asks/{offer['id']}/", json={"image": "img", "disk": 10.0})
        if r.status_code == 200:
            return str(r.json()["new_contract"])
    raise AssertionError("no Vast.ai offer could be rented")


def _pod(rp: Api) -> str:
    r = rp("POST", "/pods", json={"name": "gpubench-w", "image": "img", "gpu": {"id": GPU, "count": 1},
                                  "ports": ["22/tcp"], "startSsh": True})
    assert r.status_code == 201, r.text
    return r.json()["id"]


def _machine_env(cloud: MockCloud, provider: str, iid: str) -> dict:
    return cloud.engine.store.get(provider, iid).extra["machine_env"]


def _as(api: Api, key: str) -> Api:
    return Api(api.base, {"Authorization": f"Bearer {key}"})


def test_a_vast_instance_key_deletes_that_instance_only(booting):
    vast, _ = _apis(booting)
    mine, other = _vast_instance(vast), _vast_instance(vast)
    env = _machine_env(booting, "vast", mine)
    assert env["CONTAINER_ID"] == mine and env["CONTAINER_API_KEY"] != booting.env()["VAST_API_KEY"]
    machine = _as(vast, env["CONTAINER_API_KEY"])
    assert machine("DELETE", f"/instances/{other}/", json={}).status_code == 401
    assert machine("GET", "/instances/").status_code == 401
    assert machine("GET", f"/instances/{mine}/").status_code == 401
    assert machine("PUT", f"/instances/{mine}/", json={"state": "stopped"}).status_code == 401
    assert _as(vast, _machine_env(booting, "vast", other)["CONTAINER_API_KEY"])(
        "DELETE", f"/instances/{mine}/", json={}).status_code == 401
    r = machine("DELETE", f"/instances/{mine}/", json={})
    assert r.status_code == 200 and r.json()["success"] is True
    assert vast("GET", f"/instances/{mine}/").json()["instances"] is None
    assert vast("GET", f"/instances/{other}/").json()["instances"] is not None


def test_a_runpod_pod_key_deletes_that_pod_only(booting):
    _, rp = _apis(booting)
    mine, other = _pod(rp), _pod(rp)
    env = _machine_env(booting, "runpod", mine)
    assert env["RUNPOD_POD_ID"] == mine and env["RUNPOD_API_KEY"] != booting.env()["RUNPOD_API_KEY"]
    pod = _as(rp, env["RUNPOD_API_KEY"])
    assert pod("DELETE", f"/pods/{other}").status_code == 401
    assert pod("GET", "/pods").status_code == 401
    assert pod("POST", f"/pods/{mine}/action", json={"action": "terminate"}).status_code == 401
    assert pod("DELETE", f"/pods/{mine}").status_code == 204
    assert rp("GET", f"/pods/{mine}").status_code == 404 and rp("GET", f"/pods/{other}").status_code == 200


@pytest.mark.slow
def test_a_machine_sees_its_own_id_and_key_and_halts_only_itself(cloud, keys, vast):
    vast("POST", "/ssh/", json={"ssh_key": pub(keys["good"])})
    iid = _vast_instance(vast)
    row = wait_for(lambda: (r := vast("GET", f"/instances/{iid}/").json()["instances"])
                   and r["actual_status"] == "running" and r, timeout=20)
    out = ssh(row["ssh_port"], keys["good"], "echo $CONTAINER_ID $CONTAINER_API_KEY; command -v shutdown",
              user=cloud.engine.host.user)
    assert out.returncode == 0, out.stderr
    seen_id, seen_key, shutdown = out.stdout.split()
    env = _machine_env(cloud, "vast", iid)
    assert (seen_id, seen_key) == (iid, env["CONTAINER_API_KEY"])
    assert shutdown.startswith(str(cloud.engine.state_dir))        # the mock's, not the host's
    out = ssh(row["ssh_port"], keys["good"], "sudo -n shutdown -h now", user=cloud.engine.host.user)
    assert out.returncode == 0, out.stderr
    wait_for(lambda: vast("GET", f"/instances/{iid}/").json()["instances"]["actual_status"] == "exited",
             timeout=10)
    assert ssh(row["ssh_port"], keys["good"], "true", user=cloud.engine.host.user).returncode == 255
