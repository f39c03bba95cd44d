"""RunPod Instant Clusters (/v2/clusters) on the mock: create, the member pods with their
private addresses, delete, the errors the document gives, and cluster billing."""

from __future__ import annotations

import pytest

from tests.mock.helpers import pub, wait_for
from tests.mock.test_shapes import assert_same_shape, kind, real

GPU = "NVIDIA GeForce RTX 4090"

# What the document requires of each object, with the JSON type of each field
# (runpod-v2.openapi.json: Cluster, ClusterCompute, ClusterPodsSummary, ClusterNetwork,
# ClusterPrimary, PodCluster).
CLUSTER = {"id": "string", "name": "string", "type": "string", "compute": "object", "pods": "object",
           "createdAt": "string", "dataCenterId": "string", "network": "object", "primary": "object"}
COMPUTE = {"gpuTypeId": "string", "gpuCountPerPod": "number", "podCount": "number"}
SUMMARY = {"total": "number", "byStatus": "object"}
NETWORK = {"cidr": "string", "vxlanId": "number", "vxlanPort": "number"}
PRIMARY = {"podId": "string", "status": "string"}
MEMBERSHIP = {"id": "string", "rank": "number", "ip": "string"}


def _body(**more):
    return {"name": "gpubench-c", "type": "TRAINING", "image": "runpod/pytorch:1.0.2-cu1281-torch280-ubuntu2404",
            "compute": {"gpuTypeId": GPU, "gpuCountPerPod": 1, "podCount": 2}, "ports": ["22/tcp"],
            "startSsh": True, **more}


def _typed(obj: dict, fields: dict[str, str], closed: bool = True) -> None:
    for name, want in fields.items():
        assert name in obj and kind(obj[name]) == want, (name, obj.get(name))
    if closed:      # additionalProperties: false in the document
        assert set(obj) <= set(fields), set(obj) - set(fields)


@pytest.mark.slow
def test_create_list_and_delete_a_cluster(rp, keys):
    rp("PUT", "/account/ssh-keys", json={"keys": [pub(keys["good"])]})
    r = rp("POST", "/clusters", json=_body())
    assert r.status_code == 201, r.text
    cluster = r.json()
    _typed(cluster, CLUSTER)
    _typed(cluster["compute"], COMPUTE)
    _typed(cluster["pods"], SUMMARY)
    _typed(cluster["network"], NETWORK)
    _typed(cluster["primary"], PRIMARY, closed=False)
    assert cluster["compute"] == {"gpuTypeId": GPU, "gpuCountPerPod": 1, "podCount": 2}
    assert cluster["pods"]["total"] == 2 and cluster["type"] == "TRAINING"
    cid = cluster["id"]
    assert rp("GET", f"/clusters/{cid}").json()["id"] == cid
    assert [c["id"] for c in rp("GET", "/clusters").json()["clusters"]] == [cid]

    pods = rp("GET", f"/clusters/{cid}/pods").json()["pods"]
    assert [p["cluster"]["rank"] for p in pods] == [0, 1]
    assert [p["name"] for p in pods] == ["gpubench-c-0", "gpubench-c-1"]
    for pod in pods:
        _typed(pod["cluster"], MEMBERSHIP)
        assert pod["cluster"]["id"] == cid and pod["cluster"]["ip"] == "127.0.0.1"   # loopback mode
        assert pod["dataCenterId"] == cluster["dataCenterId"]
    assert cluster["primary"]["podId"] == pods[0]["id"]
    # members leave the plain pod list, and go only with their cluster
    assert rp("GET", "/pods").json()["pods"] == []
    listed = rp("GET", "/pods", params={"includeClusterPods": "true"}).json()["pods"]
    assert sorted(p["id"] for p in listed) == sorted(p["id"] for p in pods)
    refused = rp("DELETE", f"/pods/{pods[1]['id']}")
    assert refused.status_code == 409 and f"/v2/clusters/{cid}" in refused.json()["detail"]
    wait_for(lambda: all(rp("GET", f"/pods/{p['id']}").json()["status"] == "RUNNING" for p in pods))
    running = rp("GET", f"/clusters/{cid}").json()
    assert running["pods"]["byStatus"] == {"RUNNING": 2} and "sshEndpoint" in running["primary"]

    assert rp("DELETE", f"/clusters/{cid}").status_code == 204
    for pod in pods:
        assert rp("GET", f"/pods/{pod['id']}").status_code == 404
    assert rp("GET", f"/clusters/{cid}").status_code == 404
    assert rp("GET", "/clusters").json() == {"clusters": []}

    billed = rp("GET", "/billing/clusters", params={"clusterId": cid}).json()
    assert_same_shape(real("runpod/cluster-billing.doc-v2.9.0.json"), billed)
    assert billed["records"] and {r["clusterId"] for r in billed["records"]} == {cid}


@pytest.mark.parametrize("change, status, words", [
    ({"compute": {"gpuTypeId": GPU, "gpuCountPerPod": 1, "podCount": 1}}, 422, "podCount: must be >= 2"),
    ({"compute": {"gpuTypeId": "NVIDIA B999", "gpuCountPerPod": 1, "podCount": 2}}, 400, "unknown GPU type"),
    ({"type": "BATCH"}, 422, "$.type"),
    ({"registry": "x"}, 422, "additional properties 'registry'"),
    ({"compute": {"gpuTypeId": GPU, "gpuCountPerPod": 1, "podCount": 200}}, 400, "no longer any instances"),
])
def test_what_the_provider_refuses(rp, change, status, words):
    r = rp("POST", "/clusters", json=_body(**change))
    assert r.status_code == status and r.headers["content-type"].startswith("application/problem+json")
    body = r.json()
    assert words in body["detail"] + " ".join(body.get("errors", []))
    assert rp("GET", "/pods", params={"includeClusterPods": "true"}).json()["pods"] == []   # all or nothing


def test_unknown_cluster_is_404(rp):
    for method, path in (("GET", "/clusters/nope"), ("GET", "/clusters/nope/pods"), ("DELETE", "/clusters/nope")):
        r = rp(method, path)
        assert r.status_code == 404 and r.json()["detail"] == "cluster not found"
