"""Choosing among offers: which fit a request (`matching_offers`, used by provisioning
too), in which order (`sort_offers`), why none fit (`explain_none`, the one
explanation `offers` and `provision` both give), and one price list across
providers: every provider asked at once, answers merged. A provider that fails or
has no key becomes one warning."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Callable

from gpubench.errors import UsageError
from gpubench.format import format_dollars, spoken
from gpubench.providers import registry
from gpubench.providers.common import Offer, ProviderError
from gpubench.providers.gpus import gpu_matches, offer_vram_gb, wanted_gpu

# --sort: the order, in words for the help text, and the key. Ties go to the cheaper.
SORTS: dict[str, tuple[str, Callable[[Offer], tuple]]] = {
    "price": ("cheapest machine first",
              lambda o: (o.price_per_hour, -(o.available or 0), o.offer_id)),
    "price-per-gpu": ("cheapest GPU-hour first",
                      lambda o: (o.price_per_gpu_hour, o.price_per_hour, o.offer_id)),
    "vram": ("most memory per GPU first (unknown last)",
             lambda o: (-(offer_vram_gb(o) or 0), o.price_per_hour, o.offer_id)),
    "gpus": ("most GPUs per machine first",
             lambda o: (-o.gpu_count, o.price_per_hour, o.offer_id)),
    "region": ("by region name, A to Z",
               lambda o: (o.region or "~", o.price_per_hour, o.offer_id)),
    "reliability": ("highest host reliability first (Vast.ai publishes it; others last)",
                    lambda o: (-_reliability(o, -1.0), o.price_per_hour, o.offer_id)),
}
# --kind: on-demand machines, interruptible ones (Vast.ai bids), or both.
KINDS = ("on-demand", "spot", "all")


def _reliability(o: Offer, missing: float | None = None) -> float | None:
    value = o.extra.get("reliability")
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else missing


@dataclass
class OfferQuery:
    providers: list[str]
    gpus: int | None = None
    gpu_type: str | None = None
    max_price: float | None = None
    kind: str = "on-demand"
    region: str | None = None
    min_vram: float | None = None
    sort: str = "price"

    def validate(self) -> "OfferQuery":
        for name in self.providers:
            registry.check(name)
        if self.gpus is not None and self.gpus < 1:
            raise UsageError(f"--gpus must be at least 1 (got {self.gpus})")
        if self.max_price is not None and self.max_price <= 0:
            raise UsageError(f"--max-price must be positive (got {self.max_price})")
        if self.min_vram is not None and self.min_vram <= 0:
            raise UsageError(f"--min-vram must be a positive number of GB (got {self.min_vram:g})")
        if self.gpu_type is not None and not wanted_gpu(self.gpu_type).name:
            raise UsageError(f"--gpu '{self.gpu_type}': name a GPU, e.g. H100, 'RTX 4090', 'a100 80gb'")
        if self.kind not in KINDS:
            raise UsageError(f"--kind: '{self.kind}' is not one of {spoken(KINDS)}")
        if self.sort not in SORTS:
            raise UsageError(f"--sort: '{self.sort}' is not one of {spoken(SORTS)}")
        return self

    @property
    def filters(self) -> "OfferFilter":
        return OfferFilter(self.gpus, self.gpu_type, self.region, self.min_vram, self.max_price,
                           interruptible=self.kind == "spot")


@dataclass(frozen=True)
class OfferFilter:
    """What an offer must be, in the order `explain_none` takes the filters."""
    gpus: int | None = None
    gpu_type: str | None = None
    region: str | None = None
    min_vram: float | None = None
    max_price: float | None = None
    only_available: bool = False
    interruptible: bool = False


def _in_region(o: Offer, region: str | None) -> bool:
    return not region or region in (o.region or "") or region in o.extra.get("data_centers", [])


def _has_vram(o: Offer, min_vram: float | None) -> bool:
    if min_vram is None:
        return True
    vram = offer_vram_gb(o)
    return vram is not None and vram >= min_vram


def matching_offers(offers: list[Offer], gpus: int | None = None, gpu_type: str | None = None,
                    max_price: float | None = None, region: str | None = None,
                    only_available: bool = True, min_vram: float | None = None) -> list[Offer]:
    """Offers that fit, cheapest first (ties: the one with more availability)."""
    fit = [o for o in offers
           if (not gpus or o.gpu_count == gpus)
           and gpu_matches(gpu_type, o.gpu_name, offer_vram_gb(o))
           and (max_price is None or o.price_per_hour <= max_price)
           and _in_region(o, region) and _has_vram(o, min_vram)
           and (not only_available or o.available is None or o.available > 0)]
    return sort_offers(fit, "price")


def sort_offers(offers: list[Offer], by: str = "price") -> list[Offer]:
    return sorted(offers, key=SORTS[by][1])


# -- why nothing fits ---------------------------------------------------------

def _gpus(n: int) -> str:
    return f"{n} GPU" if n == 1 else f"{n} GPUs"


def _offers(n: int, kind: str) -> str:
    return f"{n} {kind}offer" + ("" if n == 1 else "s")


def _offered(values: list[str]) -> str:
    return f"only {values[0]} is offered" if len(values) == 1 else f"{spoken(values, 'and')} are offered"


def _counts_offered(offers: list[Offer]) -> str:
    """The GPU counts per machine on offer, as words: "1, 2, 4 and 8 are offered". A
    provider that rents any count up to a ceiling (RunPod's max_count) lists one count
    at a time, so its ceiling is said instead."""
    listed = [o for o in offers if not isinstance(o.extra.get("max_count"), int)]
    ceilings: dict[str, int] = {}
    for o in offers:
        if isinstance(o.extra.get("max_count"), int):
            ceilings[o.provider] = max(ceilings.get(o.provider, 0), o.extra["max_count"])
    parts = []
    if listed:
        parts.append(_offered([str(n) for n in sorted({o.gpu_count for o in listed})]))
    parts += [f"{name} rents 1 to {most} GPUs per machine" for name, most in sorted(ceilings.items())]
    return "; ".join(parts)


def _cheapest_line(o: Offer) -> str:
    where = f" in {o.region}" if o.region else ""
    return f"{format_dollars(o.price_per_hour)}/h: {o.gpu_count}x {o.gpu_name}{where}"


def explain_none(providers: list[str], offers: list[Offer], f: OfferFilter,
                 wider: Callable[[], list[Offer]] | None = None) -> str:
    """One line saying which filter emptied the list, and what there is instead.
    `offers` is what the providers listed for the request; `wider` lists them again
    without the GPU-count filter (providers filter on the count themselves), asked
    only when `offers` is empty and a count was given."""
    who = spoken(providers, "and")
    has = "has" if len(providers) == 1 else "have"
    kind = "interruptible " if f.interruptible else ""
    if not offers and f.gpus and wider is not None:
        try:
            offers = wider()
        except ProviderError:
            offers = []
    if not offers:
        return f"{who} {has} no {kind}machines available to rent right now"
    said: list[str] = []            # the filters passed so far, as words

    def context() -> str:
        return (" " + " ".join(said)) if said else ""

    left = offers
    if f.gpus:
        fit = [o for o in left if o.gpu_count == f.gpus]
        if not fit:
            return (f"{who} {has} {_offers(len(left), kind)}, none with {_gpus(f.gpus)}; "
                    f"{_counts_offered(left)}")
        left, said = fit, said + [f"with {_gpus(f.gpus)}"]
    if f.gpu_type:
        fit = [o for o in left if gpu_matches(f.gpu_type, o.gpu_name, offer_vram_gb(o))]
        if not fit:
            names = sorted({_name_with_vram(o, f.gpu_type) for o in left})
            return (f"{who} {has} no {kind}offers of type {wanted_gpu(f.gpu_type)}{context()}; "
                    f"GPU types offered{context()}: {', '.join(names)}")
        names = {o.gpu_name for o in fit}      # "4090" reads better as the RTX 4090 it matched
        label = names.pop() if len(names) == 1 else str(wanted_gpu(f.gpu_type))
        left, said = fit, [f"of {label}"] + said
    if f.region:
        fit = [o for o in left if _in_region(o, f.region)]
        if not fit:
            regions = sorted({r for o in left for r in (o.extra.get("data_centers") or [o.region]) if r})
            return (f"{who} {has} no {kind}offers{context()} in region {f.region}; "
                    f"regions offered{context()}: {_listing(regions) or 'none named'}")
        left, said = fit, said + [f"in {f.region}"]
    if f.min_vram is not None:
        fit = [o for o in left if _has_vram(o, f.min_vram)]
        if not fit:
            known = [o for o in left if offer_vram_gb(o) is not None]
            most = max(known, key=lambda o: offer_vram_gb(o) or 0, default=None)
            hint = (f"the most is {offer_vram_gb(most):g} GB ({most.gpu_name})" if most
                    else "none says how much")
            return (f"{who} {has} {_offers(len(left), kind)}{context()}, none with at least "
                    f"{f.min_vram:g} GB per GPU; {hint}")
        left, said = fit, said + [f"with {f.min_vram:g}+ GB per GPU"]
    if f.max_price is not None:
        fit = [o for o in left if o.price_per_hour <= f.max_price]
        if not fit:
            cheapest = sort_offers(left, "price")[0]
            return (f"{who} {has} {_offers(len(left), kind)}{context()}, none at or under "
                    f"{format_dollars(f.max_price)}/h (cheapest is {_cheapest_line(cheapest)})")
        left = fit
        said = said + [f"at or under {format_dollars(f.max_price)}/h"]
    if f.only_available:
        return f"every {who} {kind}offer{context()} is sold out right now"
    return f"no {who} offer fits"   # not reached: every filter above passed something


def _listing(names: list[str]) -> str:
    """Names joined with commas, or semicolons where names have commas ("Texas, US")."""
    return ("; " if any("," in n for n in names) else ", ").join(names)


def _name_with_vram(o: Offer, wanted: str) -> str:
    """The offer's GPU name; with its memory where the user asked for a size."""
    vram = offer_vram_gb(o)
    if wanted_gpu(wanted).memory_gb is not None and vram is not None:
        return f"{o.gpu_name} {vram:g} GB"
    return o.gpu_name


# -- one price list across providers -----------------------------------------

@dataclass
class Gathered:
    listed: list[Offer]                  # what the providers listed, before our filters
    chosen: list[Offer]                  # those that fit the query, in its order
    warnings: list[str] = field(default_factory=list)    # one per provider that failed
    asked: list[str] = field(default_factory=list)       # the providers that answered


def _one(name: str, q: OfferQuery) -> list[Offer]:
    provider = registry.get(name)
    kinds = {"on-demand": (False,), "spot": (True,), "all": (False, True)}[q.kind]
    found: list[Offer] = []
    for interruptible in kinds:
        found += provider.offers(gpus=q.gpus, gpu_type=q.gpu_type, interruptible=interruptible)
    return found


def _fetch(q: OfferQuery) -> tuple[list[Offer], list[str], list[str]]:
    names = q.providers or registry.names()
    offers: list[Offer] = []
    warnings: list[str] = []
    answered: list[str] = []
    with ThreadPoolExecutor(max_workers=len(names)) as pool:
        futures = {name: pool.submit(_one, name, q) for name in names}
        for name, fut in futures.items():
            try:
                offers.extend(fut.result())
                answered.append(name)
            except ProviderError as e:
                warnings.append(f"warning: {e}")
    return offers, warnings, answered


def gather(q: OfferQuery) -> Gathered:
    """Every provider's offers for `q`, those that fit in q.sort's order, and one
    warning line per provider that failed."""
    listed, warnings, answered = _fetch(q)
    f = q.filters
    fit = matching_offers(listed, f.gpus, f.gpu_type, f.max_price, f.region,
                          only_available=False, min_vram=f.min_vram)
    return Gathered(listed, sort_offers(fit, q.sort), warnings, answered)


def explain_empty(q: OfferQuery, got: Gathered) -> str:
    """Why `got` has no offer for `q` (explain_none over the providers that answered)."""
    return explain_none(got.asked, got.listed, q.filters,
                        wider=lambda: _fetch(replace(q, gpus=None, providers=got.asked))[0])


def offer_row(o: Offer) -> dict:
    """An offer as `offers --format json|csv` gives it: raw numbers."""
    return {"provider": o.provider, "gpu": o.gpu_name, "count": o.gpu_count,
            "vram_gb": offer_vram_gb(o),
            "price_per_hour": round(o.price_per_hour, 4),
            "price_per_gpu_hour": round(o.price_per_gpu_hour, 4), "region": o.region,
            "available": o.available, "interruptible": o.interruptible,
            "kind": "spot" if o.interruptible else "on-demand",
            "reliability": _reliability(o), "instance_type": o.instance_type,
            "offer_id": o.offer_id}


def offer_display_row(o: Offer) -> dict:
    """An offer as the table shows it: prices in one precision, memory in GB."""
    row = offer_row(o)
    vram = row["vram_gb"]
    row.update(price_per_hour=format_dollars(o.price_per_hour),
               price_per_gpu_hour=format_dollars(o.price_per_gpu_hour),
               vram_gb=f"{vram:g}" if vram is not None else None,
               interruptible="yes" if o.interruptible else "no",
               reliability=f"{row['reliability']:.3f}" if row["reliability"] is not None else None)
    return row


def limit_offers(offers: list[Offer], limit: int | None) -> tuple[list[Offer], str | None]:
    """(the first `limit` offers, a line saying how many were left out, or None).
    A limit of 0 or None shows all."""
    if not limit or len(offers) <= limit:
        return offers, None
    return offers[:limit], f"showing {limit} of {len(offers)}; --limit 0 for all"


__all__ = ["SORTS", "KINDS", "OfferQuery", "OfferFilter", "Gathered", "matching_offers", "sort_offers",
           "explain_none", "explain_empty", "gather", "offer_row", "offer_display_row", "limit_offers"]
