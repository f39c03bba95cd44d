"""Which runs left files on which rented machine, and which of them were brought back:
a table beside the instances in the ledger's sqlite file.

A row is written before a count runs on a machine gpubench rented (so a client
killed mid-run still knows there is something to pull), completed after the run
(where its files were moved aside, what it left that was not declared) and stamped
once they are pulled, or discarded on the user's word. `down` and `bench`'s teardown
read it before they terminate anything.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, fields
from pathlib import Path

from gpubench.store.ledger import open_ledger_file, set_columns

_SCHEMA = """
CREATE TABLE IF NOT EXISTS run_outputs (
    row_id INTEGER PRIMARY KEY AUTOINCREMENT,
    machine TEXT NOT NULL,
    run_id TEXT NOT NULL,
    label TEXT NOT NULL,
    remote_root TEXT NOT NULL,
    declared TEXT NOT NULL,
    dest TEXT NOT NULL,
    kept_in TEXT,
    left_files TEXT,
    started_at REAL,
    ended_at REAL,
    pulled_at REAL,
    left_pulled_at REAL,
    discarded_at REAL,
    instance_row INTEGER
);
CREATE INDEX IF NOT EXISTS run_outputs_machine ON run_outputs(machine);
"""


@dataclass(frozen=True)
class RunOutputs:
    """One count's files on one machine."""

    row_id: int
    machine: str
    run_id: str
    label: str
    remote_root: str          # the run's working directory there
    declared: str             # JSON list of the --outputs patterns ([]: none)
    dest: str                 # where they come back to: <results>/<run id>/outputs/<label>
    kept_in: str | None = None       # where the run's new files were moved, relative to remote_root
    left_files: str | None = None    # JSON [[path, size]] of what it left that was not declared
    started_at: float | None = None
    ended_at: float | None = None    # None: the client never heard the run end
    pulled_at: float | None = None   # the declared outputs are here
    left_pulled_at: float | None = None
    discarded_at: float | None = None
    instance_row: int | None = None  # the machine's ledger row: a later machine of the same name is another

    @property
    def patterns(self) -> tuple[str, ...]:
        return tuple(json.loads(self.declared or "[]"))

    @property
    def left(self) -> list[tuple[str, int]]:
        return [(str(p), int(s)) for p, s in json.loads(self.left_files or "[]")]

    @property
    def declared_pending(self) -> bool:
        return bool(self.patterns) and self.pulled_at is None and self.discarded_at is None

    @property
    def left_pending(self) -> bool:
        """Files the run left that were not declared, not yet brought back (a run whose
        end the client never heard has none known: its declared outputs are pulled from
        where it wrote them)."""
        return bool(self.left) and self.discarded_at is None and self.left_pulled_at is None

    @property
    def pending(self) -> bool:
        return self.declared_pending or self.left_pending


_COLUMNS = [f.name for f in fields(RunOutputs)]


class OutputsLedger:
    """Open with OutputsLedger() for the user's ledger file, OutputsLedger(path) elsewhere."""

    def __init__(self, path: Path | None = None) -> None:
        self.path, self._db = open_ledger_file(path, _SCHEMA)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> "OutputsLedger":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def begin(self, machine: tuple[str, int], run_id: str, label: str, remote_root: str,
              patterns: tuple[str, ...], dest: Path) -> int:
        """The row of a count about to run on `machine` (its name and ledger row)."""
        name, instance_row = machine
        cur = self._db.execute(
            "INSERT INTO run_outputs (machine, instance_row, run_id, label, remote_root, declared, dest, "
            "started_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (name, instance_row, run_id, label, remote_root, json.dumps(list(patterns)), str(dest), time.time()))
        return int(cur.lastrowid)

    def ended(self, row_id: int, kept_in: str | None, left: list[tuple[str, int]]) -> None:
        self._set(row_id, ended_at=time.time(), kept_in=kept_in, left_files=json.dumps(left))

    def pulled(self, row_id: int, declared: bool = True, left: bool = False) -> None:
        now = time.time()
        self._set(row_id, **({"pulled_at": now} if declared else {}),
                  **({"left_pulled_at": now} if left else {}))

    def discarded(self, row_id: int) -> None:
        self._set(row_id, discarded_at=time.time())

    def pending(self, machines: list[tuple[str, int]]) -> list[RunOutputs]:
        """The rows of these machines (name, ledger row) with files not yet brought back,
        oldest first."""
        if not machines:
            return []
        wanted = set(machines)
        names = sorted({name for name, _ in wanted})
        marks = ", ".join("?" for _ in names)
        rows = self._db.execute(f"SELECT * FROM run_outputs WHERE machine IN ({marks}) "
                                "AND discarded_at IS NULL ORDER BY row_id", names).fetchall()
        return [r for r in (RunOutputs(**dict(row)) for row in rows)
                if r.pending and (r.machine, r.instance_row) in wanted]

    def _set(self, row_id: int, **values) -> None:
        set_columns(self._db, self.path, "run_outputs", _COLUMNS, row_id, values)
