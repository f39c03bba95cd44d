"""A whole bench in one call: rent a machine, run the sweeps on it over SSH,
and give it back, whatever happens in between (an error, Ctrl-C), unless asked
to keep it. The ledger row written by provisioning is what teardown acts on,
so a machine whose launch was interrupted half-way is found and removed too.

`plan_bench` comes first: the cheapest offer, the plan's expected time and cost
(refused when over --budget), and the machine's deadline (--max-hours, by default
the expected time plus a margin), for the caller to confirm. The machine stops
itself at its deadline should gpubench die (lifecycle/watchdog.py); with a budget,
no run starts that would take the spending past it, and a run's time limit is cut
to what the budget has left.

Before any benchmark time the machine passes the preflight gate
(lifecycle/preflight.py) or is terminated and replaced by the next offer, within
--attempts; the gate's findings (host id, driver, CUDA, torch, NCCL, GPU names and
UUIDs, topology) go into every record of the bench.

With --hosts K the same sweep runs on K machines of one GPU type, on distinct hosts
(where the provider names its machines: Vast.ai's machine ids; elsewhere every launch
is a machine of its own), one after the other or, with --parallel, at once; every
record names its host, and the report shows the spread across hosts. Each machine
is taken down whatever happens to the others.

Money goes only on what the user agreed to: the offer the confirmation showed, any
GPU type with --any-gpu or --gpu-type, any price up to --max-price. Should that
machine never boot, a next offer outside it is asked about (`ask`), or with no one
to ask (--yes) stops the bench with one line (lifecycle/consent.py).

Once a machine is confirmed gone, its records gain what it cost: the estimate
(price x time up) and what the provider billed where it says (record_schema:
BILLING; results_billing.py rewrites the bench's own run files atomically).
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterator

from gpubench.errors import GpubenchError
from gpubench.store.results import ResultsStore, new_run_id
from gpubench.suite import WorkloadRef

if TYPE_CHECKING:
    from gpubench.lifecycle.budget import Estimate
    from gpubench.lifecycle.consent import Ask, Consent
    from gpubench.providers.common import Provider

Echo = Callable[[str], None]
TERMINATE_DEADLINE_S = 180.0
MAX_HOSTS = 16          # machines of one bench (--parallel: bench_hosts.MAX_PARALLEL at once)


@dataclass
class BenchRequest:
    provider: str
    gpus: int
    workloads: list[WorkloadRef]
    workload_args: list[str] = field(default_factory=list)
    counts: list[int] | None = None   # None: 1 and powers of two up to the machine's GPUs
    gpu_type: str | None = None
    max_price: float | None = None
    disk_gb: int = 100
    image: str | None = None
    name: str | None = None
    keep: bool = False
    force: bool = False
    timeout: float = 3600.0           # per run
    remote_python: str = "python3"
    remote_dir: str = "gpubench"
    attempts: int = 3                 # launches to try, as provision's --attempts
    boot_timeout: float = 900.0       # seconds to reach running, as provision's --boot-timeout
    ssh_timeout: float = 300.0        # seconds for SSH to answer, as provision's --ssh-timeout
    max_hours: float | None = None    # the machine's deadline [default: expected time + margin]
    budget: float | None = None       # dollars [default: [defaults] budget in config.toml, else none]
    preflight: bool = True            # check the host before the sweeps; replace one that fails
    repeat: int | None = None         # runs of each count; None: the sweep's default for the machine
    hosts: int = 1                    # machines of one GPU type, on distinct hosts, to sweep on
    parallel: bool = False            # sweep them at once rather than one after the other
    per_workload_args: dict[str, list[str]] = field(default_factory=dict)  # --args NAME="ARGS"
    any_gpu: bool = False             # --any-gpu: another GPU type may replace one that never boots


@dataclass
class BenchPlan:
    """What plan_bench decided, for the user to confirm and bench to follow."""

    provider: "Provider"
    offers: list                      # to try, cheapest first
    estimate: "Estimate"
    max_hours: float
    budget: float | None
    hosts: int = 1

    @property
    def total_dollars(self) -> float:
        """The estimate for every machine of the plan."""
        return self.estimate.dollars * self.hosts

    @property
    def highest_price(self) -> float:
        """$/h of the dearest machine the plan expects to rent: the first offer's, or
        with --hosts K the K-th cheapest distinct host's (offers that name no host are
        a machine per launch, as many as asked for, at their price)."""
        from gpubench.bench.hosts import host_key

        if self.hosts == 1:
            return self.offers[0].price_per_hour
        per_host: dict[str, float] = {}
        endless: list[float] = []
        for offer in self.offers:
            key = host_key(offer)
            if key is None:
                endless += [offer.price_per_hour] * self.hosts
            else:
                per_host[key] = min(per_host.get(key, offer.price_per_hour), offer.price_per_hour)
        prices = sorted([*per_host.values(), *endless])
        return prices[min(self.hosts, len(prices)) - 1]

    def describe(self) -> str:
        from gpubench.format import format_dollars
        from gpubench.lifecycle.budget import say_hours

        best = self.offers[0]
        ceiling = f"; budget {format_dollars(self.budget)}" if self.budget is not None else ""
        stops = f"stops itself after {say_hours(self.max_hours)} unless a gpubench run is active on it"
        if self.hosts == 1:
            return (f"{best.gpu_count}x {best.gpu_name} at {format_dollars(best.price_per_hour)}/h: "
                    f"{self.estimate.describe()}; it {stops}{ceiling}")
        return (f"{self.hosts} machines of {best.gpu_count}x {best.gpu_name} on distinct hosts, "
                f"about {format_dollars(self.total_dollars)} for all {self.hosts}; each at "
                f"{self._price_range()}/h: {self.estimate.describe()}; each {stops}"
                f"{ceiling}")


    def _price_range(self) -> str:
        from gpubench.format import format_dollars

        low, high = self.offers[0].price_per_hour, self.highest_price
        return format_dollars(low) if high <= low else f"{format_dollars(low)} to {format_dollars(high)}"


@dataclass
class BenchResult:
    name: str = ""
    instance_id: str | None = None
    records: list[dict] = field(default_factory=list)
    run_ids: list[str] = field(default_factory=list)
    cost: float | None = None         # the whole machine, from launch to terminate (or now),
    #                                   and the machines provisioning threw away for it
    billed: float | None = None       # what the provider billed for it, where it reports that
    machine_cost: float | None = None  # the machine the sweeps ran on alone, estimated
    host_id: str | None = None        # the provider's id for the machine's host, where it gives one
    terminated: bool = False
    kept: bool = False
    budget_stop: str | None = None    # why runs stopped before the plan's end (the budget)
    machines: list["BenchResult"] = field(default_factory=list)   # --hosts: each machine's

    @property
    def all_ok(self) -> bool:
        """No run of any sweep failed."""
        return all(r["status"] == "ok" for r in self.records)


class TeardownError(GpubenchError):
    """The machine may still be running (and billing)."""


def _provision_request(req: BenchRequest, name: str | None = None, max_hours: float | None = None):
    from gpubench.lifecycle.provision import DEFAULT_IMAGE, Deadlines, ProvisionRequest

    return ProvisionRequest(req.provider, req.gpus, req.gpu_type, req.disk_gb,
                            req.image or DEFAULT_IMAGE, name=name, max_price=req.max_price,
                            attempts=req.attempts,
                            deadlines=Deadlines(running_s=req.boot_timeout, ssh_s=req.ssh_timeout),
                            max_hours=max_hours)


def plan_bench(req: BenchRequest, provider=None) -> BenchPlan:
    """Connect, pick the offers, and estimate the plan; a plan expected to cost more
    than the budget is refused (BudgetError) before anything is rented."""
    from gpubench.bench import hosts
    from gpubench.lifecycle import budget, watchdog
    from gpubench.lifecycle.provision import connect_and_plan
    from gpubench.providers import registry

    registry.check(req.provider)
    watchdog.check_max_hours(req.max_hours)
    ceiling = budget.check_budget(req.budget) if req.budget is not None else budget.configured_budget()
    check_hosts(req.hosts)
    prov, offers = connect_and_plan(_provision_request(req), provider)
    best = offers[0]
    if req.hosts > 1:
        offers = hosts.same_type(offers, best)
        hosts.check_enough(offers, req.hosts, req.provider)
    counts = budget.sweep_counts(best.gpu_count or req.gpus, req.counts)
    estimate = budget.estimate([w.name for w in req.workloads], counts, req.timeout,
                               best.price_per_hour)
    budget.refuse_over_budget(hosts.for_all(estimate, req.hosts), ceiling)
    share = ceiling / req.hosts if ceiling is not None else None   # each machine its share
    max_hours = req.max_hours or estimate.default_max_hours(share)
    return BenchPlan(prov, offers, estimate, max_hours, ceiling, req.hosts)


def check_hosts(count: int) -> None:
    from gpubench.errors import UsageError

    if count < 1 or count > MAX_HOSTS:
        raise UsageError(f"--hosts must be 1 to {MAX_HOSTS} (got {count})")


def bench(req: BenchRequest, store: ResultsStore, echo: Echo, ledger=None,
          provider=None, plan: BenchPlan | None = None, ask: "Ask | None" = None) -> BenchResult:
    """Provision, sweep every workload, terminate; the result says what it cost.
    `plan` is plan_bench's (made here when not given). With req.hosts > 1, the same
    on each machine (bench_hosts.py); the result then holds each machine's. `ask`
    asks the user about an offer other than the plan's (None: it is refused)."""
    from gpubench.lifecycle import fleet
    from gpubench.store.ledger import Ledger
    from gpubench.lifecycle.provision import default_name

    plan = plan or plan_bench(req, provider)
    name = req.name or default_name(req.provider)
    own_ledger = ledger is None
    ledger = ledger or Ledger()
    try:
        fleet.settle_deadlines(ledger, say=echo)
        if plan.hosts == 1:
            return bench_machine(req, plan, plan.offers, name, store, echo, ledger, plan.budget,
                                 plan_consent(req, plan, ask))
        return _on_hosts(req, plan, name, store, echo, ledger, ask)
    finally:
        if own_ledger:
            ledger.close()


