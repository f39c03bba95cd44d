"""What a ledger row can say about its instance, and which changes of status are allowed.

The boot path only moves forward (requested -> launched -> running -> ready), and may
skip ahead: an instance seen running was launched. A launched instance that its own
account's list leaves out, and that a lookup by id could not confirm gone, is
"missing" until it is listed again (back to where it was on the boot path) or
confirmed gone: absence from a list is never proof of termination. From any live
status a terminate can begin (terminating), fail to be confirmed (unconfirmed), or be
confirmed (terminated). Terminated is final: only the provider's confirmation, seen
again by another process, may be written over it.
"""

from __future__ import annotations

import enum

from gpubench.errors import GpubenchError


class LedgerStatus(str, enum.Enum):
    """Stored as its text, so ledger files written before the enum read the same."""

    REQUESTED = "requested"        # row written; the launch call has not answered (yet)
    LAUNCHED = "launched"          # the provider answered with an instance id
    RUNNING = "running"            # the provider says running, with an SSH address
    READY = "ready"                # an SSH login worked
    MISSING = "missing"            # not in its account's list; not confirmed gone either
    TERMINATING = "terminating"    # terminate sent; waiting for the provider to drop it
    UNCONFIRMED = "unconfirmed"    # terminate sent, the provider still lists it
    TERMINATED = "terminated"      # the provider no longer has it

    def __str__(self) -> str:      # f"{status}" is the word, on every Python version
        return self.value

    __format__ = str.__format__

    @property
    def active(self) -> bool:
        """The instance may exist (and bill)."""
        return self is not LedgerStatus.TERMINATED

    @property
    def reachable(self) -> bool:
        """The instance has an SSH address worth writing into ssh_config."""
        return self in (LedgerStatus.RUNNING, LedgerStatus.READY)


BOOT_PATH = (LedgerStatus.REQUESTED, LedgerStatus.LAUNCHED, LedgerStatus.RUNNING, LedgerStatus.READY)
TAKING_DOWN = (LedgerStatus.TERMINATING, LedgerStatus.UNCONFIRMED, LedgerStatus.TERMINATED)
ACTIVE = tuple(s for s in LedgerStatus if s.active)


#: The statuses a row leaves for "missing", and may come back to once listed again.
MAY_GO_MISSING = BOOT_PATH[1:]


def _allowed() -> dict[LedgerStatus, frozenset[LedgerStatus]]:
    table = {}
    for status in LedgerStatus:
        if status in BOOT_PATH:
            onward = BOOT_PATH[BOOT_PATH.index(status):] + TAKING_DOWN
            if status in MAY_GO_MISSING:
                onward += (LedgerStatus.MISSING,)
        elif status is LedgerStatus.MISSING:
            onward = MAY_GO_MISSING + (LedgerStatus.MISSING,) + TAKING_DOWN
        elif status.active:
            onward = TAKING_DOWN
        else:
            onward = (LedgerStatus.TERMINATED,)
        table[status] = frozenset(onward)
    return table


#: status -> the statuses a row in it may be marked with next (itself included: a
#: phase seen again, e.g. a second `down` after an unconfirmed terminate).
TRANSITIONS: dict[LedgerStatus, frozenset[LedgerStatus]] = _allowed()


class BadTransitionError(GpubenchError):
    """A ledger row asked to move to a status its current one does not lead to."""


def allowed(current: LedgerStatus, new: LedgerStatus) -> bool:
    return new in TRANSITIONS[current]


def sources(new: LedgerStatus) -> tuple[LedgerStatus, ...]:
    """The statuses from which a row may be marked `new`."""
    return tuple(s for s in LedgerStatus if new in TRANSITIONS[s])


# -- one vocabulary for `ls` -------------------------------------------------------

#: An instance the ledger has no row for (an orphan), in the ledger's words, from the
#: provider's state as the adapters share it (providers.common.InstanceState values):
#: whatever the provider still has and is not taking down counts as launched.
FROM_INSTANCE_STATE: dict[str, LedgerStatus] = {
    "pending": LedgerStatus.LAUNCHED,
    "running": LedgerStatus.RUNNING,
    "stopped": LedgerStatus.LAUNCHED,
    "failed": LedgerStatus.LAUNCHED,
    "unknown": LedgerStatus.LAUNCHED,
    "terminating": LedgerStatus.TERMINATING,
    "terminated": LedgerStatus.TERMINATED,
}


def listing_words(entry, instance) -> tuple[LedgerStatus, str | None]:
    """(status, the provider's own word) for a row of `ls`: the ledger row's status
    where there is a row (reconciled with the provider just before), else the
    orphan's state mapped by FROM_INSTANCE_STATE; the provider's word as it said it
    (Lambda's `active`, RunPod's `RUNNING`), None when it was not asked or did not
    list the instance."""
    said = (instance.raw_status or str(instance.status.value)) if instance is not None else None
    if entry is not None:
        return entry.status, said
    state = str(instance.status.value) if instance is not None else "unknown"
    return FROM_INSTANCE_STATE.get(state, LedgerStatus.LAUNCHED), said
