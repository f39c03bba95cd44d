"""The instance ledger: every instance gpubench ever asked for, in sqlite.

A row is written *before* the launch call (status "requested", no instance id) and
completed after it, so a process killed in between still leaves a row that
`gpubench ls` resolves by name against the provider's own list. Every phase has its
own timestamp, which is what time-to-ready per provider is computed from.

Every row records the account it was launched under (endpoint, a fingerprint of the
API key, the provider's account id where it gives one; never the key), because a
provider's list speaks only for one account. terminated_confirmed_at is stamped only
once that account's provider says the instance is gone (not found, or terminated),
never on the terminate call's own answer nor on a list that leaves it out.

A row rented with --max-hours carries its deadline (deadline_at) and how its machine
stops itself then (watchdog, see watchdog.py); every later command acts on a row past
it, since a machine that only halted (Lambda) still bills.

Statuses (gpubench.store.status): requested -> launched -> running -> ready ->
terminating -> terminated, "missing" (left out of its account's list, not confirmed
gone), or "unconfirmed" (terminate answered but the instance is still there). `mark`
and `update` refuse a change of status that the status table does not allow.

A cluster joined by a provider's overlay network (Vast.ai) keeps the overlay's id on
every member's row (overlay_id), and when the overlay was confirmed gone
(overlay_gone_at): it is deleted only after every member is.

After teardown the row keeps the provider's billed amount beside the estimate
(billed_cost, where the provider reports it: RunPod, Vast.ai; see Provider.billed_cost).

Ledger files written before accounts were recorded gain the new columns when opened;
their rows have no account ("account unknown").
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass, fields
from pathlib import Path

from gpubench import paths
from gpubench.errors import GpubenchError
from gpubench.store.status import ACTIVE, BadTransitionError, LedgerStatus, sources
from gpubench.providers.common import Account

# How long after a row is written its launch call may still be going on (in this or
# another process) when the row does not say the call ended: the call's own time limit
# (the HTTP timeout, 30 s by default, and a retry after a refused connection or a 429)
# and the moment a provider takes to list what it just created. Until then a list
# without the instance proves nothing; after it, a full list of the row's account does.
LAUNCH_IN_FLIGHT_S = 60.0
PHASES = ("requested_at", "created_at", "running_at", "ssh_ready_at",
          "terminate_requested_at", "terminated_confirmed_at")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS instances (
    row_id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL,
    provider TEXT NOT NULL,
    instance_id TEXT,
    provider_name TEXT NOT NULL,
    status TEXT NOT NULL,
    offer_id TEXT,
    instance_type TEXT,
    region TEXT,
    gpu_name TEXT,
    gpu_count INTEGER,
    price_per_hour REAL,
    disk_gb INTEGER,
    image TEXT,
    ssh_host TEXT,
    ssh_port INTEGER,
    ssh_user TEXT,
    key_path TEXT,
    requested_at REAL,
    created_at REAL,
    running_at REAL,
    ssh_ready_at REAL,
    terminate_requested_at REAL,
    terminated_confirmed_at REAL,
    note TEXT,
    account_endpoint TEXT,
    key_fingerprint TEXT,
    account_id TEXT,
    launch_ended_at REAL,
    deadline_at REAL,
    watchdog TEXT,
    billed_cost REAL,
    cluster TEXT,
    node_index INTEGER,
    private_ip TEXT,
    port_map TEXT,
    gate TEXT,
    provider_cluster_id TEXT,
    overlay_id TEXT,
    overlay_gone_at REAL,
    volume TEXT
);
CREATE INDEX IF NOT EXISTS instances_name ON instances(name);
"""
# Columns added after the first ledger files were written: ALTERed into old files.
_ADDED_COLUMNS = (("account_endpoint", "TEXT"), ("key_fingerprint", "TEXT"),
                  ("account_id", "TEXT"), ("launch_ended_at", "REAL"),
                  ("deadline_at", "REAL"), ("watchdog", "TEXT"), ("billed_cost", "REAL"),
                  ("cluster", "TEXT"), ("node_index", "INTEGER"), ("private_ip", "TEXT"),
                  ("port_map", "TEXT"), ("gate", "TEXT"), ("provider_cluster_id", "TEXT"),
                  ("overlay_id", "TEXT"), ("overlay_gone_at", "REAL"), ("volume", "TEXT"))


