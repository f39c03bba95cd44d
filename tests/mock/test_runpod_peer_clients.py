"""The mock's RunPod as peers' own clients call it, their requests replayed as sent.

gpuhunt's daily catalog job (dstackai/gpuhunt src/gpuhunt/providers/runpod.py @3584151) posts
its GraphQL queries to /graphql with no API key and reads the answers with plain indexing:
`resp["data"]["gpuTypes"]`, `pod["lowestPrice"]["stockStatus"]`, `clusterPrice * maxGpuCount`.
An answer with `data: null` (a variable the schema does not know) breaks the whole catalog.

dstack (dstackai/dstack @511c318) creates pods through GraphQL, its start command a JSON
`{"cmd": [...], "entrypoint": [...]}` inside `dockerArgs`, and reads a pod's `clusterIp`.
REST v2 takes the start command as one string, `args` (runpod-v2.openapi.json 2.9.0,
BaseContainerConfig); `entrypoint`/`cmd`, and REST v1's `dockerEntrypoint`/`dockerStartCmd`,
are unknown fields, which the real service refuses with 422 naming each.
"""

from __future__ import annotations

import json

import pytest
import requests

# gpuhunt's queries, verbatim
GPU_MAP = "query GpuTypes { gpuTypes { id manufacturer displayName memoryInGb } }"
GPU_TYPES = """
query GpuTypes {
  countryCodes
  dataCenters {
    id
    name
    listed
    __typename
  }
  gpuTypes {
    maxGpuCount
    maxGpuCount
    maxGpuCountCommunityCloud
    maxGpuCountSecureCloud
    minPodGpuCount
    id
    displayName
    memoryInGb
    secureCloud
    communityCloud
    __typename
  }
}
"""
POD_TYPES = """
query GpuTypes($lowestPriceInput: GpuLowestPriceInput, $gpuTypesInput: GpuTypeFilter) {
  gpuTypes(input: $gpuTypesInput) {
    lowestPrice(input: $lowestPriceInput) {
      minimumBidPrice
      uninterruptablePrice
      minVcpu
      minMemory
      stockStatus
      compliance
      countryCode
      __typename
    }
    maxGpuCount
    id
    nodeGroupDatacenters {
        id
    }
    clusterPrice
    displayName
    memoryInGb
    securePrice
    communityPrice
    oneMonthPrice
    threeMonthPrice
    sixMonthPrice
    __typename
  }
}
"""
CPU_DATA_CENTERS = """
query CpuDataCenters {
  dataCenters {
    id
    listed
  }
}
"""
CPU_FLAVORS = """
query CpuFlavors($dataCenterId: String!) {
  cpuFlavors {
    id
    displayName
    groupId
    minVcpu
    maxVcpu
    ramMultiplier
    diskLimitPerVcpu
    specifics(input: { dataCenterId: $dataCenterId }) {
      stockStatus
      securePrice
    }
  }
}
"""
MIN_CUDA = "12.8"     # gpuhunt's RunpodProvider.MIN_CUDA_VERSION


def _graphql(cloud) -> str:
    return cloud.env()["GPUBENCH_RUNPOD_URL"].removesuffix("/v2") + "/graphql"


def _post(url: str, payload: dict) -> dict:
    """As gpuhunt's _make_request: no key, raise_for_status, .json()."""
    resp = requests.post(url, json=payload, timeout=10)
    resp.raise_for_status()
    return resp.json()


def test_gpuhunts_catalog_job_without_a_key_reads_every_answer(cloud):
    url = _graphql(cloud)
    names = {g["id"] for g in _post(url, {"query": GPU_MAP})["data"]["gpuTypes"]}
    types = _post(url, {"query": GPU_TYPES, "variables": {}})["data"]
    centers = [dc["id"] for dc in types["dataCenters"] if dc["listed"]]
    top = max(g["maxGpuCount"] for g in types["gpuTypes"])
    assert names and centers and top == 8

    priced = []
    for secure, where in [(True, {"dataCenterId": centers[0]})] + \
            [(False, {"countryCode": c}) for c in types["countryCodes"] if c]:
        variables = {"GpuTypeFilter": {"cluster": False},
                     "lowestPriceInput": {"secureCloud": secure, **where, "gpuCount": 1, "minDisk": None,
                                          "minMemoryInGb": None, "minVcpuCount": None,
                                          "minCudaVersion": MIN_CUDA}}
        for pod in _post(url, {"query": POD_TYPES, "variables": variables})["data"]["gpuTypes"]:
            if pod["lowestPrice"]["stockStatus"] is not None:
                priced.append(pod["securePrice"] if secure else pod["communityPrice"])
    assert priced and all(isinstance(p, float) for p in priced)

    cluster = {"gpuTypesInput": {"cluster": True}, "lowestPriceInput": {"gpuCount": 8}}
    offers = [(t["clusterPrice"] * t["maxGpuCount"], dc["id"])
              for t in _post(url, {"query": POD_TYPES, "variables": cluster})["data"]["gpuTypes"]
              if t["lowestPrice"].get("minVcpu") is not None for dc in t["nodeGroupDatacenters"]]
    assert offers and all(price > 0 for price, _ in offers)

    cpu_centers = [dc["id"] for dc in _post(url, {"query": CPU_DATA_CENTERS, "variables": {}})["data"]
                   ["dataCenters"] if dc["listed"]]
    flavors = _post(url, {"query": CPU_FLAVORS, "variables": {"dataCenterId": cpu_centers[0]}})
    assert flavors["data"]["cpuFlavors"] == []         # the mock rents no CPU pods


