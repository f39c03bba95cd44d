"""What the user agreed to spend money on, and the check before each launch.

The user confirms one offer (a GPU type, a count, a price per hour). When that
machine never boots, provisioning tries the next offer, which may be another GPU
type or a dearer one. That is only rented if the user agreed to it beforehand
(--any-gpu, or --gpu-type naming a family that both belong to, for the type;
--max-price for any price up to it), or agrees when asked now. With no one to ask
(--yes), nothing different is rented: ConsentRefused says what and why in one line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from gpubench.errors import GpubenchError
from gpubench.format import format_dollars
from gpubench.providers.common import Offer
from gpubench.providers.gpus import offer_vram_gb

# Asked with a question; True when the user agrees.
Ask = Callable[[str], bool]


class ConsentRefused(GpubenchError):
    """The next offer differs from what the user agreed to, and they did not agree to it."""


@dataclass(frozen=True)
class Agreed:
    """The machine the user confirmed, and how far they allowed provisioning to stray."""
    gpu_name: str
    gpu_count: int
    price_per_hour: float
    vram_gb: float | None = None
    any_gpu: bool = False            # --any-gpu, or --gpu-type given: any type that matches
    max_price: float | None = None   # --max-price: any price up to it

    @classmethod
    def offer(cls, offer: Offer, any_gpu: bool = False, max_price: float | None = None) -> "Agreed":
        return cls(offer.gpu_name, offer.gpu_count, offer.price_per_hour, offer_vram_gb(offer),
                   any_gpu, max_price)

    def describe(self) -> str:
        return describe_machine(self.gpu_count, self.gpu_name, self.price_per_hour, self.vram_gb)


def describe_machine(gpu_count: int, gpu_name: str, price_per_hour: float,
                     vram_gb: float | None = None) -> str:
    """"2x RTX 4090 (24 GB) at $0.60/h": what a confirmation names."""
    memory = f" ({vram_gb:g} GB)" if vram_gb else ""
    return f"{gpu_count}x {gpu_name}{memory} at {format_dollars(price_per_hour)}/h"


def departures(agreed: Agreed, offer: Offer) -> list[str]:
    """How `offer` differs from what was agreed, in words; empty when it does not."""
    found = []
    vram = offer_vram_gb(offer)
    same_memory = vram is None or agreed.vram_gb is None or vram == agreed.vram_gb
    if not agreed.any_gpu and (offer.gpu_name != agreed.gpu_name or offer.gpu_count != agreed.gpu_count
                               or not same_memory):
        found.append("another GPU type")
    ceiling = agreed.max_price if agreed.max_price is not None else agreed.price_per_hour
    if offer.price_per_hour > ceiling + 1e-9:
        found.append("a higher price")
    return found


class Consent:
    """Checks each offer before it is launched. `ask` is None where no one can be
    asked (--yes): an offer outside what was agreed then stops provisioning."""

    def __init__(self, agreed: Agreed, ask: Ask | None = None) -> None:
        self.agreed = agreed
        self.ask = ask

    def check(self, offer: Offer) -> None:
        """Return when `offer` may be rented; ConsentRefused otherwise. An offer the user
        agrees to when asked becomes the new agreement (its type and price)."""
        what = departures(self.agreed, offer)
        if not what:
            return
        this = describe_machine(offer.gpu_count, offer.gpu_name, offer.price_per_hour, offer_vram_gb(offer))
        flags = " and ".join(f for f, why in (("--any-gpu", "another GPU type"),
                                              ("--max-price", "a higher price")) if why in what)
        if self.ask is None:
            raise ConsentRefused(f"nothing more rented: the next offer is {this}, not the "
                                 f"{self.agreed.describe()} agreed to ({' and '.join(what)}); "
                                 f"pass {flags} to allow it")
        if not self.ask(f"{self.agreed.describe()} did not work out. Rent {this} instead?"):
            raise ConsentRefused(f"nothing more rented: {this} was declined")
        self.agreed = Agreed.offer(offer, self.agreed.any_gpu, self.agreed.max_price)
