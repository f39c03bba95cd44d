"""The mock's answers against the real services' answers, by shape: every field a real
answer (a live capture or the provider's documentation example, tests/fixtures/real/)
carries, the mock's answer to the same call carries too, with the same JSON type.
Values are never compared. A new field in a capture, or a field the mock drops or
retypes, fails here with its path."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from gpubench.mock import MockCloud
from tests.mock.helpers import Api, wait_for

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real"


def real(name: str):
    return json.loads((REAL / name).read_text())


def kind(value) -> str:
    """The JSON type: null, boolean, number, string, array or object (JSON has one
    number type, so 1 and 1.0 are alike)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return {str: "string", list: "array", dict: "object"}[type(value)]


def gaps(want, got, path: str = "$", maps: tuple[str, ...] = ()) -> list[str]:
    """Where `got` (the mock's answer) lacks a field `want` (a real answer) has, or holds
    another JSON type. A real null says nothing about the type; a mock null where the
    real answer has a value is a gap. Objects whose paths match one of `maps` (regular
    expressions) are maps keyed by data (type names, "22/tcp"): each of their values is
    compared with the mock's first value. Arrays: the real answer's items are compared
    with the mock's first item."""
    if want is None:
        return []
    if kind(want) != kind(got):
        return [f"{path}: {kind(got)} where the real answer has {kind(want)}"]
    out: list[str] = []
    if isinstance(want, dict):
        if any(re.fullmatch(m, path) for m in maps):
            if want and not got:
                return [f"{path}: empty map where the real answer has entries"]
            sample = next(iter(got.values()), None)
            for key, value in want.items():
                out += gaps(value, sample, f"{path}[*]", maps)
            return out
        for key, value in want.items():
            if key not in got:
                out.append(f"{path}.{key}: missing")
            else:
                out += gaps(value, got[key], f"{path}.{key}", maps)
    elif isinstance(want, list) and want and got:
        for item in want:
            out += gaps(item, got[0], f"{path}[]", maps)
    return out


def assert_same_shape(want, got, maps: tuple[str, ...] = ()) -> None:
    found = sorted(set(gaps(want, got, maps=maps)))
    assert not found, "the mock's answer differs from the real one:\n  " + "\n  ".join(found)


# -- one mock with a running instance on each provider ------------------------------------

@pytest.fixture(scope="module")
def mock(tmp_path_factory):
    d = tmp_path_factory.mktemp("shapes")
    key = d / "key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "shape", "-f", str(key)],
                   check=True, timeout=30)
    public = key.with_suffix(".pub").read_text().strip()
    with MockCloud.start(state_dir=d / "state") as cloud:
        e = cloud.env()
        apis = {
            "lambda": Api(e["GPUBENCH_LAMBDA_URL"], {"Authorization": f"Bearer {e['LAMBDA_API_KEY']}"}),
            "vast": Api(e["GPUBENCH_VAST_URL"].removesuffix("/api/v0"),
                        {"Authorization": f"Bearer {e['VAST_API_KEY']}"}),
            "runpod": Api(e["GPUBENCH_RUNPOD_URL"].removesuffix("/v2"),
                          {"Authorization": f"Bearer {e['RUNPOD_API_KEY']}"}),
        }
        answers = _launch_all(apis, public)
        yield apis, answers


