"""`bench --hosts K`: the same sweep on K machines of one GPU type, on distinct hosts,
one after the other or (--parallel) at once.

Hosts are told apart by the provider's id for the machine where it gives one
(Vast.ai's machine_id: no two of the K rent the same machine); elsewhere (Lambda,
RunPod) every launch is a machine of its own and the instance id names it. Machine
i is named NAME-i in the ledger.

Whatever happens (an error on one machine, Ctrl-C) every machine is taken down and
that confirmed: each machine's own bench (bench.bench_machine, passed in as
`run_one`) tears it down on its way out; on Ctrl-C with --parallel every worker is
told to stop at its next step (it raises Cancelled, a KeyboardInterrupt, where it
next reports progress) and the main thread waits for their teardowns; last, the
bench takes down any machine of it the ledger still holds live.
"""

from __future__ import annotations

import signal
import threading
from concurrent.futures import ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Callable

from gpubench.errors import GpubenchError
from gpubench.sweep.events import named

if TYPE_CHECKING:
    from gpubench.lifecycle.budget import Estimate

Echo = Callable[[str], None]
# One machine's bench: (its name, the offers to rent it from, its echo) -> its result
# (with .host_id), the machine taken down before it returns or raises.
RunOne = Callable[[str, list, Echo], object]
MAX_PARALLEL = 8


class NotEnoughHostsError(GpubenchError):
    pass


class Cancelled(KeyboardInterrupt):
    """Raised in a --parallel worker once Ctrl-C was pressed: it takes the same way out
    as Ctrl-C in a bench of one machine (its teardown runs)."""


# -- planning ---------------------------------------------------------------------

def same_type(offers: list, best) -> list:
    """The offers of the cheapest one's GPU type and count: K machines of one type."""
    return [o for o in offers if o.gpu_name == best.gpu_name and o.gpu_count == best.gpu_count]


def host_key(offer) -> str | None:
    """The provider's id for the machine behind an offer (Vast.ai's machine_id), where
    its offers name one (the registry entry's machine_field): hosts are told apart by
    it. None elsewhere, a provider the registry does not know included."""
    from gpubench.providers import registry

    known = registry.find(getattr(offer, "provider", ""))
    field = known.machine_field if known is not None else None
    if field is None:
        return None
    host = (getattr(offer, "extra", None) or {}).get(field)
    return None if host is None else str(host)


def check_enough(offers: list, hosts: int, provider: str) -> None:
    """Where offers name their machines, there must be K distinct ones to rent."""
    named = {host_key(o) for o in offers if host_key(o) is not None}
    if named and len(named) < hosts:
        best = offers[0]
        raise NotEnoughHostsError(f"--hosts {hosts}: {provider} offers {best.gpu_count}x "
                                  f"{best.gpu_name} on {len(named)} distinct host(s) only")


def for_all(estimate: "Estimate", hosts: int) -> "Estimate":
    """The estimate of one machine, for K of them (what the budget is checked against)."""
    from gpubench.lifecycle.budget import Estimate

    return Estimate(estimate.runs * hosts, estimate.expected_s * hosts, estimate.price_per_hour)


def not_used(offers: list, used: set) -> list:
    """The offers on hosts no earlier machine of the bench ran on."""
    return [o for o in offers if host_key(o) is None or host_key(o) not in used]


def split_hosts(offers: list, hosts: int) -> list[list]:
    """K disjoint offer lists, one per machine started at once, so that no two rent the
    same host: distinct machines dealt out in turn, cheapest first. Offers that name no
    machine are shared: every launch of those is a machine of its own."""
    shared = [o for o in offers if host_key(o) is None]
    machines: list[str] = []
    for o in offers:
        key = host_key(o)
        if key is not None and key not in machines:
            machines.append(key)
    lists = []
    for i in range(hosts):
        mine = set(machines[i::hosts])
        lists.append([o for o in offers if host_key(o) in mine] + shared)
    return lists


def machine_name(base: str, index: int) -> str:
    return f"{base[:37]}-{index}"


# -- running ------------------------------------------------------------------------