class LedgerError(GpubenchError):
    pass


class UnknownInstanceError(LedgerError):
    pass


@dataclass
class LedgerEntry:
    row_id: int
    name: str                      # the user's name; the provider sees provider_name
    provider: str
    instance_id: str | None
    provider_name: str
    status: LedgerStatus
    offer_id: str | None = None
    instance_type: str | None = None
    region: str | None = None
    gpu_name: str | None = None
    gpu_count: int | None = None
    price_per_hour: float | None = None
    disk_gb: int | None = None
    image: str | None = None
    ssh_host: str | None = None
    ssh_port: int | None = None
    ssh_user: str | None = None
    key_path: str | None = None
    requested_at: float | None = None
    created_at: float | None = None
    running_at: float | None = None
    ssh_ready_at: float | None = None
    terminate_requested_at: float | None = None
    terminated_confirmed_at: float | None = None
    note: str | None = None
    account_endpoint: str | None = None   # the account it was launched under (see Account)
    key_fingerprint: str | None = None
    account_id: str | None = None
    launch_ended_at: float | None = None  # the launch call came back (with an id or not)
    deadline_at: float | None = None      # --max-hours: when the machine must stop (None: never)
    watchdog: str | None = None           # how the machine stops itself, or why it cannot
    billed_cost: float | None = None      # what the provider billed, read after teardown (None: not reported)
    cluster: str | None = None            # the cluster it is a member of (provision --nodes); None: alone
    node_index: int | None = None         # its place in that cluster, 0 = the head
    private_ip: str | None = None         # its address on the provider's private network, where it has one
    port_map: str | None = None           # JSON {"container port": public port}, where the provider maps ports
    gate: str | None = None               # JSON of the preflight gate's findings on this machine
    provider_cluster_id: str | None = None  # the provider's id of the cluster it was rented in as one
    #                                         (RunPod Instant Clusters); None: rented alone
    overlay_id: str | None = None         # the provider's overlay network joining the cluster's
    #                                       members (Vast.ai), kept on every member's row
    overlay_gone_at: float | None = None  # when the provider's list confirmed that overlay gone
    volume: str | None = None             # the ledger's volume it was rented with (mounted at VOLUME_MOUNT)

    @property
    def active(self) -> bool:
        return self.status.active

    @property
    def gate_facts(self) -> dict:
        """The `gate` column read: the preflight gate's findings and what else was
        measured on the machine (a cluster member's link); {} when none or unreadable."""
        try:
            found = json.loads(self.gate) if self.gate else {}
        except ValueError:
            return {}
        return found if isinstance(found, dict) else {}

    @property
    def account(self) -> Account | None:
        """The account it was launched under; None for a row from before accounts were
        recorded (account unknown)."""
        if not self.key_fingerprint or not self.account_endpoint:
            return None
        return Account(self.provider, self.account_endpoint, self.key_fingerprint, self.account_id)

    @property
    def termination_confirmed(self) -> bool:
        """Terminated on its own account's word. A row that records no account and says
        terminated may have been written off by an older gpubench only because a list
        left it out: it is asked about again before anyone is told it is gone."""
        return self.status is LedgerStatus.TERMINATED and self.key_fingerprint is not None

    @property
    def may_answer_ssh(self) -> bool:
        """Was seen running with an SSH address and is not confirmed gone: worth trying
        to log in to (a missing, terminating or unconfirmed machine may still run)."""
        return (bool(self.ssh_host) and not self.termination_confirmed
                and self.status not in (LedgerStatus.REQUESTED, LedgerStatus.LAUNCHED))

    def boot_status(self) -> LedgerStatus:
        """Where the row stood on the boot path, from its phase stamps: what a missing
        row returns to once it is listed again."""
        if self.ssh_ready_at:
            return LedgerStatus.READY
        if self.running_at:
            return LedgerStatus.RUNNING
        return LedgerStatus.LAUNCHED if self.instance_id else LedgerStatus.REQUESTED

    @property
    def reachable(self) -> bool:
        """Running or ready with an SSH address: what `ls` and `gpubench ssh` take as up
        (see may_answer_ssh for what is still worth trying)."""
        return self.status.reachable and bool(self.ssh_host)

    @property
    def ssh_alias(self) -> str:
        return self.provider_name

    def uptime_s(self, now: float | None = None) -> float | None:
        start = self.created_at or self.requested_at
        if start is None:
            return None
        end = self.terminated_confirmed_at or (now if now is not None else time.time())
        return max(end - start, 0.0)

    def cost(self, now: float | None = None) -> float | None:
        """Dollars so far, estimated: the hourly price times the time since the provider
        created it (billed_cost holds what the provider billed, where it says)."""
        up = self.uptime_s(now)
        if up is None or self.price_per_hour is None or self.instance_id is None:
            return None
        return self.price_per_hour * up / 3600.0

    def past_deadline(self, now: float | None = None) -> bool:
        """A live row whose --max-hours deadline has passed: the next gpubench command
        terminates its machine unless a gpubench run is active on it."""
        now = time.time() if now is None else now
        return self.active and self.deadline_at is not None and now >= self.deadline_at

    def launch_in_flight_s(self, now: float | None = None) -> float:
        """Seconds left during which the launch call may still be going on: 0 once the
        call came back (an id, or an answer that did not say) or LAUNCH_IN_FLIGHT_S
        after the row was written."""
        if self.instance_id or self.launch_ended_at or not self.requested_at:
            return 0.0
        now = time.time() if now is None else now
        return max(self.requested_at + LAUNCH_IN_FLIGHT_S - now, 0.0)


