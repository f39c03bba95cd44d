"""Optional, beside Provider: private overlay networks between machines of one physical
cluster (Vast.ai: offers carry a `cluster_id`; an overlay made on that cluster gives the
instances joined to it a private LAN with every port open between them).

A cluster that goes over an overlay is rented one machine at a time as any other; the
overlay is made before the first machine is rented (a refusal then costs nothing),
each member joins it once it runs, and it is deleted only after every member is
confirmed gone. The API names no member's address on the overlay, only the overlay's
subnet: each member's address is read on the member (the one of its addresses inside
that subnet)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class Overlay:
    overlay_id: str
    name: str
    cluster_id: str
    subnet: str | None                 # e.g. "10.0.0.0/24"; None while the provider gives none
    instances: tuple[str, ...] = ()    # the ids of the instances joined to it

    def holds(self, address: str) -> bool:
        """Whether `address` lies in the overlay's subnet."""
        if not self.subnet:
            return False
        try:
            return ipaddress.ip_address(address) in ipaddress.ip_network(self.subnet, strict=False)
        except ValueError:
            return False


@runtime_checkable
class OverlayNetworks(Protocol):
    def create_overlay(self, cluster_id: str, name: str) -> Overlay:
        """Make overlay `name` on physical cluster `cluster_id`; the overlay as listed."""
        ...

    def join_overlay(self, name: str, instance_id: str) -> None:
        ...

    def overlays(self) -> list[Overlay]:
        ...

    def delete_overlay(self, overlay_id: str) -> None:
        """NotFoundError when there is no such overlay."""
        ...


def overlay_networks(provider: object) -> OverlayNetworks | None:
    """The provider as an OverlayNetworks where it has them, else None."""
    return provider if isinstance(provider, OverlayNetworks) else None


def cluster_of(offer) -> str | None:
    """The physical cluster an offer's machine belongs to (extra cluster_id), or None."""
    found = (offer.extra or {}).get("cluster_id") if isinstance(offer.extra, dict) else None
    if isinstance(found, bool) or found in (None, ""):
        return None
    return str(found)
