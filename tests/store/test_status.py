"""Ledger statuses: an enum stored as its text, and only the transitions the table allows."""

from __future__ import annotations

import sqlite3

import pytest

from gpubench.store.ledger import Ledger, LedgerError
from gpubench.store.status import TRANSITIONS, BadTransitionError, LedgerStatus

S = LedgerStatus

# Every change of status the lifecycle makes, and where.
MADE = [
    (S.REQUESTED, S.LAUNCHED),      # provision: the launch answered; ls: recovered by name
    (S.REQUESTED, S.RUNNING),       # ls: recovered by name, already running with an address
    (S.REQUESTED, S.READY),         # a row completed in one step (tests/remote/test_sweep_remote.py)
    (S.REQUESTED, S.TERMINATING),   # down: found by name, terminate sent
    (S.REQUESTED, S.TERMINATED),    # ls/down: the launch never reached the provider
    (S.LAUNCHED, S.RUNNING),        # provision
    (S.LAUNCHED, S.TERMINATING),    # provision: never booted; down
    (S.LAUNCHED, S.TERMINATED),     # ls: not listed, and its account's lookup by id finds nothing
    (S.LAUNCHED, S.MISSING),        # ls: not listed, and the lookup by id got no answer
    (S.RUNNING, S.MISSING),
    (S.READY, S.MISSING),
    (S.MISSING, S.MISSING),         # ls again, still not seen
    (S.MISSING, S.READY),           # ls: seen again, back where it was
    (S.MISSING, S.RUNNING),
    (S.MISSING, S.LAUNCHED),
    (S.MISSING, S.TERMINATING),     # down
    (S.MISSING, S.TERMINATED),      # ls: its account's lookup by id finds nothing
    (S.RUNNING, S.READY),           # provision: SSH answers
    (S.RUNNING, S.TERMINATING),     # provision: SSH never answered; down
    (S.READY, S.TERMINATING),       # down, bench teardown
    (S.READY, S.TERMINATED),        # ls: not listed, and its account's lookup by id finds nothing
    (S.TERMINATING, S.TERMINATED),  # confirmed gone
    (S.TERMINATING, S.UNCONFIRMED), # still listed at the deadline, or terminate failed
    (S.TERMINATING, S.TERMINATING), # down again after an interrupted down
    (S.UNCONFIRMED, S.TERMINATING), # down again
    (S.UNCONFIRMED, S.TERMINATED),  # ls: gone after all (its account says so)
    (S.TERMINATED, S.TERMINATED),   # confirmed by two processes (ls while down waits)
]

REFUSED = [
    (S.TERMINATED, S.REQUESTED), (S.TERMINATED, S.LAUNCHED), (S.TERMINATED, S.RUNNING),
    (S.TERMINATED, S.READY), (S.TERMINATED, S.TERMINATING), (S.TERMINATED, S.UNCONFIRMED),
    (S.READY, S.RUNNING), (S.READY, S.LAUNCHED), (S.RUNNING, S.LAUNCHED), (S.LAUNCHED, S.REQUESTED),
    (S.TERMINATING, S.READY), (S.TERMINATING, S.RUNNING), (S.UNCONFIRMED, S.READY),
    (S.UNCONFIRMED, S.REQUESTED),
    (S.REQUESTED, S.MISSING), (S.TERMINATED, S.MISSING), (S.TERMINATING, S.MISSING),
    (S.UNCONFIRMED, S.MISSING), (S.MISSING, S.REQUESTED),
]


def _row_in(ledger: Ledger, status: LedgerStatus) -> int:
    row = ledger.begin("t", "mem", "gpubench-t")
    ledger._db.execute("UPDATE instances SET status = ? WHERE row_id = ?", (status.value, row.row_id))
    return row.row_id


@pytest.mark.parametrize("current,new", MADE, ids=lambda s: s.value)
def test_the_transitions_the_lifecycle_makes_are_allowed(current, new):
    assert new in TRANSITIONS[current]
    with Ledger() as ledger:
        row_id = _row_in(ledger, current)
        assert ledger.mark(row_id, new).status is new
        assert ledger.update(row_id).status is new


@pytest.mark.parametrize("current,new", REFUSED, ids=lambda s: s.value)
def test_other_transitions_are_refused_and_nothing_is_written(current, new):
    assert new not in TRANSITIONS[current]
    with Ledger() as ledger:
        row_id = _row_in(ledger, current)
        with pytest.raises(BadTransitionError, match=f"is {current.value}; it cannot become {new.value}"):
            ledger.mark(row_id, new, "running_at", note="should not be written")
        with pytest.raises(BadTransitionError):
            ledger.update(row_id, status=new.value, note="should not be written")
        entry = ledger.get(row_id)
    assert entry.status is current and entry.note is None and entry.running_at is None


def test_terminated_is_final_and_only_terminated_is_inactive():
    assert TRANSITIONS[S.TERMINATED] == {S.TERMINATED}
    assert [s for s in S if not s.active] == [S.TERMINATED]
    assert [s for s in S if s.reachable] == [S.RUNNING, S.READY]


def test_an_unknown_status_is_a_typed_error():
    with Ledger() as ledger:
        row_id = _row_in(ledger, S.READY)
        with pytest.raises(BadTransitionError, match="'failed' is not a ledger status"):
            ledger.mark(row_id, "failed")


def test_statuses_are_stored_as_text_and_old_ledgers_read(tmp_path):
    path = tmp_path / "old.sqlite"
    with Ledger(path) as ledger:       # the schema, as every version wrote it
        pass
    db = sqlite3.connect(path)
    db.execute("INSERT INTO instances (name, provider, provider_name, status, instance_id) "
               "VALUES ('a', 'vast', 'gpubench-a', 'ready', '1'), "
               "('b', 'vast', 'gpubench-b', 'terminated', '2')")
    db.commit()
    with Ledger(path) as ledger:
        a = ledger.find("a")
        assert a.status is S.READY and a.status == "ready" and f"{a.status}" == "ready"
        assert [e.name for e in ledger.entries()] == ["a"]
        ledger.mark(a.row_id, S.TERMINATING)
    assert db.execute("SELECT status, typeof(status) FROM instances ORDER BY row_id").fetchall() == \
        [("terminating", "text"), ("terminated", "text")]
    db.execute("UPDATE instances SET status = 'exploded' WHERE name = 'b'")
    db.commit()
    with Ledger(path) as ledger, pytest.raises(LedgerError, match="unknown status 'exploded'"):
        ledger.entries(include_done=True)
