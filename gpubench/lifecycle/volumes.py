"""Volumes: storage that outlives a machine, made, listed and deleted through the
providers' own APIs (Lambda filesystems, RunPod network volumes, Vast.ai local volumes),
kept in the ledger like machines, and the place each one pins a machine rented with it.

A volume is written down before its create call returns; `volume ls` sets the ledger
beside each provider's own list (a volume made outside gpubench is shown, marked as not
gpubench's); nothing deletes a volume but `volume rm`, which refuses one in use and writes
it off only once its provider's list no longer has it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from gpubench.errors import GpubenchError, UsageError
from gpubench.lifecycle import accounts, fleet
from gpubench.lifecycle.provision import NAME_RE, Pin
from gpubench.lifecycle.waiting import Say, poll_interval, silent
from gpubench.providers import registry
from gpubench.providers.common import (NotFoundError, Offer, Provider, ProviderError, Volume, VolumePlace,
                                       Volumes, provider_name, volumes_of)
from gpubench.store.ledger import Ledger
from gpubench.store.volumes import VolumeRow, VolumesLedger

GONE_DEADLINE_S = 120.0


class VolumeError(GpubenchError):
    """A volume that cannot be made, found or deleted as asked (one line)."""


@dataclass(frozen=True)
class VolumeListing:
    """One line of `volume ls`: the ledger's row, the provider's volume, or both."""

    name: str
    provider: str
    place: str
    size_gb: float | None
    used_bytes: int | None
    monthly_cost: float | None
    attached_to: tuple[str, ...]
    ours: bool                       # made by gpubench (in the ledger, or named gpubench-*)
    status: str                      # "ready", "missing" (the provider does not list it), "not gpubench's"
    volume_id: str | None = None


def volume_api(provider_name_: str, provider: Provider | None = None) -> tuple[Provider, Volumes]:
    """The provider connected, as Volumes; a UsageError where it sells none gpubench speaks to."""
    registry.check(provider_name_)
    if registry.entry(provider_name_).volumes is None:
        raise UsageError(f"{provider_name_} has no volumes gpubench can make")
    provider = provider or registry.get(provider_name_)
    api = volumes_of(provider)
    if api is None:
        raise UsageError(f"{provider_name_} has no volumes gpubench can make")
    return provider, api


def choose_place(api: Volumes, provider: str, size_gb: int | None, region: str | None,
                 gpu_type: str | None, say: Say = silent) -> VolumePlace:
    """--region's place, or the one with the most offers of --gpu-type now (said so)."""
    places = api.volume_places(gpu_type, size_gb)
    if not places:
        raise VolumeError(f"{provider} offers no place to make a volume now")
    if region is not None:
        for place in places:
            if place.place == region:
                return place
        raise VolumeError(f"--region {region}: {provider} cannot make a volume there; it can in "
                          + ", ".join(p.place for p in places[:8]) + (" ..." if len(places) > 8 else ""))
    best = places[0]
    kind = registry.entry(provider).volumes
    what = f"{best.offers} offer{'s' if best.offers != 1 else ''} of {gpu_type}" if gpu_type else "the first listed"
    say(f"placing it in {kind.bound_to} {best.place}: {what} there now (--region chooses)")
    return best


def create(provider_name_: str, name: str, size_gb: int | None, region: str | None = None,
           gpu_type: str | None = None, say: Say = silent,
           provider: Provider | None = None) -> tuple[VolumeRow, Volume]:
    """Make volume `name`, written in the ledger before the create call."""
    if not NAME_RE.match(name):
        raise UsageError(f"volume name '{name}': use lower-case letters, digits and '-' "
                         "(at most 41, starting with a letter or digit)")
    if size_gb is not None and size_gb < 1:
        raise UsageError(f"--size must be a positive number of GB (got {size_gb})")
    provider, api = volume_api(provider_name_, provider)
    with VolumesLedger() as ledger:
        if ledger.find_live(name) is not None:
            raise VolumeError(f"a volume named '{name}' is already in the ledger (see 'gpubench volume ls')")
    place = choose_place(api, provider_name_, size_gb, region, gpu_type, say)
    account = accounts.identified(provider)
    with VolumesLedger() as ledger:
        row = ledger.begin(name, provider_name_, provider_name(name), place.place, size_gb, account)
        try:
            volume = api.create_volume(name, size_gb, place)
        except ProviderError as e:
            if e.launch_refused:
                ledger.discard(row.row_id)       # a definite no: nothing was made
            else:
                ledger.noted(row.row_id, f"create answer unclear: {e.message}")
            raise
        return ledger.created(row.row_id, volume.volume_id, volume.place), volume


