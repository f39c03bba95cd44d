"""RunPod REST v2 and the legacy GraphQL (through the official runpod SDK) against the mock."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
import requests

from tests.mock.helpers import clean_env, pub, ssh, wait_for

GPU = "NVIDIA GeForce RTX 4090"


def _pod_body(**more):
    return {"name": "bench", "image": "runpod/pytorch:1.0.2-cu1281-torch280-ubuntu2404",
            "gpu": {"id": GPU, "count": 2}, "cloud": "SECURE", "disk": 50, "ports": ["22/tcp"],
            "startSsh": True, **more}


def test_catalog(rp):
    gpus = rp("GET", "/catalog/gpus").json()["gpus"]
    g = next(x for x in gpus if x["id"] == GPU)
    assert g["name"] == "RTX 4090" and 0.3 <= g["price"]["secure"] <= 0.7 and "availability" not in g
    r = rp("GET", "/catalog/gpus", params={"include": "AVAILABILITY", "product": "POD", "count": 2})
    g = next(x for x in r.json()["gpus"] if x["id"] == GPU)
    assert g["availability"] in ("HIGH", "MEDIUM", "LOW") and g["dataCenters"][0]["id"]
    assert rp("GET", "/catalog/gpus", params={"include": "AVAILABILITY"}).status_code == 400
    assert rp("GET", "/catalog/gpus", params={"product": "POD"}).status_code == 400
    assert rp("GET", "/catalog/gpus/NVIDIA%20GeForce%20RTX%204090").json()["id"] == GPU
    dcs = rp("GET", "/catalog/datacenters").json()["dataCenters"]
    assert rp("GET", f"/catalog/datacenters/{dcs[0]['id']}").json() == dcs[0]


@pytest.mark.slow
def test_pod_lifecycle_and_ssh(rp, keys):
    r = rp("PUT", "/account/ssh-keys", json={"keys": [pub(keys["good"])]})
    assert r.json() == {"keys": [pub(keys["good"])]}
    r = rp("POST", "/pods", json=_pod_body())
    assert r.status_code == 201, r.text
    pod = r.json()
    assert pod["status"] == "PROVISIONING" and pod["ssh"]["direct"] is None and pod["runtime"] == {}
    assert pod["startedAt"] is None and pod["gpu"] == {"id": GPU, "count": 2} and len(pod["id"]) == 14
    assert "RateLimit" in r.headers
    pod = wait_for(lambda: (p := rp("GET", f"/pods/{pod['id']}").json())["status"] == "RUNNING" and p)
    d = pod["ssh"]["direct"]
    assert pod["runtime"]["ports"] == [{"private": 22, "public": d["port"], "type": "tcp", "ip": "127.0.0.1"}]
    assert abs(pod["cost"] - 2 * 0.44) < 1e-6 and pod["actions"] == ["stop", "restart", "terminate"]
    out = ssh(d["port"], keys["good"], "echo $GPUBENCH_MOCK_GPU_COUNT", user=d["username"])
    assert out.returncode == 0 and out.stdout.strip() == "2", out.stderr
    assert ssh(d["port"], keys["other"], "true", user=d["username"]).returncode == 255
    assert [p["id"] for p in rp("GET", "/pods", params={"desiredStatus": "RUNNING"}).json()["pods"]] == [pod["id"]]
    r = rp("POST", f"/pods/{pod['id']}/action", json={"action": "stop"})
    assert r.status_code == 200 and r.json()["status"] == "EXITED" and r.json()["cost"] == 0.0
    assert rp("POST", f"/pods/{pod['id']}/action", json={"action": "restart"}).status_code == 409
    assert rp("POST", f"/pods/{pod['id']}/action", json={"action": "reset"}).status_code == 422
    r = rp("DELETE", f"/pods/{pod['id']}")
    assert r.status_code == 204 and r.content == b""
    r = rp("GET", f"/pods/{pod['id']}")
    assert r.status_code == 404 and r.headers["Content-Type"] == "application/problem+json"
    assert r.json()["title"] == "Not Found" and rp("GET", "/pods").json() == {"pods": []}


@pytest.mark.slow
def test_public_key_env_without_account_keys(rp, keys):
    body = _pod_body(startSsh=False, env={"PUBLIC_KEY": pub(keys["other"])})
    pid = rp("POST", "/pods", json=body).json()["id"]
    pod = wait_for(lambda: (p := rp("GET", f"/pods/{pid}").json())["status"] == "RUNNING" and p)
    d = pod["ssh"]["direct"]
    assert ssh(d["port"], keys["other"], "true", user=d["username"]).returncode == 0
    assert ssh(d["port"], keys["good"], "true", user=d["username"]).returncode == 255


def test_errors(cloud, rp):
    url = cloud.env()["GPUBENCH_RUNPOD_URL"] + "/pods"
    r = requests.get(url, headers={"Authorization": "Bearer nope"}, timeout=10)
    assert r.status_code == 401 and r.headers["Content-Type"] == "application/problem+json"
    assert r.json()["status"] == 401
    assert requests.get(url, params={"api_key": cloud.env()["RUNPOD_API_KEY"]}, timeout=10).status_code == 401
    r = rp("POST", "/pods", json=_pod_body(interruptible=True))
    assert r.status_code == 422 and "$: additional properties 'interruptible' not allowed" in r.json()["errors"]
    r = rp("POST", "/pods", json={"image": "x", "gpu": {"id": GPU, "count": 1}})
    assert r.status_code == 422 and "$: missing property 'name'" in r.json()["errors"]
    assert rp("GET", "/pods/doesnotexist00").status_code == 404
    assert rp("DELETE", "/pods/doesnotexist00").status_code == 404
    r = rp("POST", "/pods", json=_pod_body(gpu={"id": GPU, "count": 8}, dataCenterIds=["US-KS-2"]))
    assert r.status_code == 400 and r.json()["detail"].startswith("There are no longer any instances")
    r = rp("PUT", "/account/ssh-keys", json={"keys": ["not a key"]})
    assert r.status_code == 422


@pytest.mark.slow
def test_capacity_runs_out(rp):
    made = [rp("POST", "/pods", json=_pod_body(gpu={"id": GPU, "count": 8})).status_code for _ in range(4)]
    assert made == [201, 201, 201, 400]      # 16 + 8 GPUs in the secure cloud
    g = rp("GET", "/catalog/gpus/" + GPU, params={"include": "AVAILABILITY", "product": "POD", "count": 8}).json()
    assert g["availability"] == "NONE" and "dataCenters" not in g


SDK_SCRIPT = textwrap.dedent("""
    import json, os, sys, time
    import runpod
    runpod.api_key = os.environ["RUNPOD_API_KEY"]
    out = {"gpus": runpod.get_gpus()}
    out["gpu"] = runpod.get_gpu("NVIDIA GeForce RTX 4090", 2)
    pod = runpod.create_pod("sdk", "runpod/pytorch", "NVIDIA GeForce RTX 4090", cloud_type="SECURE",
                            gpu_count=2, ports="22/tcp")
    out["created"] = pod
    deadline = time.time() + 20
    while time.time() < deadline:
        pods = runpod.get_pods()
        if pods and pods[0]["runtime"]:
            break
        time.sleep(0.1)
    out["pods"] = pods
    out["pod"] = runpod.get_pod(pod["id"])
    runpod.terminate_pod(pod["id"])
    out["after"] = runpod.get_pods()
    try:
        runpod.terminate_pod(pod["id"])
    except Exception as e:
        out["again"] = type(e).__name__ + ": " + str(e)
    print(json.dumps(out))
