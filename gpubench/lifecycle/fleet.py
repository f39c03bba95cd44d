"""What is running: the ledger set beside each provider's own list.

`reconcile` gives each live ledger row what its own account's provider says of it
(sightings.py: the list, a lookup by id for a row the list leaves out, a row whose
launch answer was lost found by its gpubench- name; rows of another account are
left as they are), and reports instances named gpubench-* or tagged gpubench (where the
provider has tags) that the ledger lacks as orphans. `settle_deadlines` terminates the machines past their --max-hours deadline
that no gpubench run holds (every command that rents or lists calls it first).
Taking instances down is in terminate.py (one instance) and down.py (what
`gpubench down` asks for).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from gpubench.lifecycle import accounts, sightings, watchdog
from gpubench.lifecycle.accounts import Relation
from gpubench.store.ledger import Ledger, LedgerEntry
from gpubench.store.status import BadTransitionError, LedgerStatus
from gpubench.lifecycle.terminate import DownResult, terminate_and_confirm
from gpubench.lifecycle.waiting import Say, silent
from gpubench.providers import registry
from gpubench.providers.common import (Instance, InstanceState, MissingKeyError,
                                       NotFoundError, Provider, ProviderError)

# -- providers ---------------------------------------------------------------

def connect_all(names: list[str], warn: Say = silent, quiet_missing_key: bool = False
                ) -> dict[str, Provider]:
    out = {}
    for name in names:
        try:
            out[name] = registry.get(name)
        except MissingKeyError as e:
            if not quiet_missing_key:
                warn(f"warning: {e}")
    return out


def providers_for_ledger(ledger: Ledger, warn: Say = silent) -> dict[str, Provider]:
    """The providers `ls` asks: those with live ledger rows must be asked (a missing key
    is worth a warning); the others only if a key is there, to find orphans."""
    wanted = sorted({e.provider for e in ledger.entries()})
    providers = connect_all(wanted, warn)
    providers.update(connect_all([n for n in registry.names() if n not in wanted],
                                 quiet_missing_key=True))
    return providers


def list_all(providers: dict[str, Provider], warn: Say = silent) -> dict[str, list[Instance]]:
    """Each provider's own list, queried concurrently; a failing provider is one warning
    and is left out of the answer (so nothing is concluded from its silence)."""
    def one(item):
        name, prov = item
        try:
            return name, prov.list(), None
        except ProviderError as e:
            return name, None, e

    found: dict[str, list[Instance]] = {}
    if not providers:
        return found
    with ThreadPoolExecutor(max_workers=len(providers)) as pool:
        for name, instances, error in pool.map(one, providers.items()):
            if error is not None:
                warn(f"warning: {error}")
            else:
                found[name] = instances
    return found


# -- listing -----------------------------------------------------------------

@dataclass
class FleetRow:
    name: str
    provider: str
    instance_id: str | None
    status: str
    gpus: str
    price_per_hour: float | None
    uptime_s: float | None
    cost: float | None
    ssh: str | None
    note: str = ""
    entry: LedgerEntry | None = field(default=None, repr=False)
    instance: Instance | None = field(default=None, repr=False)
    stops: str | None = None             # its deadline and watchdog, as `ls` says them

    @property
    def cluster(self) -> str | None:
        return self.entry.cluster if self.entry else None

    @property
    def node_index(self) -> int | None:
        return self.entry.node_index if self.entry and self.entry.cluster else None

    @property
    def member(self) -> str | None:
        """'train:0 (head)', 'train:1': its place in its cluster as `gpubench ssh` takes it."""
        if self.cluster is None:
            return None
        return f"{self.cluster}:{self.node_index}" + (" (head)" if self.node_index == 0 else "")

    def as_row(self) -> dict:
        entry = self.entry
        return {"cluster": self.cluster, "node_index": self.node_index, "member": self.member,
                "name": self.name, "provider": self.provider, "instance_id": self.instance_id,
                "status": self.status, "gpus": self.gpus, "price_per_hour": self.price_per_hour,
                "uptime": _duration(self.uptime_s), "uptime_s": self.uptime_s,
                "cost": None if self.cost is None else round(self.cost, 4),
                "billed_cost": entry.billed_cost if entry else None, "ssh": self.ssh,
                "stops": self.stops, "deadline_at": entry.deadline_at if entry else None,
                "watchdog": entry.watchdog if entry else None, "note": self.note}


def _duration(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    s = int(seconds)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def _gpus(count, name) -> str:
    return f"{count or '?'}x {name or '?'}"


def reconcile(ledger: Ledger, providers: dict[str, Provider], include_done: bool = False,
              warn: Say = silent) -> list[FleetRow]:
    listed = list_all(providers, warn)
    now = time.time()
    matched: set[tuple[str, str]] = set()
    rows: list[FleetRow] = []
    for entry in ledger.entries(include_done=include_done):
        inst, note = None, entry.note or ""
        if entry.active and entry.provider in listed:
            try:
                sighting = sightings.check(ledger, entry, providers[entry.provider],
                                           listed[entry.provider], now)
                entry, inst, note = sighting.entry, sighting.instance, sighting.note
            except BadTransitionError:
                # Another process (a provision, a down) moved the row meanwhile: its word stands.
                entry = ledger.get(entry.row_id)
                note = entry.note or ""
        elif entry.active:
            note = "provider not checked"
        if inst is not None:
            matched.add((entry.provider, inst.instance_id))
        if not include_done and not entry.active:
            continue
        rows.append(FleetRow(
            name=entry.name, provider=entry.provider, instance_id=entry.instance_id,
            status=(inst.raw_status or inst.status.value) if inst else entry.status.value,
            gpus=_gpus(entry.gpu_count, entry.gpu_name), price_per_hour=entry.price_per_hour,
            uptime_s=entry.uptime_s(now), cost=entry.cost(now),
            ssh=entry.ssh_alias if entry.active and entry.may_answer_ssh else None,
            note=note, entry=entry, instance=inst,
            stops=watchdog.deadline_of(entry).describe(now) if entry.active else None))
    for provider, instances in listed.items():
        for inst in instances:
            key = (provider, inst.instance_id)
            if key in matched or not inst.launched_by_gpubench:   # by name or by tag
                continue
            if inst.status is InstanceState.TERMINATED:
                continue
            if ledger.by_instance(provider, inst.instance_id) is not None and not include_done:
                # In the ledger as done, yet listed: a terminate that did not take.
                note = "ledger says terminated; still listed"
            else:
                note = "not in ledger (orphan)"
            rows.append(FleetRow(
                name=inst.gpubench_name, provider=provider, instance_id=inst.instance_id,
                status=inst.raw_status or inst.status.value, gpus=_gpus(inst.gpu_count, inst.gpu_name),
                price_per_hour=inst.price_per_hour, uptime_s=None, cost=None, ssh=None,
                note=note, instance=inst))
    return rows


def grouped(rows: list[FleetRow]) -> list[FleetRow]:
    """The rows with each cluster's members together, head first, where the cluster's
    first row stood; other rows keep their order."""
    order: dict[object, int] = {}
    for i, row in enumerate(rows):
        order.setdefault(row.cluster if row.cluster is not None else ("row", i), i)
    def key(item):
        i, row = item
        if row.cluster is None:
            return (order[("row", i)], 0, i)
        return (order[row.cluster], row.node_index if row.node_index is not None else 1 << 30, i)
    return [row for _, row in sorted(enumerate(rows), key=key)]


def total_cost(rows: list[FleetRow]) -> float:
    """Dollars spent so far by the machines the rows show (price x time, from the ledger)."""
    return sum(r.cost or 0.0 for r in rows)


# -- deadlines -----------------------------------------------------------------

TERMINATE_DEADLINE_S = 180.0


def settle_deadlines(ledger: Ledger, providers: dict[str, Provider] | None = None,
                     say: Say = silent, now: float | None = None) -> list[DownResult]:
    """Terminate (until confirmed) every live machine past its --max-hours deadline,
    saying so, unless a gpubench run is active on it then (it is left, and asked
    again by the next command). A machine that halted itself still bills, and a
    watchdog may never have started: this is the ledger's side of the deadline.
    Providers are connected only when some row is due (`providers`: already connected)."""
    now = time.time() if now is None else now
    due = [e for e in ledger.entries() if e.past_deadline(now) and e.instance_id]
    if not due:
        return []
    if providers is None:
        providers = connect_all(sorted({e.provider for e in due}), say)
    results = []
    for entry in due:
        provider = providers.get(entry.provider)
        relation = accounts.relation(entry, provider) if provider is not None else Relation.OTHER
        if relation is Relation.OTHER:
            continue        # `ls` says why (no key, another account); nothing can be done here
        try:
            result = _settle_one(ledger, entry, provider, relation, say)
        except BadTransitionError:
            continue        # another process moved the row meanwhile: its word stands
        except ProviderError as e:
            say(f"warning: {entry.name} is past its deadline; {e}")
            continue
        if result is not None:
            results.append(result)
    return results


def _settle_one(ledger: Ledger, entry: LedgerEntry, provider: Provider, relation: Relation,
                say: Say) -> DownResult | None:
    when = time.strftime("%H:%M", time.localtime(entry.deadline_at))
    if relation is Relation.SAME and _gone(provider, entry.instance_id):
        entry = ledger.mark(entry.row_id, LedgerStatus.TERMINATED, "terminated_confirmed_at",
                            note=f"stopped itself at its deadline ({when}); "
                                 f"{entry.provider} confirms it gone")
        say(f"{entry.name} stopped itself at its deadline ({when}); {entry.provider} confirms it gone")
        return DownResult(entry.name, entry.provider, entry.instance_id, True, entry.cost(),
                          "stopped itself")
    if watchdog.run_active(entry):
        say(f"{entry.name} is past its deadline ({when}) but a gpubench run is active on it: "
            f"left running")
        return None
    say(f"{entry.name} passed its deadline ({when}, --max-hours) with no gpubench run active: "
        f"terminating {entry.provider} {entry.instance_id}")
    result = terminate_and_confirm(ledger, entry, provider, TERMINATE_DEADLINE_S, say,
                                   note=f"past its deadline ({when}): terminated")
    say(f"{entry.name}: terminated (confirmed by {entry.provider})" if result.gone else
        f"warning: {entry.name}: NOT confirmed gone: {result.message}")
    return result


def _gone(provider: Provider, instance_id: str) -> bool:
    """The row's own account says the instance is no more (not found, or terminated)."""
    try:
        return provider.get(instance_id).status is InstanceState.TERMINATED
    except NotFoundError:
        return True
