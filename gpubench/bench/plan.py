"""Before anything is rented: the offers, the points each machine will sweep, the
plan's expected time and cost (refused when over --budget), each machine's
deadline (--max-hours, by default the expected time plus a margin), and what the
user agrees to by confirming it (lifecycle/consent.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpubench.bench.request import BenchRequest
from gpubench.errors import UsageError
from gpubench.format import format_dollars
from gpubench.launch.base import Machine, NodeSpan, SweepPoint
from gpubench.launch.points import CountsAsked, sweep_points

if TYPE_CHECKING:
    from gpubench.lifecycle.budget import Estimate, Forecast
    from gpubench.lifecycle.consent import Ask, Consent
    from gpubench.providers.common import Provider

MAX_HOSTS = 16          # machines of one bench (--parallel: hosts.MAX_PARALLEL at once)


# A replacement machine may cost this share more an hour than the plan's without asking.
REPLACEMENT_MARGIN = 0.10


@dataclass
class BenchPlan:
    """What plan_bench decided, for the user to confirm and bench to follow."""

    provider: "Provider"
    offers: list                      # to try, cheapest first
    estimate: "Estimate"
    max_hours: float
    budget: float | None
    hosts: int = 1
    forecast: "Forecast | None" = None    # each run's predicted seconds on the plan's offer
    max_price: float | None = None        # --max-price
    # The prediction each record keeps, made before renting: (workload, gpus, nodes) ->
    # predicted_* fields; None: each record's is made from the records written before it.
    kept: dict | None = None

    @property
    def replacement_ceiling(self) -> float:
        """The most a machine that replaces one that never booted or failed preflight may
        cost an hour without asking: --max-price, else the plan's price plus a tenth. The
        question states it, so that --yes agrees to it."""
        if self.max_price is not None:
            return self.max_price
        return round(self.highest_price * (1 + REPLACEMENT_MARGIN), 2)

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
        best = self.offers[0]
        if self.hosts == 1:
            return (f"{best.gpu_count}x {best.gpu_name} at {format_dollars(best.price_per_hour)}/h: "
                    f"{self.estimate.describe()}; it {stops_itself(self.max_hours)}{budget_note(self.budget)}"
                    f"; a replacement up to {format_dollars(self.replacement_ceiling)}/h")
        return (f"{self.hosts} machines of {best.gpu_count}x {best.gpu_name} on distinct hosts, "
                f"about {format_dollars(self.total_dollars)} for all {self.hosts}; each at "
                f"{self._price_range()}/h: {self.estimate.describe()}; each {stops_itself(self.max_hours)}"
                f"{budget_note(self.budget)}; a replacement up to {format_dollars(self.replacement_ceiling)}/h")

    def _price_range(self) -> str:
        low, high = self.offers[0].price_per_hour, self.highest_price
        return format_dollars(low) if high <= low else f"{format_dollars(low)} to {format_dollars(high)}"


@dataclass
class ClusterBenchPlan:
    """What plan_cluster_bench decided, for the user to confirm and the bench to follow."""

    provider: object                  # the connected Provider
    request: object                   # cluster_placement.ClusterRequest (its machine's name set)
    placement: object                 # cluster_placement.Placement
    nodes: list[int]                  # the node counts to sweep
    estimate: "Estimate"              # for one machine
    max_hours: float
    budget: float | None
    forecast: "Forecast | None" = None

    @property
    def size(self) -> int:
        return max(self.nodes)

    @property
    def total_dollars(self) -> float:
        return self.estimate.dollars * self.size

    def describe(self) -> str:
        return (f"{self.size} machines of {self.placement.describe()} in one cluster, about "
                f"{format_dollars(self.total_dollars)} for all {self.size}; each at "
                f"{format_dollars(self.placement.price_per_hour)}/h: {self.estimate.describe()}; each "
                f"{stops_itself(self.max_hours)}{budget_note(self.budget)}")


def stops_itself(max_hours: float) -> str:
    """What a machine of the plan does at its deadline, as the plan and the bench say it."""
    from gpubench.lifecycle.budget import say_hours

    return f"stops itself after {say_hours(max_hours)} unless a gpubench run is active on it"


def budget_note(budget: float | None) -> str:
    """"; budget $X" where the plan has one."""
    return f"; budget {format_dollars(budget)}" if budget is not None else ""


def provision_request(req: BenchRequest, name: str | None = None, max_hours: float | None = None):
    """The lifecycle's request for one machine of the bench."""
    from gpubench.lifecycle.provision import DEFAULT_IMAGE, Deadlines, ProvisionRequest

    return ProvisionRequest(req.provider, req.gpus, req.gpu_type, req.disk_gb,
                            req.image or DEFAULT_IMAGE, name=name, max_price=req.max_price,
                            attempts=req.attempts,
                            deadlines=Deadlines(running_s=req.boot_timeout, ssh_s=req.ssh_timeout),
                            max_hours=max_hours, pin=req.pin)


