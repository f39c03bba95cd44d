"""A provider answering garbage: a ProviderError naming the endpoint, one line at the
CLI, never a KeyError/TypeError/AttributeError/ValueError traceback."""

import pytest

from gpubench.lifecycle import fleet
from gpubench.providers import lambda_cloud, runpod, vast
from gpubench.providers.common import LaunchSpec, Offer, ProviderError, SshKeyRef, TransportError


@pytest.fixture
def adapters(fake_api):
    return {"lambda": lambda_cloud.connect("KEY", fake_api.url),
            "vast": vast.connect("KEY", fake_api.url),
            "runpod": runpod.connect("KEY", fake_api.url)}


@pytest.mark.parametrize("provider,method,path,body,call", [
    ("lambda", "GET", "/api/v1/instances", {"data": [{"name": "gpubench-x"}]}, lambda p: p.list()),
    ("lambda", "GET", "/api/v1/instances", {"data": "nonsense"}, lambda p: p.list()),
    ("lambda", "GET", "/api/v1/instances/i1", {"data": [1, 2]}, lambda p: p.get("i1")),
    ("lambda", "GET", "/api/v1/instance-types", {"data": {"t": {"instance_type": {"specs": {"gpus": "1.5"}}}}},
     lambda p: p.offers()),
    ("runpod", "GET", "/v2/pods/p1", [{"id": "p1"}], lambda p: p.get("p1")),
    ("runpod", "GET", "/v2/pods/p1", {"name": "no id"}, lambda p: p.get("p1")),
    ("runpod", "GET", "/v2/pods", {"pods": [{"id": "p1", "gpu": {"count": "1.5"}}]}, lambda p: p.list()),
    ("runpod", "GET", "/v2/catalog/gpus", {"gpus": "H100"}, lambda p: p.offers(gpus=1)),
    ("runpod", "GET", "/v2/catalog/gpus", {"gpus": [{"name": "x", "price": {"secure": 1.0}}]},
     lambda p: p.offers(gpus=1)),
    ("vast", "POST", "/api/v0/bundles/", {"offers": [{"direct_port_count": 1, "num_gpus": "1.5",
                                                      "dph_total": 1.0, "id": 1}]},
     lambda p: p.offers()),
    ("vast", "POST", "/api/v0/bundles/", {"offers": [{"direct_port_count": 1, "num_gpus": 1,
                                                      "dph_total": 1.0}]}, lambda p: p.offers()),
    ("vast", "GET", "/api/v1/instances/", {"instances": [{"label": "gpubench-x"}]}, lambda p: p.list()),
])
def test_garbage_is_a_provider_error_naming_the_endpoint(fake_api, adapters, provider, method, path,
                                                         body, call):
    fake_api.route(method, path, (200, body))
    with pytest.raises(ProviderError) as e:
        call(adapters[provider])
    assert "unexpected answer" in str(e.value) and path in str(e.value)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("provider,method,path,body", [
    ("lambda", "POST", "/api/v1/instance-operations/launch", {"data": ["i1"]}),
    ("lambda", "POST", "/api/v1/instance-operations/launch", {"data": {"instance_ids": []}}),
    ("lambda", "POST", "/api/v1/instance-operations/launch", {"nothing": 1}),
    ("runpod", "POST", "/v2/pods", {"name": "gpubench-x"}),
    ("runpod", "POST", "/v2/pods", {"id": "p1", "gpu": {"count": "many"}}),
    ("vast", "PUT", "/api/v0/asks/5/", {"success": True}),
    ("vast", "PUT", "/api/v0/asks/5/", ["new_contract", 7]),
])
def test_garbled_launch_answer_is_unclear_not_refused(fake_api, adapters, provider, method, path, body):
    """A success status without a readable id may still have rented a machine."""
    fake_api.route(method, path, (200, body))
    offer = Offer(provider, "gpu_1x_h100@us-east-1" if provider == "lambda" else "5", "H100", 1, 2.0)
    with pytest.raises(TransportError):
        adapters[provider].launch(offer, LaunchSpec(gpus=1, name="x", ssh_key=SshKeyRef("ssh-ed25519 A", name="k")))
    assert len(fake_api.calls(method, path)) == 1


def test_list_all_warns_about_garbage_and_keeps_the_others(fake_api, adapters):
    fake_api.route("GET", "/api/v1/instances", (200, {"data": [{"status": "active"}]}))
    fake_api.route("GET", "/v2/pods", (200, {"pods": []}))
    said = []
    found = fleet.list_all({"lambda": adapters["lambda"], "runpod": adapters["runpod"]}, said.append)
    assert found == {"runpod": []}
    assert len(said) == 1 and "unexpected answer" in said[0]


def test_cli_offers_with_garbage_is_one_line(fake_api, monkeypatch, cli):
    monkeypatch.setenv("VAST_API_KEY", "k")
    monkeypatch.setenv("GPUBENCH_VAST_URL", fake_api.url)
    fake_api.route("POST", "/api/v0/bundles/", (200, {"offers": [{"direct_port_count": 1, "num_gpus": "1.5",
                                                                  "dph_total": 1.0, "id": 1}]}))
    code, _, err = cli("offers", "vast")
    assert code != 0 and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and "unexpected answer" in err
