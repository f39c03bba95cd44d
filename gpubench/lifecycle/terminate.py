"""Taking an instance down, and knowing it is gone.

`terminate_confirmed` does not trust a terminate call's answer: it polls until the
provider stops listing the instance, re-sending terminate a bounded number of times.
`terminate_and_confirm` is the one way a ledger row is taken down (provision's
discarded instances, `down`, bench teardown): mark terminating, terminate until
confirmed, mark terminated or unconfirmed, forget the host key of what is gone.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from gpubench.lifecycle import keys
from gpubench.lifecycle.ledger import Ledger, LedgerEntry
from gpubench.lifecycle.status import LedgerStatus
from gpubench.lifecycle.waiting import pause
from gpubench.providers.common import Instance, InstanceState, NotFoundError, Provider, ProviderError

MAX_TERMINATE_CALLS = 4
# How long `down` looks for a fresh "requested" row's instance by name before leaving it.
FIND_BY_NAME_S = 60.0

Say = Callable[[str], None]


def _silent(message: str) -> None:
    pass


@dataclass
class DownResult:
    """What became of one instance that was taken down."""

    name: str
    provider: str
    instance_id: str | None
    gone: bool                 # the provider confirmed it no longer has it
    cost: float | None         # the whole instance's, from the ledger; None when unknown
    message: str               # "terminated", or why it is not confirmed gone
    reached: bool = True       # False: no provider to ask (no API key), nothing was tried


# -- the provider side ---------------------------------------------------------

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
    (gone, why not). Terminate is re-sent when the instance shows no sign of going;
    a final error (bad key, no credit) is raised, since no later call will do better."""
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
            except ProviderError as e:
                if e.final:
                    raise
                # It may or may not have taken: poll, and send it again unless it shows going.
                failed += 1
                failure = str(e)
                send_failed = True
            send = False
            quiet_polls = 0
        pause(deadline, poll_s)
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


# -- with the ledger -------------------------------------------------------------

def terminate_and_confirm(ledger: Ledger, entry: LedgerEntry, provider: Provider, deadline_s: float,
                          say: Say = _silent, note: str | None = None) -> DownResult:
    """Take down the ledger row's instance (it must have an instance id). The row ends
    terminated (with `note`) once the provider confirms, else unconfirmed with why."""
    instance_id = entry.instance_id
    entry = ledger.mark(entry.row_id, LedgerStatus.TERMINATING, "terminate_requested_at")
    try:
        gone, why = terminate_confirmed(provider, instance_id, deadline_s, say)
    except Exception as e:
        ledger.mark(entry.row_id, LedgerStatus.UNCONFIRMED, note=f"terminate failed: {e}"[:200])
        raise
    if not gone:
        entry = ledger.mark(entry.row_id, LedgerStatus.UNCONFIRMED, note=why)
        return DownResult(entry.name, entry.provider, instance_id, False, entry.cost(), why)
    entry = ledger.mark(entry.row_id, LedgerStatus.TERMINATED, "terminated_confirmed_at", note=note)
    keys.forget_host(entry.ssh_host, entry.ssh_port)
    return DownResult(entry.name, entry.provider, instance_id, True, entry.cost(), "terminated")


def _find_by_name(provider: Provider, entry: LedgerEntry, wait_s: float
                  ) -> tuple[Instance | None, bool, str]:
    """(the instance named like `entry`, whether its absence is final, why not found).
    A provider may list a new instance only some time after the launch call, so the
    list is polled for up to `wait_s`, or until the request is stale."""
    deadline = time.monotonic() + wait_s
    while True:
        stale = entry.request_is_stale()
        why = f"{provider.name} does not list {entry.provider_name} yet; the launch may still show up"
        try:
            inst = next((i for i in provider.list() if i.name == entry.provider_name
                         and i.status is not InstanceState.TERMINATED), None)
        except ProviderError as e:
            if e.final:
                raise
            inst, stale, why = None, False, f"cannot list {provider.name} to find it: {e}"
        if inst is not None or stale or time.monotonic() >= deadline:
            return inst, stale, why
        pause(deadline)


def take_down_entry(ledger: Ledger, entry: LedgerEntry, provider: Provider, deadline_s: float,
                    say: Say = _silent, find_s: float | None = None) -> DownResult:
    """Terminate the ledger row's instance and confirm it. A row whose launch answer was
    lost is looked for by name for up to `find_s` (default FIND_BY_NAME_S) first."""
    if not entry.instance_id:
        inst, stale, why = _find_by_name(provider, entry, FIND_BY_NAME_S if find_s is None else find_s)
        if inst is None and stale:
            ledger.mark(entry.row_id, LedgerStatus.TERMINATED, "terminated_confirmed_at",
                        note="launch never reached the provider")
            return DownResult(entry.name, entry.provider, None, True, None,
                              "nothing to terminate: the provider never created it")
        if inst is None:
            # A fresh launch may not be listed yet: absence proves nothing, so the row
            # stays 'requested' and 'ls' keeps looking for it by name.
            ledger.update(entry.row_id, note=why[:200])
            return DownResult(entry.name, entry.provider, None, False, None, why)
        entry = ledger.update(entry.row_id, instance_id=inst.instance_id, created_at=entry.requested_at)
    return terminate_and_confirm(ledger, entry, provider, deadline_s, say)


def take_down_instance(instance: Instance, provider: Provider, deadline_s: float,
                       say: Say = _silent) -> DownResult:
    """Terminate an instance the ledger does not have (an orphan) and confirm it."""
    gone, why = terminate_confirmed(provider, instance.instance_id, deadline_s, say)
    if gone:
        keys.forget_host(instance.ssh_host, instance.ssh_port)
    return DownResult(instance.name, instance.provider, instance.instance_id, gone, None,
                      "terminated" if gone else why)
