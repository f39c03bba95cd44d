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
from typing import Callable

from gpubench.bench.plan import ClusterBenchPlan
from gpubench.bench.request import BenchRequest, BenchResult
from gpubench.bench.sweeps import WithHostFacts, gate, spending_for, sweep_on
from gpubench.bench.teardown import Rented, bench_ledger, money, rent_sweep_teardown, teardown
from gpubench.store.results import ResultsStore
from gpubench.sweep.predicted import WithPredictions

Echo = Callable[[str], None]


def bench_cluster(req: BenchRequest, plan: ClusterBenchPlan, store: ResultsStore, echo: Echo,
                  ledger=None) -> BenchResult:
    """Rent the cluster, sweep every workload over the node counts, take every member
    down and confirm each gone (unless --keep); the result says what all of it cost."""
    name = plan.request.machine.name
    result = BenchResult(name=name)
    started = time.time()
    with bench_ledger(ledger, echo) as ledger:
        return rent_sweep_teardown(
            lambda: _rent_and_sweep(req, plan, store, echo, ledger, result),
            lambda: teardown(Rented(name, plan.provider, cluster=True), req.keep, ledger, echo, result,
                             started),
            store, result, echo)


def _rent_and_sweep(req: BenchRequest, plan: ClusterBenchPlan, store: ResultsStore, echo: Echo,
                    ledger, result: BenchResult) -> None:
    from gpubench.lifecycle.cluster_provision import network_line, provision_cluster

    place = plan.placement
    echo(f"renting {plan.size} x {place.describe()} on {req.provider} at "
         f"{money(place.price_per_hour)}/h each")
    outcome = provision_cluster(plan.provider, plan.request, place, ledger,
                                lambda phase, detail: echo(f"{phase}: {detail}"), gate(req, ledger))
    head = outcome.members[0]
    result.instance_id = head.instance_id
    echo(f"cluster {outcome.name} ready in {outcome.seconds_to_ready:.1f}s: "
         + ", ".join(f"{m.name} ({req.provider} {m.instance_id})" for m in outcome.members))
    echo(network_line(req.provider, outcome.hosts, outcome.overlay))
    spending = spending_for(ledger, head.row_id,
                            plan.budget / plan.size if plan.budget is not None else None)
    store = WithPredictions(store, place.offers[0])
    _sweeps(req, plan, outcome.name, WithHostFacts(store, {"cluster": outcome.name}), echo, result,
            spending)


def _sweeps(req: BenchRequest, plan: ClusterBenchPlan, cluster: str, store, echo: Echo,
            result: BenchResult, spending) -> None:
    from gpubench.launch.points import CountsAsked, sweep_points

    asked = CountsAsked(nodes=plan.nodes, per_node=req.counts, per_node_flag="--counts")
    sweep_on(cluster, lambda machine: sweep_points(machine, asked), req, store, echo, result, spending,
             forecast=plan.forecast)
