"""Before a bench across providers rents anything (`bench all --candidates K`, or
`bench lambda,vast ...`): every named provider's offers at the bench's size (asked at
once; a provider without a key, or one that fails, is left out and said once), the
prediction model's time and cost of an epoch of each workload on each GPU type there,
the K candidates chosen from them (candidates.py), each one's plan as a bench of one
machine has it (plan.machine_plan: its runs' forecasts, its estimate, its deadline),
and the budget checked against them all before anything is rented.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Callable

from gpubench.bench.candidates import Candidate, check_count, choose, group_offers, refuse_over_budget
from gpubench.bench.plan import (BenchPlan, checked_budget, machine_plan, planned_points, provision_request,
                                 stops_itself)
from gpubench.bench.request import BenchRequest
from gpubench.errors import GpubenchError, UsageError
from gpubench.format import format_dollars
from gpubench.predict.advise import NO_FIT

Echo = Callable[[str], None]
ALL = "all"


@dataclass
class Shortlisted:
    """One chosen candidate, planned as a bench of one machine on its provider."""

    candidate: Candidate
    request: BenchRequest             # the bench's, for the candidate's provider
    plan: BenchPlan                   # its offers (cheapest first), estimate, deadline, forecast

    @property
    def label(self) -> str:
        return self.candidate.label

    def describe(self) -> str:
        """'1x H100 PCIe (80 GB) at $2.00/h on vast: predicted 16 min and $0.53 for an
        epoch (scaled, on the front); this bench about 11 min, $0.37'."""
        from gpubench.lifecycle.budget import say_hours
        from gpubench.lifecycle.consent import describe_machine
        from gpubench.predict.words import say_duration
        from gpubench.providers.gpus import offer_vram_gb

        o, p = self.candidate.offer, self.candidate.prediction
        machine = describe_machine(o.gpu_count, o.gpu_name, o.price_per_hour, offer_vram_gb(o))
        if p.has_figure:
            front = ", on the front" if p.pareto else ""
            epoch = "an epoch" if len(self.request.workloads) < 2 else "an epoch of each workload"
            said = (f"predicted {say_duration(p.seconds)} and {format_dollars(p.dollars)} {epoch} "
                    f"({p.basis}{front})")
        else:
            said = f"no prediction ({p.left_out or p.basis})"
        e = self.plan.estimate
        return (f"{machine} on {o.provider}: {said}; this bench about {say_hours(e.hours)}, "
                f"{format_dollars(e.dollars)}")


@dataclass
class AcrossPlan:
    """What plan_across decided, for the user to confirm and bench_across to follow."""

    chosen: list[Shortlisted]
    budget: float | None
    left_out: list[str] = field(default_factory=list)   # one line per provider left out

    @property
    def total_dollars(self) -> float:
        return sum(s.plan.estimate.dollars for s in self.chosen)

    @property
    def max_hours(self) -> float:
        return max(s.plan.max_hours for s in self.chosen)

    def summary(self) -> str:
        """The tail of the question: the total, when each stops itself, the budget."""
        budget = f"; budget {format_dollars(self.budget)} for all" if self.budget is not None else ""
        return (f"about {format_dollars(self.total_dollars)} in all; each "
                f"{stops_itself(self.max_hours)}{budget}")

    def one_line(self) -> str:
        """The plan in one line (what --yes says instead of asking)."""
        machines = "; ".join(f"{s.label} at {format_dollars(s.candidate.offer.price_per_hour)}/h, "
                             f"about {format_dollars(s.plan.estimate.dollars)}" for s in self.chosen)
        n = len(self.chosen)
        return f"renting {n} candidates at once: {machines}; {self.summary()}" if n > 1 else \
            f"renting 1 candidate: {machines}; {self.summary()}"


def parse_providers(text: str) -> list[str]:
    """'all', or provider names separated by commas, as registry names."""
    from gpubench.providers import registry

    if text.strip().lower() == ALL:
        return registry.names()
    names = [n.strip().lower() for n in text.split(",") if n.strip()]
    if not names:
        raise UsageError(f"'{text}': name a provider ({registry.help_names()}), several "
                         f"separated by commas, or {ALL}")
    return list(dict.fromkeys(registry.check(n) for n in names))


def plan_across(req: BenchRequest, providers: list[str], k: int, echo: Echo) -> AcrossPlan:
    """Ask each provider for its offers (at once), predict, choose K, plan each, check
    the budget over all: refused (UsageError, BudgetError) before anything is rented."""
    check_count(k)
    ceiling = checked_budget(req)
    listed, left_out, none_fit = _offers_of(req, providers)
    for line in left_out:
        echo(line)
    if not listed:
        raise UsageError("no provider to bench on: " + "; ".join(left_out + none_fit))
    offers = [o for _, found in listed.values() for o in found]
    from gpubench.predict.records import records_for_prediction

    records = records_for_prediction(req.results)[0]       # as they stand before anything is rented
    hints: list[str] = []
    candidates = predicted(req, group_offers(offers), echo, hints, records)
    chosen = choose(candidates, k, req.gpu_type, req.max_price, "; ".join(none_fit), "; ".join(hints))
    planned = [_planned(req, c, listed[c.provider][0], ceiling, records) for c in chosen]
    refuse_over_budget([(s.label, s.plan.estimate.dollars) for s in planned], ceiling)
    return AcrossPlan(planned, ceiling, left_out)


