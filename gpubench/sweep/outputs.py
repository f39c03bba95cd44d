"""A user's script's outputs brought back after each count, and while it runs.

With `--outputs checkpoints/,runs/*.pt` every count's declared files are pulled into
<results>/<run id>/outputs/<count>/ after the count ends, whatever its exit, and
checked byte for byte; while a count runs they are pulled every PULL_EVERY_S too, so
that a machine lost mid-run (preempted, cut off) loses little. On a machine gpubench
rented, the ledger is told before each count starts (store/outputs.py): what a client
killed mid-run never pulled, `down` and `gpubench pull` still find. What a count left
that was not declared (moved aside by the file guard) is listed at the end with its
size; `gpubench pull NAME` brings it back.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Callable

from gpubench.errors import GpubenchError
from gpubench.launch.base import Launcher, RunOutcome
from gpubench.remote.pull import PullError, RunFiles, listing, matches, pull, size_text
from gpubench.store.ledger import Ledger
from gpubench.store.outputs import OutputsLedger
from gpubench.suite import WorkloadRef

PULL_EVERY_S = float(os.environ.get("GPUBENCH_OUTPUTS_PULL_EVERY", "300"))
OUTPUTS_DIR = "outputs"


def _live_row(name: str):
    """The ledger's live machine called `name` (its row, which the outputs are kept under)."""
    with Ledger() as ledger:
        return ledger.find_active(name)


def outputs_dest(results: Path, run_id: str, label: str) -> Path:
    return results / run_id / OUTPUTS_DIR / label


class OutputKeeper:
    """Around each count of one sweep: the ledger row, the pulls, what was left."""

    def __init__(self, launcher: Launcher, workload: WorkloadRef, results: Path | None, run_id: str,
                 echo: Callable[[str], None]) -> None:
        self.patterns = workload.project.outputs if workload.project else ()
        self.results = results
        self.run_id = run_id
        self.echo = echo
        self.files: RunFiles | None = None
        if not workload.in_suite and results is not None and hasattr(launcher, "files_at"):
            self.files = launcher.files_at(workload)
        self.left: list[tuple[str, str, int]] = []   # (label, path, size) not declared
        self._row: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def active(self) -> bool:
        return self.files is not None

    def before(self, label: str) -> None:
        """A count is about to start: written down, and pulled from as it goes."""
        if self.files is None:
            return
        dest = outputs_dest(self.results, self.run_id, label)
        entry = _live_row(self.files.machine) if self.files.machine else None
        if entry is not None:
            with OutputsLedger() as ledger:
                self._row = ledger.begin((entry.name, entry.row_id), self.run_id, label, self.files.root,
                                         self.patterns, dest)
        if self.patterns and PULL_EVERY_S > 0:
            self._stop.clear()
            self._thread = threading.Thread(target=self._pull_while_running, args=(dest,),
                                            name="gpubench-outputs", daemon=True)
            self._thread.start()

    def _pull_while_running(self, dest: Path) -> None:
        while not self._stop.wait(PULL_EVERY_S):
            try:
                # bounded by the interval: a slow link's pull gives way to the next one
                pull(self.files, "", self.patterns, dest, timeout=max(PULL_EVERY_S, 60.0), check=False)
            except GpubenchError:
                pass  # the run's own end says what became of it; the next pull tries again

    def stopped(self) -> None:
        """The count did not come back (Ctrl-C, a lost machine): the pulls while it ran
        stop; its ledger row stays open, for `down` and `gpubench pull`."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None

    def after(self, label: str, prefix: str, outcome: RunOutcome) -> None:
        """The count ended: its declared outputs pulled and checked, what it left noted."""
        self.stopped()
        if self.files is None:
            return
        kept_in = outcome.files.kept_in if outcome.files is not None else None
        rel = os.path.normpath(kept_in) if kept_in else None  # as the guard said: there, or from the root
        dest = outputs_dest(self.results, self.run_id, label)
        pulled = False
        if self.patterns:
            try:
                done = pull(self.files, rel or "", self.patterns, dest)
                count = sum(1 for path in dest.rglob("*") if path.is_file())
                self.echo(f"{prefix}outputs: {count} file(s) in {dest} ({done.files} pulled now, "
                          f"checked, {done.seconds:.1f}s)")
                pulled = True
            except PullError as e:
                self.echo(f"{prefix}warning: outputs not pulled: {e}"
                          + (f"; 'gpubench pull {self.files.machine}' tries again" if self.files.machine else ""))
        left: list[tuple[str, int]] = []
        if rel:
            try:
                left = [(p, s) for p, s in listing(self.files, rel) if not matches(p, self.patterns)]
            except PullError:
                left = [(p, 0) for p in (outcome.files.left_behind if outcome.files else [])
                        if not matches(p, self.patterns)]
        self.left += [(label, p, s) for p, s in left]
        if self._row is not None:
            with OutputsLedger() as ledger:
                ledger.ended(self._row, rel, left)
                if pulled:
                    ledger.pulled(self._row)
            self._row = None

    def summary(self) -> list[str]:
        """What the counts left that was not declared, with sizes, and how to get it."""
        if not self.left or self.files is None:
            return []
        shown = ", ".join(f"{label}/{p} ({size_text(s)})" for label, p, s in self.left[:6])
        more = f" and {len(self.left) - 6} more" if len(self.left) > 6 else ""
        total = size_text(sum(s for _, _, s in self.left))
        where = self.files.describe()
        how = (f"'gpubench pull {self.files.machine}' brings them back" if self.files.machine
               else "declare them with --outputs to bring them back")
        return [f"left in {where}/.gpubench-left-behind, not declared as outputs: {shown}{more} "
                f"({total} in all); {how}"]

