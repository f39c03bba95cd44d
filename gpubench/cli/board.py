"""The live display of a bench across providers: one row per candidate machine, with
for how long it has been at what it is doing now (renting, booting, preflight, run k
of n at step i of N, torn down, measured or dropped and why), and while a run goes, a
line under it per GPU of every node, its use, memory and power as a short history ("no
GPU" on a CPU).

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

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from gpubench.cli.progress import (PLAIN_EVERY_S, LiveDisplay, RunState, clock_text, fitted_status,
                                   gpu_lines, status_line, status_parts)
from gpubench.format import format_dollars
from gpubench.sweep.events import GpuSample, RunStarted, RunStep

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

    def state(self, now: float, started_at: float, width: int | None = None) -> tuple[str, str]:
        """(how long it has been at it, what it is at), the latter fitted to `width`
        (the rate, ETA and money spent kept longest)."""
        if self.run is not None:
            parts = status_parts(self.run, now, now - started_at)
            said = fitted_status(parts, width) if width else status_line(self.run, now, now - started_at)
            return clock_text(now - self.run.since), said
        return clock_text(now - self.since), self.said


class Board(LiveDisplay):
    """The bench's echo (`say`), each machine's (`echo_for(name)`), and the live rows."""

    def __init__(self, machines: list[tuple[str, str]], console: Console | None = None,
                 quiet: bool = False, live: bool | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 plain_every_s: float = PLAIN_EVERY_S, budget: float | None = None,
                 spent: Callable[[], float | None] | None = None) -> None:
        super().__init__(console, quiet, live, clock, plain_every_s)
        self.rows = {name: Row(name, label, since=self.started_at) for name, label in machines}
        self.budget = budget
        self._spent = spent                # every machine of the bench so far, thrown-away ones too
        self._spent_read: tuple[float, float | None] = (float("-inf"), None)   # (when, dollars)

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
        if isinstance(line, GpuSample):   # drawn under the row, never printed
            if row.run is not None:
                row.run.watch(line)
            return None
        if isinstance(line, RunStep):
            if row.run is None:
                return None
            row.run.step, row.run.step_at = line, now
            row.run.watch(line)
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
    def __rich__(self) -> Group:
        """A row per machine: its name, its candidate, for how long, and what it is at;
        where the terminal is too narrow for what it is at to keep its rate, ETA and money
        spent on the same line, that goes on a line of its own under the row; under a row
        whose machine runs, a line per GPU. Then the money spent on all of them against
        the budget."""
        with self._lock:
            now = self.clock()
            rows = list(self.rows.values())
            clocks = [r.state(now, self.started_at)[0] for r in rows]
            widths = [max(len(r.name) for r in rows), max(len(r.label) for r in rows), max([5, *map(len, clocks)])]
            room = self.console.width - sum(widths) - 3 * PADDING
            states = [r.state(now, self.started_at, room)[1] for r in rows]
            beside = all(len(state) <= room for state in states)
            under = self.console.width - len(UNDER)
            parts = []
            for row, clock, state in zip(rows, clocks, states):
                # a grid per row, its columns as wide as every row's: the rows line up
                line = Table.grid(padding=(0, PADDING))
                for width in widths[:2]:
                    line.add_column(no_wrap=True, min_width=width)    # the state gives way, not these
                line.add_column(no_wrap=True, justify="right", min_width=widths[2])
                if beside:
                    line.add_column(no_wrap=True, overflow="ellipsis", ratio=1)
                    line.add_row(row.name, row.label, clock, state)
                    parts.append(line)
                else:
                    line.add_row(row.name, row.label, clock)
                    parts += [line, _under(row.state(now, self.started_at, under)[1])]
                parts += [_under(gpu) for gpu in (gpu_lines(row.run) if row.run else [])]
            total = self.total_line(now)
            if total:
                parts.append(Text(total, no_wrap=True, overflow="ellipsis"))
            return Group(*parts)

    def total_line(self, now: float) -> str | None:
        """'spent $0.42 of the $5.00 budget on all the machines' (read at most every
        SPENT_EVERY_S); None where nothing says what was spent."""
        if self._spent is None:
            return None
        when, dollars = self._spent_read
        if now - when >= SPENT_EVERY_S:
            try:
                dollars = self._spent()
            except Exception:   # a figure on a display never stops the bench
                dollars = None
            self._spent_read = (now, dollars)
        if dollars is None:
            return None
        of = f" of the {format_dollars(self.budget)} budget" if self.budget is not None else ""
        return f"spent {format_dollars(dollars)}{of} on all the machines"


PADDING = 2
UNDER = "    "          # what a machine is at, and its GPUs, on lines of their own under its row


def _under(text: str) -> Text:
    return Text(UNDER + text, no_wrap=True, overflow="ellipsis")
SPENT_EVERY_S = 2.0     # the ledger read for the total at most this often


def board_for(machines: list[tuple[str, str]], as_json: bool, quiet: bool, budget: float | None = None,
              spent: Callable[[], float | None] | None = None) -> Board:
    """The board for a command: on stdout for people, on stderr when stdout carries one
    JSON document for a program; its last line the money spent (`spent`) against `budget`."""
    return Board(machines, Console(stderr=as_json, highlight=False, soft_wrap=True), quiet=quiet,
                 budget=budget, spent=spent)
