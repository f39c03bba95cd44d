"""RunPod legacy GraphQL: the placement filters of the released SDK's deploy mutation.

The mutation is the SDK's own text (tests/fixtures/runpod/sdk_deploy_mutation.json, with its
source); each case changes one or a few of its input values and checks where the pod lands, or
that it is refused in the real API's words. The RTX 4090 is offered in the secure cloud in EU-RO-1
and CA-MTL-1 and in the community cloud in US-KS-2 and US-TX-3 (catalog.runpod_slots); the data
centers' properties are catalog.RUNPOD_DC_SPECS.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import requests

from gpubench.mock.runpod_pods import NO_CAPACITY

FIXTURE = json.loads((Path(__file__).parents[1] / "fixtures/runpod/sdk_deploy_mutation.json").read_text())
SDK_MUTATION = FIXTURE["mutation"]


CANADA = {"countryCode": '"CA"', "allowedCudaVersions": '["12.2"]', "minDownload": "500", "minUpload": "300"}


def _with(**values: str) -> str:
    """The SDK's mutation with the named input fields set to the given GraphQL literals."""
    text = SDK_MUTATION
    for field, literal in values.items():
        text, n = re.subn(rf'\b{field}: ("[^"]*"|\[[^\]]*\]|\w+)', f"{field}: {literal}", text, count=1)
        assert n == 1, f"{field} is not in the SDK's mutation"
    return text


@pytest.fixture
def gql(cloud):
    url, key = cloud.base_url + "/graphql", cloud.env()["RUNPOD_API_KEY"]

    def post(query: str) -> dict:
        r = requests.post(url, json={"query": query}, headers={"Authorization": f"Bearer {key}"}, timeout=15)
        assert r.status_code == 200, r.text
        return r.json()
    return post


def _placed(gql, query: str) -> tuple[str, str]:
    """Deploy; returns (data center, cloud) of the pod it made."""
    body = gql(query)
    assert "errors" not in body, body["errors"]
    pod_id = body["data"]["podFindAndDeployOnDemand"]["id"]
    pod = gql(f'{{ pod(input: {{podId: "{pod_id}"}}) {{ dataCenterId cloudType }} }}')["data"]["pod"]
    return pod["dataCenterId"], pod["cloudType"]


def _refused(gql, query: str) -> str:
    body = gql(query)
    assert body["data"] == {"podFindAndDeployOnDemand": None} or body["data"] is None, body
    return body["errors"][0]["message"]


def test_fixture_is_what_the_sdk_sends():
    pods = pytest.importorskip("runpod.api.mutations.pods")
    assert pods.generate_pod_deployment_mutation(**FIXTURE["call"]) == SDK_MUTATION


def test_sdk_mutation_as_sent_places_in_the_us_community_cloud(gql):
    # US only, so not the secure cloud's Romania or Canada; 2 GPUs with ports on a public IP
    assert _placed(gql, SDK_MUTATION) == ("US-KS-2", "COMMUNITY")


@pytest.mark.parametrize("values, where", [
    ({"countryCode": '"RO"'}, ("EU-RO-1", "SECURE")),
    ({"dataCenterId": '"US-TX-3"'}, ("US-TX-3", "COMMUNITY")),
    ({"cloudType": "COMMUNITY"}, ("US-KS-2", "COMMUNITY")),
    ({"minVcpuCount": "32"}, ("US-KS-2", "COMMUNITY")),                 # 16 per GPU there
    ({"minMemoryInGb": "250"}, ("US-KS-2", "COMMUNITY")),               # 125 GB per GPU there
    ({"minDownload": "5000", "minUpload": "2000"}, ("US-KS-2", "COMMUNITY")),
    ({"volumeInGb": "1980"}, ("US-KS-2", "COMMUNITY")),                 # 1000 GB per GPU with the 20 of disk
    ({"allowedCudaVersions": '["12.9", "13.0"]'}, ("US-TX-3", "COMMUNITY")),
    ({"gpuCount": "8"}, ("US-KS-2", "COMMUNITY")),
    # Canada's hosts have no public IP (HTTP ports only), older drivers and a slower network
    ({**CANADA, "supportPublicIp": "false", "ports": '"8888/http"'}, ("CA-MTL-1", "SECURE")),
])
def test_each_filter_places(gql, values, where):
    assert _placed(gql, _with(**values)) == where


