"""The live display of a bench across providers: one row per candidate machine, with
for how long it has been at what it is doing now (renting, booting, preflight, run k
of n at step i of N, torn down, measured or dropped and why).

Every line a machine says is printed above the board, prefixed with its name, as a
bench of several machines prints them; a run's steps only move its row (without a
terminal, or with --quiet, the board is not drawn: a plain step line at most every
PLAIN_EVERY_S, none with --quiet). Lines of the bench as a whole (`say`) are printed
as they come. Safe to call from the machines' threads.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from rich.console import Console
from rich.table import Table

from gpubench.cli.progress import PLAIN_EVERY_S, LiveDisplay, RunState, clock_text, status_line
from gpubench.sweep.events import RunStarted, RunStep

Echo = Callable[[str], None]


@dataclass
class Row:
    """One machine of the board."""

    name: str
    label: str                         # "1x H100 PCIe on vast"
    said: str = "waiting to start"
    since: float = 0.0                 # clock() when `said` came
    run: RunState | None = None
    plain_step_at: float = float("-inf")

    def state(self, now: float, started_at: float) -> tuple[str, str]:
        """(how long it has been at it, what it is at)."""
        if self.run is not None:
            return clock_text(now - self.run.since), status_line(self.run, now, now - started_at)
        return clock_text(now - self.since), self.said


class Board(LiveDisplay):
    """The bench's echo (`say`), each machine's (`echo_for(name)`), and the live rows."""

    def __init__(self, machines: list[tuple[str, str]], console: Console | None = None,
                 quiet: bool = False, live: bool | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 plain_every_s: float = PLAIN_EVERY_S) -> None:
        super().__init__(console, quiet, live, clock, plain_every_s)
        self.rows = {name: Row(name, label, since=self.started_at) for name, label in machines}

    # ------------------------------------------------------------------ input
    def say(self, line: str) -> None:
        """A line of the bench as a whole."""
        self._print(str(line))

    def echo_for(self, name: str) -> Echo:
        """The echo of machine `name`: its row follows what it says."""
        return lambda line: self._machine_said(name, line)

    def _machine_said(self, name: str, line) -> None:
        with self._lock:
            shown = self._take(self.rows[name], line, self.clock())
        if shown is not None:
            self._print(f"[{name}] {shown}")

    def _take(self, row: Row, line, now: float) -> str | None:
        """Note what `line` says of the machine; returns what to print, or None."""
        if isinstance(line, RunStarted):
            row.run, row.plain_step_at = RunState(line, now), now
            return f"{line} (run {line.index} of {line.total})"
        if isinstance(line, RunStep):
            if row.run is None:
                return None
            row.run.step, row.run.step_at = line, now
            if self.live or self.quiet or now - row.plain_step_at < self.plain_every_s:
                return None
            row.plain_step_at = now
            return status_line(row.run, now, now - self.started_at, named=False)
        row.run = None
        row.said, row.since = str(line), now
        return str(line)

    def _print(self, text: str) -> None:
        self.console.print(text, markup=False, highlight=False)

    # ------------------------------------------------------------------ live rendering
    def __rich__(self) -> Table:
        with self._lock:
            now = self.clock()
            table = Table.grid(padding=(0, 2))
            for width in (max(len(r.name) for r in self.rows.values()),
                          max(len(r.label) for r in self.rows.values())):
                table.add_column(no_wrap=True, min_width=width)    # the state gives way, not these
            table.add_column(no_wrap=True, justify="right", min_width=5)
            table.add_column(no_wrap=True, overflow="ellipsis", ratio=1)
            for row in self.rows.values():
                table.add_row(row.name, row.label, *row.state(now, self.started_at))
            return table


def board_for(machines: list[tuple[str, str]], as_json: bool, quiet: bool) -> Board:
    """The board for a command: on stdout for people, on stderr when stdout carries one
    JSON document for a program."""
    return Board(machines, Console(stderr=as_json, highlight=False, soft_wrap=True), quiet=quiet)