def plan_consent(req: BenchRequest, plan: BenchPlan, ask: "Ask | None" = None) -> "Consent":
    """What the user agreed to by confirming the plan: its first offer (with --hosts,
    at up to the dearest host the plan named); any type of a --gpu-type they named (or
    any at all, --any-gpu); any price up to --max-price."""
    from gpubench.lifecycle.consent import Agreed, Consent

    ceiling = req.max_price
    if plan.hosts > 1:
        ceiling = max(ceiling or 0.0, plan.highest_price)
    agreed = Agreed.offer(plan.offers[0], any_gpu=req.any_gpu or bool(req.gpu_type), max_price=ceiling)
    return Consent(agreed, ask)


def bench_machine(req: BenchRequest, plan: BenchPlan, offers: list, name: str, store: ResultsStore,
                  echo: Echo, ledger, budget: float | None,
                  consent: "Consent | None" = None) -> BenchResult:
    """One machine: rent it (from `offers`, in order, each within `consent`), sweep on
    it, take it down; then its records gain what it cost, estimated and billed."""
    from gpubench.bench import hosts as bench_hosts
    from gpubench.lifecycle import provision as lifecycle_provision
    from gpubench.lifecycle.budget import say_hours

    preq = _provision_request(req, name, plan.max_hours)
    best = offers[0]
    echo(f"renting {best.gpu_count}x {best.gpu_name} on {req.provider} "
         f"({best.instance_type or best.offer_id}) at ${best.price_per_hour:.2f}/h")
    echo(f"plan: {plan.estimate.describe()}; the machine stops itself after "
         f"{say_hours(plan.max_hours)} unless a gpubench run is active on it"
         + (f"; budget {_money(budget)}" if budget is not None else ""))
    result = BenchResult(name=name)
    started = time.time()
    try:
        outcome = lifecycle_provision.provision(plan.provider, preq, offers, ledger,
                                                lambda phase, detail: echo(f"{phase}: {detail}"),
                                                gate=_gate(req, ledger), consent=consent)
        result.instance_id = outcome.entry.instance_id
        result.host_id = bench_hosts.host_key(outcome.offer)
        echo(f"ready in {outcome.seconds_to_ready:.1f}s: {name} ({req.provider} "
             f"{outcome.entry.instance_id})")
        spending = None
        if budget is not None:
            from gpubench.lifecycle.budget import Spending

            spending = Spending(ledger, outcome.entry.row_id, budget)
        facts = outcome.gate.record_fields() if outcome.gate is not None else {}
        facts.update({k: v for k, v in (("host_id", result.host_id),
                                        ("instance_id", result.instance_id)) if v is not None})
        _sweeps(req, outcome.entry, _WithHostFacts(store, facts), echo, result, spending)
    except BaseException as first:
        try:
            _teardown(req, name, ledger, plan.provider, echo, result, started)
        except Exception as second:
            # Both matter: why the bench stopped, and that the machine may still bill.
            raise TeardownError(f"{_one_line(first)}\nerror: {second}") from first
        _add_cost(store, result, echo)
        raise
    _teardown(req, name, ledger, plan.provider, echo, result, started)
    _add_cost(store, result, echo)
    return result


