"""Which machines a bench across providers measures (`bench all --candidates K`): of
every GPU type each provider offers at the bench's size, the K most worth measuring,
from the prediction model's figures; and whether the budget covers them.

A candidate is one GPU type at one provider (its offers of that type and count,
cheapest first: the first is the one the user is asked about, the others what a
machine that never boots is replaced from). The order of choice: the predicted
Pareto front first (no other candidate is predicted both faster and cheaper), then
the others by predicted cost; a GPU type not yet chosen before a second offer of one
chosen (the same card at another provider); candidates the model has no figure for
last, cheapest first. A candidate whose cards the memory model says cannot hold the
workload at its batch is never chosen: renting it would only measure an out-of-memory
error. Pure: the offers and predictions come in, the choice goes out.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpubench.errors import UsageError
from gpubench.format import format_dollars, spoken
from gpubench.lifecycle.budget import BudgetError
from gpubench.predict.advise import NO_FIT, Prediction
from gpubench.providers.common import Offer
from gpubench.providers.gpus import gpu_matches, offer_vram_gb

MAX_CANDIDATES = 8      # machines rented at once (hosts.MAX_PARALLEL)


class CandidateError(UsageError):
    """More candidates asked for than offers match, or a count out of range."""


@dataclass(frozen=True)
class Candidate:
    """One GPU type at one provider, with the workloads' prediction on its cheapest offer."""

    prediction: Prediction            # an epoch of each workload, summed; no figure: none known
    offers: tuple[Offer, ...]         # its provider's offers of this type and count, cheapest first

    @property
    def offer(self) -> Offer:
        return self.offers[0]

    @property
    def provider(self) -> str:
        return self.offer.provider

    @property
    def gpu_type(self) -> str:
        return self.offer.gpu_name

    @property
    def label(self) -> str:
        """'1x H100 PCIe on vast'."""
        return f"{self.offer.gpu_count}x {self.offer.gpu_name} on {self.provider}"

    def sort_key(self) -> tuple:
        """Front first, then by predicted dollars and seconds; no figure last, by price."""
        p = self.prediction
        if not p.has_figure:
            return (2, self.offer.price_per_hour, 0.0)
        return (0 if p.pareto else 1, p.dollars, p.seconds)


def group_offers(offers: list[Offer]) -> list[tuple[Offer, ...]]:
    """The offers by provider, GPU type and count, each group cheapest first, the groups
    in the order of their cheapest offer."""
    groups: dict[tuple, list[Offer]] = {}
    for o in sorted(offers, key=lambda o: o.price_per_hour):
        groups.setdefault((o.provider, o.gpu_name.lower(), o.gpu_count), []).append(o)
    return [tuple(g) for g in groups.values()]


def matches(candidate: Candidate, gpu_type: str | None, max_price: float | None) -> bool:
    """Within --gpu-type and --max-price."""
    o = candidate.offer
    return (gpu_matches(gpu_type, o.gpu_name, offer_vram_gb(o))
            and (max_price is None or o.price_per_hour <= max_price + 1e-9))


def check_count(k: int) -> None:
    if k < 1 or k > MAX_CANDIDATES:
        raise CandidateError(f"--candidates must be 1 to {MAX_CANDIDATES} (got {k})")


def choose(candidates: list[Candidate], k: int, gpu_type: str | None = None,
           max_price: float | None = None, nothing_else: str = "", what_fits: str = "") -> list[Candidate]:
    """The K most worth measuring, in the order they were chosen (see the module), of
    those whose cards hold the workload. CandidateError naming what matched when fewer
    than K do; `nothing_else` ends it (why some provider had none), `what_fits` says
    what would fit where cards were too small."""
    check_count(k)
    matched = [c for c in candidates if matches(c, gpu_type, max_price)]
    fit = [c for c in matched if c.prediction.basis != NO_FIT]
    if k > len(fit):
        small = [c for c in matched if c.prediction.basis == NO_FIT]
        raise CandidateError(_too_few(k, fit, small, gpu_type, max_price, nothing_else, what_fits))
    left = sorted(fit, key=Candidate.sort_key)
    chosen: list[Candidate] = []
    types: set[str] = set()
    while len(chosen) < k:
        pick = min(left, key=lambda c: (c.gpu_type.lower() in types, c.sort_key()))
        left.remove(pick)
        chosen.append(pick)
        types.add(pick.gpu_type.lower())
    return chosen


def _too_few(k: int, fit: list[Candidate], small: list[Candidate], gpu_type: str | None,
             max_price: float | None, nothing_else: str, what_fits: str) -> str:
    filters = [f for f in (f"--gpu-type {gpu_type}" if gpu_type else "",
                           f"--max-price {max_price:g}" if max_price is not None else "") if f]
    within = f" within {' and '.join(filters)}" if filters else ""
    types = ", ".join(dict.fromkeys(c.gpu_type for c in small))
    if not fit and small:
        said = (f"--candidates {k}: the memory model says none of the {len(small)} offer(s) that match{within} "
                f"can hold the workload at its batch ({types})" + (f": {what_fits}" if what_fits else ""))
    elif not fit:
        said = f"--candidates {k}: no offer matches{within}"
    else:
        holds = " and hold the workload" if small else ""
        said = (f"--candidates {k}: only {len(fit)} offer(s) match{within}{holds}: "
                f"{spoken([c.label for c in sorted(fit, key=Candidate.sort_key)], 'and')}")
        if small:
            said += (f"; {len(small)} more cannot hold it at its batch ({types})"
                     + (f": {what_fits}" if what_fits else ""))
    return said + (f" ({nothing_else})" if nothing_else else "")


def refuse_over_budget(costs: list[tuple[str, float]], budget: float | None) -> None:
    """Before anything is rented: `costs` is each chosen candidate's (label, expected
    dollars) in the order chosen. BudgetError when the budget cannot cover even the
    cheapest one (naming its estimate), or not all of them (naming how many it covers)."""
    if budget is None or not costs:
        return
    cheapest = min(costs, key=lambda c: c[1])
    if cheapest[1] > budget:
        raise BudgetError(f"the budget of {format_dollars(budget)} cannot cover even one candidate: "
                          f"the cheapest, {cheapest[0]}, is expected to cost about "
                          f"{format_dollars(cheapest[1])} for this bench: nothing rented (a larger "
                          f"--budget, or fewer workloads or counts)")
    total = sum(c[1] for c in costs)
    if total > budget:
        fits, spent = 0, 0.0
        for _, dollars in costs:
            if spent + dollars > budget:
                break
            fits, spent = fits + 1, spent + dollars
        hint = f"--candidates {fits}" if fits else "cheaper candidates"
        raise BudgetError(f"the {len(costs)} candidates are expected to cost about "
                          f"{format_dollars(total)} in all, more than the budget of "
                          f"{format_dollars(budget)}: nothing rented ({hint}, or a larger --budget)")