def account_columns(account: Account | None) -> dict:
    """The ledger columns that record `account` (none when it is unknown)."""
    if account is None:
        return {}
    return {"account_endpoint": account.endpoint, "key_fingerprint": account.key_fingerprint,
            "account_id": account.account_id}


_COLUMNS = [f.name for f in fields(LedgerEntry)]
_ACTIVE_TEXT = tuple(s.value for s in ACTIVE)
_ACTIVE_MARKS = ", ".join("?" for _ in ACTIVE)


def open_ledger_file(path: Path | None, schema: str) -> tuple[Path, sqlite3.Connection]:
    """The ledger's sqlite file (the user's, or `path`), its tables of `schema` made where
    missing; autocommit, rows by name. LedgerError in one line when it cannot be opened."""
    path = Path(path) if path else paths.ledger_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        db = sqlite3.connect(path, timeout=10, isolation_level=None, check_same_thread=False)
        db.row_factory = sqlite3.Row
        db.executescript(schema)
    except sqlite3.DatabaseError as e:
        raise LedgerError(f"{path}: cannot open the instance ledger: {e}") from None
    return path, db


def set_columns(db: sqlite3.Connection, path: Path, table: str, columns: list[str], row_id: int,
                values: dict) -> None:
    """Set `values` (only names among `columns`) on row `row_id` of `table` in the ledger
    file at `path`; LedgerError in one line when sqlite refuses."""
    bad = set(values) - set(columns)
    if bad:
        raise ValueError(f"unknown {table} columns: {sorted(bad)}")
    try:
        db.execute(f"UPDATE {table} SET {', '.join(f'{k} = ?' for k in values)} WHERE row_id = ?",
                   [*values.values(), row_id])
    except sqlite3.DatabaseError as e:
        raise LedgerError(f"{path}: {e}") from None


