"""Running the candidates of a bench across providers (bench/across.py), without a
cloud: one budget over every machine (the thrown-away ones included, and once reached
for one, reached for all), a candidate whose runs all fail rented again within
--attempts or dropped with its reason, one that cannot be had dropped, and an error
in one stopping the others."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import pytest

from gpubench.bench import across, hosts
from gpubench.bench.plan import BenchPlan
from gpubench.bench.request import BenchRequest, BenchResult
from gpubench.lifecycle.budget import BudgetReached, Estimate, SharedBudget
from gpubench.lifecycle.provision import ProvisionError
from gpubench.store.ledger import Ledger


def row(ledger: Ledger, name: str, price: float, hours_ago: float, instance: str, done: bool = False):
    entry = ledger.begin(name, "vast", f"gpubench-{name}", price_per_hour=price, offer_id=f"offer-{instance}")
    ledger.mark(entry.row_id, "launched", "created_at", instance_id=instance)
    ledger.update(entry.row_id, created_at=time.time() - hours_ago * 3600)
    if done:
        ledger.mark(entry.row_id, "terminated", "terminated_confirmed_at")
    return entry


def test_one_budget_over_every_machine_thrown_away_ones_included(tmp_path):
    since = time.time() - 1
    with Ledger() as ledger:
        row(ledger, "b-1", 1.0, 0.5, "i1", done=True)   # thrown away: about $0.50
        row(ledger, "b-1", 1.0, 1.0, "i2")               # about $1.00 so far
        row(ledger, "b-2", 2.0, 1.0, "i3")               # about $2.00 so far
        row(ledger, "other", 9.0, 1.0, "i4")             # not of this bench
        shared = SharedBudget(4.0, ["b-1", "b-2"], since)
        one, two = shared.watch(ledger), shared.watch(Ledger(ledger.path))
        assert one.spent() == pytest.approx(3.5, rel=1e-3)
        assert one.seconds_left() == pytest.approx(0.5 / 3.0 * 3600, rel=1e-2)   # at $3/h for both
        assert one.allow(60.0, 3600.0, "a short run") == pytest.approx(600, rel=1e-2)
        with pytest.raises(BudgetReached, match=r"of \$4.00 spent on all the machines; a long run"):
            one.allow(3600.0, 7200.0, "a long run")
        with pytest.raises(BudgetReached, match="a long run"):   # reached for every machine
            two.allow(1.0, 3600.0, "a tiny run")


@dataclass
class Shortlisted:
    """What _candidate reads of a shortlisted candidate."""

    request: BenchRequest
    plan: object
    label: str = "1x A10 on vast"


def results(*statuses: str) -> BenchResult:
    return BenchResult(records=[{"status": s, "error": "boom: the host fell over" if s != "ok" else None}
                                for s in statuses], run_ids=["r"])


def candidate(monkeypatch, outcomes: list, attempts: int = 3):
    """_candidate over a bench_machine that launches a machine and then gives or raises
    each of `outcomes` in turn; (what became of it, what it said, the offers tried)."""
    from gpubench.providers.common import Offer

    offers = tuple(Offer("vast", f"o{i}", "A10", 1, 0.25, extra={"machine_id": 100 + i}) for i in range(3))
    tried, said = [], []

    def bench_machine(req, plan, left, name, store, say, ledger, shared, consent):
        tried.append((req.attempts, [o.offer_id for o in left]))
        row(ledger, name, 0.25, 0.01, f"i{len(tried)}", done=True)
        ledger.update(ledger.entries(include_done=True)[-1].row_id, offer_id=left[0].offer_id)
        got = outcomes.pop(0)
        if isinstance(got, BaseException):
            raise got
        got.instance_id = f"i{len(tried)}"
        return got

    monkeypatch.setattr(across, "bench_machine", bench_machine)
    req = BenchRequest("vast", 1, [], attempts=attempts)
    plan = BenchPlan(None, list(offers), Estimate(1, 60.0, 0.25), 1.0, None)
    with Ledger() as ledger:
        got = across._candidate(Shortlisted(req, plan), "b-1", None, said.append, ledger, None,
                                time.time() - 1, None)
        across._costs(got, ledger, time.time() - 60)
    return got, said, tried


def test_a_candidate_whose_runs_all_fail_is_rented_again_on_another_host(monkeypatch):
    got, said, tried = candidate(monkeypatch, [results("failed"), results("ok", "failed")])
    assert got.measured and got.result.records[0]["status"] == "ok"
    assert "replace: its runs failed: boom: the host fell over; renting another 1x A10 on vast" in said
    assert tried == [(3, ["o0", "o1", "o2"]), (2, ["o1", "o2"])]      # not the host that failed
    assert got.machines == 2 and got.thrown_away > 0 and got.cost > got.thrown_away


def test_a_candidate_is_dropped_with_its_reason_once_attempts_run_out(monkeypatch):
    got, said, tried = candidate(monkeypatch, [results("failed"), results("failed")], attempts=2)
    assert not got.measured and got.dropped == "its runs failed: boom: the host fell over"
    assert said[-1] == "dropped: its runs failed: boom: the host fell over" and len(tried) == 2
    assert got.machines == 2 and got.thrown_away == pytest.approx(got.cost)

    got, said, tried = candidate(monkeypatch, [ProvisionError("could not provision on vast: never booted")])
    assert got.dropped == "could not provision on vast: never booted" and len(tried) == 1


def test_an_error_in_one_machine_stops_the_others_and_is_raised():
    stopped = threading.Event()

    def work(i: int, name: str, say) -> str:
        if i == 0:
            time.sleep(0.2)
            raise RuntimeError("a bug")
        try:
            while True:          # a machine at work, saying what it does
                say("step")
                time.sleep(0.05)
        except hosts.Cancelled:
            stopped.set()        # its teardown would run here
            raise

    with pytest.raises(RuntimeError, match="a bug"):
        hosts.each_at_once(["m-1", "m-2"], work, lambda name: (lambda line: None), lambda line: None,
                           stop_all_on_error=True)
    assert stopped.is_set()
