"""A bench on one machine, or on K machines of one GPU type (--hosts): rent it,
run the sweeps on it over SSH, and give it back, whatever happens in between (an
error, Ctrl-C), unless asked to keep it. The ledger row written by provisioning is
what teardown acts on, so a machine whose launch was interrupted half-way is found
and removed too.

Before any benchmark time the machine passes the preflight gate
(lifecycle/preflight.py) or is terminated and replaced by the next offer, within
--attempts; the gate's findings (host id, driver, CUDA, torch, NCCL, GPU names and
UUIDs, topology) go into every record of the bench. The machine stops itself at its
deadline should gpubench die (lifecycle/watchdog.py); with a budget, no run starts
that would take the spending past it.

With --hosts K the same sweep runs on K machines named NAME-1..NAME-K, on distinct
hosts (hosts.py), one after the other or, with --parallel, at once; every record
names its host. Each machine is taken down whatever happens to the others.

Money goes only on what the user agreed to (plan.plan_consent): should that machine
never boot, a next offer outside it is asked about (`ask`), or with no one to ask
(--yes) stops the bench with one line (lifecycle/consent.py).
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Callable

from gpubench.bench.plan import (BenchPlan, budget_note, plan_bench, plan_consent, provision_request,
                                 stops_itself)
from gpubench.bench.request import BenchRequest, BenchResult
from gpubench.bench.sweeps import WithHostFacts, gate, spending_for, sweep_on
from gpubench.bench.teardown import Rented, bench_ledger, rent_sweep_teardown, teardown
from gpubench.store.results import ResultsStore
from gpubench.sweep.predicted import WithPredictions

if TYPE_CHECKING:
    from gpubench.lifecycle.budget import SharedBudget
    from gpubench.lifecycle.consent import Ask, Consent

Echo = Callable[[str], None]


def bench(req: BenchRequest, store: ResultsStore, echo: Echo, ledger=None,
          provider=None, plan: BenchPlan | None = None, ask: "Ask | None" = None) -> BenchResult:
    """Provision, sweep every workload, terminate; the result says what it cost.
    `plan` is plan_bench's (made here when not given). With req.hosts > 1, the same
    on each machine (hosts.py); the result then holds each machine's. `ask` asks the
    user about an offer other than the plan's (None: it is refused)."""
    from gpubench.lifecycle.provision import default_name

    plan = plan or plan_bench(req, provider)
    name = req.name or default_name(req.provider)
    with bench_ledger(ledger, echo) as ledger:
        if plan.hosts == 1:
            return bench_machine(req, plan, plan.offers, name, store, echo, ledger, plan.budget,
                                 plan_consent(req, plan, ask))
        return _on_hosts(req, plan, name, store, echo, ledger, ask)


def bench_machine(req: BenchRequest, plan: BenchPlan, offers: list, name: str, store: ResultsStore,
                  echo: Echo, ledger, budget: "float | SharedBudget | None",
                  consent: "Consent | None" = None) -> BenchResult:
    """One machine: rent it (from `offers`, in order, each within `consent`), sweep on
    it, take it down; then its records gain what it cost, estimated and billed. The
    budget is this machine's alone, or one shared with others rented at once."""
    best = offers[0]
    echo(f"renting {best.gpu_count}x {best.gpu_name} on {req.provider} "
         f"({best.instance_type or best.offer_id}) at ${best.price_per_hour:.2f}/h")
    from gpubench.lifecycle.budget import SharedBudget

    said = (f"{budget_note(budget.budget)} for all the machines" if isinstance(budget, SharedBudget)
            else budget_note(budget))
    echo(f"plan: {plan.estimate.describe()}; the machine {stops_itself(plan.max_hours)}{said}")
    result = BenchResult(name=name)
    started = time.time()

    def rent_and_sweep() -> None:
        _rent_and_sweep(req, plan, offers, name, store, echo, ledger, budget, consent, result)

    return rent_sweep_teardown(
        rent_and_sweep, lambda: teardown(Rented(name, plan.provider), req.keep, ledger, echo, result, started),
        store, result, echo)


