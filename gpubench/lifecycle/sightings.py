"""What a ledger row's own account says of it now: its list, then, for a row the list
leaves out, one lookup by id.

Absence from a list is never proof of termination. A row its account's list leaves
out is looked up by id right away: "not found" (or terminated) confirms it gone; found
means the list left it out for a while; no answer marks it "missing" until a later
list or lookup settles it. A row whose launch answer was lost (no id) is looked for by
name; once its launch call can no longer be going on, a full list of its account
without that name means the machine was never created.

Rows of another account are left as they are; rows that record no account are never
written off on absence (see accounts.py).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from gpubench.lifecycle import accounts
from gpubench.lifecycle.accounts import Relation
from gpubench.store.ledger import Ledger, LedgerEntry
from gpubench.store.status import MAY_GO_MISSING, LedgerStatus
from gpubench.providers.common import Instance, InstanceState, NotFoundError, Provider, ProviderError


@dataclass
class Sighting:
    entry: LedgerEntry            # the row as the ledger has it now
    instance: Instance | None     # as the provider listed (or looked up) it; None: not seen
    note: str                     # what `ls` says of it


def check(ledger: Ledger, entry: LedgerEntry, provider: Provider, listed: list[Instance],
          now: float | None = None) -> Sighting:
    """Bring one live row up to date with `listed`, the complete list of `provider`'s
    account, asking the provider once more by id for a row the list leaves out."""
    now = time.time() if now is None else now
    relation = accounts.relation(entry, provider)
    if relation is Relation.OTHER:
        inst = _by_id(entry, listed) if accounts.same_endpoint(entry, provider) else None
        if inst is None:
            return Sighting(entry, None, f"{accounts.describe_other(entry, provider)}; "
                                         f"not checked with this one")
        relation = Relation.SAME      # its id is in this account's list: the key was rotated
    inst = _by_id(entry, listed) if entry.instance_id else _by_name(entry, listed)
    if inst is not None:
        entry = seen(ledger, entry, provider, inst, now)
        return Sighting(entry, inst, entry.note or "")
    if entry.instance_id:
        return _not_listed(ledger, entry, provider, relation, now)
    return _not_launched(ledger, entry, provider, relation, now)


def seen(ledger: Ledger, entry: LedgerEntry, provider: Provider, inst: Instance,
         now: float | None = None) -> LedgerEntry:
    """Record what the row's own account showed of its instance: the id of a row whose
    launch answer was lost, the SSH address, a missing row back where it was, gone."""
    now = time.time() if now is None else now
    values = accounts.adopt(entry, provider)
    if not entry.instance_id:
        values.update(instance_id=inst.instance_id, status=LedgerStatus.LAUNCHED,
                      note="recovered by name", created_at=entry.requested_at)
    if inst.status is InstanceState.TERMINATED:
        return ledger.mark(entry.row_id, LedgerStatus.TERMINATED, "terminated_confirmed_at", **values)
    if entry.status is LedgerStatus.MISSING:
        values.update(status=entry.boot_status(), note="seen again by its provider")
    status = values.get("status", entry.status)
    if inst.ssh_host and not entry.ssh_host:
        values.update(ssh_host=inst.ssh_host, ssh_port=inst.ssh_port, ssh_user=inst.ssh_user)
        if inst.status is InstanceState.RUNNING and status in (LedgerStatus.REQUESTED,
                                                               LedgerStatus.LAUNCHED):
            values.update(status=LedgerStatus.RUNNING, running_at=now)
    return ledger.update(entry.row_id, **values) if values else entry


def _by_id(entry: LedgerEntry, instances: list[Instance]) -> Instance | None:
    return next((i for i in instances if i.instance_id == entry.instance_id), None)


def _by_name(entry: LedgerEntry, instances: list[Instance]) -> Instance | None:
    """The launch answer never reached the ledger: its provider-side name finds it."""
    return next((i for i in instances if i.name == entry.provider_name
                 and i.status is not InstanceState.TERMINATED), None)


def named(provider: Provider, entry: LedgerEntry) -> Instance | None:
    """The live instance of the row's name in the provider's list, or None."""
    return _by_name(entry, provider.list())


def _not_listed(ledger: Ledger, entry: LedgerEntry, provider: Provider, relation: Relation,
                now: float) -> Sighting:
    try:
        inst = provider.get(entry.instance_id)
    except NotFoundError:
        inst = None
    except ProviderError as e:
        return _missing(ledger, entry, f"not in {provider.name}'s list, and the lookup by id "
                                       f"failed ({e.message}); not confirmed gone")
    if inst is not None and inst.status is not InstanceState.TERMINATED:
        entry = seen(ledger, entry, provider, inst, now)
        return Sighting(entry, inst, f"left out of {provider.name}'s list; found by id")
    if relation is Relation.UNKNOWN:
        return _missing(ledger, entry, f"not found with the API key in use (fingerprint "
                                       f"{accounts.fingerprint(provider)}); the key it was launched "
                                       f"with is unknown: 'gpubench down {entry.name}' settles it")
    found = "nothing" if inst is None else "it terminated"
    entry = ledger.mark(entry.row_id, LedgerStatus.TERMINATED, "terminated_confirmed_at",
                        note=f"gone: not in {provider.name}'s list, and a lookup by id finds {found}")
    return Sighting(entry, None, entry.note)


def _missing(ledger: Ledger, entry: LedgerEntry, why: str) -> Sighting:
    """Not seen, not confirmed gone. A row being taken down keeps its status."""
    values = {"note": why[:300]}
    if entry.status in MAY_GO_MISSING + (LedgerStatus.MISSING,):
        values["status"] = LedgerStatus.MISSING
    entry = ledger.update(entry.row_id, **values)
    return Sighting(entry, None, entry.note)


def _not_launched(ledger: Ledger, entry: LedgerEntry, provider: Provider, relation: Relation,
                  now: float) -> Sighting:
    left = entry.launch_in_flight_s(now)
    if left > 0:
        return Sighting(entry, None, f"not listed yet; its launch call may still be going on "
                                     f"(for up to {left:.0f} s more)")
    if relation is Relation.UNKNOWN:
        return Sighting(entry, None, f"not listed with the API key in use (fingerprint "
                                     f"{accounts.fingerprint(provider)}); the key it was launched "
                                     f"with is unknown: 'gpubench down {entry.name}' settles it")
    entry = ledger.mark(entry.row_id, LedgerStatus.TERMINATED, "terminated_confirmed_at",
                        note=never_created(entry, provider))
    return Sighting(entry, None, entry.note)


def never_created(entry: LedgerEntry, provider: Provider) -> str:
    """Why a row with no id is settled as never created: the reason, stated."""
    call = ("its launch call ended without an answer" if entry.launch_ended_at else
            "its launch call cannot still be going on")
    return (f"never created: {call}, and {provider.name}'s full list for this API key "
            f"(fingerprint {accounts.fingerprint(provider)}) has no {entry.provider_name}")
