"""Offers whose host fails a published check are never rented; a machine that fails
the preflight gate is terminated (confirmed gone) and the next offer rented, within
--attempts. An in-memory provider, a scripted gate."""

from __future__ import annotations

import json

import pytest

from gpubench.lifecycle import boot
from gpubench.store.ledger import Ledger
from gpubench.lifecycle.preflight import Check, Expectation, GateReport, PreflightError, PreflightPythonError
from gpubench.lifecycle.provision import (Deadlines, NoOfferError, ProvisionError, ProvisionRequest, plan,
                                          provision)
from gpubench.offer_checks import left_out_line, offer_problems, split_offers
from gpubench.providers.common import Instance, InstanceState, Offer
from tests.lifecycle.helpers import Cloud

GOOD_HOST = {"reliability": 0.99, "cuda_max_good": 12.4, "direct_port_count": 20, "pcie_bw": 24.0,
             "inet_down": 2000.0, "inet_up": 900.0, "gpu_ram": 81920, "cpu_ram": 258000,
             "cpu_cores_effective": 32.0}


def vast_offer(oid: str, price: float, **host) -> Offer:
    return Offer("vast", oid, "H100 SXM", 2, price, available=1, extra={**GOOD_HOST, **host})


@pytest.mark.parametrize("field, value, why", [
    ("reliability", 0.85, "reliability 0.85 (floor: > 0.90)"),
    ("cuda_max_good", 11.7, "cuda_max_good 11.7 (floor: >= 11.8)"),
    ("direct_port_count", 3, "direct_port_count 3 (floor: > 3)"),
    ("pcie_bw", 2.5, "pcie_bw 2.5 (floor: > 2.85 GB/s)"),
    ("inet_down", 300.0, "inet_down 300 (floor: >= 500 Mb/s)"),
    ("inet_up", 100.0, "inet_up 100 (floor: >= 500 Mb/s)"),
    ("cpu_ram", 120000, "cpu_ram 120000 (floor: >= 0.95 x 163840 MB of GPU memory)"),
    ("cpu_cores_effective", 3.0, "cpu_cores_effective 3 (floor: >= 2 per GPU, 4)"),
])
def test_each_published_host_figure_fails_on_its_own(field, value, why):
    assert offer_problems(vast_offer("a", 1.0)) == []
    assert offer_problems(vast_offer("a", 1.0, **{field: value})) == [why]


def test_a_field_the_provider_does_not_publish_is_not_checked():
    assert offer_problems(Offer("lambda", "gpu_1x_h100", "H100 SXM", 1, 3.0)) == []
    assert offer_problems(Offer("vast", "1", "H100 SXM", 1, 3.0, extra={"reliability": None})) == []


class Market:
    name = "vast"

    def __init__(self, offers):
        self._offers = offers

    def offers(self, gpus=None, gpu_type=None, interruptible=False):
        return list(self._offers)


def test_offers_that_fail_are_not_rented_and_say_why():
    cheap_bad = vast_offer("1", 1.0, reliability=0.8)
    good = vast_offer("2", 2.0)
    assert [o.offer_id for o in plan(Market([cheap_bad, good]), ProvisionRequest("vast", 2))] == ["2"]
    with pytest.raises(NoOfferError) as e:
        plan(Market([cheap_bad]), ProvisionRequest("vast", 2))
    assert str(e.value) == ("every matching vast offer fails a check on its host: left out: vast 1 "
                            "(2x H100 SXM, $1.00/h): reliability 0.8 (floor: > 0.90)")


def test_offers_command_lists_the_kept_and_says_why_each_was_left_out(monkeypatch, cli):
    import gpubench.offers

    found = [vast_offer("1", 1.0, reliability=0.8, inet_up=10.0), vast_offer("2", 2.0)]
    monkeypatch.setattr(gpubench.offers, "_one", lambda name, q: found)
    code, out, err = cli("offers", "vast", "--format", "json")
    assert code == 0
    assert [row["price_per_hour"] for row in json.loads(out)] == [2.0]
    assert err.strip() == left_out_line(*split_offers(found)[1][0]) == (
        "left out: vast 1 (2x H100 SXM, $1.00/h): reliability 0.8 (floor: > 0.90); "
        "inet_up 10 (floor: >= 500 Mb/s)")


# -- replacing a host that fails the gate ----------------------------------------

class Booting(Cloud):
    """Instances run with an SSH address at once."""

    launched = 0

    def add(self, name):
        self.launched += 1
        inst = Instance("mem", f"i{self.launched}", name, InstanceState.RUNNING,
                        ssh_host="127.0.0.1", ssh_port=22, ssh_user="u", raw_status="running")
        self.instances[inst.instance_id] = inst
        return inst

    def offers(self, gpus=None, gpu_type=None, interruptible=False):
        return [Offer("mem", f"o{i}", "H100", 1, 2.0 + i, available=1) for i in range(3)]


