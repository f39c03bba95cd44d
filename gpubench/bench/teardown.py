"""Giving back what a bench rented, one way for a machine and for a cluster: every
live row under the bench's name terminated and confirmed gone by its provider
(unless --keep), a second Ctrl-C held off meanwhile, and what it all cost said,
machines provisioning threw away for it included. `rent_sweep_teardown` is the one
shape of a bench: teardown runs whatever happened, and the records gain the cost."""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from dataclasses import dataclass
from typing import Callable, Iterator

from gpubench.bench.request import BenchResult
from gpubench.errors import GpubenchError
from gpubench.format import format_dollars
from gpubench.store.results import ResultsStore

Echo = Callable[[str], None]
TERMINATE_DEADLINE_S = 180.0


class TeardownError(GpubenchError):
    """The machine may still be running (and billing)."""


@dataclass
class Rented:
    """What a bench rented under one name, as its teardown reads the ledger."""

    name: str
    provider: object                  # the connected Provider
    cluster: bool = False             # the members of cluster `name`, or the machine `name`

    def live(self, ledger) -> list:
        if self.cluster:
            return ledger.cluster_members(self.name)
        entry = ledger.find_active(self.name)
        return [entry] if entry is not None else []

    def every_row(self, ledger) -> list:
        if self.cluster:
            return ledger.cluster_members(self.name, include_done=True)
        return [r for r in ledger.entries(include_done=True) if r.name == self.name]

    def take_down(self, ledger, echo: Echo) -> list:
        """Terminate every live row, each confirmed gone (or said why not)."""
        if self.cluster:
            from gpubench.lifecycle.cluster_provision import take_down_members

            return take_down_members(ledger, self.provider, self.name, echo)
        from gpubench.lifecycle.terminate import take_down_entry

        return [take_down_entry(ledger, entry, self.provider, TERMINATE_DEADLINE_S, echo)
                for entry in self.live(ledger)]

    @property
    def called(self) -> str:
        return f"cluster {self.name}" if self.cluster else self.name


def rent_sweep_teardown(rent_and_sweep: Callable[[], None], teardown: Callable[[], None],
                        store: ResultsStore, result: BenchResult, echo: Echo) -> BenchResult:
    """Run `rent_and_sweep`, then `teardown` whatever happened (an error, Ctrl-C); once
    the machines are confirmed gone, their records gain what they cost. Should the
    teardown fail too, both are said: why the bench stopped, and that a machine may
    still bill."""
    try:
        rent_and_sweep()
    except BaseException as first:
        try:
            teardown()
        except Exception as second:
            raise TeardownError(f"{one_line(first)}\nerror: {second}") from first
        add_cost(store, result, echo)
        raise
    teardown()
    add_cost(store, result, echo)
    return result


def teardown(rented: Rented, keep: bool, ledger, echo: Echo, result: BenchResult,
             since: float = 0.0) -> None:
    """Terminate what the bench rented (rows under its name written since `since`),
    unless `keep`. The cost said is the whole bench's: thrown-away machines included.
    TeardownError when any is not confirmed gone."""
    from gpubench.lifecycle.sshconfig import sync_ssh_config

    ours = [r for r in rented.every_row(ledger) if (r.requested_at or 0) >= since]
    thrown_away = sum(r.cost() or 0.0 for r in ours if not r.active)
    live = rented.live(ledger)
    if not live:
        if any(r.instance_id for r in ours):
            result.cost, result.terminated = thrown_away, True
            echo(f"{rented.called} terminated; the whole bench cost {money(thrown_away)}")
        return  # never launched: nothing to pay for
    if keep:
        _keep(rented, live, thrown_away, echo, result)
        return
    _pull_declared(rented, live, echo)
    echo(_terminating(rented, live))
    with ctrl_c_deferred(echo):
        downs = rented.take_down(ledger, echo)
        sync_ssh_config(ledger)
    costs, billed = [d.cost for d in downs], [d.billed for d in downs]
    result.machine_cost = None if None in costs or not costs else sum(costs)
    result.cost = None if result.machine_cost is None else result.machine_cost + thrown_away
    result.billed = None if None in billed or not billed else sum(billed)
    left = [d for d in downs if not d.gone]
    result.terminated = not left
    if left:
        why = (f"cluster {rented.name}: NOT confirmed terminated: "
               + ", ".join(f"{d.name} ({d.message})" for d in left) if rented.cluster
               else f"{rented.name} is NOT confirmed terminated ({left[0].message})")
        raise TeardownError(f"{why}; run 'gpubench down {rented.name}' and check 'gpubench ls'")
    if rented.cluster:
        echo(f"cluster {rented.name}: all {len(downs)} members terminated and confirmed gone; "
             f"the whole bench cost {money(result.cost)}")
    else:
        provider = downs[0].provider
        said = f" ({provider} billed {money(result.billed)})" if result.billed is not None else ""
        echo(f"{rented.name} terminated; the whole bench cost {money(result.cost)}{said}")