class Ledger:
    """Open with Ledger() for the user's ledger, Ledger(path) elsewhere (tests)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path, self._db = open_ledger_file(path, _SCHEMA)
        try:
            self._migrate()
        except sqlite3.DatabaseError as e:
            raise LedgerError(f"{self.path}: cannot open the instance ledger: {e}") from None

    def _migrate(self) -> None:
        """Add the columns a ledger file from an older gpubench lacks."""
        have = {row["name"] for row in self._db.execute("PRAGMA table_info(instances)")}
        for name, kind in _ADDED_COLUMNS:
            if name in have:
                continue
            try:
                self._db.execute(f"ALTER TABLE instances ADD COLUMN {name} {kind}")
            except sqlite3.OperationalError as e:
                if "duplicate column" not in str(e):   # another process added it first
                    raise

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> "Ledger":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- writing ------------------------------------------------------------
    def begin(self, name: str, provider: str, provider_name: str, account: Account | None = None,
              **values) -> LedgerEntry:
        """The row written before the launch call, under `account` (None: unknown).
        Refuses a name already in use."""
        if self.find_active(name) is not None:
            raise LedgerError(f"an instance named '{name}' is already in the ledger "
                              f"(see 'gpubench ls'; pick another --name)")
        values = {k: v for k, v in values.items() if k in _COLUMNS}
        values.update(account_columns(account))
        values.update(name=name, provider=provider, provider_name=provider_name,
                      status=LedgerStatus.REQUESTED.value, requested_at=time.time())
        cols = ", ".join(values)
        marks = ", ".join("?" for _ in values)
        cur = self._db.execute(f"INSERT INTO instances ({cols}) VALUES ({marks})", list(values.values()))
        return self.get(cur.lastrowid)

    def update(self, row_id: int, **values) -> LedgerEntry:
        """Set columns of one row. A new `status` must be one the row's current status
        leads to (status.TRANSITIONS), else BadTransitionError and nothing is written."""
        bad = set(values) - set(_COLUMNS)
        if bad:
            raise ValueError(f"unknown ledger columns: {sorted(bad)}")
        if not values:
            return self.get(row_id)
        where, params = "row_id = ?", [row_id]
        if "status" in values:
            new = _status(values["status"])
            values["status"] = new.value
            allowed_from = [s.value for s in sources(new)]
            # Checked in the same statement as the write: another process may move the row too.
            where += f" AND status IN ({', '.join('?' for _ in allowed_from)})"
            params += allowed_from
        sets = ", ".join(f"{k} = ?" for k in values)
        cur = self._db.execute(f"UPDATE instances SET {sets} WHERE {where}", [*values.values(), *params])
        entry = self.get(row_id)     # UnknownInstanceError for a row that is not there
        if cur.rowcount == 0:
            raise BadTransitionError(f"ledger row {row_id} ({entry.name}) is {entry.status}; "
                                     f"it cannot become {values['status']}")
        return entry

    def mark(self, row_id: int, status: LedgerStatus | str, phase: str | None = None,
             **values) -> LedgerEntry:
        """Set the status and stamp `phase` (one of PHASES) with the time now."""
        if phase is not None:
            if phase not in PHASES:
                raise ValueError(f"unknown phase {phase}")
            values[phase] = time.time()
        return self.update(row_id, status=status, **values)

    def discard(self, row_id: int) -> None:
        """Remove a row whose launch call was refused: no instance exists for it."""
        self._db.execute("DELETE FROM instances WHERE row_id = ? AND instance_id IS NULL", (row_id,))

    # -- reading ------------------------------------------------------------
    def get(self, row_id: int) -> LedgerEntry:
        row = self._db.execute("SELECT * FROM instances WHERE row_id = ?", (row_id,)).fetchone()
        if row is None:
            raise UnknownInstanceError(f"no ledger row {row_id}")
        return self._entry(row)

    def entries(self, include_done: bool = False) -> list[LedgerEntry]:
        sql = "SELECT * FROM instances"
        if not include_done:
            sql += f" WHERE status IN ({_ACTIVE_MARKS})"
        rows = self._db.execute(sql + " ORDER BY row_id", () if include_done else _ACTIVE_TEXT).fetchall()
        return [self._entry(r) for r in rows]

    def find_active(self, name: str) -> LedgerEntry | None:
        rows = self._db.execute(
            f"SELECT * FROM instances WHERE (name = ? OR provider_name = ?) AND status IN "
            f"({_ACTIVE_MARKS}) ORDER BY row_id DESC LIMIT 1",
            (name, name, *_ACTIVE_TEXT)).fetchone()
        return self._entry(rows) if rows else None

    def find(self, name: str) -> LedgerEntry:
        """The live instance called `name` (or "gpubench-name"); else the newest row of
        that name. Raises UnknownInstanceError with a one-line message."""
        entry = self.find_active(name)
        if entry is not None:
            return entry
        row = self._db.execute(
            "SELECT * FROM instances WHERE name = ? OR provider_name = ? ORDER BY row_id DESC LIMIT 1",
            (name, name)).fetchone()
        if row is None:
            raise UnknownInstanceError(f"no instance named '{name}' in the ledger (see 'gpubench ls')")
        return self._entry(row)

    def cluster_members(self, cluster: str, include_done: bool = False) -> list[LedgerEntry]:
        """The rows of one cluster, head first (by node_index); live ones only unless
        include_done."""
        sql = "SELECT * FROM instances WHERE cluster = ?"
        params: list = [cluster]
        if not include_done:
            sql += f" AND status IN ({_ACTIVE_MARKS})"
            params += _ACTIVE_TEXT
        rows = self._db.execute(sql + " ORDER BY node_index, row_id", params).fetchall()
        return [self._entry(r) for r in rows]

    def overlay_rows(self, provider: str, overlay_id: str) -> list[LedgerEntry]:
        """Every row (done ones too) of the members `overlay_id` joins."""
        rows = self._db.execute("SELECT * FROM instances WHERE provider = ? AND overlay_id = ? ORDER BY "
                                "node_index, row_id", (provider, overlay_id)).fetchall()
        return [self._entry(r) for r in rows]

    def overlays_left(self, cluster: str | None = None) -> list[tuple[str, str]]:
        """(provider, overlay id) of each overlay not yet confirmed gone, of `cluster`
        only where given."""
        sql = "SELECT DISTINCT provider, overlay_id FROM instances WHERE overlay_id IS NOT NULL " \
              "AND overlay_gone_at IS NULL"
        params: list = []
        if cluster is not None:
            sql += " AND cluster = ?"
            params.append(cluster)
        return [(r["provider"], r["overlay_id"]) for r in self._db.execute(sql + " ORDER BY row_id", params)]

    def overlay_gone(self, provider: str, overlay_id: str) -> None:
        """Write the overlay off on every row it is kept on: its provider listed it no more."""
        self._db.execute("UPDATE instances SET overlay_gone_at = ? WHERE provider = ? AND overlay_id = ? "
                         "AND overlay_gone_at IS NULL", (time.time(), provider, overlay_id))

    def by_instance(self, provider: str, instance_id: str) -> LedgerEntry | None:
        row = self._db.execute(
            "SELECT * FROM instances WHERE provider = ? AND instance_id = ? ORDER BY row_id DESC LIMIT 1",
            (provider, instance_id)).fetchone()
        return self._entry(row) if row else None

    def _entry(self, row: sqlite3.Row) -> LedgerEntry:
        values = dict(row)
        try:
            values["status"] = LedgerStatus(values["status"])
        except ValueError:
            raise LedgerError(f"{self.path}: row {values['row_id']} has an unknown status "
                              f"'{values['status']}'") from None
        return LedgerEntry(**values)


def _status(value: LedgerStatus | str) -> LedgerStatus:
    try:
        return LedgerStatus(value)
    except ValueError:
        raise BadTransitionError(f"'{value}' is not a ledger status "
                                 f"({', '.join(s.value for s in LedgerStatus)})") from None
