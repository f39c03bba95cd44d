"""Checks on an offer before it is rented, from what its provider publishes about the
host (Vast.ai's marketplace rows; Lambda and RunPod publish none of these, so their
offers pass). An offer that fails one is not rented, and `offers` says why.

The floors are the ones the Vast.ai CLI's own `check_requirements` uses: CUDA 11.8,
reliability above 0.90, more than 3 direct ports, PCIe above 2.85 GB/s, 500 Mb/s each
way, CPU RAM at least 0.95 x the GPUs' memory, and two CPU cores per GPU. A field the
offer does not carry is not checked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from gpubench.providers.common import Offer

MIN_CUDA = 11.8


@dataclass(frozen=True)
class OfferCheck:
    name: str
    field: str                                   # the provider's own field name
    passes: Callable[[float, Offer], bool]
    floor: Callable[[Offer], str]                # the floor, in words, for this offer

    def judge(self, offer: Offer) -> str | None:
        """Why the offer fails this check (the value against the floor), or None."""
        value = _number(offer.extra.get(self.field))
        if value is None:
            return None
        if self.passes(value, offer):
            return None
        return f"{self.field} {value:g} (floor: {self.floor(offer)})"


def _number(value) -> float | None:
    try:
        return None if value is None or isinstance(value, bool) else float(value)
    except (TypeError, ValueError):
        return None


def _vram_mb(offer: Offer) -> float | None:
    total = _number(offer.extra.get("gpu_total_ram"))
    if total is None:
        per_gpu = _number(offer.extra.get("gpu_ram"))
        total = per_gpu * offer.gpu_count if per_gpu is not None else None
    return total


CHECKS: tuple[OfferCheck, ...] = (
    OfferCheck("cuda", "cuda_max_good", lambda v, o: v >= MIN_CUDA, lambda o: f">= {MIN_CUDA}"),
    OfferCheck("reliability", "reliability", lambda v, o: v > 0.90, lambda o: "> 0.90"),
    OfferCheck("ports", "direct_port_count", lambda v, o: v > 3, lambda o: "> 3"),
    OfferCheck("pcie", "pcie_bw", lambda v, o: v > 2.85, lambda o: "> 2.85 GB/s"),
    OfferCheck("download", "inet_down", lambda v, o: v >= 500, lambda o: ">= 500 Mb/s"),
    OfferCheck("upload", "inet_up", lambda v, o: v >= 500, lambda o: ">= 500 Mb/s"),
    OfferCheck("cpu-ram", "cpu_ram",
               lambda v, o: _vram_mb(o) is None or v >= 0.95 * _vram_mb(o),
               lambda o: f">= 0.95 x {_vram_mb(o):g} MB of GPU memory"),
    OfferCheck("cpu-cores", "cpu_cores_effective", lambda v, o: v >= 2 * o.gpu_count,
               lambda o: f">= 2 per GPU, {2 * o.gpu_count}"),
)


def offer_problems(offer: Offer) -> list[str]:
    """Every check the offer fails, each as 'field value (floor: ...)'."""
    return [why for check in CHECKS if (why := check.judge(offer)) is not None]


def split_offers(offers: list[Offer]) -> tuple[list[Offer], list[tuple[Offer, list[str]]]]:
    """(offers that pass, in their order; [(offer, why)] for those left out)."""
    kept, left_out = [], []
    for offer in offers:
        problems = offer_problems(offer)
        if problems:
            left_out.append((offer, problems))
        else:
            kept.append(offer)
    return kept, left_out


def left_out_line(offer: Offer, problems: list[str]) -> str:
    return (f"left out: {offer.provider} {offer.offer_id} ({offer.gpu_count}x {offer.gpu_name}, "
            f"${offer.price_per_hour:.2f}/h): {'; '.join(problems)}")