def plan_bench(req: BenchRequest, provider=None) -> BenchPlan:
    """Connect, pick the offers, and estimate the plan; a plan expected to cost more
    than the budget is refused (BudgetError) before anything is rented."""
    from gpubench.bench import hosts
    from gpubench.lifecycle.provision import connect_and_plan

    ceiling = _checkedbudget_note(req)
    check_hosts(req.hosts)
    prov, offers = connect_and_plan(provision_request(req), provider)
    if req.hosts > 1:
        offers = hosts.same_type(offers, offers[0])
        hosts.check_enough(offers, req.hosts, req.provider)
    return machine_plan(req, prov, offers, ceiling)


def machine_plan(req: BenchRequest, prov, offers: list, ceiling: float | None,
                 refuse: bool = True) -> BenchPlan:
    """The plan of req.hosts machines of `offers` (cheapest first) on `prov`: each run's
    forecast on the first offer, the estimate, each machine's deadline within the
    budget; refused (BudgetError) over the budget unless not `refuse` (a bench across
    providers weighs all its candidates together: candidates.refuse_over_budget)."""
    from gpubench.bench import hosts
    from gpubench.lifecycle import budget

    best = offers[0]
    forecast = forecaster(req, best)
    one = budget.estimate([w.name for w in req.workloads], planned_points(best.gpu_count or req.gpus, req),
                          req.timeout, best.price_per_hour, forecast)
    max_hours = _deadline(req, one, hosts.for_all(one, req.hosts), req.hosts, ceiling if refuse else None)
    if not refuse and ceiling is not None and not req.max_hours:
        max_hours = one.default_max_hours(ceiling)
    return BenchPlan(prov, offers, one, max_hours, ceiling, req.hosts, forecast, req.max_price)


def plan_cluster_bench(req: BenchRequest, nodes: list[int], provider=None) -> ClusterBenchPlan:
    """Connect, pick the placement for max(nodes) machines, and estimate the plan for
    all of them; refused (BudgetError) when over the budget, before anything is rented."""
    from gpubench.lifecycle import budget
    from gpubench.lifecycle.cluster_placement import ClusterRequest, connect_and_place

    check_nodes(nodes, req.hosts)
    ceiling = _checkedbudget_note(req)
    size = max(nodes)
    creq = ClusterRequest(provision_request(req, req.name), size, private_network=True,
                          public_network=req.public_network)
    prov, place = connect_and_place(creq, provider)
    points = planned_points(place.gpu_count or req.gpus, req, nodes)
    forecast = forecaster(req, place.offers[0])
    one = budget.estimate([w.name for w in req.workloads], points, req.timeout, place.price_per_hour,
                          forecast)
    all_of_them = budget.Estimate(one.runs, one.expected_s, one.price_per_hour * size, one.basis)
    creq.machine.max_hours = _deadline(req, one, all_of_them, size, ceiling)
    return ClusterBenchPlan(prov, creq, place, sorted(set(nodes)), one, creq.machine.max_hours, ceiling,
                            forecast)


