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


# -- sorting, filtering and the explanation of an empty list, on the mock's offers --

import pytest  # noqa: E402

from gpubench.offers import (SORTS, OfferFilter, OfferQuery, explain_none, gather,  # noqa: E402
                             limit_offers, sort_offers)
from gpubench.providers.gpus import offer_vram_gb  # noqa: E402


@pytest.fixture
def cloud(tmp_path, monkeypatch):
    from tests.helpers import mock_cloud

    yield from mock_cloud(tmp_path, monkeypatch)


def _query(**kw) -> OfferQuery:
    return OfferQuery(kw.pop("providers", []), **kw).validate()


def test_each_sort_orders_the_mocks_offers(cloud):
    got = gather(_query())
    assert len(got.chosen) > 60 and set(got.asked) == {"lambda", "vast", "runpod"}
    for by, check in {
        "price": lambda o: o.price_per_hour,
        "price-per-gpu": lambda o: o.price_per_gpu_hour,
        "vram": lambda o: -(offer_vram_gb(o) or 0),
        "gpus": lambda o: -o.gpu_count,
        "region": lambda o: o.region or "~",
        "reliability": lambda o: -(o.extra.get("reliability") or -1),
    }.items():
        ordered = gather(_query(sort=by)).chosen
        assert [check(o) for o in ordered] == sorted(check(o) for o in ordered), by
        assert sorted(map(id, ordered)) != [] and len(ordered) == len(got.chosen)
    assert set(SORTS) == {"price", "price-per-gpu", "vram", "gpus", "region", "reliability"}
    by_vram = gather(_query(sort="vram")).chosen
    assert offer_vram_gb(by_vram[0]) == 80
    assert gather(_query(sort="reliability")).chosen[0].provider == "vast"   # the one that publishes it


def test_limit_says_how_many_were_left_out():
    offers = [Offer("p", str(n), "A10", 1, 1.0 + n) for n in range(30)]
    shown, line = limit_offers(offers, 20)
    assert len(shown) == 20 and line == "showing 20 of 30; --limit 0 for all"
    assert limit_offers(offers, 0) == (offers, None) and limit_offers(offers, 30) == (offers, None)


def test_region_min_vram_and_gpu_filters(cloud):
    texas = gather(_query(providers=["vast"], region="Texas")).chosen
    assert texas and all("Texas" in o.region for o in texas)
    kansas = gather(_query(providers=["runpod"], region="US-KS-2")).chosen
    assert kansas and all("US-KS-2" in o.extra["data_centers"] for o in kansas)
    big = gather(_query(min_vram=48)).chosen
    assert big and all(offer_vram_gb(o) >= 48 for o in big)
    assert {o.gpu_name for o in big} >= {"L40S", "H100 SXM"} and "RTX 4090" not in {o.gpu_name for o in big}
    typed = gather(_query(gpu_type="rtx4090", gpus=1)).chosen
    assert {o.gpu_name for o in typed} == {"RTX 4090"} and {o.provider for o in typed} == {"vast", "runpod"}


def test_spot_offers_are_vast_bids_and_all_mixes_both(cloud):
    spot = gather(_query(kind="spot")).chosen
    assert spot and all(o.interruptible and o.provider == "vast" for o in spot)
    on_demand = gather(_query(providers=["vast"])).chosen
    assert not any(o.interruptible for o in on_demand)
    # the same machine's bid is below its on-demand price
    bids = {o.offer_id: o.price_per_hour for o in spot}
    assert all(bids[o.offer_id] < o.price_per_hour for o in on_demand if o.offer_id in bids)
    both = gather(_query(kind="all")).chosen
    assert {o.interruptible for o in both} == {True, False}
    assert len(both) == len(spot) + len(gather(_query()).chosen)


@pytest.mark.parametrize("kw,message", [
    (dict(gpus=2), "p has 5 offers, none with 2 GPUs; 1 and 8 are offered"),
    (dict(gpus=1, gpu_type="rtx5090"),
     "p has no offers of type RTX 5090 with 1 GPU; GPU types offered with 1 GPU: A100 PCIe, H100 PCIe, RTX 4090"),
    (dict(gpus=1, gpu_type="a100 80gb"),
     "p has no offers of type A100 80 GB with 1 GPU; GPU types offered with 1 GPU: A100 PCIe, "
     "H100 PCIe 80 GB, RTX 4090 24 GB"),
    (dict(gpu_type="4090", region="eu-west-9"),
     "p has no offers of RTX 4090 in region eu-west-9; regions offered of RTX 4090: none named"),
    (dict(gpu_type="A100", region="eu-west-9"),
     "p has no offers of A100 PCIe in region eu-west-9; regions offered of A100 PCIe: us-east-1"),
    (dict(gpus=1, min_vram=100),
     "p has 4 offers with 1 GPU, none with at least 100 GB per GPU; the most is 80 GB (H100 PCIe)"),
    (dict(gpu_type="4090", max_price=0.3),
     "p has 2 offers of RTX 4090, none at or under $0.30/h (cheapest is $0.40/h: 1x RTX 4090)"),
    (dict(gpu_type="4090", max_price=0.45, only_available=True),
     "every p offer of RTX 4090 at or under $0.45/h is sold out right now"),
    (dict(interruptible=True), "p has no interruptible machines available to rent right now"),
])
def test_each_explanation_names_the_filter_that_emptied_the_list(kw, message):
    offers = [] if kw.get("interruptible") else OFFERS
    assert explain_none(["p"], offers, OfferFilter(**kw)) == message


def test_count_explanation_asks_again_without_the_count():
    """Providers filter on the count themselves: an empty answer is asked again
    without it, to say which counts there are."""
    assert explain_none(["vast"], [], OfferFilter(gpus=3), wider=lambda: OFFERS) == \
        "vast has 5 offers, none with 3 GPUs; 1 and 8 are offered"
    ceiling = [Offer("runpod", "g", "RTX 4090", 1, 0.4, extra={"max_count": 8})]
    assert explain_none(["runpod"], [], OfferFilter(gpus=9), wider=lambda: ceiling) == \
        "runpod has 1 offer, none with 9 GPUs; runpod rents 1 to 8 GPUs per machine"
    assert explain_none(["lambda", "vast"], [], OfferFilter(gpus=3), wider=lambda: []) == \
        "lambda and vast have no machines available to rent right now"


def test_sort_offers_keeps_every_offer():
    assert sorted(o.offer_id for o in sort_offers(OFFERS, "vram")) == sorted(o.offer_id for o in OFFERS)