def _report(ok: bool, check: str = "throttle") -> GateReport:
    detail = "GPU 0 under load: HW thermal slowdown (0x40) (floor: no HW slowdown, ...)"
    return GateReport([Check("gpus", True, "1x H100"), Check(check, ok, "no slowdown" if ok else detail)],
                      {}, Expectation("H100", 1))


@pytest.fixture
def no_ssh(monkeypatch):
    monkeypatch.setattr(boot, "probe", lambda *a, **kw: None)


def _run(cloud, ledger, gate, attempts=3):
    req = ProvisionRequest("mem", gpus=1, name="g", attempts=attempts, deadlines=Deadlines(5, 5, 5))
    said = []
    outcome = provision(cloud, req, cloud.offers(), ledger, lambda p, d: said.append(f"{p}: {d}"), gate)
    return outcome, said


def test_a_host_that_fails_the_gate_is_terminated_and_the_next_offer_rented(no_ssh):
    cloud = Booting()
    verdicts = iter([_report(False), _report(True)])
    seen = []

    def gate(entry, offer):
        seen.append(offer.offer_id)
        return next(verdicts)

    with Ledger() as ledger:
        outcome, said = _run(cloud, ledger, gate)
        rows = {r.instance_id: r for r in ledger.entries(include_done=True)}
    assert seen == ["o0", "o1"] and outcome.offer.offer_id == "o1" and outcome.gate.passed
    assert rows["i1"].status == "terminated" and rows["i1"].terminated_confirmed_at
    assert rows["i1"].note.startswith("preflight failed: throttle: GPU 0 under load: HW thermal")
    assert rows["i2"].status == "ready" and rows["i2"].note.startswith("preflight passed 2 checks")
    assert list(cloud.instances) == ["i2"]
    assert any(line.startswith("replace: preflight failed: throttle:") for line in said)
    assert outcome.attempts == ["i1: preflight failed: throttle: GPU 0 under load: HW thermal slowdown "
                                "(0x40) (floor: no HW slowdown, ...)"]


def test_every_host_failing_stops_at_attempts_and_says_which_check(no_ssh):
    cloud = Booting()
    with Ledger() as ledger, pytest.raises(ProvisionError) as e:
        _run(cloud, ledger, lambda entry, offer: _report(False, "pcie"), attempts=2)
    assert "(2 launched, 0 refused)" in str(e.value) and "preflight failed: pcie:" in str(e.value)
    assert cloud.instances == {}


def test_a_gate_that_cannot_run_replaces_the_host(no_ssh):
    cloud = Booting()
    answers = iter([PreflightError("the preflight probe gave no answer: killed"), _report(True)])

    def gate(entry, offer):
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    with Ledger() as ledger:
        outcome, _ = _run(cloud, ledger, gate)
    assert outcome.entry.instance_id == "i2" and list(cloud.instances) == ["i2"]


def test_a_missing_python_is_the_users_and_terminates_without_replacing(no_ssh):
    cloud = Booting()

    def gate(entry, offer):
        raise PreflightPythonError("remote environment on u@127.0.0.1: missing python")

    with Ledger() as ledger, pytest.raises(PreflightPythonError):
        _run(cloud, ledger, gate)
    assert cloud.instances == {} and cloud.terminate_calls >= 1


def test_the_gates_findings_are_kept_in_each_machines_ledger_row(no_ssh, monkeypatch):
    from gpubench.lifecycle import preflight

    cloud = Booting()
    answers = iter([PreflightError("the preflight probe gave no answer: killed"),
                    _report(False, "pcie"), _report(True)])

    def check_entry(entry, offer=None, python="python3"):
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(preflight, "check_entry", check_entry)
    with Ledger() as ledger:
        outcome, _ = _run(cloud, ledger, preflight.recorded_gate(ledger))
        gates = {r.instance_id: json.loads(r.gate) for r in ledger.entries(include_done=True)}
    assert outcome.entry.instance_id == "i3"
    assert gates["i1"]["passed"] is False and gates["i1"]["failed"] == [
        {"check": "run", "measured": "the preflight probe gave no answer: killed", "floor": None}]
    assert gates["i2"]["failed"] == [{"check": "pcie", "floor": "no HW slowdown, ...",
                                      "measured": "GPU 0 under load: HW thermal slowdown (0x40)"}]
    assert gates["i3"]["passed"] is True and gates["i3"]["failed"] == []
    assert gates["i3"]["checks"] == {"gpus": "ok: 1x H100", "throttle": "ok: no slowdown"}
    assert {"host_id", "instance_id", "seconds", "at"} <= set(gates["i3"])
