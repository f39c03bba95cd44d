"""Offers that match a request, cheapest available first."""

from __future__ import annotations

from gpubench.offers import matching_offers
from gpubench.providers.common import Offer

OFFERS = [Offer("p", "a", "H100 SXM", 8, 24.0, available=1), Offer("p", "b", "H100 PCIe", 1, 2.5, available=1),
          Offer("p", "c", "RTX 4090", 1, 0.4, available=0), Offer("p", "d", "RTX 4090", 1, 0.5, available=2),
          Offer("p", "e", "A100 PCIe", 1, 1.3, region="us-east-1", available=1)]


def test_cheapest_available_first():
    assert [o.offer_id for o in matching_offers(OFFERS, gpus=1)] == ["d", "e", "b"]
    assert [o.offer_id for o in matching_offers(OFFERS, gpus=1, gpu_type="h100")] == ["b"]
    assert [o.offer_id for o in matching_offers(OFFERS, gpus=1, max_price=1.0)] == ["d"]
