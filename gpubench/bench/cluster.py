"""`bench --nodes 1,2`: rent a cluster of max(nodes) machines, sweep node counts on it,
and give every member back, whatever happens in between.

The cluster is rented as `provision --nodes` rents one (cluster_provision: one offer
type in one region, all or nothing, the link from the head to each member measured),
the sweep goes through the launcher factory with the cluster's name (the cluster
launcher: torchrun's c10d rendezvous across the first K members), and teardown
terminates every member and confirms each gone, on success, failure and Ctrl-C alike,
unless --keep. The plan and the question before renting name N machines and the
estimate for N (one machine's estimate times N: the members are billed side by side).

The budget: the plan is refused when its estimate for N machines is over it; during
the sweep the head's spending is held to its share (budget / N), which holds the
cluster's to the budget, since every member is billed from about the same moment.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from gpubench.bench.machine import (BenchRequest, BenchResult, Echo, TeardownError, _add_cost,
                            _ctrl_c_deferred, _gate, _money, _one_line, _provision_request,
                            _WithHostFacts, sweep_on)
from gpubench.errors import UsageError
from gpubench.store.results import ResultsStore


@dataclass
class ClusterBenchPlan:
    """What plan_cluster_bench decided, for the user to confirm and the bench to follow."""

    provider: object                  # the connected Provider
    request: object                   # cluster_provision.ClusterRequest (its machine's name set)
    placement: object                 # cluster_provision.Placement
    nodes: list[int]                  # the node counts to sweep
    estimate: object                  # lifecycle.budget.Estimate for one machine
    max_hours: float
    budget: float | None

    @property
    def size(self) -> int:
        return max(self.nodes)

    @property
    def total_dollars(self) -> float:
        return self.estimate.dollars * self.size

    def describe(self) -> str:
        from gpubench.format import format_dollars
        from gpubench.lifecycle.budget import say_hours

        ceiling = f"; budget {format_dollars(self.budget)}" if self.budget is not None else ""
        return (f"{self.size} machines of {self.placement.describe()} in one cluster, about "
                f"{format_dollars(self.total_dollars)} for all {self.size}; each at "
                f"{format_dollars(self.placement.price_per_hour)}/h: {self.estimate.describe()}; each "
                f"stops itself after {say_hours(self.max_hours)} unless a gpubench run is active on it"
                f"{ceiling}")


def parse_nodes(text: str) -> list[int]:
    """'1,2' -> [1, 2]; anything else is a usage error naming --nodes."""
    nodes = []
    for part in text.split(","):
        try:
            n = int(part.strip())
        except ValueError:
            raise UsageError(f"--nodes: '{part.strip()}' is not a whole number (example: --nodes 1,2)") from None
        if n < 1:
            raise UsageError(f"--nodes: {n} is not a valid node count; counts start at 1")
        nodes += [n] if n not in nodes else []
    return nodes


def check_nodes(nodes: list[int], hosts: int) -> None:
    if hosts > 1:
        raise UsageError("--nodes and --hosts do not go together: --nodes rents one cluster, "
                         "--hosts separate machines")
    if not nodes:
        raise UsageError("--nodes: give node counts of 1 or more, e.g. 1,2")


def plan_cluster_bench(req: BenchRequest, nodes: list[int], provider=None) -> ClusterBenchPlan:
    """Connect, pick the placement for max(nodes) machines, and estimate the plan for
    all of them; refused (BudgetError) when over the budget, before anything is rented."""
    from gpubench.lifecycle import budget, watchdog
    from gpubench.lifecycle.cluster_provision import ClusterRequest, connect_and_place
    from gpubench.providers import registry

    check_nodes(nodes, req.hosts)
    registry.check(req.provider)
    watchdog.check_max_hours(req.max_hours)
    ceiling = budget.check_budget(req.budget) if req.budget is not None else budget.configured_budget()
    size = max(nodes)
    creq = ClusterRequest(_provision_request(req, req.name), size)
    prov, place = connect_and_place(creq, provider)
    per_node = req.counts or [place.gpu_count or req.gpus]
    points = [n * p for n in nodes for p in per_node]       # one run per point
    one = budget.estimate([w.name for w in req.workloads], points, req.timeout, place.price_per_hour)
    budget.refuse_over_budget(_times(one, size), ceiling)
    share = ceiling / size if ceiling is not None else None
    max_hours = req.max_hours or one.default_max_hours(share)
    creq.machine.max_hours = max_hours
    return ClusterBenchPlan(prov, creq, place, sorted(set(nodes)), one, max_hours, ceiling)


def _times(one, machines: int):
    from gpubench.lifecycle.budget import Estimate

    return Estimate(one.runs, one.expected_s, one.price_per_hour * machines)


def bench_cluster(req: BenchRequest, plan: ClusterBenchPlan, store: ResultsStore, echo: Echo,
                  ledger=None) -> BenchResult:
    """Rent the cluster, sweep every workload over the node counts, take every member
    down and confirm each gone (unless --keep); the result says what all of it cost."""
    from gpubench.lifecycle import fleet
    from gpubench.store.ledger import Ledger

    own_ledger = ledger is None
    ledger = ledger or Ledger()
    name = plan.request.machine.name
    result = BenchResult(name=name)
    started = time.time()
    try:
        fleet.settle_deadlines(ledger, say=echo)
        try:
            _rent_and_sweep(req, plan, store, echo, ledger, result)
        except BaseException as first:
            try:
                _teardown(req, plan, ledger, echo, result, started)
            except Exception as second:
                raise TeardownError(f"{_one_line(first)}\nerror: {second}") from first
            _add_cost(store, result, echo)
            raise
        _teardown(req, plan, ledger, echo, result, started)
        _add_cost(store, result, echo)
        return result
    finally:
        if own_ledger:
            ledger.close()


def _rent_and_sweep(req: BenchRequest, plan: ClusterBenchPlan, store: ResultsStore, echo: Echo,
                    ledger, result: BenchResult) -> None:
    from gpubench.lifecycle.cluster_provision import network_line, provision_cluster

    place = plan.placement
    echo(f"renting {plan.size} x {place.describe()} on {req.provider} at "
         f"{_money(place.price_per_hour)}/h each")
    outcome = provision_cluster(plan.provider, plan.request, place, ledger,
                                lambda phase, detail: echo(f"{phase}: {detail}"), _gate(req, ledger))
    head = outcome.members[0]
    result.instance_id = head.instance_id
    echo(f"cluster {outcome.name} ready in {outcome.seconds_to_ready:.1f}s: "
         + ", ".join(f"{m.name} ({req.provider} {m.instance_id})" for m in outcome.members))
    echo(network_line(req.provider, outcome.hosts))
    spending = None
    if plan.budget is not None:
        from gpubench.lifecycle.budget import Spending

        spending = Spending(ledger, head.row_id, plan.budget / plan.size)
    _sweeps(req, plan, outcome.name, _WithHostFacts(store, {"cluster": outcome.name}), echo, result,
            spending)


def _sweeps(req: BenchRequest, plan: ClusterBenchPlan, cluster: str, store, echo: Echo,
            result: BenchResult, spending) -> None:
    from gpubench.launch.cluster import node_points

    sweep_on(cluster, lambda machine: node_points(machine, cluster, plan.nodes, req.counts),
             req, store, echo, result, spending)


def _teardown(req: BenchRequest, plan: ClusterBenchPlan, ledger, echo: Echo, result: BenchResult,
              since: float) -> None:
    """Every live member terminated and confirmed gone (unless --keep); the cost said
    is the whole cluster's, members provisioning threw away included."""
    from gpubench.lifecycle.cluster_provision import take_down_members
    from gpubench.lifecycle.sshconfig import sync_ssh_config

    name = plan.request.machine.name
    members = ledger.cluster_members(name)
    thrown_away = sum(r.cost() or 0.0 for r in ledger.cluster_members(name, include_done=True)
                      if not r.active and (r.requested_at or 0) >= since)
    if not members:
        if thrown_away or ledger.cluster_members(name, include_done=True):
            result.cost, result.terminated = thrown_away, True
        return
    if req.keep:
        result.kept = True
        costs = [m.cost() for m in members]
        result.cost = None if None in costs else sum(costs) + thrown_away
        echo(f"keeping cluster {name} ({len(members)} machines), {_money(result.cost)} so far; "
             f"'gpubench down {name}' stops paying for them")
        return
    echo(f"terminating cluster {name}: {', '.join(m.name for m in members)}")
    with _ctrl_c_deferred(echo):
        downs = take_down_members(ledger, plan.provider, name, echo)
        sync_ssh_config(ledger)
    costs = [d.cost for d in downs]
    billed = [d.billed for d in downs]
    result.machine_cost = None if None in costs else sum(costs)
    result.cost = None if result.machine_cost is None else result.machine_cost + thrown_away
    result.billed = None if None in billed or not billed else sum(billed)
    left = [d for d in downs if not d.gone]
    result.terminated = not left
    if left:
        names = ", ".join(f"{d.name} ({d.message})" for d in left)
        raise TeardownError(f"cluster {name}: NOT confirmed terminated: {names}; run "
                            f"'gpubench down {name}' and check 'gpubench ls'")
    echo(f"cluster {name}: all {len(downs)} members terminated and confirmed gone; the whole "
         f"bench cost {_money(result.cost)}")
