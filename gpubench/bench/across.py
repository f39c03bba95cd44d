"""A bench across providers: the K candidates shortlist.py chose, rented and swept at
once, each a bench of one machine (machine.bench_machine: its own lifecycle, preflight
gate, watchdog and deadline), named BASE-1 .. BASE-K, under one budget for all of
them (lifecycle.budget.SharedBudget: the machines thrown away on the way count).

A candidate whose machine never becomes usable (never boots, fails preflight) is
replaced from its own offers by provisioning, within --attempts; one refused by
consent (a dearer machine than agreed, under --yes) or still not usable is dropped
with its reason. One whose runs all fail is rented again on another host while
--attempts has launches left, else dropped. The others go on either way.

Ctrl-C, or any other error in one of them, stops them all (each tearing its machine
down, hosts.each_at_once); whatever happens, any machine of the bench the ledger still
holds live is taken down at the end (machine.take_down_leftovers), and confirmed gone.
Afterwards each candidate's cost is read from the ledger: every machine rented for it,
the one it was measured on and those thrown away, and what the provider billed.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Callable

from gpubench.bench.machine import bench_machine, register_key_once, take_down_leftovers
from gpubench.bench.plan import plan_consent
from gpubench.bench.request import BenchResult
from gpubench.bench.shortlist import AcrossPlan, Shortlisted, names_for
from gpubench.bench.teardown import TeardownError, bench_ledger, one_line
from gpubench.errors import GpubenchError
from gpubench.store.results import ResultsStore

if TYPE_CHECKING:
    from gpubench.lifecycle.consent import Ask

Echo = Callable[[str], None]


@dataclass
class CandidateOutcome:
    """What became of one candidate."""

    shortlisted: Shortlisted
    name: str                          # its machine's name in the ledger
    result: BenchResult | None = None  # the machine it was measured on
    dropped: str | None = None         # why it was dropped (nothing kept of it)
    machines: int = 0                  # machines launched for it
    cost: float | None = None          # all of them, estimated from the ledger
    thrown_away: float = 0.0           # the machines whose figures were not kept
    billed: float | None = None        # what the provider billed for all of them, where it says

    @property
    def measured(self) -> bool:
        return self.result is not None and self.dropped is None

    @property
    def label(self) -> str:
        return self.shortlisted.label


@dataclass
class AcrossResult:
    outcomes: list[CandidateOutcome] = field(default_factory=list)

    @property
    def measured(self) -> list[CandidateOutcome]:
        return [o for o in self.outcomes if o.measured]

    @property
    def records(self) -> list[dict]:
        return [r for o in self.measured for r in o.result.records]

    @property
    def run_ids(self) -> list[str]:
        return [r for o in self.measured for r in o.result.run_ids]

    @property
    def cost(self) -> float | None:
        costs = [o.cost for o in self.outcomes if o.machines]
        return None if None in costs else sum(costs)

    @property
    def thrown_away(self) -> float:
        return sum(o.thrown_away for o in self.outcomes)

    @property
    def billed(self) -> float | None:
        billed = [o.billed for o in self.outcomes if o.machines]
        return None if None in billed or not billed else sum(billed)

    @property
    def budget_stop(self) -> str | None:
        return next((o.result.budget_stop for o in self.measured if o.result.budget_stop), None)

    @property
    def all_ok(self) -> bool:
        """Every candidate measured, and no run of any failed."""
        return all(o.measured and o.result.all_ok for o in self.outcomes)


def bench_across(plan: AcrossPlan, base: str, store: ResultsStore, echo: Echo,
                 echo_for: Callable[[str], Echo] | None = None, ask: "Ask | None" = None,
                 ledger=None) -> AcrossResult:
    """Rent, sweep and give back every candidate of `plan` at once, as BASE-1 .. BASE-K;
    each says its lines through `echo_for(name)` (default: on `echo`, prefixed with its
    name). `ask` asks about a machine outside what was agreed (None: refused)."""
    from gpubench.bench import hosts
    from gpubench.lifecycle.budget import SharedBudget
    from gpubench.store.ledger import Ledger

    names = names_for(base, len(plan.chosen))
    started = time.time()
    shared = SharedBudget(plan.budget, names, started) if plan.budget is not None else None
    asking = threading.Lock()

    def one_at_a_time(question: str) -> bool:   # one question on the terminal at once
        with asking:
            return ask(question)

    with bench_ledger(ledger, echo) as ledger:
        def work(i: int, name: str, say: Echo) -> CandidateOutcome:
            with Ledger(ledger.path) as own:     # a connection of its own per thread
                return _candidate(plan.chosen[i], name, store, say, own, shared, started,
                                  one_at_a_time if ask is not None else None)

        for prov in {id(s.plan.provider): s.plan.provider for s in plan.chosen}.values():
            register_key_once(prov)        # not K workers each creating it
        try:
            outcomes = hosts.each_at_once(names, work, echo_for or hosts.prefixed(echo), echo,
                                          stop_all_on_error=True)
        finally:
            for s, name in zip(plan.chosen, names):
                take_down_leftovers([name], ledger, s.plan.provider, echo)
        for outcome in outcomes:
            _costs(outcome, ledger, started)
    return AcrossResult(outcomes)


def spent_on(names: list[str], since: float) -> Callable[[], float]:
    """What every machine named in `names` launched since `since` has cost so far, the
    ones thrown away included, as the ledger has it (a connection of its own per call:
    a live display asks from its own thread)."""
    from gpubench.store.ledger import Ledger

    def spent() -> float:
        with Ledger() as ledger:
            return sum(r.cost() or 0.0 for r in ledger.entries(include_done=True)
                       if r.name in names and (r.requested_at or 0) >= since)
    return spent


def _candidate(s: Shortlisted, name: str, store: ResultsStore, say: Echo, ledger, shared,
               started: float, ask: "Ask | None") -> CandidateOutcome:
    """One candidate's bench, rented again on another host while its runs all fail and
    --attempts allows; dropped with its reason when it cannot be had or measured."""
    from gpubench.bench.hosts import not_used
    from gpubench.lifecycle.consent import ConsentRefused
    from gpubench.lifecycle.provision import NoOfferError, ProvisionError
    from gpubench.providers.common import ProviderError

    outcome = CandidateOutcome(s, name)
    consent = plan_consent(s.request, s.plan, ask)
    used: set = set()
    while True:
        left = not_used(list(s.plan.offers), used)
        attempts = s.request.attempts - _launched(ledger, name, started)
        req = replace(s.request, attempts=attempts, force=True)   # each candidate measured now
        try:
            result = bench_machine(req, s.plan, left, name, store, say, ledger, shared, consent)
        except TeardownError:
            raise
        except (ProvisionError, NoOfferError, ConsentRefused, ProviderError) as e:
            return _dropped(outcome, one_line(e), say)
        except GpubenchError as e:
            why = f"its runs failed: {one_line(e)}"
        else:
            if result.budget_stop or not result.records or any(r["status"] == "ok" for r in result.records):
                outcome.result = result
                say(f"measured: {s.label}")
                return outcome
            why = f"its runs failed: {_first_error(result.records)}"
        used |= _hosts_of(ledger, name, started, s.plan.offers)
        if _launched(ledger, name, started) >= s.request.attempts or not not_used(list(s.plan.offers), used):
            return _dropped(outcome, why, say)
        say(f"replace: {why}; renting another {s.label}")


def _dropped(outcome: CandidateOutcome, why: str, say: Echo) -> CandidateOutcome:
    outcome.dropped = why
    say(f"dropped: {why}")
    return outcome


def _first_error(records: list[dict]) -> str:
    failed = next((r for r in records if r.get("status") != "ok"), {})
    return str(failed.get("error") or failed.get("status") or "failed").splitlines()[0][:200]


def _rows(ledger, name: str, started: float) -> list:
    return [r for r in ledger.entries(include_done=True)
            if r.name == name and (r.requested_at or 0) >= started]


def _launched(ledger, name: str, started: float) -> int:
    return sum(1 for r in _rows(ledger, name, started) if r.instance_id)


def _hosts_of(ledger, name: str, started: float, offers) -> set:
    """The hosts (hosts.host_key) of the offers this candidate's machines were launched from."""
    from gpubench.bench.hosts import host_key

    launched = {r.offer_id for r in _rows(ledger, name, started) if r.instance_id}
    return {host_key(o) for o in offers if o.offer_id in launched and host_key(o) is not None}


def _costs(outcome: CandidateOutcome, ledger, started: float) -> None:
    """Every machine launched for the candidate, from the ledger: what all of them cost,
    what those whose figures were not kept cost, and what the provider billed."""
    rows = [r for r in _rows(ledger, outcome.name, started) if r.instance_id]
    outcome.machines = len(rows)
    if not rows:
        return
    costs = [r.cost() for r in rows]
    outcome.cost = None if None in costs else sum(costs)
    kept = outcome.result.instance_id if outcome.measured else None
    outcome.thrown_away = sum(c or 0.0 for r, c in zip(rows, costs) if r.instance_id != kept)
    billed = [r.billed_cost for r in rows]
    outcome.billed = None if None in billed else sum(billed)
