"""`gpubench down`'s workflow called directly: what a request names, taking each
down, the totals, and ssh_config rewritten; `ls`'s choice of providers."""

from __future__ import annotations

import pytest

from gpubench import paths
from gpubench.errors import UsageError
from gpubench.lifecycle import fleet
from gpubench.lifecycle.down import DownRequest, plan_down, take_down
from gpubench.store.ledger import Ledger, UnknownInstanceError
from gpubench.store.status import LedgerStatus
from gpubench.providers import registry
from gpubench.providers.common import MissingKeyError
from tests.lifecycle.helpers import Cloud


@pytest.fixture
def clouds(monkeypatch):
    """Provider name -> in-memory cloud; a provider not in it has no API key."""
    connected: dict[str, Cloud] = {}

    def get(name):
        if name not in connected:
            raise MissingKeyError(name, "-", f"no key for {name}")
        return connected[name]

    monkeypatch.setattr(registry, "get", get)
    monkeypatch.setattr(registry, "names", lambda: ["mem", "other"])
    return connected


def _live(ledger: Ledger, cloud: Cloud, name: str, provider: str = "mem", port: int = 2200):
    inst = cloud.add(name) if cloud is not None else None
    row = ledger.begin(name, provider, f"gpubench-{name}", price_per_hour=3.6, key_path="/k")
    return ledger.mark(row.row_id, LedgerStatus.READY, "created_at",
                       instance_id=inst.instance_id if inst else f"x-{name}", ssh_host="10.0.0.1",
                       ssh_port=port, ssh_user="root")


@pytest.mark.parametrize("kw,words", [
    (dict(), "exactly one of NAME"),
    (dict(name="a", everything=True), "exactly one of NAME"),
    (dict(everything=True, orphans=True), "exactly one of NAME"),
    (dict(name="a", deadline_s=0), "--timeout must be positive"),
])
def test_bad_requests_are_usage_errors(kw, words):
    with Ledger() as ledger, pytest.raises(UsageError, match=words):
        plan_down(ledger, DownRequest(**kw))


def test_one_by_name_then_nothing_to_do(clouds):
    cloud = clouds["mem"] = Cloud()
    with Ledger() as ledger:
        _live(ledger, cloud, "a", port=2201)
        _live(ledger, cloud, "b", port=2202)
        with pytest.raises(UnknownInstanceError):
            plan_down(ledger, DownRequest(name="ghost"))
        plan = plan_down(ledger, DownRequest(name="a", deadline_s=5))
        assert [t.name for t in plan.targets] == ["a"] and plan.describe() == "a (mem i1)"
        heard = []
        report = take_down(ledger, plan, on_result=heard.append)
        assert heard == report.results and report.all_gone and len(report.reached) == 1
        assert ledger.find("a").status is LedgerStatus.TERMINATED
        assert list(cloud.instances) == ["i2"]
        text = paths.ssh_config_path().read_text()
        assert "Host gpubench-b\n" in text and "gpubench-a" not in text   # rewritten
        again = plan_down(ledger, DownRequest(name="a"))
    assert again.targets == [] and again.note == "a is already terminated"


def test_all_with_one_provider_unreachable(clouds):
    cloud = clouds["mem"] = Cloud()
    warnings = []
    with Ledger() as ledger:
        _live(ledger, cloud, "a", port=2201)
        _live(ledger, cloud, "b", port=2202)
        _live(ledger, None, "c", provider="other")
        plan = plan_down(ledger, DownRequest(everything=True, deadline_s=5), warn=warnings.append)
        assert [t.name for t in plan.targets] == ["a", "b", "c"] and set(plan.providers) == {"mem"}
        assert warnings == ["warning: other -: no API key: no key for other"]
        report = take_down(ledger, plan)
        assert [(r.name, r.gone, r.reached) for r in report.results] == [
            ("a", True, True), ("b", True, True), ("c", False, False)]
        assert report.results[2].message == "cannot reach other (no API key)"
        assert not report.all_gone
        assert report.total_cost == pytest.approx(sum(r.cost for r in report.results[:2]))
        assert [e.name for e in ledger.entries()] == ["c"]


def test_orphans_only(clouds):
    cloud = clouds["mem"] = Cloud()
    with Ledger() as ledger:
        _live(ledger, cloud, "known")
        cloud.add("stray")
        plan = plan_down(ledger, DownRequest(orphans=True, deadline_s=5))
        assert [(t.name, t.entry, t.instance.instance_id) for t in plan.targets] == [("stray", None, "i2")]
        report = take_down(ledger, plan)
        assert report.all_gone and report.results[0].cost is None
        assert list(cloud.instances) == ["i1"] and ledger.find("known").status is LedgerStatus.READY


def test_nothing_to_take_down(clouds):
    clouds["mem"] = Cloud()
    with Ledger() as ledger:
        plan = plan_down(ledger, DownRequest(everything=True))
    assert plan.targets == [] and plan.note == "nothing to take down"


def test_ls_asks_ledger_providers_loudly_and_the_others_quietly(clouds):
    clouds["other"] = Cloud()
    warnings = []
    with Ledger() as ledger:
        _live(ledger, None, "a", provider="mem")
        providers = fleet.providers_for_ledger(ledger, warnings.append)
    assert set(providers) == {"other"}
    assert warnings == ["warning: mem -: no API key: no key for mem"]