def _launch_all(apis, public: str) -> dict:
    lam, vast, rp = apis["lambda"], apis["vast"], apis["runpod"]
    answers = {"lambda-key-add": lam("POST", "/ssh-keys", json={"name": "shape", "public_key": public}).json()}
    types = lam("GET", "/instance-types").json()["data"]
    name, item = next((n, t) for n, t in types.items() if t["regions_with_capacity_available"])
    answers["lambda-launch"] = lam("POST", "/instance-operations/launch", json={
        "region_name": item["regions_with_capacity_available"][0]["name"], "instance_type_name": name,
        "ssh_key_names": ["shape"], "name": "shape", "tags": [{"key": "gpubench", "value": "shape"}]}).json()
    answers["vast-key-add"] = vast("POST", "/api/v0/ssh/", json={"ssh_key": public}).json()
    offer = vast("POST", "/api/v0/bundles/", json={"num_gpus": {"eq": 1}, "limit": 1}).json()["offers"][0]
    answers["vast-create"] = vast("PUT", f"/api/v0/asks/{offer['id']}/", json={
        "client_id": "me", "image": "pytorch/pytorch", "disk": 20.0, "label": "shape",
        "runtype": "ssh_direc ssh_proxy", "env": {"-p 10022:10022": "1"}}).json()
    gpu = rp("GET", "/v2/catalog/gpus").json()["gpus"][0]["id"]
    answers["runpod-create"] = rp("POST", "/v2/pods", json={
        "name": "shape", "image": "runpod/pytorch", "gpu": {"id": gpu, "count": 1},
        "ports": ["22/tcp", "8888/http"], "startSsh": True, "env": {"PUBLIC_KEY": public},
        "mounts": {"persistent": {"size": 20, "path": "/workspace"}}}).json()
    wait_for(lambda: lam("GET", "/instances").json()["data"][0]["status"] == "active")
    wait_for(lambda: vast("GET", "/api/v1/instances/").json()["instances"][0]["actual_status"] == "running")
    wait_for(lambda: rp("GET", "/v2/pods").json()["pods"][0]["status"] == "RUNNING")
    return answers


def _graphql(mock, query: str) -> dict:
    apis, _ = mock
    resp = apis["runpod"]("POST", "/graphql", json={"query": query})
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert "errors" not in body, body["errors"]
    return body


# -- Lambda ------------------------------------------------------------------------------

LAMBDA_TYPES_MAP = (r"\$\.data",)


@pytest.mark.parametrize("answer", ["instance-types.live-2026-04-11", "instance-types.doc-1.10.0"])
def test_lambda_instance_types(mock, answer):
    apis, _ = mock
    assert_same_shape(real(f"lambda/{answer}.json"), apis["lambda"]("GET", "/instance-types").json(),
                      LAMBDA_TYPES_MAP)


@pytest.mark.parametrize("answer", ["instances.live-2026-04-11", "instances.doc-1.10.0"])
def test_lambda_instances(mock, answer):
    apis, _ = mock
    got = apis["lambda"]("GET", "/instances").json()
    assert_same_shape(real(f"lambda/{answer}.json"), got)
    one = apis["lambda"]("GET", f"/instances/{got['data'][0]['id']}").json()
    assert_same_shape({"data": real(f"lambda/{answer}.json")["data"][0]}, one)


def test_lambda_keys_and_launch(mock):
    apis, answers = mock
    assert_same_shape(real("lambda/ssh-keys.doc-1.10.0.json"), apis["lambda"]("GET", "/ssh-keys").json())
    assert_same_shape(real("lambda/launch.doc-1.10.0.json"), answers["lambda-launch"])


# -- Vast.ai -----------------------------------------------------------------------------

VAST_MAPS = (r".*\.ports", r"\$\.label_counts")


@pytest.mark.parametrize("answer", ["bundles.live-2024-07", "bundles.live-2022-11"])
def test_vast_offers(mock, answer):
    apis, _ = mock
    got = apis["vast"]("POST", "/api/v0/bundles/", json={"limit": 3}).json()
    assert_same_shape(real(f"vast/{answer}.json"), got)


def test_vast_instances(mock):
    apis, _ = mock
    listing = apis["vast"]("GET", "/api/v1/instances/").json()
    documented = real("vast/instances-v1.doc.json")
    # one page holds the mock's one instance (no next page), made without a template
    documented.update(next_token=None)
    for key in ("template_id", "template_hash_id", "template_name"):
        documented["instances"][0][key] = None
    assert_same_shape(documented, listing, VAST_MAPS)
    assert listing["instances"][0]["ports"]["10022/tcp"][0]["HostPort"].isdigit()
    one = apis["vast"]("GET", f"/api/v0/instances/{listing['instances'][0]['id']}/").json()
    documented = real("vast/instance.doc.json")
    for key in ("template_id", "template_hash_id", "template_name"):
        documented["instances"][key] = None
    # The single-instance example lists `ports` as [8080, 8081]; every live answer and the
    # list example give the docker-style map, which the mock follows (see README there).
    documented["instances"].pop("ports")
    # it writes os_version as a number (18.04); the live offers write "20.04", as the mock does
    documented["instances"].pop("os_version")
    assert_same_shape(documented, one)


