"""The volumes gpubench made, in the ledger's sqlite file beside the machines.

As with a machine, a volume's row is written before the provider's create call (status
"requested", no id), completed with the provider's id after it, and written off only once
the provider's list no longer has it ("deleted"). A row is never removed by a command that
was not asked to remove its volume.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, fields
from pathlib import Path

from gpubench.errors import UsageError
from gpubench.providers.common import Account
from gpubench.store.ledger import LedgerError, account_columns, open_ledger_file, set_columns

REQUESTED, CREATED, DELETED = "requested", "created", "deleted"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS volumes (
    row_id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL,
    provider TEXT NOT NULL,
    provider_name TEXT NOT NULL,
    volume_id TEXT,
    status TEXT NOT NULL,
    place TEXT,
    size_gb REAL,
    requested_at REAL,
    created_at REAL,
    deleted_at REAL,
    account_endpoint TEXT,
    key_fingerprint TEXT,
    account_id TEXT,
    note TEXT
);
"""


class UnknownVolumeError(UsageError):
    pass


@dataclass(frozen=True)
class VolumeRow:
    row_id: int
    name: str                 # the user's; the provider sees provider_name
    provider: str
    provider_name: str
    volume_id: str | None
    status: str
    place: str | None = None
    size_gb: float | None = None
    requested_at: float | None = None
    created_at: float | None = None
    deleted_at: float | None = None
    account_endpoint: str | None = None
    key_fingerprint: str | None = None
    account_id: str | None = None
    note: str | None = None

    @property
    def live(self) -> bool:
        return self.status != DELETED


_COLUMNS = [f.name for f in fields(VolumeRow)]


class VolumesLedger:
    def __init__(self, path: Path | None = None) -> None:
        self.path, self._db = open_ledger_file(path, _SCHEMA)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> "VolumesLedger":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def begin(self, name: str, provider: str, provider_name: str, place: str, size_gb: float | None,
              account: Account | None) -> VolumeRow:
        """The row written before the create call; refuses a name a live volume has."""
        if self.find_live(name) is not None:
            raise LedgerError(f"a volume named '{name}' is already in the ledger (see 'gpubench volume ls')")
        values = {"name": name, "provider": provider, "provider_name": provider_name, "status": REQUESTED,
                  "place": place, "size_gb": size_gb, "requested_at": time.time(), **account_columns(account)}
        cur = self._db.execute(f"INSERT INTO volumes ({', '.join(values)}) VALUES "
                               f"({', '.join('?' for _ in values)})", list(values.values()))
        return self.get(int(cur.lastrowid))

    def created(self, row_id: int, volume_id: str, place: str) -> VolumeRow:
        return self._set(row_id, volume_id=volume_id, place=place, status=CREATED, created_at=time.time())

    def deleted(self, row_id: int) -> VolumeRow:
        return self._set(row_id, status=DELETED, deleted_at=time.time())

    def noted(self, row_id: int, note: str) -> VolumeRow:
        return self._set(row_id, note=note)

    def discard(self, row_id: int) -> None:
        """A create the provider refused: no volume exists for the row."""
        self._db.execute("DELETE FROM volumes WHERE row_id = ? AND volume_id IS NULL", (row_id,))

    def get(self, row_id: int) -> VolumeRow:
        row = self._db.execute("SELECT * FROM volumes WHERE row_id = ?", (row_id,)).fetchone()
        if row is None:
            raise UnknownVolumeError(f"no volume row {row_id}")
        return VolumeRow(**dict(row))

    def rows(self, include_deleted: bool = False) -> list[VolumeRow]:
        sql = "SELECT * FROM volumes" + ("" if include_deleted else f" WHERE status != '{DELETED}'")
        return [VolumeRow(**dict(r)) for r in self._db.execute(sql + " ORDER BY row_id").fetchall()]

    def find_live(self, name: str) -> VolumeRow | None:
        row = self._db.execute("SELECT * FROM volumes WHERE (name = ? OR provider_name = ?) AND status != ? "
                               "ORDER BY row_id DESC LIMIT 1", (name, name, DELETED)).fetchone()
        return VolumeRow(**dict(row)) if row else None

    def find(self, name: str) -> VolumeRow:
        """The live volume called `name`; UnknownVolumeError in one line otherwise."""
        row = self.find_live(name)
        if row is None:
            raise UnknownVolumeError(f"no volume named '{name}' in the ledger (see 'gpubench volume ls')")
        return row

    def _set(self, row_id: int, **values) -> VolumeRow:
        set_columns(self._db, self.path, "volumes", _COLUMNS, row_id, values)
        return self.get(row_id)
