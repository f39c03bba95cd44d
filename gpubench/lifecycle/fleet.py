"""What is running, and taking it down.

`reconcile` sets the ledger beside each provider's own list: ledger rows get the
provider's current status (a row whose launch answer was lost is matched by its
gpubench- name), and instances named gpubench-* that the ledger lacks are reported
as orphans. `terminate_confirmed` does not trust a terminate call's answer: it
polls until the provider stops listing the instance, re-sending terminate a
bounded number of times.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable

from gpubench.lifecycle import keys
from gpubench.lifecycle.ledger import Ledger, LedgerEntry
from gpubench.providers import registry
from gpubench.providers.common import (NAME_PREFIX, AuthError, Instance, InstanceState,
                                       MissingKeyError, NotFoundError, PaymentError, Provider,
                                       ProviderError)

MAX_TERMINATE_CALLS = 4
# A "requested" row older than this with no instance at the provider never launched.
STALE_REQUEST_S = 600.0
# How long `down` looks for a fresh "requested" row's instance by name before leaving it.
FIND_BY_NAME_S = 60.0

Say = Callable[[str], None]


def _silent(message: str) -> None:
    pass


# -- providers ---------------------------------------------------------------

def connect_all(names: list[str], warn: Say = _silent, quiet_missing_key: bool = False
                ) -> dict[str, Provider]:
    out = {}
    for name in names:
        try:
            out[name] = registry.get(name)
        except MissingKeyError as e:
            if not quiet_missing_key:
                warn(f"warning: {e}")
    return out


def list_all(providers: dict[str, Provider], warn: Say = _silent) -> dict[str, list[Instance]]:
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

    def as_row(self) -> dict:
        return {"name": self.name, "provider": self.provider, "instance_id": self.instance_id,
                "status": self.status, "gpus": self.gpus, "price_per_hour": self.price_per_hour,
                "uptime": _duration(self.uptime_s), "uptime_s": self.uptime_s,
                "cost": None if self.cost is None else round(self.cost, 4), "ssh": self.ssh,
                "note": self.note}


def _duration(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    s = int(seconds)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def _gpus(count, name) -> str:
    return f"{count or '?'}x {name or '?'}"


def reconcile(ledger: Ledger, providers: dict[str, Provider], include_done: bool = False,
              warn: Say = _silent) -> list[FleetRow]:
    listed = list_all(providers, warn)
    now = time.time()
    matched: set[tuple[str, str]] = set()
    rows: list[FleetRow] = []
    for entry in ledger.entries(include_done=include_done):
        inst = None
        instances = listed.get(entry.provider)
        if instances is not None and entry.active:
            inst = _match(entry, instances)
            entry = _update_from_provider(ledger, entry, inst, now)
        if inst is not None:
            matched.add((inst.provider, inst.instance_id))
        if not include_done and not entry.active:
            continue
        note = entry.note or ""
        if entry.active and entry.provider not in listed:
            note = "provider not checked"
        rows.append(FleetRow(
            name=entry.name, provider=entry.provider, instance_id=entry.instance_id,
            status=(inst.raw_status or inst.status.value) if inst else entry.status,
            gpus=_gpus(entry.gpu_count, entry.gpu_name), price_per_hour=entry.price_per_hour,
            uptime_s=entry.uptime_s(now), cost=entry.cost(now),
            ssh=entry.ssh_alias if entry.status in ("running", "ready") else None,
            note=note, entry=entry, instance=inst))
    for provider, instances in listed.items():
        for inst in instances:
            key = (provider, inst.instance_id)
            if key in matched or not inst.name.startswith(NAME_PREFIX):
                continue
            if inst.status is InstanceState.TERMINATED:
                continue
            if ledger.by_instance(provider, inst.instance_id) is not None and not include_done:
                # In the ledger as done, yet listed: a terminate that did not take.
                note = "ledger says terminated; still listed"
            else:
                note = "not in ledger (orphan)"
            rows.append(FleetRow(
                name=inst.name[len(NAME_PREFIX):], provider=provider, instance_id=inst.instance_id,
                status=inst.raw_status or inst.status.value, gpus=_gpus(inst.gpu_count, inst.gpu_name),
                price_per_hour=inst.price_per_hour, uptime_s=None, cost=None, ssh=None,
                note=note, instance=inst))
    return rows


def _match(entry: LedgerEntry, instances: list[Instance]) -> Instance | None:
    if entry.instance_id:
        return next((i for i in instances if i.instance_id == entry.instance_id), None)
    # The launch answer never reached the ledger: find it by its provider-side name.
    return next((i for i in instances if i.name == entry.provider_name
                 and i.status is not InstanceState.TERMINATED), None)


def _update_from_provider(ledger: Ledger, entry: LedgerEntry, inst: Instance | None,
                          now: float) -> LedgerEntry:
    if inst is None:
        if entry.instance_id:
            return ledger.mark(entry.row_id, "terminated", "terminated_confirmed_at",
                               note="no longer listed by the provider")
        if entry.requested_at and now - entry.requested_at > STALE_REQUEST_S:
            return ledger.mark(entry.row_id, "terminated", "terminated_confirmed_at",
                               note="launch never reached the provider")
        return entry
    values = {}
    if not entry.instance_id:
        values.update(instance_id=inst.instance_id, status="launched", note="recovered by name",
                      created_at=entry.requested_at)
    if inst.status is InstanceState.TERMINATED:
        return ledger.mark(entry.row_id, "terminated", "terminated_confirmed_at", **values)
    if inst.ssh_host and not entry.ssh_host:
        values.update(ssh_host=inst.ssh_host, ssh_port=inst.ssh_port, ssh_user=inst.ssh_user)
        if inst.status is InstanceState.RUNNING and entry.status in ("requested", "launched"):
            values.update(status="running", running_at=now)
    return ledger.update(entry.row_id, **values) if values else entry


# -- terminating -------------------------------------------------------------

def _still_there(provider: Provider, instance_id: str) -> Instance | None:
    """The instance if the provider still has it (and it is not terminated)."""
    try:
        inst = provider.get(instance_id)
    except NotFoundError:
        inst = None
    if inst is not None and inst.status is not InstanceState.TERMINATED:
        return inst
    # get() says gone: make sure the list agrees (a lying terminate can fool one of them).
    listed = next((i for i in provider.list() if i.instance_id == instance_id), None)
    if listed is not None and listed.status is not InstanceState.TERMINATED:
        return listed
    return None


def terminate_confirmed(provider: Provider, instance_id: str, deadline_s: float = 120.0,
                        say: Say = _silent, poll_s: float | None = None) -> tuple[bool, str]:
    """Terminate and wait until the provider no longer has the instance. Returns
    (gone, why not). Terminate is re-sent when the instance shows no sign of going."""
    from gpubench.lifecycle.provision import poll_interval

    poll = poll_s if poll_s is not None else poll_interval()
    deadline = time.monotonic() + deadline_s
    calls = 0          # terminate calls the provider accepted
    failed = 0         # terminate calls that failed (5xx, no answer): sent again
    failure = said = ""
    send, send_failed = True, False
    quiet_polls = 0
    last: Instance | None = None
    while True:
        if send:
            if send_failed:
                if failure != said:   # once per distinct failure, not once per poll
                    say(f"warning: terminate for {instance_id} failed ({failure}); sending terminate again")
                    said = failure
            elif calls:
                say(f"warning: {provider.name} answered terminate for {instance_id} but it is still "
                    f"{last.raw_status or last.status.value}; sending terminate again")
            try:
                provider.terminate(instance_id)
                calls += 1
                send_failed = False
            except NotFoundError:
                calls += 1      # already gone; confirmed below
                send_failed = False
            except (AuthError, PaymentError):
                raise           # no later call will do better
            except ProviderError as e:
                # It may or may not have taken: poll, and send it again unless it shows going.
                failed += 1
                failure = str(e)
                send_failed = True
            send = False
            quiet_polls = 0
        time.sleep(min(poll, max(deadline - time.monotonic(), 0.0)))
        try:
            last = _still_there(provider, instance_id)
        except ProviderError as e:
            last, why = None, str(e)
            if time.monotonic() >= deadline:
                return False, f"cannot confirm: {why}{_failures(failed, failure)}"
            send = send_failed
            continue
        if last is None:
            return True, ""
        # TERMINATING is progress; anything else after a terminate is a terminate that did not take.
        going = last.status is InstanceState.TERMINATING
        quiet_polls = 0 if going else quiet_polls + 1
        if time.monotonic() >= deadline:
            return False, (f"still {last.raw_status or last.status.value} at {provider.name} after "
                           f"{calls} terminate call(s) and {deadline_s:g} s{_failures(failed, failure)}")
        send = (send_failed and not going) or (quiet_polls >= 3 and calls < MAX_TERMINATE_CALLS)


def _failures(failed: int, failure: str) -> str:
    return f" ({failed} terminate call(s) failed, last: {failure})" if failed else ""


@dataclass
class DownResult:
    name: str
    provider: str
    instance_id: str | None
    gone: bool
    cost: float | None
    message: str


def _find_by_name(provider: Provider, entry: LedgerEntry, wait_s: float
                  ) -> tuple[Instance | None, bool, str]:
    """(the instance named like `entry`, whether its absence is final, why not found).
    A provider may list a new instance only some time after the launch call, so the
    list is polled for up to `wait_s`, or until the request is STALE_REQUEST_S old."""
    from gpubench.lifecycle.provision import poll_interval

    deadline = time.monotonic() + wait_s
    while True:
        stale = bool(entry.requested_at) and time.time() - entry.requested_at > STALE_REQUEST_S
        why = f"{provider.name} does not list {entry.provider_name} yet; the launch may still show up"
        try:
            inst = next((i for i in provider.list() if i.name == entry.provider_name
                         and i.status is not InstanceState.TERMINATED), None)
        except (AuthError, PaymentError):
            raise
        except ProviderError as e:
            inst, stale, why = None, False, f"cannot list {provider.name} to find it: {e}"
        if inst is not None or stale or time.monotonic() >= deadline:
            return inst, stale, why
        time.sleep(min(poll_interval(), max(deadline - time.monotonic(), 0.01)))


def down_entry(ledger: Ledger, entry: LedgerEntry, provider: Provider, deadline_s: float,
               say: Say = _silent, find_s: float | None = None) -> DownResult:
    """Terminate the ledger row's instance and confirm it. A row whose launch answer was
    lost is looked for by name for up to `find_s` (default FIND_BY_NAME_S) first."""
    instance_id = entry.instance_id
    if not instance_id:   # launch answer lost: look for it by name
        inst, stale, why = _find_by_name(provider, entry, FIND_BY_NAME_S if find_s is None else find_s)
        if inst is None and stale:
            ledger.mark(entry.row_id, "terminated", "terminated_confirmed_at",
                        note="launch never reached the provider")
            return DownResult(entry.name, entry.provider, None, True, None,
                              "nothing to terminate: the provider never created it")
        if inst is None:
            # A fresh launch may not be listed yet: absence proves nothing, so the row
            # stays 'requested' and 'ls' keeps looking for it by name.
            ledger.update(entry.row_id, note=why[:200])
            return DownResult(entry.name, entry.provider, None, False, None, why)
        instance_id = inst.instance_id
        entry = ledger.update(entry.row_id, instance_id=instance_id, created_at=entry.requested_at)
    entry = ledger.mark(entry.row_id, "terminating", "terminate_requested_at")
    gone, why = terminate_confirmed(provider, instance_id, deadline_s, say)
    if not gone:
        ledger.mark(entry.row_id, "unconfirmed", note=why)
        return DownResult(entry.name, entry.provider, instance_id, False, entry.cost(), why)
    entry = ledger.mark(entry.row_id, "terminated", "terminated_confirmed_at", note=None)
    keys.forget_host(entry.ssh_host, entry.ssh_port)
    return DownResult(entry.name, entry.provider, instance_id, True, entry.cost(), "terminated")


def down_orphan(instance: Instance, provider: Provider, deadline_s: float, say: Say = _silent) -> DownResult:
    gone, why = terminate_confirmed(provider, instance.instance_id, deadline_s, say)
    keys.forget_host(instance.ssh_host, instance.ssh_port)
    return DownResult(instance.name, instance.provider, instance.instance_id, gone, None,
                      "terminated" if gone else why)