def _on_hosts(req: BenchRequest, plan: BenchPlan, name: str, store: ResultsStore, echo: Echo,
              ledger, ask: "Ask | None" = None) -> BenchResult:
    """--hosts K: bench_machine on each of K machines named NAME-1..NAME-K, in turn or
    at once (bench_hosts.py); whatever happens, any of them still live at the end is
    taken down here. The result holds each machine's and their sums. Each machine is
    held to the plan's offer (type and price) the user confirmed."""
    from gpubench.bench import hosts as bench_hosts
    from gpubench.store.ledger import Ledger

    names = [bench_hosts.machine_name(name, i) for i in range(1, plan.hosts + 1)]
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
            _register_key_once(plan.provider)     # not K workers each creating it
            done = bench_hosts.at_once(names, plan.offers, at_once, echo)
        else:
            done = bench_hosts.in_turn(names, plan.offers, in_turn, echo)
    finally:
        _take_down_leftovers(names, ledger, plan.provider, echo)
    return _combined(name, done)


def _register_key_once(provider) -> None:
    from gpubench.lifecycle.keys import ensure_keypair

    keypair = ensure_keypair()
    provider.ensure_ssh_key(keypair.public_key, "gpubench")


def _take_down_leftovers(names: list[str], ledger, provider, echo: Echo) -> None:
    """The last safety of --hosts: a machine of the bench the ledger still holds live (a
    worker stopped before its own teardown) is taken down here."""
    from gpubench.lifecycle.terminate import take_down_entry

    for machine in names:
        entry = ledger.find_active(machine)
        if entry is None:
            continue
        echo(f"terminating {machine} ({entry.provider} {entry.instance_id or 'id unknown'})")
        down = take_down_entry(ledger, entry, provider, TERMINATE_DEADLINE_S, echo)
        if not down.gone:
            raise TeardownError(f"{machine} is NOT confirmed terminated ({down.message}); "
                                f"run 'gpubench down {machine}' and check 'gpubench ls'")


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


