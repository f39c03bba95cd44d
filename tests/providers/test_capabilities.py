"""What a provider's machines and offers can do lives in its registry entry, and each
place that depends on it reads the entry: the watchdog's self-removal, one machine
per offer (cluster placement), how hosts are told apart (bench --hosts), and the
mock cloud's API module (its providers and its routing)."""

from __future__ import annotations

import importlib

import pytest

from gpubench.bench.hosts import host_key
from gpubench.lifecycle import watchdog
from gpubench.lifecycle.cluster_placement import placements
from gpubench.mock import apis, faults, runpod_pods, vast_api
from gpubench.mock.web import Request
from gpubench.providers import registry
from gpubench.providers.common import Offer
from gpubench.providers.registry import SelfRemoval


def test_the_three_entries_capabilities():
    lam, vast, runpod = (registry.entry(n) for n in ("lambda", "vast", "runpod"))
    assert lam.self_removal is None and not lam.one_machine_per_offer and lam.machine_field is None
    assert vast.self_removal == SelfRemoval("CONTAINER_ID", "CONTAINER_API_KEY", "DELETE",
                                            "/api/v0/instances/{id}/", "{}")
    assert vast.one_machine_per_offer and vast.machine_field == "machine_id"
    assert runpod.self_removal == SelfRemoval("RUNPOD_POD_ID", "RUNPOD_API_KEY", "DELETE", "/v2/pods/{id}")
    assert not runpod.one_machine_per_offer and runpod.machine_field is None
    assert registry.find("acme") is None and registry.find("vast") is vast


def test_the_mock_puts_on_its_machines_the_variables_the_registry_names():
    """The mock models each API on its own; where the registry says a machine finds its
    id and key, the mock's machines carry them."""
    assert (vast_api.ID_VAR, vast_api.KEY_VAR) == (registry.entry("vast").self_removal.id_var,
                                                   registry.entry("vast").self_removal.key_var)
    assert (runpod_pods.ID_VAR, runpod_pods.KEY_VAR) == (registry.entry("runpod").self_removal.id_var,
                                                         registry.entry("runpod").self_removal.key_var)


@pytest.mark.parametrize("entry", [e for e in registry.entries() if e.mock_api], ids=lambda e: e.name)
def test_every_mock_api_module_speaks_for_its_entry(entry):
    module = importlib.import_module(entry.mock_api)
    assert module.PROVIDER == entry.name and module.API_KEY
    for name in ("claim", "authorized", "unauthorized", "fault_response", "handle"):
        assert callable(getattr(module, name)), name
    assert module in apis.modules()
    assert entry.name in faults.PROVIDERS


def test_the_watchdog_is_told_what_the_entry_says():
    assert watchdog.how_it_stops("vast") == watchdog.how_it_stops("runpod") == "self-removal"
    assert watchdog.how_it_stops("lambda") == watchdog.how_it_stops("mem") == "shutdown -h"
    line = watchdog.install_command(60, "vast", "https://console.vast.ai", 30.0)
    assert "--id-var CONTAINER_ID --key-var CONTAINER_API_KEY --method DELETE " \
           "--path '/api/v0/instances/{id}/' --body '{}'" in line
    assert "--id-var" not in watchdog.install_command(60, "lambda", "", 30.0)


def _offer(provider: str, oid: str, machine=None) -> Offer:
    return Offer(provider, oid, "H100 SXM", 8, 20.0, region="Texas, US", available=1,
                 extra={} if machine is None else {"machine_id": machine})


def test_hosts_are_told_apart_by_the_field_the_entry_names():
    assert host_key(_offer("vast", "1", 6001)) == "6001"
    assert host_key(_offer("vast", "2")) is None
    # where the entry names no field (or the registry knows no such provider), every
    # launch is a machine of its own, whatever the offer carries
    assert host_key(_offer("lambda", "3", 6001)) is None
    assert host_key(_offer("mem", "4", 6001)) is None


def test_one_machine_per_offer_counts_the_machines_of_a_region():
    offers = [_offer("vast", "1"), _offer("vast", "2")]
    assert [p.machines for p in placements("vast", offers)] == [2]
    assert [p.machines for p in placements("lambda", [_offer("lambda", "1")])] == [None]


def _request(path: str, key: str | None = None) -> Request:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return Request.build("GET", path, headers, b"")


def test_requests_go_to_the_api_that_claims_them():
    from gpubench.mock import lambda_api, runpod_api

    assert apis.for_request(_request("/v2/pods")) is runpod_api
    assert apis.for_request(_request("/api/v0/bundles/")) is vast_api
    assert apis.for_request(_request("/api/v1/instances/")) is vast_api            # the vastai CLI's spelling
    assert apis.for_request(_request("/api/v1/instances", vast_api.API_KEY)) is vast_api
    assert apis.for_request(_request("/api/v1/instances", lambda_api.API_KEY)) is lambda_api
    assert apis.for_request(_request("/api/v1/instances")) is lambda_api          # no key: Lambda's 401
    assert apis.for_request(_request("/nothing")) is None
    graphql = apis.for_request(_request("/graphql"))
    assert graphql is None or graphql.__name__ == "gpubench.mock.runpod_graphql"
    assert apis.for_request(_request("/v2/graphql")) is graphql
