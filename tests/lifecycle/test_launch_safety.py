"""A paid instance is never forgotten: unclear launch answers keep their ledger row,
a launched machine is terminated whatever goes wrong after, teardown looks for a
just-launched machine before calling it gone, and a failing terminate is sent again."""

from __future__ import annotations

import time

import pytest

from gpubench.lifecycle import terminate
from gpubench.store.ledger import LAUNCH_IN_FLIGHT_S, Ledger
from gpubench.lifecycle.provision import Deadlines, ProvisionError, ProvisionRequest, provision
from gpubench.providers.common import (AuthError, InvalidRequestError, ProviderError, TransportError,
                                       provider_name)
from tests.lifecycle.helpers import Cloud


def _provision(cloud: Cloud, ledger: Ledger, **kw):
    req = ProvisionRequest("mem", gpus=1, name="t", deadlines=Deadlines(5, 5, 5), **kw)
    return provision(cloud, req, cloud.offers(), ledger)


# -- unclear launch answers keep the ledger row --------------------------------

@pytest.mark.parametrize("error", [
    ProviderError("mem", "PUT /asks/1/", "bad gateway", status=502),
    ProviderError("mem", "PUT /asks/1/", "answer has no id", status=200),
    ProviderError("mem", "PUT /asks/1/", "something odd"),
    TransportError("mem", "PUT /asks/1/", "no answer within 30 s"),
])
def test_unclear_launch_keeps_the_row_and_points_at_ls(error):
    with Ledger() as ledger:
        with pytest.raises(ProvisionError) as e:
            _provision(Cloud(launch_error=error), ledger)
        rows = ledger.entries(include_done=True)
    assert "gpubench ls" in str(e.value) and "\n" not in str(e.value)
    assert [(r.name, r.status) for r in rows] == [("t", "requested")]
    assert error.message in rows[0].note


@pytest.mark.parametrize("error", [
    InvalidRequestError("mem", "POST /launch", "bad image", status=422),
    AuthError("mem", "POST /launch", "bad key", status=401),
    ProviderError("mem", "POST /launch", "teapot", status=418),
])
def test_definite_refusal_discards_the_row(error):
    with Ledger() as ledger:
        with pytest.raises(ProviderError):
            _provision(Cloud(launch_error=error), ledger)
        assert ledger.entries(include_done=True) == []


# -- whatever fails after a launch, the machine is terminated ------------------

@pytest.mark.parametrize("error", [KeyError("id"), TypeError("list indices"), AuthError("mem", "GET", "revoked")])
def test_unexpected_error_while_booting_terminates_the_instance(error):
    cloud = Cloud(get_error=error)
    with Ledger() as ledger:
        with pytest.raises(type(error)):
            _provision(cloud, ledger)
        rows = ledger.entries(include_done=True)
    assert cloud.terminate_calls >= 1 and cloud.instances == {}
    assert [r.status for r in rows] == ["terminated"]


# -- teardown of a row whose launch answer was lost ----------------------------

def _requested_row(ledger: Ledger, age_s: float = 0.0):
    entry = ledger.begin("t", "mem", provider_name("t"))
    if age_s:
        entry = ledger.update(entry.row_id, requested_at=time.time() - age_s)
    return entry


def test_down_waits_for_a_just_launched_instance_to_be_listed():
    cloud = Cloud(unlisted_polls=3)
    cloud.add("t")
    with Ledger() as ledger:
        result = terminate.take_down_entry(ledger, _requested_row(ledger), cloud, deadline_s=5, find_s=5)
        row = ledger.find("t")
    assert result.gone and cloud.list_calls >= 4 and cloud.instances == {}
    assert row.status == "terminated" and row.instance_id == "i1"


def test_down_of_a_fresh_row_never_listed_stays_requested():
    cloud = Cloud()
    with Ledger() as ledger:
        result = terminate.take_down_entry(ledger, _requested_row(ledger), cloud, deadline_s=5, find_s=0.2)
        row = ledger.find("t")
    assert not result.gone and "does not list" in result.message
    assert row.status == "requested" and cloud.list_calls >= 2


def test_down_of_a_stale_row_never_listed_is_done_at_once():
    cloud = Cloud()
    with Ledger() as ledger:
        row = _requested_row(ledger, age_s=LAUNCH_IN_FLIGHT_S + 5)
        result = terminate.take_down_entry(ledger, row, cloud, deadline_s=5, find_s=30)
        assert ledger.find("t").status == "terminated"
    assert result.gone and cloud.list_calls == 1


# -- terminate that fails is sent again ---------------------------------------

def test_terminate_5xx_is_sent_again_until_it_takes():
    cloud = Cloud(terminate_errors=[ProviderError("mem", "DELETE", "oops", status=503),
                                    TransportError("mem", "DELETE", "no answer")])
    cloud.add("t")
    said = []
    gone, why = terminate.terminate_confirmed(cloud, "i1", deadline_s=5, say=said.append, poll_s=0.01)
    assert gone and cloud.terminate_calls == 3
    assert "failed" in said[0] and "sending terminate again" in said[0]


def test_terminate_that_always_fails_is_reported_not_raised():
    cloud = Cloud(terminate_errors=[TransportError("mem", "DELETE", "no answer")] * 1000)
    cloud.add("t")
    gone, why = terminate.terminate_confirmed(cloud, "i1", deadline_s=0.3, poll_s=0.01)
    assert not gone and "failed" in why and "no answer" in why


def test_terminate_auth_error_is_raised():
    cloud = Cloud(terminate_errors=[AuthError("mem", "DELETE", "revoked", status=401)])
    cloud.add("t")
    with pytest.raises(AuthError):
        terminate.terminate_confirmed(cloud, "i1", deadline_s=1, poll_s=0.01)


def test_down_when_the_list_fails_says_so_and_keeps_the_row():
    class NoList(Cloud):
        def list(self):
            self.list_calls += 1
            raise TransportError("mem", "GET /instances", "no answer within 30 s")

    cloud = NoList()
    with Ledger() as ledger:
        row = _requested_row(ledger, age_s=LAUNCH_IN_FLIGHT_S + 5)   # even when old
        result = terminate.take_down_entry(ledger, row, cloud, deadline_s=5, find_s=0.2)
        assert ledger.find("t").status == "requested"
    assert not result.gone and "cannot list" in result.message and cloud.list_calls >= 2