def _pull_declared(rented: Rented, live: list, echo: Echo) -> None:
    """The declared outputs (--outputs) a count could not bring back, pulled before the
    machine goes; when they cannot be, it is kept (TeardownError says what it costs)."""
    from gpubench.lifecycle import keep_outputs

    held = keep_outputs.unpulled(live, declared_only=True)
    if not held:
        return
    for item in held:
        echo(f"before terminating: {item.describe()}")
    try:
        keep_outputs.pull_unpulled(held, say=echo, declared_only=True)
    except keep_outputs.OutputsNotPulledError as e:
        raise TeardownError(str(e)) from None


def _terminating(rented: Rented, live: list) -> str:
    if rented.cluster:
        return f"terminating cluster {rented.name}: {', '.join(m.name for m in live)}"
    entry = live[0]
    return f"terminating {rented.name} ({entry.provider} {entry.instance_id or 'id unknown'})"


def _keep(rented: Rented, live: list, thrown_away: float, echo: Echo, result: BenchResult) -> None:
    """--keep: say what it cost so far, how to stop paying, and when it stops itself."""
    result.kept = True
    costs = [m.cost() for m in live]
    result.cost = None if None in costs else sum(costs) + thrown_away
    if rented.cluster:
        echo(f"keeping cluster {rented.name} ({len(live)} machines), {money(result.cost)} so far; "
             f"'gpubench down {rented.name}' stops paying for them")
        return
    entry = live[0]
    stops = (f"; it stops itself at {_clock(entry.deadline_at)} unless a gpubench run is "
             f"active on it" if entry.deadline_at else "")
    echo(f"keeping {rented.name} ({entry.provider} {entry.instance_id}), {money(result.cost)} so far; "
         f"'gpubench down {rented.name}' stops paying for it{stops}")


def add_cost(store: ResultsStore, result: BenchResult, echo: Echo) -> None:
    """Once the machine is confirmed gone, its records gain what it cost (estimated,
    and billed where the provider says)."""
    if not result.terminated or not result.run_ids:
        return
    from gpubench.store.billing import add_machine_cost

    for warning in add_machine_cost(store.directory, result.run_ids, result.machine_cost,
                                    result.billed):
        echo(f"warning: {warning}")


@contextlib.contextmanager
def ctrl_c_deferred(echo: Echo) -> Iterator[None]:
    """A second Ctrl-C must not leave a paid machine half torn down: it is noted and
    raised once the (time-bounded) terminate is done."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pressed: list[bool] = []

    def note(signum, frame) -> None:
        pressed.append(True)
        echo("terminating the machine first; it takes a moment")

    previous = signal.signal(signal.SIGINT, note)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if pressed:
        raise KeyboardInterrupt


def one_line(exc: BaseException) -> str:
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    if isinstance(exc, GpubenchError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}".splitlines()[0]


def money(dollars: float | None) -> str:
    if dollars is None:
        return "an unknown amount (no price on record)"
    return format_dollars(dollars)


def _clock(stamp: float) -> str:
    return time.strftime("%H:%M", time.localtime(stamp))


@contextlib.contextmanager
def bench_ledger(ledger, echo: Echo) -> Iterator:
    """The ledger a bench writes to (its own connection unless one is given), with
    machines of earlier runs past their deadline taken down first."""
    from gpubench.lifecycle import fleet
    from gpubench.store.ledger import Ledger

    own = ledger is None
    ledger = ledger or Ledger()
    try:
        fleet.settle_deadlines(ledger, say=echo)
        yield ledger
    finally:
        if own:
            ledger.close()
