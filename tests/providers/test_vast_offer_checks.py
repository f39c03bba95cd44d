"""The host figures a Vast.ai offer publishes reach Offer.extra under the names
gpubench.offer_checks reads, so the checks run on real offers: two live search
answers (tests/fixtures/real/README.md), each left out for its own reason, and the
mock cloud's offers carrying the same figures with the same JSON types."""

from __future__ import annotations

import json

import pytest

from gpubench.offer_checks import CHECKS, offer_problems
from gpubench.providers import vast
from gpubench.providers.common import Offer
from tests.providers.conftest import fixture

FIGURES = {"pcie_bw", "inet_down", "inet_up", "direct_port_count", "gpu_ram", "cpu_ram",
           "cpu_cores_effective", "reliability", "cuda_max_good"}


@pytest.fixture
def v(fake_api):
    return vast.connect("KEY", fake_api.url)


def _offer(fake_api, v, answer: str) -> Offer:
    fake_api.route("POST", "/api/v0/bundles/", (200, f"real/vast/{answer}.json"))
    [offer] = v.offers(gpus=1)
    return offer


def test_every_figure_the_checks_read_comes_from_the_offer():
    assert {c.field for c in CHECKS} <= FIGURES | {"gpu_total_ram"}


def test_a_2024_live_offer_carries_its_figures_and_fails_on_its_slow_internet(fake_api, v):
    offer = _offer(fake_api, v, "bundles.live-2024-07")
    assert FIGURES <= set(offer.extra)
    assert (offer.extra["pcie_bw"], offer.extra["inet_down"], offer.extra["inet_up"],
            offer.extra["direct_port_count"], offer.extra["gpu_ram"], offer.extra["cpu_ram"],
            offer.extra["cpu_cores_effective"], offer.extra["cuda_max_good"]) == \
        (12.3, 105.9, 77.7, 249.0, 24564.0, 64393.0, 24.0, 12.2)
    assert offer.extra["reliability"] == pytest.approx(0.9700835)
    assert (offer.extra["machine_id"], offer.extra["host_id"]) == (22990, 125418)
    assert offer_problems(offer) == ["inet_down 105.9 (floor: >= 500 Mb/s)",
                                     "inet_up 77.7 (floor: >= 500 Mb/s)"]


def test_a_2022_live_offer_falls_back_on_reliability2_and_fails_on_its_cuda(fake_api, v):
    offer = _offer(fake_api, v, "bundles.live-2022-11")
    # this answer has reliability null and the score in reliability2, gpu_total_ram null
    assert offer.extra["reliability"] == pytest.approx(0.9993718)
    assert "gpu_total_ram" not in offer.extra and offer.extra["gpu_ram"] == 24576.0
    assert offer.extra["machine_id"] == 2555
    assert offer_problems(offer) == ["cuda_max_good 11.7 (floor: >= 11.8)"]


def test_a_figure_that_is_not_a_number_is_left_out_not_judged(fake_api, v):
    answer = fixture("real/vast/bundles.live-2024-07.json")
    row = answer["offers"][0]
    row.update(inet_down=None, inet_up="fast", pcie_bw=True)
    fake_api.route("POST", "/api/v0/bundles/", (200, json.loads(json.dumps(answer))))
    [offer] = v.offers(gpus=1)
    assert not {"inet_down", "inet_up", "pcie_bw"} & set(offer.extra)
    assert offer_problems(offer) == []


def test_the_mocks_offers_carry_the_same_figures_with_the_same_types():
    from gpubench.mock.catalog import vast_offers

    real = fixture("real/vast/bundles.live-2024-07.json")["offers"][0]
    mock = next(iter(vast_offers().values())).row(rented=0, bid=False)
    for name in FIGURES | {"gpu_total_ram", "machine_id", "host_id", "reliability2"}:
        assert type(mock[name]) is type(real[name]), name
