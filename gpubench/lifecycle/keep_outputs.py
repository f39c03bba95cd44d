"""Nothing a rented machine made is destroyed unasked: before a machine is terminated,
the files its runs left that were not brought back (store/outputs.py) are named, with
their sizes, and pulled on the user's word; a pull that fails keeps the machine.

Declared outputs (--outputs) come from where the file guard moved them after the
count, or, for a count whose end the client never heard (killed mid-run), from where
the script wrote them. What a count left undeclared comes back whole from where the
guard moved it. Everything lands in the results directory the run wrote to:
<results>/<run id>/outputs/<count>/.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from gpubench import paths
from gpubench.errors import GpubenchError
from gpubench.lifecycle.waiting import Say, silent
from gpubench.remote.errors import BadTargetError
from gpubench.remote.pull import PullError, RunFiles, listing, pull, size_text
from gpubench.remote.targets import host_from_entry
from gpubench.store.ledger import LedgerEntry
from gpubench.store.outputs import OutputsLedger, RunOutputs


class OutputsNotPulledError(GpubenchError):
    """A machine's run outputs could not be brought back; it was kept running."""


@dataclass
class Unpulled:
    """One machine's files not yet brought back: (row, path relative to the count's
    outputs, size); `unreachable` says why they could not be listed."""

    entry: LedgerEntry
    rows: list[RunOutputs]
    files: list[tuple[RunOutputs, str, int]] = field(default_factory=list)
    unreachable: str | None = None

    @property
    def size(self) -> int:
        return sum(s for _, _, s in self.files)

    def describe(self, shown: int = 4) -> str:
        if self.unreachable:
            return (f"{self.entry.name} holds outputs of {len(self.rows)} count(s) not yet pulled "
                    f"(cannot list them: {self.unreachable})")
        names = ", ".join(f"{Path(r.dest).parent.parent.name}/{r.label}/{p} ({size_text(s)})"
                          for r, p, s in self.files[:shown])
        more = f" and {len(self.files) - shown} more" if len(self.files) > shown else ""
        return (f"{self.entry.name} holds {len(self.files)} file(s) of its runs not yet pulled, "
                f"{size_text(self.size)}: {names}{more}")


def files_of(entry: LedgerEntry, row: RunOutputs) -> RunFiles:
    host = host_from_entry(entry, warn=lambda _: None)
    return RunFiles(row.remote_root, host.target, paths.known_hosts_path(), entry.name)


def unpulled(entries: list[LedgerEntry], declared_only: bool = False) -> list[Unpulled]:
    """Each of these machines with files not yet brought back, listed with their sizes
    (over SSH: a machine that does not answer says why)."""
    by_key = {(e.name, e.row_id): e for e in entries}
    with OutputsLedger() as ledger:
        rows = ledger.pending(list(by_key))
    if declared_only:
        rows = [r for r in rows if r.declared_pending]
    found: dict[tuple[str, int], Unpulled] = {}
    empty: list[int] = []
    for row in rows:
        key = (row.machine, row.instance_row)
        item = found.setdefault(key, Unpulled(by_key[key], []))
        item.rows.append(row)
        if item.unreachable:
            continue
        try:
            files = files_of(item.entry, row)
            listed = []
            if row.declared_pending:
                listed = listing(files, row.kept_in or "", row.patterns)
                if not listed and not row.left_pending:
                    empty.append(row.row_id)   # it wrote none of them: nothing to keep
            if row.left_pending and not declared_only:
                listed += row.left
            item.files += [(row, p, s) for p, s in listed]
        except (PullError, BadTargetError) as e:
            item.unreachable = str(e)
    if empty:
        with OutputsLedger() as ledger:
            for row_id in empty:
                ledger.pulled(row_id)
    return [u for u in found.values() if u.files or u.unreachable]


def pull_unpulled(items: list[Unpulled], say: Say = silent, declared_only: bool = False) -> int:
    """Bring each machine's files back, marking them pulled; returns the files pulled.
    OutputsNotPulledError (one line, with what the machine costs an hour) at the first
    machine whose files cannot be."""
    count = 0
    for item in items:
        try:
            for row in item.rows:
                files = files_of(item.entry, row)
                dest = Path(row.dest)
                if row.declared_pending:
                    pull(files, row.kept_in or "", row.patterns, dest)
                left = row.left_pending and not declared_only
                if left:
                    pull(files, row.kept_in or "", (), dest)
                with OutputsLedger() as ledger:
                    ledger.pulled(row.row_id, declared=row.declared_pending, left=left)
                say(f"{item.entry.name}: pulled {row.label} of run {row.run_id} into {dest}")
            count += len(item.files)
        except (PullError, BadTargetError) as e:
            raise OutputsNotPulledError(f"{item.entry.name} was kept: its outputs could not be pulled "
                                        f"({e}); it costs {_hourly(item.entry)} while it runs; "
                                        f"'gpubench pull {item.entry.name}' tries again, 'gpubench down "
                                        f"{item.entry.name} --discard-outputs' gives them up") from None
    return count


def discard(entries: list[LedgerEntry]) -> int:
    """The user gave up these machines' files not yet brought back: they are no longer
    asked about. Returns how many counts' files that was."""
    with OutputsLedger() as ledger:
        rows = ledger.pending([(e.name, e.row_id) for e in entries])
        for row in rows:
            ledger.discarded(row.row_id)
    return len(rows)


def pending_counts(entries: list[LedgerEntry]) -> dict[str, int]:
    """{machine name: counts whose files are not yet brought back}, from the ledger alone."""
    with OutputsLedger() as ledger:
        rows = ledger.pending([(e.name, e.row_id) for e in entries])
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.machine] = counts.get(row.machine, 0) + 1
    return counts


def _hourly(entry: LedgerEntry) -> str:
    return f"${entry.price_per_hour:.2f} an hour" if entry.price_per_hour is not None else "an unknown price"