def _rent_and_sweep(req: BenchRequest, plan: BenchPlan, offers: list, name: str, store: ResultsStore,
                    echo: Echo, ledger, budget: "float | SharedBudget | None", consent: "Consent | None",
                    result: BenchResult) -> None:
    from gpubench.bench.hosts import host_key
    from gpubench.launch.points import CountsAsked, sweep_points
    from gpubench.lifecycle import provision
    from gpubench.lifecycle.budget import SharedBudget
    from gpubench.remote.targets import host_from_entry

    outcome = provision.provision(plan.provider, provision_request(req, name, plan.max_hours), offers,
                                  ledger, lambda phase, detail: echo(f"{phase}: {detail}"),
                                  gate=gate(req, ledger), consent=consent)
    result.instance_id = outcome.entry.instance_id
    result.host_id = host_key(outcome.offer)
    echo(f"ready in {outcome.seconds_to_ready:.1f}s: {name} ({req.provider} "
         f"{outcome.entry.instance_id})")
    facts = outcome.gate.record_fields() if outcome.gate is not None else {}
    facts.update({k: v for k, v in (("host_id", result.host_id),
                                    ("instance_id", result.instance_id)) if v is not None})
    sweep_on(host_from_entry(outcome.entry), lambda machine: sweep_points(machine, CountsAsked(gpus=req.counts)),
             req, WithHostFacts(WithPredictions(store, outcome.offer, plan.kept), facts), echo, result,
             budget.watch(ledger) if isinstance(budget, SharedBudget)
             else spending_for(ledger, outcome.entry.row_id, budget),
             force=req.force or req.hosts > 1,   # with --hosts, each host is measured
             forecast=plan.forecast)


def _on_hosts(req: BenchRequest, plan: BenchPlan, name: str, store: ResultsStore, echo: Echo,
              ledger, ask: "Ask | None" = None) -> BenchResult:
    """--hosts K: bench_machine on each of K machines named NAME-1..NAME-K, in turn or
    at once (hosts.py); whatever happens, any of them still live at the end is
    taken down here. The result holds each machine's and their sums. Each machine is
    held to the plan's offer (type and price) the user confirmed."""
    from gpubench.bench import hosts
    from gpubench.store.ledger import Ledger

    names = [hosts.machine_name(name, i) for i in range(1, plan.hosts + 1)]
    share = plan.budget / plan.hosts if plan.budget is not None else None
    asking = threading.Lock()

    def one_at_a_time(question: str) -> bool:   # --parallel: one question on the terminal at once
        with asking:
            return ask(question)

    def in_turn(machine: str, offers: list, say: Echo) -> BenchResult:
        return bench_machine(req, plan, offers, machine, store, say, ledger, share,
                             plan_consent(req, plan, ask))

    def at_once(machine: str, offers: list, say: Echo) -> BenchResult:
        with Ledger(ledger.path) as own:     # a connection of its own per thread
            return bench_machine(req, plan, offers, machine, store, say, own, share,
                                 plan_consent(req, plan, one_at_a_time if ask is not None else None))

    try:
        if req.parallel:
            register_key_once(plan.provider)     # not K workers each creating it
            done = hosts.at_once(names, plan.offers, at_once, echo)
        else:
            done = hosts.in_turn(names, plan.offers, in_turn, echo)
    finally:
        take_down_leftovers(names, ledger, plan.provider, echo)
    return _combined(name, done)


def register_key_once(provider) -> None:
    """The SSH key registered with `provider` once, before machines are rented from it at once."""
    from gpubench.lifecycle.keys import ensure_keypair

    keypair = ensure_keypair()
    provider.ensure_ssh_key(keypair.public_key, "gpubench")


def take_down_leftovers(names: list[str], ledger, provider, echo: Echo) -> None:
    """The last safety of machines rented at once: a machine of the bench the ledger
    still holds live (a worker stopped before its own teardown) is taken down here."""
    for machine in names:
        if ledger.find_active(machine) is not None:
            teardown(Rented(machine, provider), False, ledger, echo, BenchResult(name=machine))


def _combined(name: str, machines: list[BenchResult]) -> BenchResult:
    costs = [m.cost for m in machines]
    billed = [m.billed for m in machines]
    return BenchResult(
        name=name, records=[r for m in machines for r in m.records],
        run_ids=[r for m in machines for r in m.run_ids],
        cost=None if None in costs else sum(costs),
        billed=None if (None in billed or not billed) else sum(billed),
        terminated=all(m.terminated for m in machines), kept=any(m.kept for m in machines),
        budget_stop="; ".join(m.budget_stop for m in machines if m.budget_stop) or None,
        machines=machines)
