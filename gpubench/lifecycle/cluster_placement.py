"""Where a cluster goes, before anything is rented: N machines of one offer type in
one region. Where an offer is one machine (the registry entry's one_machine_per_offer:
a Vast.ai ask), the offers say how many machines a region has, and a cluster larger
than that is refused here; elsewhere the provider's answer to the launch decides.

Where the provider joins machines of one physical cluster by an overlay network
(providers/overlays.py: Vast.ai's offers with a cluster_id) and the request wants a
private network, N machines of one physical cluster and one GPU type come first. Where
no physical cluster has N, the public internet between separate machines is taken only
with the user's agreement (--public-network, or asked); otherwise a
NoPrivateNetworkError says so in one line."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from gpubench.errors import UsageError
from gpubench.lifecycle.provision import NAME_RE, ProvisionRequest, connect_and_plan, default_name
from gpubench.providers.common import Offer, Provider
from gpubench.providers.overlays import cluster_of, overlay_networks

MAX_NODES = 64


class PlacementError(UsageError):
    """The provider cannot place the cluster in one region (before anything is rented)."""


class NoPrivateNetworkError(PlacementError):
    """No physical cluster holds the machines, and the public internet was not agreed to."""


def member_name(cluster: str, index: int) -> str:
    """The name of member `index` of `cluster` in the ledger (and, with the gpubench-
    prefix, at the provider)."""
    return f"{cluster}-{index}"


@dataclass
class ClusterRequest:
    machine: ProvisionRequest        # what every member is (name: the cluster's name)
    nodes: int
    private_network: bool = False    # prefer one physical cluster joined by an overlay, where
    #                                  the provider has overlays (Vast.ai)
    public_network: bool = False     # where no physical cluster fits, the public internet is agreed

    def validate(self) -> "ClusterRequest":
        """Checks the request; a cluster without a name gets one."""
        if self.nodes < 1:
            raise UsageError(f"--nodes must be at least 1 (got {self.nodes})")
        if self.nodes > MAX_NODES:
            raise UsageError(f"--nodes {self.nodes}: at most {MAX_NODES} machines in one cluster")
        self.machine.validate()
        name = self.machine.name = self.machine.name or default_name(self.machine.provider)
        if not NAME_RE.match(member_name(name, self.nodes - 1)):
            raise UsageError(f"--name '{name}': use lower-case letters, digits and '-' (at most "
                             f"{41 - len(str(self.nodes - 1)) - 1} for {self.nodes} nodes, starting "
                             f"with a letter or digit)")
        return self


def one_machine_per_offer(provider: str) -> bool:
    """Whether every offer is one machine (the registry entry's one_machine_per_offer: a
    Vast.ai ask is one host's GPUs), so a region has as many machines as offers. Lambda's
    offers are a type in a region with capacity of unknown depth, RunPod's a GPU type
    with an availability level: neither says how many machines."""
    from gpubench.providers import registry

    return getattr(registry.find(provider), "one_machine_per_offer", False)




@dataclass
class Placement:
    """One offer type in one region: the offers a cluster's members are rented from."""

    provider: str
    gpu_name: str
    gpu_count: int
    region: str
    offers: list[Offer]              # cheapest first
    machines: int | None             # how many the provider says the region has; None: it does not say
    cluster_id: str | None = None    # the physical cluster holding them all, where an overlay joins them

    @property
    def price_per_hour(self) -> float:
        return self.offers[0].price_per_hour

    def describe(self) -> str:
        where = f" in {self.region}" if self.region else ""
        cluster = f", physical cluster {self.cluster_id}" if self.cluster_id else ""
        return f"{self.gpu_count}x {self.gpu_name}{where}{cluster}"


def _by_region(offers: list[Offer]) -> list[Offer]:
    """One offer per region: a RunPod offer names the data centres that have the GPU
    (extra data_centers), and a cluster must sit in one of them."""
    out = []
    for offer in offers:
        centres = offer.extra.get("data_centers") if isinstance(offer.extra, dict) else None
        if isinstance(centres, list) and centres:
            out += [replace(offer, region=str(c)) for c in centres]
        elif offer.available != 0:
            out.append(offer)
    return out


def placements(provider: str, offers: list[Offer]) -> list[Placement]:
    """The offers grouped by (type, GPU count, region), cheapest group first."""
    groups: dict[tuple, list[Offer]] = {}
    for offer in _by_region(offers):
        key = (offer.instance_type or offer.gpu_name, offer.gpu_name, offer.gpu_count, offer.region)
        groups.setdefault(key, []).append(offer)
    out = []
    for (_, gpu, count, region), members in groups.items():
        members.sort(key=lambda o: o.price_per_hour)
        machines = len({o.offer_id for o in members}) if one_machine_per_offer(provider) else None
        out.append(Placement(provider, gpu, count, region, members, machines))
    return sorted(out, key=lambda p: p.price_per_hour)


def choose_placement(provider: str, offers: list[Offer], nodes: int, region: str | None = None
                     ) -> Placement:
    """The cheapest placement that can hold `nodes` machines as far as the offers say;
    a PlacementError in the provider's terms when none can."""
    found = placements(provider, offers)
    fits = [p for p in found if p.machines is None or p.machines >= nodes]
    if fits:
        return fits[0]
    if not found:
        raise PlacementError(f"{provider} has no offer that can be placed in one region")
    most = max(found, key=lambda p: (p.machines or 0, -p.price_per_hour))
    where = f"in {region}" if region else "in one region"
    plural = "s" if most.machines != 1 else ""
    raise PlacementError(f"{provider} has {most.machines} machine{plural} of {most.gpu_count}x "
                         f"{most.gpu_name} {where}, asked for {nodes}")


def cluster_placements(provider: str, offers: list[Offer], nodes: int) -> list[Placement]:
    """The physical clusters (offers sharing a cluster_id) with `nodes` machines of one GPU
    type and count, cheapest first."""
    groups: dict[tuple, list[Offer]] = {}
    for offer in offers:
        cluster = cluster_of(offer)
        if cluster is not None and offer.available != 0:
            groups.setdefault((cluster, offer.gpu_name, offer.gpu_count), []).append(offer)
    out = []
    for (cluster, gpu, count), members in groups.items():
        machines = len({o.extra.get("machine_id") or o.offer_id for o in members})
        if machines < nodes:
            continue
        members.sort(key=lambda o: o.price_per_hour)
        regions = {o.region for o in members}
        out.append(Placement(provider, gpu, count, regions.pop() if len(regions) == 1 else "", members,
                             machines, cluster))
    return sorted(out, key=lambda p: p.price_per_hour)


def no_cluster_line(provider: str, nodes: int, offers: list[Offer]) -> str:
    """One line: no physical cluster of `provider` holds `nodes` of the machines asked for."""
    kinds = sorted({f"{o.gpu_count}x {o.gpu_name}" for o in offers})
    counts = {o.gpu_count for o in offers}
    what = kinds[0] if len(kinds) == 1 else (f"{counts.pop()}x one GPU type" if len(counts) == 1
                                             else "one GPU type")
    return (f"{provider} has no physical cluster with {nodes} machines of {what} free (offers sharing a "
            f"cluster_id), so no private overlay network can join them")


def connect_and_place(req: ClusterRequest, provider: Provider | None = None,
                      agree_public: Callable[[str], bool] | None = None) -> tuple[Provider, Placement]:
    """Check the request, connect to its provider (unless one is given) and pick where
    the cluster goes. NoOfferError when no offer fits, PlacementError when no region
    has room for every member. With req.private_network, where the provider has
    overlays: one physical cluster first; else the public internet only when
    `agree_public(line)` says yes (without it: req.public_network), NoPrivateNetworkError
    otherwise."""
    req.validate()
    provider, offers = connect_and_plan(req.machine, provider)
    name = req.machine.provider
    if req.private_network and req.nodes >= 2 and overlay_networks(provider) is not None:
        found = cluster_placements(name, offers, req.nodes)
        if found:
            return provider, found[0]
        line = no_cluster_line(name, req.nodes, offers)
        agreed = agree_public(line) if agree_public is not None else req.public_network
        if not agreed:
            raise NoPrivateNetworkError(f"{line}; pass --public-network to join separate machines over "
                                        f"the public internet")
    return provider, choose_placement(name, offers, req.nodes, req.machine.region)