def _add_cost(store: ResultsStore, result: BenchResult, echo: Echo) -> None:
    """Once the machine is confirmed gone, its records gain what it cost (estimated,
    and billed where the provider says)."""
    if not result.terminated or not result.run_ids:
        return
    from gpubench.store.billing import add_machine_cost

    for warning in add_machine_cost(store.directory, result.run_ids, result.machine_cost,
                                    result.billed):
        echo(f"warning: {warning}")


def _sweeps(req: BenchRequest, entry, store: ResultsStore, echo: Echo, result: BenchResult,
            spending=None) -> None:
    from gpubench.remote.targets import host_from_entry
    from gpubench.sweep.run import default_points, on_one_node

    def points(machine):
        return on_one_node(req.counts) if req.counts else default_points(machine)

    sweep_on(host_from_entry(entry), points, req, store, echo, result, spending,
             force=req.force or req.hosts > 1)   # with --hosts, each host is measured


def sweep_on(target, points_for, req: BenchRequest, store: ResultsStore, echo: Echo,
             result: BenchResult, spending=None, force: bool | None = None) -> None:
    """Sweep every workload of the bench on a rented machine or cluster (`target`, an
    --on value for the launcher factory) at the points `points_for(machine)` gives,
    under the budget's `spending`; a budget reached ends the sweeps (result.budget_stop)."""
    from gpubench.launch.factory import LaunchOptions, open_launcher
    from gpubench.lifecycle.budget import BudgetReached
    from gpubench.suite import args_for
    from gpubench.sweep.run import SweepPlan, default_repeats, sweep

    options = LaunchOptions(remote_python=req.remote_python, remote_dir=req.remote_dir, echo=echo)
    with open_launcher(target, options) as opened:
        launcher = opened if spending is None else _Budgeted(opened, spending)
        machine = launcher.machine()
        points = points_for(machine)
        for workload in req.workloads:
            run_plan = SweepPlan(workload, list(points),
                                 args_for(workload, req.workload_args, req.per_workload_args), new_run_id(),
                                 req.timeout, force=req.force if force is None else force,
                                 repeat=req.repeat or default_repeats(machine))
            result.run_ids.append(run_plan.run_id)
            try:
                result.records += sweep(launcher, run_plan, store, echo).records
            except BudgetReached as e:
                result.budget_stop = str(e)
                echo(f"{e}; tearing down")
                return


def _gate(req: BenchRequest, ledger):
    """The preflight gate for provisioning, run with the bench's remote python, its
    findings kept in the ledger; None when --no-preflight."""
    if not req.preflight:
        return None
    from gpubench.lifecycle.preflight import recorded_gate

    return recorded_gate(ledger, req.remote_python)


