"""Taking an instance down, and knowing it is gone.

`terminate_confirmed` does not trust a terminate call's answer: it polls until the
provider no longer has the instance, re-sending terminate with a growing gap until
the deadline. `terminate_and_confirm` is the one way a ledger row is taken down
(provision's discarded instances, `down`, bench teardown): mark terminating,
terminate until confirmed, mark terminated or unconfirmed, forget the host key of
what is gone. `take_down_entry` first asks the row's own account about it: a row of
another account is left alone, a row written off without its account's word is
looked up again, and a row whose launch answer was lost is found by name.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from gpubench.lifecycle import accounts, keys, sightings
from gpubench.lifecycle.accounts import Relation
from gpubench.store.ledger import Ledger, LedgerEntry, account_columns
from gpubench.store.status import LedgerStatus
from gpubench.lifecycle.waiting import Reminder, Say, pause, silent
from gpubench.providers.common import Instance, InstanceState, NotFoundError, Provider, ProviderError

# Terminate is sent again after this many polls that show no sign of the instance
# going; the gap doubles after each re-send, up to RESEND_MAX_POLLS, until the deadline.
RESEND_AFTER_POLLS = 3
RESEND_MAX_POLLS = 15
# How long a row whose launch answer was lost is looked for by name when the provider
# cannot be listed, once its launch call can no longer be going on.
LIST_RETRY_S = 10.0

@dataclass
class DownResult:
    """What became of one instance that was taken down."""

    name: str
    provider: str
    instance_id: str | None
    gone: bool                 # the provider confirmed it no longer has it
    cost: float | None         # the whole instance's, from the ledger; None when unknown
    message: str               # "terminated", or why it is not confirmed gone
    reached: bool = True       # False: nothing was tried (no API key, another account's row)
    billed: float | None = None   # what the provider billed for it, where it reports that


def fetch_billed(provider: Provider, instance_id: str | None, since: float | None) -> float | None:
    """What the provider says it billed for the instance, or None where it does not say
    (no billing call, no record yet, or the call failed: the estimate still stands)."""
    lookup = getattr(provider, "billed_cost", None)
    if lookup is None or not instance_id:
        return None
    try:
        return lookup(instance_id, since=since)
    except ProviderError:
        return None


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


def _state(inst: Instance) -> str:
    return inst.raw_status or inst.status.value


def terminate_confirmed(provider: Provider, instance_id: str, deadline_s: float = 120.0,
                        say: Say = silent, poll_s: float | None = None) -> tuple[bool, str]:
    """Terminate and wait until the provider no longer has the instance. Returns
    (gone, why not). Terminate is sent again when the instance shows no sign of going
    (after RESEND_AFTER_POLLS quiet polls, then a doubling gap) until the deadline; a
    final error (bad key, no credit) is raised, since no later call will do better."""
    deadline = time.monotonic() + deadline_s
    remind = Reminder(say)
    calls = 0          # terminate calls the provider accepted
    failed = 0         # terminate calls that failed (5xx, no answer): sent again
    failure = said = ""
    send, send_failed = True, False
    quiet_polls = 0
    gap = RESEND_AFTER_POLLS
    last: Instance | None = None
    while True:
        if send:
            if send_failed:
                if failure != said:   # once per distinct failure, not once per poll
                    say(f"warning: terminate for {instance_id} failed ({failure}); sending terminate again")
                    said = failure
            elif calls:
                say(f"warning: {provider.name} answered terminate for {instance_id} but it is still "
                    f"{_state(last)}; sending terminate again (call {calls + 1})")
                gap = min(gap * 2, RESEND_MAX_POLLS)
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
            remind(f"waiting for {provider.name} to confirm {instance_id} is gone: cannot ask ({why}); "
                   f"{remind.elapsed:.0f} s of {deadline_s:g} s")
            send = send_failed
            continue
        if last is None:
            return True, ""
        # TERMINATING is progress; anything else after a terminate is a terminate that did not take.
        going = last.status is InstanceState.TERMINATING
        quiet_polls = 0 if going else quiet_polls + 1
        if time.monotonic() >= deadline:
            return False, (f"still {_state(last)} at {provider.name} after "
                           f"{calls} terminate call(s) and {deadline_s:g} s{_failures(failed, failure)}")
        remind(f"waiting for {provider.name} to confirm {instance_id} is gone: still {_state(last)}, "
               f"{remind.elapsed:.0f} s of {deadline_s:g} s")
        send = (send_failed and not going) or quiet_polls >= gap


def _failures(failed: int, failure: str) -> str:
    return f" ({failed} terminate call(s) failed, last: {failure})" if failed else ""


# -- with the ledger -------------------------------------------------------------

def terminate_and_confirm(ledger: Ledger, entry: LedgerEntry, provider: Provider, deadline_s: float,
                          say: Say = silent, note: str | None = None) -> DownResult:
    """Take down the ledger row's instance (it must have an instance id). The row ends
    terminated (with `note`, and the account that confirmed it) once the provider
    confirms, else unconfirmed with why."""
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
    billed = fetch_billed(provider, instance_id, entry.requested_at)
    entry = ledger.mark(entry.row_id, LedgerStatus.TERMINATED, "terminated_confirmed_at", note=note,
                        billed_cost=billed, **accounts.adopt(entry, provider))
    keys.forget_host(entry.ssh_host, entry.ssh_port)
    return DownResult(entry.name, entry.provider, instance_id, True, entry.cost(), "terminated",
                      billed=billed)


def find_by_name(provider: Provider, entry: LedgerEntry, wait_s: float | None = None,
                 say: Say = silent) -> tuple[Instance | None, bool, str]:
    """(the live instance named like `entry`, whether its absence is settled, why not
    found). While the row's launch call may still be going on, absence proves nothing;
    once it cannot be, one full list settles it. The list is polled for up to `wait_s`
    (default: the rest of that time, and LIST_RETRY_S at least for a list that fails),
    saying what it waits for."""
    if wait_s is None:
        wait_s = max(entry.launch_in_flight_s(), LIST_RETRY_S)
    deadline = time.monotonic() + wait_s
    remind = Reminder(say)
    while True:
        in_flight = entry.launch_in_flight_s()   # before the list: a list taken after it counts
        try:
            inst = sightings.named(provider, entry)
        except ProviderError as e:
            if e.final:
                raise
            inst, settled, why = None, False, f"cannot list {provider.name} to find it: {e}"
        else:
            settled = in_flight <= 0
            why = (sightings.never_created(entry, provider) if settled else
                   f"{provider.name} does not list {entry.provider_name} yet; its launch call may "
                   f"still be going on (for up to {in_flight:.0f} s more)")
        if inst is not None or settled or time.monotonic() >= deadline:
            return inst, settled, why
        remind(f"waiting for {provider.name} to list {entry.provider_name}: its launch call may still "
               f"be going on ({in_flight:.0f} s more at most)")
        pause(deadline)


def take_down_entry(ledger: Ledger, entry: LedgerEntry, provider: Provider, deadline_s: float,
                    say: Say = silent, find_s: float | None = None) -> DownResult:
    """Terminate the ledger row's instance and confirm it, having first asked the row's
    own account: nothing is said of a row before its provider is asked.

    - a row launched under another account is left alone (not reached, with why);
    - a row marked terminated without its account's word (by an older gpubench, on a
      list that left it out) is looked up again, and terminated if it is still there;
    - a row whose launch answer was lost is looked for by name, for up to `find_s`
      while its launch call may still be going on (see find_by_name)."""
    if accounts.relation(entry, provider) is Relation.OTHER and not _owned_here(provider, entry):
        return DownResult(entry.name, entry.provider, entry.instance_id, False, entry.cost(),
                          f"{accounts.describe_other(entry, provider)}; {accounts.in_use(entry, provider)} "
                          f"cannot see it: run this again with the key and endpoint it was launched "
                          f"with", reached=False)
    if entry.status is LedgerStatus.TERMINATED:
        return _look_again(ledger, entry, provider, deadline_s, say)
    if not entry.instance_id:
        inst, settled, why = find_by_name(provider, entry, find_s, say)
        if inst is None and settled:
            ledger.mark(entry.row_id, LedgerStatus.TERMINATED, "terminated_confirmed_at",
                        note=why[:300], **accounts.adopt(entry, provider))
            return DownResult(entry.name, entry.provider, None, True, None, f"nothing to terminate: {why}")
        if inst is None:
            # Absence proves nothing yet: the row stays 'requested' and 'ls' keeps looking.
            ledger.update(entry.row_id, note=why[:300])
            return DownResult(entry.name, entry.provider, None, False, None, why)
        entry = ledger.update(entry.row_id, instance_id=inst.instance_id, created_at=entry.requested_at)
    return terminate_and_confirm(ledger, entry, provider, deadline_s, say)


def _owned_here(provider: Provider, entry: LedgerEntry) -> bool:
    """A row of another key at the same endpoint whose id this account finds: the key
    was rotated, and the connected account owns the machine."""
    if not entry.instance_id or not accounts.same_endpoint(entry, provider):
        return False
    try:
        inst = provider.get(entry.instance_id)
    except ProviderError:
        return False
    return inst.status is not InstanceState.TERMINATED


def _look_again(ledger: Ledger, entry: LedgerEntry, provider: Provider, deadline_s: float,
                say: Say) -> DownResult:
    """A row the ledger calls terminated without its account's confirmation: ask the
    provider, and terminate the machine if it is still there."""
    confirmed = account_columns(accounts.identified(provider))
    try:
        inst = (_still_there(provider, entry.instance_id) if entry.instance_id
                else sightings.named(provider, entry))
    except ProviderError as e:
        if e.final:
            raise
        return DownResult(entry.name, entry.provider, entry.instance_id, False, entry.cost(),
                          f"the ledger says terminated, unconfirmed, and {provider.name} cannot be "
                          f"asked now: {e}")
    if inst is None:
        entry = ledger.mark(entry.row_id, LedgerStatus.TERMINATED, "terminated_confirmed_at", **confirmed)
        return DownResult(entry.name, entry.provider, entry.instance_id, True, entry.cost(),
                          f"already terminated ({provider.name} confirms it is gone)")
    say(f"warning: the ledger had {entry.name} as terminated, but {provider.name} still has "
        f"{inst.instance_id} ({_state(inst)}); terminating it")
    gone, why = terminate_confirmed(provider, inst.instance_id, deadline_s, say)
    if not gone:
        ledger.update(entry.row_id, note=why[:300])
        return DownResult(entry.name, entry.provider, inst.instance_id, False, entry.cost(), why)
    entry = ledger.mark(entry.row_id, LedgerStatus.TERMINATED, "terminated_confirmed_at",
                        instance_id=inst.instance_id, note="was still there after being written off; "
                        "terminated", **confirmed)
    keys.forget_host(entry.ssh_host, entry.ssh_port)
    return DownResult(entry.name, entry.provider, inst.instance_id, True, entry.cost(), "terminated")


def take_down_instance(instance: Instance, provider: Provider, deadline_s: float,
                       say: Say = silent) -> DownResult:
    """Terminate an instance the ledger does not have (an orphan) and confirm it."""
    gone, why = terminate_confirmed(provider, instance.instance_id, deadline_s, say)
    if gone:
        keys.forget_host(instance.ssh_host, instance.ssh_port)
    return DownResult(instance.name, instance.provider, instance.instance_id, gone, None,
                      "terminated" if gone else why)