def in_turn(names: list[str], offers: list, run_one: RunOne, echo: Echo) -> list:
    """Each machine after the other, each on a host none before it ran on."""
    used: set = set()
    done = []
    for i, machine in enumerate(names, start=1):
        left = not_used(offers, used)
        if not left:
            raise NotEnoughHostsError(f"no host left to rent for machine {i} of {len(names)}")
        echo(f"machine {i} of {len(names)}: {machine}")
        result = run_one(machine, left, echo)
        used.add(getattr(result, "host_id", None))
        done.append(result)
    return done


def at_once(names: list[str], offers: list, run_one: RunOne, echo: Echo) -> list:
    """Every machine at once (at most MAX_PARALLEL threads), on disjoint hosts; their
    results in order. Ctrl-C stops them all (each tearing its machine down) and is
    raised once they are done; else the first machine's error is, once all are done."""
    lists = split_hosts(offers, len(names))
    outcomes = each_at_once(names, lambda i, machine, say: run_one(machine, lists[i], say),
                            prefixed(echo), echo)
    errors = [o for o in outcomes if isinstance(o, BaseException)]
    if errors:
        raise errors[0]
    return outcomes


def prefixed(echo: Echo) -> Callable[[str], Echo]:
    """Each machine's lines on `echo`, prefixed with its name (its GPU samples stay
    samples: events.named)."""
    return lambda machine: (lambda line: echo(named(line, machine)))


def each_at_once(names: list[str], work: Callable[[int, str, Echo], object],
                 echo_for: Callable[[str], Echo], echo: Echo, stop_all_on_error: bool = False) -> list:
    """`work(i, name, say)` for every machine at once (at most MAX_PARALLEL threads), each
    saying its lines through `echo_for(name)`; what each returned, or the exception it
    raised, in order. Ctrl-C stops them all (each at its next line, tearing its machine
    down) and is raised once they are done. With `stop_all_on_error`, one raising stops
    the others the same way, and its error is raised once all are done."""
    cancel = threading.Event()
    lock = threading.Lock()
    failed: list[BaseException] = []
    with _ctrl_c_cancels(cancel, echo), ThreadPoolExecutor(min(len(names), MAX_PARALLEL)) as pool:
        futures = [pool.submit(work, i, machine, _said_by(echo_for(machine), cancel, lock))
                   for i, machine in enumerate(names)]
        _wait_all(futures, cancel if stop_all_on_error else None, failed)
        outcomes = []
        for future in futures:
            try:
                outcomes.append(future.result())
            except BaseException as e:
                outcomes.append(e)
    if failed:
        raise failed[0]
    if cancel.is_set():
        raise KeyboardInterrupt
    return outcomes


def _wait_all(futures, stop: threading.Event | None = None, failed: list | None = None) -> None:
    """Until every worker is done: a worker's failure does not stop the others (each
    tears its own machine down) unless `stop` is given, which it then sets (its error
    kept in `failed`); Ctrl-C (the handler sets `cancel`) stops them all."""
    pending = set(futures)
    while pending:     # short waits: the main thread's Ctrl-C handler runs between them
        done, pending = wait(pending, timeout=0.5)
        if stop is None:
            continue
        for future in done:
            error = future.exception()
            if error is not None and not isinstance(error, KeyboardInterrupt) and not stop.is_set():
                failed.append(error)
                stop.set()


class _ctrl_c_cancels:
    """While the workers run, Ctrl-C sets `cancel` (each worker stops at its next step
    and takes its machine down) instead of stopping the main thread, which must wait
    for those teardowns; pressed again it only says so."""

    def __init__(self, cancel: threading.Event, echo: Echo) -> None:
        self.cancel, self.echo, self.previous = cancel, echo, None

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self.previous = signal.signal(signal.SIGINT, self._note)
        return self

    def _note(self, signum, frame) -> None:
        self.cancel.set()
        self.echo("stopping: taking every machine of this bench down; it takes a moment")

    def __exit__(self, *exc) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)


def _said_by(say: Echo, cancel: threading.Event, lock: threading.Lock) -> Echo:
    """A worker's echo: its lines through `say`, one at a time; once Ctrl-C was
    pressed, its next line raises Cancelled (once: its teardown speaks too)."""
    raised = []

    def said(line: str) -> None:
        if cancel.is_set() and not raised:
            raised.append(True)
            raise Cancelled
        with lock:
            say(line)

    return said