@pytest.mark.parametrize("values", [
    {"countryCode": '"ZZ"'},
    {"countryCode": '"US"', "cloudType": "SECURE"},                     # the 4090's secure cloud is RO, CA
    {"dataCenterId": '"EU-RO-1"'},                                      # not in the US
    {"minVcpuCount": "33"},
    {"minMemoryInGb": "251"},
    {"minDownload": "5001"},
    {"minUpload": "2001"},
    {"volumeInGb": "1981"},
    {"containerDiskInGb": "1981"},
    {"allowedCudaVersions": '["11.8"]'},                                 # only Canada, without a public IP
    {**CANADA, "supportPublicIp": "false"},                              # 22/tcp needs a public IP
    {**CANADA, "supportPublicIp": "true", "ports": '"8888/http"'},
    {**CANADA, "supportPublicIp": "false", "ports": '"8888/http"', "minDownload": "501"},
    {"gpuCount": "9"},
])
def test_each_filter_refuses(gql, values):
    message = _refused(gql, _with(**values))
    if values != {"gpuCount": "9"}:
        assert message == NO_CAPACITY
    else:
        assert "9" in message


def test_no_room_left_in_the_matching_data_centers(gql):
    assert _placed(gql, _with(gpuCount="8")) == ("US-KS-2", "COMMUNITY")
    assert _placed(gql, _with(gpuCount="4")) == ("US-TX-3", "COMMUNITY")      # Kansas is full
    assert _refused(gql, _with(gpuCount="1")) == NO_CAPACITY                # so is Texas, and the rest is abroad
    assert _placed(gql, _with(gpuCount="1", countryCode='"RO"')) == ("EU-RO-1", "SECURE")


def test_a_malformed_port_is_refused(gql):
    assert "ssh" in _refused(gql, _with(ports='"ssh"'))


def test_pod_reports_its_data_centers_vcpus_and_memory(gql):
    body = gql(_with(countryCode='"RO"'))
    pod_id = body["data"]["podFindAndDeployOnDemand"]["id"]
    pod = gql(f'{{ pod(input: {{podId: "{pod_id}"}}) {{ vcpuCount memoryInGb podType }} }}')["data"]["pod"]
    assert pod == {"vcpuCount": 16.0, "memoryInGb": 124.0, "podType": "RESERVED"}    # 2 x (8, 62)


def test_lowest_price_honours_the_same_filters(gql):
    def lowest(args: str) -> dict:
        q = f'{{ gpuTypes(input: {{id: "NVIDIA GeForce RTX 4090"}}) {{ lowestPrice(input: {{{args}}}) ' \
            '{ uninterruptablePrice minVcpu minMemory supportPublicIp } } }'
        return gql(q)["data"]["gpuTypes"][0]["lowestPrice"]
    assert lowest('gpuCount: 1, countryCode: "RO"') == {
        "uninterruptablePrice": 0.44, "minVcpu": 8, "minMemory": 62, "supportPublicIp": True}
    assert lowest('gpuCount: 1, minVcpuCount: 17')["uninterruptablePrice"] is None


def test_interruptible_rent_places_at_the_bid(gql):
    query = _with(countryCode='"RO"').replace("podFindAndDeployOnDemand(", "podRentInterruptable(") \
        .replace("input: {", "input: { bidPerGpu: 0.3,", 1)
    pod_id = gql(query)["data"]["podRentInterruptable"]["id"]
    pod = gql(f'{{ pod(input: {{podId: "{pod_id}"}}) {{ dataCenterId costPerHr podType }} }}')["data"]["pod"]
    assert pod == {"dataCenterId": "EU-RO-1", "costPerHr": 0.6, "podType": "INTERRUPTABLE"}
    low = gql(query.replace("bidPerGpu: 0.3", "bidPerGpu: 0.01"))
    assert low["data"]["podRentInterruptable"] is None and "minimum bid" in low["errors"][0]["message"]
