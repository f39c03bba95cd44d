"""The mock's persistent state: instances, SSH keys and counters in one sqlite file.

Instances are kept as JSON documents (one dataclass, provider-specific request fields in
`extra`) so that the three provider modules can share one store. Every call takes one lock:
the HTTP server answers requests on many threads.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from gpubench.errors import GpubenchError

# Life phases shared by every provider; each API maps them to its own status words.
PENDING = "pending"        # launched, not yet booted
RUNNING = "running"        # booted; sshd started (unless ssh-refuses)
DEAD = "dead"              # died mid-run (preempted / outbid / ERROR)
STOPPED = "stopped"        # stopped by the user (RunPod EXITED, Vast stopped)


class MockStateError(GpubenchError):
    """The --state directory cannot be used."""


@dataclass
class MockInstance:
    provider: str
    id: str
    name: str
    offer_key: str            # the capacity slot it occupies (see catalog.py)
    units: int                # how much of that slot it uses
    gpu_name: str             # the provider's own spelling
    gpu_count: int
    price_per_hour: float     # whole machine, USD
    region: str
    created_at: float
    ready_at: float           # when booting ends
    phase: str = PENDING
    ssh_port: int = 0
    authorized_keys: list[str] = field(default_factory=list)
    interruptible: bool = False
    never_boots: bool = False
    ssh_refuses: bool = False
    running_since: float | None = None
    extra: dict = field(default_factory=dict)

    @classmethod
    def from_json(cls, text: str) -> "MockInstance":
        return cls(**json.loads(text))


@dataclass
class SshKey:
    provider: str
    id: str
    name: str
    public_key: str
    created_at: float


class Store:
    def __init__(self, path: Path) -> None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
        except (OSError, sqlite3.Error) as e:
            raise MockStateError(f"cannot use state file {path}: {e}") from None
        self._lock = threading.RLock()
        with self._lock:
            self._db.executescript("""
                CREATE TABLE IF NOT EXISTS instances (provider TEXT, id TEXT, data TEXT,
                                                      PRIMARY KEY (provider, id));
                CREATE TABLE IF NOT EXISTS ssh_keys (provider TEXT, id TEXT, name TEXT,
                                                     public_key TEXT, created_at REAL,
                                                     PRIMARY KEY (provider, id));
                CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
                CREATE TABLE IF NOT EXISTS sshd (provider TEXT, id TEXT, pid INTEGER,
                                                 PRIMARY KEY (provider, id));
                CREATE TABLE IF NOT EXISTS volumes (provider TEXT, id TEXT, data TEXT,
                                                    PRIMARY KEY (provider, id));
            """)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    @property
    def mock_id(self) -> str:
        """This mock's identity, made once per state file: it tags every process an
        instance starts and seeds Vast.ai's instance numbers, so that two mocks on one
        machine (tests side by side, a demo beside a test run) never stop or confuse
        each other's instances. A mock restarted on the same state keeps it."""
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE key='mock_id'").fetchone()
            if row:
                return row[0]
            value = secrets.token_hex(4)
            self._db.execute("INSERT INTO meta VALUES ('mock_id', ?)", (value,))
            return value

    def meta(self, key: str) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    # instances
    def put(self, inst: MockInstance) -> None:
        """Insert or replace: for a new instance only (see update)."""
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO instances VALUES (?, ?, ?)",
                             (inst.provider, inst.id, json.dumps(asdict(inst))))

    def update(self, inst: MockInstance) -> bool:
        """Rewrite an instance that is still stored; False (and nothing written) if it is gone,
        so a late write can never bring back a terminated instance."""
        with self._lock:
            cur = self._db.execute("UPDATE instances SET data=? WHERE provider=? AND id=?",
                                   (json.dumps(asdict(inst)), inst.provider, inst.id))
        return cur.rowcount > 0

    def get(self, provider: str, iid: str) -> MockInstance | None:
        with self._lock:
            row = self._db.execute("SELECT data FROM instances WHERE provider=? AND id=?",
                                   (provider, str(iid))).fetchone()
        return MockInstance.from_json(row[0]) if row else None

    def instances(self, provider: str | None = None) -> list[MockInstance]:
        with self._lock:
            if provider is None:
                rows = self._db.execute("SELECT data FROM instances").fetchall()
            else:
                rows = self._db.execute("SELECT data FROM instances WHERE provider=?",
                                        (provider,)).fetchall()
        out = [MockInstance.from_json(r[0]) for r in rows]
        out.sort(key=lambda i: (i.created_at, i.id))
        return out

    def delete(self, provider: str, iid: str) -> None:
        with self._lock:
            self._db.execute("DELETE FROM instances WHERE provider=? AND id=?", (provider, str(iid)))

    def used(self, provider: str, offer_key: str) -> int:
        """Units of a capacity slot held by live instances."""
        return sum(i.units for i in self.instances(provider)
                   if i.offer_key == offer_key and i.phase != DEAD)

    # ssh keys
    def add_key(self, provider: str, name: str, public_key: str, key_id: str) -> SshKey:
        key = SshKey(provider, key_id, name, public_key.strip(), time.time())
        with self._lock:
            self._db.execute("INSERT INTO ssh_keys VALUES (?, ?, ?, ?, ?)",
                             (provider, key.id, key.name, key.public_key, key.created_at))
        return key

    def keys(self, provider: str) -> list[SshKey]:
        with self._lock:
            rows = self._db.execute("SELECT provider, id, name, public_key, created_at FROM ssh_keys "
                                    "WHERE provider=? ORDER BY created_at, id", (provider,)).fetchall()
        return [SshKey(*r) for r in rows]

    def delete_key(self, provider: str, key_id: str) -> bool:
        with self._lock:
            cur = self._db.execute("DELETE FROM ssh_keys WHERE provider=? AND id=?", (provider, key_id))
        return cur.rowcount > 0

    def replace_keys(self, provider: str, public_keys: list[str]) -> None:
        with self._lock:
            self._db.execute("DELETE FROM ssh_keys WHERE provider=?", (provider,))
            for n, k in enumerate(public_keys):
                self._db.execute("INSERT INTO ssh_keys VALUES (?, ?, ?, ?, ?)",
                                 (provider, str(n), "", k.strip(), time.time() + n * 1e-6))

    # counters (Vast ids are integers that grow)
    def next_counter(self, name: str, start: int) -> int:
        """The next value of counter `name`; its first value is `start`."""
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE key=?", (name,)).fetchone()
            value = int(row[0]) + 1 if row else start
            self._db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (name, str(value)))
        return value

    # volumes: each provider's own JSON document (its API's fields), one row each; their
    # files live in the state directory's volumes/<provider>-<id>/ (sshhost.volume_dir)
    def put_volume(self, provider: str, vid: str, doc: dict) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO volumes VALUES (?, ?, ?)",
                             (provider, str(vid), json.dumps(doc)))

    def volume(self, provider: str, vid: str) -> dict | None:
        with self._lock:
            row = self._db.execute("SELECT data FROM volumes WHERE provider=? AND id=?",
                                   (provider, str(vid))).fetchone()
        return json.loads(row[0]) if row else None

    def volumes(self, provider: str) -> list[dict]:
        with self._lock:
            rows = self._db.execute("SELECT data FROM volumes WHERE provider=? ORDER BY rowid",
                                    (provider,)).fetchall()
        return [json.loads(r[0]) for r in rows]

    def delete_volume(self, provider: str, vid: str) -> bool:
        with self._lock:
            cur = self._db.execute("DELETE FROM volumes WHERE provider=? AND id=?", (provider, str(vid)))
        return cur.rowcount > 0

    # sshd pids, so that a restarted mock can reap what a killed one left behind
    def set_pid(self, provider: str, iid: str, pid: int | None) -> None:
        with self._lock:
            if pid is None:
                self._db.execute("DELETE FROM sshd WHERE provider=? AND id=?", (provider, iid))
            else:
                self._db.execute("INSERT OR REPLACE INTO sshd VALUES (?, ?, ?)", (provider, iid, pid))

    def pids(self) -> list[tuple[str, str, int]]:
        with self._lock:
            return [tuple(r) for r in self._db.execute("SELECT provider, id, pid FROM sshd").fetchall()]