def test_the_cuda_floor_filters_lowest_price(cloud):
    url = _graphql(cloud)
    ask = {"gpuTypesInput": None, "lowestPriceInput": {"gpuCount": 1, "minCudaVersion": "99.0"}}
    found = _post(url, {"query": POD_TYPES, "variables": ask})["data"]["gpuTypes"]
    assert found and all(t["lowestPrice"]["stockStatus"] is None for t in found)


def test_the_account_still_needs_the_key(cloud):
    url = _graphql(cloud)
    for query in ("query { myself { id } }", "query { pod(input: {podId: \"x\"}) { id clusterIp } }"):
        assert requests.post(url, json={"query": query}, timeout=10).status_code == 401


# REST v2 pod create: what dstack and REST v1 clients send for the start command
@pytest.mark.parametrize("fields", [
    {"entrypoint": ["/bin/sh", "-c"], "cmd": ["sleep infinity"]},
    {"dockerEntrypoint": ["/bin/sh", "-c"], "dockerStartCmd": ["sleep infinity"]},
])
def test_v2_refuses_argv_start_commands_naming_each_field(rp, fields):
    gpu = rp("GET", "/catalog/gpus").json()["gpus"][0]["id"]
    resp = rp("POST", "/pods", json={"name": "p", "image": "img", "gpu": {"id": gpu, "count": 1}, **fields})
    assert resp.status_code == 422
    body = resp.json()
    assert body["title"] == "Unprocessable Entity" and body["detail"] == "Request validation failed."
    assert body["errors"] == [f"$: additional properties '{k}' not allowed" for k in fields]


def test_v2_takes_the_start_command_as_one_string(rp):
    gpu = rp("GET", "/catalog/gpus").json()["gpus"][0]["id"]
    command = "/bin/sh -c 'sleep infinity'"
    pod = rp("POST", "/pods", json={"name": "p", "image": "img", "gpu": {"id": gpu, "count": 1},
                                    "args": command})
    assert pod.status_code == 201 and pod.json()["args"] == command
    argv = rp("POST", "/pods", json={"name": "p", "image": "img", "gpu": {"id": gpu, "count": 1},
                                     "args": ["sleep", "infinity"]})
    assert argv.status_code == 422 and argv.json()["errors"] == ["$.args: expected string"]


def test_dstacks_graphql_pod_create_and_query(cloud):
    """dstack's mutation (its start command JSON in dockerArgs) and its pod query (clusterIp)."""
    e = cloud.env()
    url = _graphql(cloud)
    headers = {"Authorization": f"Bearer {e['RUNPOD_API_KEY']}"}
    gpu = requests.get(e["GPUBENCH_RUNPOD_URL"] + "/catalog/gpus", headers=headers, timeout=10).json()["gpus"][0]["id"]
    docker_args = json.dumps(json.dumps({"cmd": ["sleep infinity"], "entrypoint": ["/bin/sh", "-c"]})).strip('"')
    mutation = f"""
        mutation {{
          podFindAndDeployOnDemand(
            input: {{
              name: "dstack-p", imageName: "img", gpuTypeId: "{gpu}", cloudType: SECURE,
              minCudaVersion: "{MIN_CUDA}", startSsh: true, supportPublicIp: true, gpuCount: 1,
              containerDiskInGb: 20, dockerArgs: "{docker_args}", ports: "22/tcp",
              env: [{{ key: "A", value: "b" }}]
            }}
          ) {{ id lastStatusChange imageName machine {{ podHostId }} }}
        }}"""
    created = requests.post(url, json={"query": mutation}, headers=headers, timeout=10).json()
    pod_id = created["data"]["podFindAndDeployOnDemand"]["id"]
    query = f'query pod {{ pod(input: {{podId: "{pod_id}"}}) {{ id clusterIp dockerArgs }} }}'
    pod = requests.post(url, json={"query": query}, headers=headers, timeout=10).json()["data"]["pod"]
    assert pod["clusterIp"] is None          # a plain pod, in no cluster
    assert json.loads(pod["dockerArgs"]) == {"cmd": ["sleep infinity"], "entrypoint": ["/bin/sh", "-c"]}
