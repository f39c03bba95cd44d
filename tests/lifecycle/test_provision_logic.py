"""Why no offer matches a provision request, and confirming terminations, with an
in-memory provider."""

from __future__ import annotations

import pytest

from gpubench.lifecycle import terminate
from gpubench.providers.common import Instance, InstanceState, NotFoundError
from gpubench.lifecycle.provision import NoOfferError, ProvisionRequest, plan
from tests.test_offers import OFFERS


class Catalog:
    name = "p"

    def offers(self, gpus=None, gpu_type=None, interruptible=False):
        return list(OFFERS)


@pytest.mark.parametrize("kw,words", [
    (dict(gpus=2), "p has 5 offers, none with 2 GPUs; 1 and 8 are offered"),
    (dict(gpus=1, gpu_type="B200"), "of type B200"),
    (dict(gpus=1, gpu_type="H100", max_price=1.0), "cheapest is $2.50/h"),
    (dict(gpus=1, gpu_type="4090", max_price=0.45), "sold out"),
    (dict(gpus=1, region="eu-west-9"), "in region eu-west-9"),
])
def test_why_no_offer_matches(kw, words):
    with pytest.raises(NoOfferError) as e:
        plan(Catalog(), ProvisionRequest("p", **kw))
    assert words in str(e.value)


class Liar:
    """Terminate answers success; the instance goes only after `lies` more calls."""

    name = "liar"

    def __init__(self, lies: int) -> None:
        self.lies = lies
        self.calls = 0
        self.alive = True

    def terminate(self, iid):
        self.calls += 1
        if self.calls > self.lies:
            self.alive = False

    def _inst(self):
        return Instance("liar", "i1", "gpubench-x", InstanceState.RUNNING, raw_status="running")

    def get(self, iid):
        if not self.alive:
            raise NotFoundError("liar", "GET", "gone")
        return self._inst()

    def list(self):
        return [self._inst()] if self.alive else []


def test_terminate_resent_until_gone():
    liar = Liar(lies=1)
    said = []
    gone, why = terminate.terminate_confirmed(liar, "i1", deadline_s=5, say=said.append, poll_s=0.01)
    assert gone and liar.calls == 2 and "still running" in said[0]


def test_terminate_that_never_takes_is_reported_not_done():
    liar = Liar(lies=99)
    gone, why = terminate.terminate_confirmed(liar, "i1", deadline_s=0.3, poll_s=0.01)
    # Re-sent with a growing gap (after 3, 6, 12 ... quiet polls) until the deadline.
    assert not gone and "still running" in why and f"after {liar.calls} terminate call(s)" in why
    assert 2 <= liar.calls <= 5