def _planned(req: BenchRequest, c: Candidate, prov, ceiling: float | None, records: list[dict]) -> Shortlisted:
    mine = replace(req, provider=c.provider, hosts=1, parallel=False)
    plan = machine_plan(mine, prov, list(c.offers), ceiling, refuse=False)
    plan.kept = kept_predictions(mine, c.offer, records)
    return Shortlisted(c, mine, plan)


def kept_predictions(req: BenchRequest, offer, records: list[dict]) -> dict:
    """The prediction each of the candidate's records will keep, made now, before
    renting, from the records as they stand: (workload, gpus, nodes) -> predicted_*
    fields, at every point its sweeps will run. At the offer's own count it is the
    figure the question shows."""
    from gpubench.predict.for_records import gpu_fields
    from gpubench.suite import args_for

    kept = {}
    for ref in req.workloads:
        if not ref.in_suite or ref.name == "allreduce":     # a bandwidth test has no throughput to predict
            continue
        args = tuple(args_for(ref, req.workload_args, req.per_workload_args))
        for point in planned_points(offer.gpu_count or req.gpus, req):
            kept[(ref.name, point.world_size, point.nodes)] = gpu_fields(ref.name, args, offer, point.world_size,
                                                                         point.nodes, records)
    return kept


def _offers_of(req: BenchRequest, providers: list[str]) -> tuple[dict, list[str], list[str]]:
    """({provider: (adapter, its offers that fit, cheapest first)}, a line per provider
    left out (no key, an error), why the others that answered have none)."""
    from gpubench.lifecycle.provision import NoOfferError, connect_and_plan

    def one(name: str):
        return connect_and_plan(provision_request(replace(req, provider=name)))

    listed, left_out, none_fit = {}, [], []
    with ThreadPoolExecutor(max_workers=len(providers)) as pool:
        futures = {name: pool.submit(one, name) for name in providers}
        for name, future in futures.items():
            try:
                listed[name] = future.result()
            except NoOfferError as e:
                none_fit.append(f"{name}: {e}")
            except UsageError:
                raise                  # the request itself: the same for every provider
            except GpubenchError as e:
                left_out.append(f"warning: {name} left out: {e}")
    return listed, left_out, none_fit


def predicted(req: BenchRequest, groups: list[tuple], echo: Echo, what_fits: list[str] | None = None,
              records: list[dict] | None = None) -> list[Candidate]:
    """A Candidate per group of offers: an epoch of each workload predicted on its
    cheapest offer, summed, the Pareto front marked; no figure where any workload has
    none (a workload nothing is known of leaves every candidate without one), and "does
    not fit" where any workload's memory does not fit the card. Where cards were too
    small, what would fit is added to `what_fits`, a line per workload."""
    from gpubench.predict.advise import mark_pareto
    from gpubench.predict.records import records_for_prediction

    if records is None:
        records = records_for_prediction(req.results)[0]
    firsts = [g[0] for g in groups]
    per_workload = [_for_workload(req, ref, firsts, records, echo, what_fits) for ref in req.workloads]
    combined = []
    for i, offer in enumerate(firsts):
        mine = [preds[i] for preds in per_workload]
        missing = next((p for p in mine if p.basis == NO_FIT), None) or \
            next((p for p in mine if not p.has_figure), None)
        if not mine:
            combined.append(_no_figure(offer))
        elif missing is not None:
            combined.append(missing)
        else:
            combined.append(replace(mine[0], seconds=sum(p.seconds for p in mine),
                                    dollars=sum(p.dollars for p in mine)))
    return [Candidate(p, g) for p, g in zip(mark_pareto(combined), groups)]


def _for_workload(req: BenchRequest, ref, offers: list, records: list[dict], echo: Echo,
                  what_fits: list[str] | None = None) -> list:
    """Each offer's prediction for an epoch of `ref` (no figure where nothing is known of it)."""
    from gpubench.predict.advise import for_offers
    from gpubench.predict.fits import what_fits as fitting
    from gpubench.predict.subject import suite_subject, work_for
    from gpubench.suite import args_for

    args = tuple(args_for(ref, req.workload_args, req.per_workload_args))
    try:
        if ref.in_suite:
            subject = suite_subject(ref.name, args, records)
        else:
            from gpubench.predict.calibrate import script_subject

            subject = script_subject(ref, args, records, echo)
        work = work_for(subject, None, None)
    except UsageError as e:
        echo(f"note: {ref.name}: no prediction ({e}); its candidates are chosen by price")
        return [_no_figure(o, str(e)) for o in offers]
    predictions = for_offers(subject, offers, records, work)
    hint = fitting(subject, predictions)
    if hint and what_fits is not None:
        what_fits.append(hint if len(req.workloads) < 2 else f"{ref.name}: {hint}")
    return predictions


def _no_figure(offer, why: str | None = None):
    from gpubench.predict.advise import Config, Prediction

    return Prediction(Config(offer, offer.gpu_count, 1, offer.price_per_hour), left_out=why)


def names_for(base: str, count: int) -> list[str]:
    """The machines' names: BASE-1 .. BASE-K, as --hosts names its machines."""
    from gpubench.bench.hosts import machine_name

    check_name(base)
    return [machine_name(base, i) for i in range(1, count + 1)]


def check_name(base: str) -> None:
    """--name as the machines' names start: UsageError when it cannot be one."""
    from gpubench.lifecycle.provision import NAME_RE

    if not NAME_RE.match(base):
        raise UsageError(f"--name '{base}': use lower-case letters, digits and '-' (starting with "
                         f"a letter or digit)")