""")


@pytest.mark.slow
def test_official_runpod_sdk(cloud, rp, keys, tmp_path):
    pytest.importorskip("runpod")
    rp("PUT", "/account/ssh-keys", json={"keys": [pub(keys["good"])]})
    env = clean_env({"RUNPOD_API_BASE_URL": cloud.base_url, "RUNPOD_API_KEY": cloud.env()["RUNPOD_API_KEY"]},
                    tmp_path)
    r = subprocess.run([sys.executable, "-c", SDK_SCRIPT], capture_output=True, text=True, env=env, timeout=90,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert {"id": GPU, "displayName": "RTX 4090", "memoryInGb": 24} in out["gpus"]
    assert out["gpu"]["lowestPrice"]["uninterruptablePrice"] == 0.34 and out["gpu"]["maxGpuCount"] == 8
    (pod,) = out["pods"]
    assert pod["id"] == out["created"]["id"] and pod["gpuCount"] == 2 and pod["desiredStatus"] == "RUNNING"
    port = pod["runtime"]["ports"][0]
    assert port["privatePort"] == 22 and port["isIpPublic"] is True
    assert out["pod"]["id"] == pod["id"]
    assert out["after"] == [] and "pod not found to terminate" in out["again"]
    assert rp("GET", f"/pods/{pod['id']}").status_code == 404     # the same pods as REST v2


def test_graphql_errors_and_auth(cloud):
    url = cloud.base_url + "/graphql"
    key = cloud.env()["RUNPOD_API_KEY"]
    r = requests.post(url, json={"query": "{ myself { id } }"}, headers={"Authorization": "Bearer x"}, timeout=10)
    assert r.status_code == 401
    r = requests.post(url, params={"api_key": key}, json={"query": "{ myself { nope } }"}, timeout=10)
    assert r.status_code == 400 and "nope" in r.json()["errors"][0]["message"]
    q = 'mutation { podFindAndDeployOnDemand(input: {name: "x", imageName: "i", gpuTypeId: "NVIDIA H100 80GB HBM3", gpuCount: 9, cloudType: SECURE}) { id } }'
    r = requests.post(url, params={"api_key": key}, json={"query": q}, timeout=10)
    assert r.status_code == 200 and r.json()["errors"][0]["message"]
    r = requests.post(url, headers={"Authorization": f"Bearer {key}"},
                      json={"query": "mutation($i: UpdateUserSettingsInput!) { updateUserSettings(input: $i) { pubKey } }",
                            "variables": {"i": {"pubKey": "ssh-ed25519 AAAA a\\n\\nssh-ed25519 BBBB b"}}}, timeout=10)
    assert r.json()["data"]["updateUserSettings"]["pubKey"].count("ssh-ed25519") == 2
