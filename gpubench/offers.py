"""Choosing among offers: which fit a request, cheapest first (`matching_offers`, used
by provisioning too), and one price list across providers: every provider asked at
once, answers merged and sorted by price. A provider that fails or has no key becomes
one warning."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from gpubench.errors import UsageError
from gpubench.providers import registry
from gpubench.providers.common import Offer, ProviderError
from gpubench.providers.gpus import gpu_matches


@dataclass
class OfferQuery:
    providers: list[str]
    gpus: int | None = None
    gpu_type: str | None = None
    max_price: float | None = None
    interruptible: bool = False

    def validate(self) -> "OfferQuery":
        for name in self.providers:
            registry.check(name)
        if self.gpus is not None and self.gpus < 1:
            raise UsageError(f"--gpus must be at least 1 (got {self.gpus})")
        if self.max_price is not None and self.max_price <= 0:
            raise UsageError(f"--max-price must be positive (got {self.max_price})")
        return self


def matching_offers(offers: list[Offer], gpus: int | None = None, gpu_type: str | None = None,
                    max_price: float | None = None, region: str | None = None,
                    only_available: bool = True) -> list[Offer]:
    """Offers that fit, cheapest first (ties: the one with more availability)."""
    fit = [o for o in offers
           if (not gpus or o.gpu_count == gpus)
           and gpu_matches(gpu_type, o.gpu_name)
           and (max_price is None or o.price_per_hour <= max_price)
           and (not region or region in (o.region or "") or region in o.extra.get("data_centers", []))
           and (not only_available or o.available is None or o.available > 0)]
    return sorted(fit, key=lambda o: (o.price_per_hour, -(o.available or 0), o.offer_id))


def _one(name: str, q: OfferQuery) -> list[Offer]:
    provider = registry.get(name)
    return provider.offers(gpus=q.gpus, gpu_type=q.gpu_type, interruptible=q.interruptible)


def gather(q: OfferQuery) -> tuple[list[Offer], list[str]]:
    """(matching offers cheapest first, one warning line per provider that failed)."""
    names = q.providers or registry.names()
    offers: list[Offer] = []
    warnings: list[str] = []
    with ThreadPoolExecutor(max_workers=len(names)) as pool:
        futures = {name: pool.submit(_one, name, q) for name in names}
        for name, fut in futures.items():
            try:
                offers.extend(fut.result())
            except ProviderError as e:
                warnings.append(f"warning: {e}")
    chosen = matching_offers(offers, q.gpus, q.gpu_type, q.max_price, only_available=False)
    return chosen, warnings


def offer_row(o: Offer) -> dict:
    return {"provider": o.provider, "gpu": o.gpu_name, "count": o.gpu_count,
            "price_per_hour": round(o.price_per_hour, 4),
            "price_per_gpu_hour": round(o.price_per_gpu_hour, 4), "region": o.region,
            "available": o.available, "interruptible": o.interruptible,
            "instance_type": o.instance_type, "offer_id": o.offer_id}