def forecaster(req: BenchRequest, offer) -> "Forecast":
    """Each run's predicted seconds and basis on `offer` (gpubench/predict/runs.py), from
    the records as they stand now; None for a run the model has no basis for."""
    from gpubench.predict.records import records_for_prediction
    from gpubench.predict.runs import forecast
    from gpubench.suite import args_for

    records = records_for_prediction(req.results)[0]
    args = {w.name: tuple(args_for(w, req.workload_args, req.per_workload_args)) for w in req.workloads}

    def run_seconds(workload: str, point: SweepPoint) -> tuple[float, str] | None:
        found = forecast(workload, args.get(workload, ()), offer, point.world_size, point.nodes, records)
        return (found.seconds, found.basis) if found else None
    return run_seconds


def planned_points(gpus: int, req: BenchRequest, nodes: list[int] | None = None) -> list[SweepPoint]:
    """The points each sweep of the bench will run, as far as the offer tells: on one
    machine the --counts that fit it (else the first), or 1 and the powers of two up
    to its GPUs; on a cluster, each node count with each --counts per node."""
    if nodes is not None:
        cluster = Machine("plan", "plan", "gpu", gpus, None, max_nodes=max(nodes),
                          span=NodeSpan("the cluster planned", gpus_per_node=True))
        return sweep_points(cluster, CountsAsked(nodes=nodes, per_node=req.counts, per_node_flag="--counts"))
    machine = Machine("plan", "plan", "gpu", gpus, None)
    asked = sweep_points(machine, CountsAsked(gpus=req.counts))
    return [p for p in asked if p.procs_per_node <= gpus] or asked[:1]


def _checkedbudget_note(req: BenchRequest) -> float | None:
    """The provider and the deadline checked; the budget: --budget, else [defaults]."""
    from gpubench.providers import registry

    registry.check(req.provider)
    return checked_budget(req)


def checked_budget(req: BenchRequest) -> float | None:
    """The deadline checked; the budget: --budget, else [defaults] in config.toml."""
    from gpubench.lifecycle import budget, watchdog

    watchdog.check_max_hours(req.max_hours)
    return budget.check_budget(req.budget) if req.budget is not None else budget.configured_budget()


def _deadline(req: BenchRequest, one: "Estimate", all_of_them: "Estimate", machines: int,
              ceiling: float | None) -> float:
    """Refuse a plan over the budget (BudgetError); else each machine's deadline:
    --max-hours, or its expected time plus a margin within its share of the budget."""
    from gpubench.lifecycle import budget

    budget.refuse_over_budget(all_of_them, ceiling)
    share = ceiling / machines if ceiling is not None else None
    return req.max_hours or one.default_max_hours(share)


def check_hosts(count: int) -> None:
    if count < 1 or count > MAX_HOSTS:
        raise UsageError(f"--hosts must be 1 to {MAX_HOSTS} (got {count})")


def check_nodes(nodes: list[int], hosts: int) -> None:
    if hosts > 1:
        raise UsageError("--nodes and --hosts do not go together: --nodes rents one cluster, "
                         "--hosts separate machines")
    if not nodes:
        raise UsageError("--nodes: give node counts of 1 or more, e.g. 1,2")


def plan_consent(req: BenchRequest, plan: BenchPlan, ask: "Ask | None" = None) -> "Consent":
    """What the user agreed to by confirming the plan: its first offer (with --hosts,
    at up to the dearest host the plan named); any type of a --gpu-type they named (or
    any at all, --any-gpu); any price up to --max-price."""
    from gpubench.lifecycle.consent import Agreed, Consent

    ceiling = max(req.max_price or 0.0, plan.replacement_ceiling)     # the question stated it
    agreed = Agreed.offer(plan.offers[0], any_gpu=req.any_gpu or bool(req.gpu_type), max_price=ceiling)
    return Consent(agreed, ask)
