"""Vast.ai's overlay calls (the official client's paths and bodies) against the mock in
loopback mode: offers of physical clusters carry their cluster_id, an overlay is refused
in one clear answer outside namespace mode, and the errors come typed."""

from __future__ import annotations

import pytest
import requests

from gpubench.lifecycle.cluster_placement import cluster_placements
from gpubench.mock.catalog import VAST_CLUSTERS
from gpubench.mock.vast_api import API_KEY
from gpubench.providers import registry
from gpubench.providers.common import NotFoundError, ProviderError
from gpubench.providers.overlays import cluster_of, overlay_networks
from tests.helpers import mock_cloud


@pytest.fixture
def cloud(tmp_path, monkeypatch):
    yield from mock_cloud(tmp_path, monkeypatch)


@pytest.fixture
def vast(cloud):
    return registry.get("vast")


def test_offers_of_physical_clusters_carry_their_cluster_id(vast):
    offers = vast.offers(gpus=4)
    by_cluster: dict[str, set] = {}
    for offer in offers:
        if cluster_of(offer):
            by_cluster.setdefault(cluster_of(offer), set()).add((offer.gpu_name, offer.region))
    want = {str(c) for c, _, count, _, _ in VAST_CLUSTERS if count == 4}
    assert set(by_cluster) == want
    assert all(len(kinds) == 1 for kinds in by_cluster.values())   # one GPU type, one place each
    place = cluster_placements("vast", offers, 3)
    assert [p.cluster_id for p in place] == ["7001"] and place[0].machines == 3
    assert cluster_placements("vast", offers, 4) == []
    assert all(cluster_of(o) is None for o in vast.offers(gpus=1))


def test_overlay_calls_and_their_errors_outside_namespace_mode(vast, cloud):
    overlays = overlay_networks(vast)
    assert overlays is not None and overlays.overlays() == []
    with pytest.raises(ProviderError) as e:
        overlays.create_overlay("7001", "gpubench-x")
    assert "namespace mode" in e.value.message and e.value.status == 400
    with pytest.raises(NotFoundError):
        overlays.create_overlay("999", "gpubench-x")
    with pytest.raises(NotFoundError):
        overlays.delete_overlay("5100")
    with pytest.raises(NotFoundError):
        overlays.join_overlay("gpubench-x", "24100000")
    # the renter's own clusters (show clusters): none
    answer = requests.get(f"{cloud.base_url}/api/v0/clusters/", headers={"Authorization": f"Bearer {API_KEY}"},
                          timeout=10)
    assert answer.status_code == 200 and answer.json() == {"clusters": {}}


def test_an_unreadable_overlay_list_is_a_provider_error(vast, monkeypatch):
    monkeypatch.setattr(type(vast), "_call", lambda self, method, path, **kw: [{"name": "x"}])
    with pytest.raises(ProviderError, match="unexpected answer"):
        vast.overlays()