class _WithHostFacts:
    """The results store, adding the preflight's findings to every record appended
    (where the workload wrote none of its own)."""

    def __init__(self, store: ResultsStore, fields: dict) -> None:
        self._store = store
        self._fields = fields

    def append(self, run_id: str, record: dict):
        for key, value in self._fields.items():
            if record.get(key) is None:
                record[key] = value
        return self._store.append(run_id, record)

    def __getattr__(self, name: str):
        return getattr(self._store, name)


class _Budgeted:
    """The sweep's launcher, asking the budget before each run: no run starts whose
    expected time would take the spending past it, and a run's time limit is cut to
    what the budget has left (a run stopped there is recorded as timed out)."""

    def __init__(self, launcher, spending) -> None:
        self._launcher = launcher
        self._spending = spending

    def machine(self):
        return self._launcher.machine()

    def prepare(self, workload) -> None:
        self._launcher.prepare(workload)

    def run(self, workload, point, workload_args, on_line, timeout):
        from gpubench.lifecycle.budget import expected_run_s

        limit = self._spending.allow(expected_run_s(workload.name, timeout), timeout,
                                     f"the next run ({workload.name} on {point.describe()})")
        return self._launcher.run(workload, point, workload_args, on_line, limit)

    def close(self) -> None:
        self._launcher.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _discarded_cost(ledger, name: str, since: float) -> float:
    """What the machines of this bench that provisioning already threw away cost
    (a host that failed the preflight check, one that never booted)."""
    rows = [r for r in ledger.entries(include_done=True)
            if r.name == name and (r.requested_at or 0) >= since and not r.active]
    return sum(r.cost() or 0.0 for r in rows)


def _teardown(req: BenchRequest, name: str, ledger, prov, echo: Echo, result: BenchResult,
              since: float = 0.0) -> None:
    """Terminate the machine named `name`, if the ledger has it, unless --keep. The
    cost said is the whole bench's: thrown-away machines included."""
    from gpubench.lifecycle.sshconfig import sync_ssh_config
    from gpubench.lifecycle.terminate import take_down_entry

    thrown_away = _discarded_cost(ledger, name, since)
    entry = ledger.find_active(name)
    if entry is None:
        if any(r.name == name and (r.requested_at or 0) >= since and r.instance_id
               for r in ledger.entries(include_done=True)):
            result.cost, result.terminated = thrown_away, True
            echo(f"{name} terminated; the whole bench cost {_money(thrown_away)}")
        return  # never launched: nothing to pay for
    if req.keep:
        result.kept = True
        cost = entry.cost()
        result.cost = None if cost is None else cost + thrown_away
        stops = (f"; it stops itself at {_clock(entry.deadline_at)} unless a gpubench run is "
                 f"active on it" if entry.deadline_at else "")
        echo(f"keeping {name} ({req.provider} {entry.instance_id}), {_money(result.cost)} so far; "
             f"'gpubench down {name}' stops paying for it{stops}")
        return
    echo(f"terminating {name} ({req.provider} {entry.instance_id or 'id unknown'})")
    with _ctrl_c_deferred(echo):
        down = take_down_entry(ledger, entry, prov, TERMINATE_DEADLINE_S, echo)
        sync_ssh_config(ledger)
    result.cost = None if down.cost is None else down.cost + thrown_away
    result.machine_cost = down.cost
    result.billed = down.billed
    result.terminated = down.gone
    if down.gone:
        billed = f" ({req.provider} billed {_money(down.billed)})" if down.billed is not None else ""
        echo(f"{name} terminated; the whole bench cost {_money(result.cost)}{billed}")
    else:
        raise TeardownError(f"{name} is NOT confirmed terminated ({down.message}); "
                            f"run 'gpubench down {name}' and check 'gpubench ls'")


@contextlib.contextmanager
def _ctrl_c_deferred(echo: Echo) -> Iterator[None]:
    """A second Ctrl-C must not leave a paid machine half torn down: it is noted and
    raised once the (time-bounded) terminate is done."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pressed: list[bool] = []

    def note(signum, frame) -> None:
        pressed.append(True)
        echo("terminating the machine first; it takes a moment")

    previous = signal.signal(signal.SIGINT, note)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if pressed:
        raise KeyboardInterrupt


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    if isinstance(exc, GpubenchError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}".splitlines()[0]


def _money(dollars: float | None) -> str:
    if dollars is None:
        return "an unknown amount (no price on record)"
    from gpubench.format import format_dollars

    return format_dollars(dollars)


def _clock(stamp: float) -> str:
    return time.strftime("%H:%M", time.localtime(stamp))