def listing(say: Say = silent) -> list[VolumeListing]:
    """The ledger's volumes beside every reachable provider's own list."""
    with VolumesLedger() as ledger:
        rows = ledger.rows()
    wanted = sorted({r.provider for r in rows})
    others = [e.name for e in registry.entries() if e.volumes is not None and e.name not in wanted]
    providers = {**fleet.connect_all(wanted, say), **fleet.connect_all(others, quiet_missing_key=True)}
    attached = _attached_machines()
    found: list[VolumeListing] = []
    seen: set[tuple[str, str]] = set()
    for name, provider in providers.items():
        api = volumes_of(provider)
        if api is None:
            continue
        try:
            listed = api.list_volumes()
        except ProviderError as e:
            say(f"warning: {name}: cannot list its volumes: {e}")
            listed = None
        by_id = {v.volume_id: v for v in listed or []}
        for row in (r for r in rows if r.provider == name):
            volume = by_id.get(row.volume_id or "")
            if volume is not None:
                seen.add((name, volume.volume_id))
            status = "ready" if volume is not None else ("unknown" if listed is None else "missing")
            found.append(_line(row.name, name, volume, row, attached.get(row.name, ()), True, status))
        for volume in listed or []:
            if (name, volume.volume_id) not in seen:
                ours = volume.launched_by_gpubench
                found.append(_line(volume.name, name, volume, None, (), ours,
                                   "not in the ledger" if ours else "not gpubench's"))
    return found


def _line(name: str, provider: str, volume: Volume | None, row: VolumeRow | None, machines: tuple,
          ours: bool, status: str) -> VolumeListing:
    attached = tuple(dict.fromkeys([*(volume.attached_to if volume else ()), *machines]))
    return VolumeListing(name, provider, (volume.place if volume else (row.place if row else "")) or "",
                         volume.size_gb if volume else (row.size_gb if row else None),
                         volume.used_bytes if volume else None, volume.monthly_cost if volume else None,
                         attached, ours, status, volume.volume_id if volume else (row.volume_id if row else None))


def _attached_machines() -> dict[str, tuple[str, ...]]:
    """{volume name: the live machines of the ledger rented with it}."""
    with Ledger() as ledger:
        entries = ledger.entries()
    found: dict[str, list[str]] = {}
    for entry in entries:
        if entry.volume:
            found.setdefault(entry.volume, []).append(entry.name)
    return {k: tuple(v) for k, v in found.items()}


def pinned(name: str, provider: Provider | None = None) -> tuple[VolumeRow, Volume, Volumes]:
    """The ledger's volume `name` as its provider lists it now, for a machine to be rented with."""
    with VolumesLedger() as ledger:
        row = ledger.find(name)
    provider, api = volume_api(row.provider, provider)
    for volume in api.list_volumes():
        if volume.volume_id == row.volume_id:
            return row, volume, api
    raise VolumeError(f"volume {name}: {row.provider} no longer lists it (id {row.volume_id}); "
                      "see 'gpubench volume ls'")


def pin_for(name: str, provider_name_: str, gpu_type: str | None, gpus: int,
            provider: Provider | None = None, nodes: int = 1) -> Pin:
    """--volume NAME for a machine (or `nodes` of them) on `provider_name_`: the offers it
    allows and what to say when none is free where it is. A volume of another provider,
    or a Vast.ai volume (one machine) for a cluster, is refused in one line."""
    with VolumesLedger() as ledger:
        row = ledger.find(name)
    if row.provider != provider_name_:
        raise UsageError(f"--volume {name} is a {row.provider} volume; a {provider_name_} machine cannot "
                         f"mount it (rent on {row.provider})")
    kind = registry.entry(row.provider).volumes
    if nodes > 1 and kind is not None and kind.one_machine:
        raise UsageError(f"--volume {name}: a {registry.display_name(row.provider)} {kind.noun} lives on "
                         f"one machine, so --nodes {nodes} cannot share it")
    _, volume, api = pinned(name, provider)
    where = f"{kind.bound_to} {volume.place}" if kind else volume.place
    wanted = gpu_type or f"{gpus}-GPU machine"
    return Pin(name, volume, lambda offer: api.offer_at(offer, volume),
               f"volume {name} pins you to {where}, where no {wanted} is free now")


def remove(name: str, say: Say = silent, deadline_s: float = GONE_DEADLINE_S) -> VolumeRow:
    """Delete the ledger's volume `name` and confirm it gone from the provider's list."""
    row, volume, api = pinned(name)
    machines = _attached_machines().get(name, ())
    using = tuple(dict.fromkeys([*volume.attached_to, *machines]))
    if using or volume.in_use:
        held = ", ".join(using) if using else "a machine"
        raise VolumeError(f"volume {name} is in use by {held}: take the machine down first "
                          "('gpubench down NAME'); nothing was deleted")
    try:
        api.delete_volume(volume.volume_id)
    except NotFoundError:
        pass
    deadline = time.monotonic() + deadline_s
    while True:
        if not any(v.volume_id == volume.volume_id for v in api.list_volumes()):
            with VolumesLedger() as ledger:
                return ledger.deleted(row.row_id)
        if time.monotonic() > deadline:
            raise VolumeError(f"volume {name}: {row.provider} still lists it after {deadline_s:.0f} s; "
                              "run 'gpubench volume rm' again")
        time.sleep(poll_interval())
