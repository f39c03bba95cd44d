"""A cluster's overlay network (providers/overlays.py, Vast.ai): made before the first
member is rented, joined by each member once it runs, and deleted only after every
member is confirmed gone, itself confirmed gone by the provider's list before the
ledger writes it off.

Each member's address on the overlay is read on the member over SSH (`ip -o -4 addr`:
the one inside the overlay's subnet), since the provider lists only the subnet. That
address becomes the member's private_ip, and its port mapping is dropped: on the
overlay every port is open between the members, so peers reach each port as itself.
"""

from __future__ import annotations

import time
from typing import Callable

from gpubench.errors import GpubenchError
from gpubench.lifecycle.waiting import pause
from gpubench.providers.common import NotFoundError, ProviderError, provider_name
from gpubench.providers.overlays import Overlay, OverlayNetworks
from gpubench.store.ledger import Ledger, LedgerEntry

JOIN_S = 120.0          # for the provider to list every member on the overlay, with a subnet
ADDRESS_S = 60.0        # for each member to hold an address in that subnet
GONE_S = 60.0           # for a deleted overlay to leave the provider's list
ADDRESSES = "ip -o -4 addr show"

Say = Callable[[str], None]


class OverlayError(GpubenchError):
    """The overlay network could not be made, joined or confirmed gone."""


def overlay_name(cluster: str) -> str:
    """The overlay's name at the provider: the cluster's own, gpubench- prefixed."""
    return provider_name(cluster)


def make_overlay(overlays: OverlayNetworks, provider: str, cluster_id: str, cluster: str,
                 say: Say) -> Overlay:
    """The overlay for `cluster` on physical cluster `cluster_id`; an OverlayError in one
    line when the provider will not make it (nothing is rented yet)."""
    name = overlay_name(cluster)
    say(f"making overlay network {name} on {provider} physical cluster {cluster_id}")
    try:
        made = overlays.create_overlay(cluster_id, name)
    except ProviderError as e:
        raise OverlayError(f"{provider} would not make an overlay network on physical cluster "
                           f"{cluster_id}: {e.message}; nothing rented") from None
    say(f"overlay {made.name} ({made.overlay_id}) made")
    return made


def join_members(overlays: OverlayNetworks, overlay: Overlay, members: list[LedgerEntry],
                 ledger: Ledger, known_hosts, say: Say) -> list[LedgerEntry]:
    """Join every member to `overlay`, wait for the provider to list them all on it,
    then read each member's address on it and keep it as the row's private_ip. The
    members' rows, head first; OverlayError when it cannot be done in time."""
    for entry in members:
        overlays.join_overlay(overlay.name, entry.instance_id)
        say(f"{entry.name} ({entry.instance_id}) joined overlay {overlay.name}")
    listed = _listed_with_all(overlays, overlay, {m.instance_id for m in members})
    out = []
    for entry in members:
        address = member_address(entry, listed, known_hosts)
        out.append(ledger.update(entry.row_id, private_ip=address, port_map=None))
        say(f"{entry.name}: {address} on overlay {listed.name} ({listed.subnet})")
    return out


def _listed_with_all(overlays: OverlayNetworks, overlay: Overlay, ids: set[str]) -> Overlay:
    deadline = time.monotonic() + JOIN_S
    while True:
        found = next((o for o in overlays.overlays() if o.overlay_id == overlay.overlay_id), None)
        if found is not None and found.subnet and ids <= set(found.instances):
            return found
        if time.monotonic() >= deadline:
            have = "not listed" if found is None else f"lists {sorted(found.instances)}, subnet {found.subnet}"
            raise OverlayError(f"overlay {overlay.name} does not list every member within {JOIN_S:g} s "
                               f"({have})")
        pause(deadline)


def member_address(entry: LedgerEntry, overlay: Overlay, known_hosts) -> str:
    """The member's IPv4 address inside the overlay's subnet, read on the member."""
    from gpubench.remote.connection import ConnectOptions, SshConnection
    from gpubench.remote.errors import SshError
    from gpubench.remote.targets import host_from_entry

    conn = SshConnection(host_from_entry(entry).target, known_hosts, ConnectOptions(wait=30.0))
    deadline = time.monotonic() + ADDRESS_S
    try:
        conn.open()
        while True:
            code, text = conn.capture(ADDRESSES, timeout=30.0)
            found = [a for a in addresses_in(text) if overlay.holds(a)] if code == 0 else []
            if found:
                return found[0]
            if time.monotonic() >= deadline:
                raise OverlayError(f"{entry.name} holds no address in overlay {overlay.name}'s subnet "
                                   f"{overlay.subnet} within {ADDRESS_S:g} s")
            pause(deadline)
    except (SshError, OSError) as e:
        raise OverlayError(f"{entry.name}: cannot read its overlay address: {e}") from None
    finally:
        conn.close()


def addresses_in(text: str) -> list[str]:
    """The IPv4 addresses in `ip -o -4 addr show` output ("2: eth1    inet 10.0.0.2/24 ...")."""
    out = []
    for line in text.splitlines():
        words = line.split()
        if "inet" in words and words.index("inet") + 1 < len(words):
            out.append(words[words.index("inet") + 1].split("/")[0])
    return out


def remove_overlay(overlays: OverlayNetworks, provider: str, overlay_id: str, ledger: Ledger | None,
                   say: Say) -> str | None:
    """Delete the overlay and wait until the provider lists it no more, then write it off
    in the ledger. None when confirmed gone, else why not (one line)."""
    say(f"deleting overlay {overlay_id} on {provider}")
    try:
        overlays.delete_overlay(overlay_id)
    except NotFoundError:
        pass                      # already gone; the list below confirms it
    except ProviderError as e:
        return f"overlay {overlay_id}: delete failed ({e.message})"
    deadline = time.monotonic() + GONE_S
    while True:
        try:
            listed = {o.overlay_id for o in overlays.overlays()}
        except ProviderError as e:
            return f"overlay {overlay_id}: cannot confirm it gone ({e.message})"
        if overlay_id not in listed:
            if ledger is not None:
                ledger.overlay_gone(provider, overlay_id)
            say(f"overlay {overlay_id} deleted and confirmed gone")
            return None
        if time.monotonic() >= deadline:
            return f"overlay {overlay_id}: still listed {GONE_S:g} s after its delete"
        pause(deadline)


def remove_left_overlays(ledger: Ledger, provider, overlays: OverlayNetworks | None, cluster: str | None,
                         say: Say) -> list[str]:
    """Delete each overlay of `provider` (of `cluster` where given) not yet written off
    whose members are all confirmed gone; one line per overlay that is not confirmed
    gone (kept because a member may still run, or its delete failed)."""
    left = []
    for name, overlay_id in ledger.overlays_left(cluster):
        if name != provider.name:
            continue
        if overlays is None:
            left.append(f"overlay {overlay_id}: {name} has no overlay calls")
            continue
        members = ledger.overlay_rows(name, overlay_id)
        if not all(m.termination_confirmed for m in members):
            left.append(f"overlay {overlay_id} kept: not every member is confirmed gone")
            continue
        why = remove_overlay(overlays, name, overlay_id, ledger, say)
        if why:
            left.append(why)
    return left