def test_vast_keys_and_create(mock):
    _, answers = mock
    assert_same_shape(real("vast/ssh-key-add.doc.json"), answers["vast-key-add"])
    assert_same_shape(real("vast/create.doc.json"), answers["vast-create"])
    assert_same_shape(real("vast/create.doc-hello-world.json"), answers["vast-create"])


# -- RunPod REST v2 --------------------------------------------------------------------------

# env and mounts are keyed by what the pod was given; a pod made without a template has none
RUNPOD_MAPS = (r".*\.env", r".*\.mounts")


def _no_template(answer: dict) -> dict:
    for pod in answer.get("pods", [answer]):
        pod["template"] = None
    return answer


def test_runpod_pods(mock):
    apis, answers = mock
    listing = apis["runpod"]("GET", "/v2/pods").json()
    assert_same_shape(_no_template(real("runpod/pods.doc-v2.9.0.json")), listing, RUNPOD_MAPS)
    pod = apis["runpod"]("GET", f"/v2/pods/{listing['pods'][0]['id']}").json()
    assert_same_shape(_no_template(real("runpod/pod.doc-v2.9.0.json")), pod, RUNPOD_MAPS)
    assert_same_shape(_no_template(real("runpod/pod-create.doc-v2.9.0.json")), answers["runpod-create"],
                      RUNPOD_MAPS)


def test_runpod_catalog_and_keys(mock):
    apis, _ = mock
    got = apis["runpod"]("GET", "/v2/catalog/gpus",
                         params={"include": "AVAILABILITY", "product": "POD", "count": 1}).json()
    assert_same_shape(real("runpod/gpus.doc-v2.9.0.json"), got)
    assert_same_shape(real("runpod/ssh-keys.doc-v2.9.0.json"), apis["runpod"]("GET", "/v2/account/ssh-keys").json())


# -- RunPod legacy GraphQL: the documentation's own queries -------------------------------------

def _doc_query(name: str, **replace: str) -> str:
    text = (REAL / f"runpod/graphql-{name}.doc.graphql").read_text()
    for old, new in replace.items():
        text = text.replace(old, new)
    return text


@pytest.mark.parametrize("name", ["pod", "stop", "resume"])
def test_graphql_pod_queries(mock, name):
    apis, _ = mock
    pod_id = apis["runpod"]("GET", "/v2/pods").json()["pods"][0]["id"]
    got = _graphql(mock, _doc_query(name, YOUR_POD_ID=pod_id))
    assert_same_shape(real(f"runpod/graphql-{name}.doc.json"), got)
    if name == "stop":   # leave it running for the other cases
        _graphql(mock, _doc_query("resume", YOUR_POD_ID=pod_id))
        wait_for(lambda: apis["runpod"]("GET", f"/v2/pods/{pod_id}").json()["status"] == "RUNNING")


def test_graphql_myself_pods(mock):
    assert_same_shape(real("runpod/graphql-myself-pods.doc.json"), _graphql(mock, _doc_query("myself-pods")))


@pytest.mark.parametrize("name", ["gputypes", "gputype-price", "gputype-stock-high", "gputype-stock-low"])
def test_graphql_gpu_type_queries(mock, name):
    # the documented GPU ids are ones the mock does not rent: ask for one it does
    text = re.sub(r'id: "[^"]+"', 'id: "NVIDIA GeForce RTX 4090"', _doc_query(name))
    assert_same_shape(real(f"runpod/graphql-{name}.doc.json"), _graphql(mock, text))


def test_graphql_deploy(mock):
    text = _doc_query("deploy").replace("NVIDIA RTX A6000", "NVIDIA GeForce RTX 4090")
    assert_same_shape(real("runpod/graphql-deploy.doc.json"), _graphql(mock, text))
