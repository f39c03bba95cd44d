"""`bench --hosts K`: the same sweep on K machines of one GPU type, on distinct hosts,
one after the other or (--parallel) at once.

Hosts are told apart by the provider's id for the machine where it gives one
(Vast.ai's machine_id: no two of the K rent the same machine); elsewhere (Lambda,
RunPod) every launch is a machine of its own and the instance id names it. Machine
i is named NAME-i in the ledger.

Whatever happens (an error on one machine, Ctrl-C) every machine is taken down and
that confirmed: each machine's own bench tears it down on its way out; on Ctrl-C
with --parallel every worker is told to stop at its next step (it raises
Cancelled, a KeyboardInterrupt, where it next reports progress) and the main
thread waits for their teardowns; last, any machine of the bench the ledger still
holds live is taken down here.
"""

from __future__ import annotations

import signal
import threading
from concurrent.futures import ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Callable

from gpubench.errors import GpubenchError

if TYPE_CHECKING:
    from gpubench.bench import BenchPlan, BenchRequest, BenchResult
    from gpubench.lifecycle.budget import Estimate

Echo = Callable[[str], None]


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
    from gpubench.bench import host_of

    return host_of(offer)


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

def bench_hosts(req: "BenchRequest", plan: "BenchPlan", name: str, store, echo: Echo,
                ledger) -> "BenchResult":
    """Bench each of the K machines; the result holds each machine's and their sum."""
    from gpubench.bench import BenchResult

    names = [machine_name(name, i) for i in range(1, plan.hosts + 1)]
    share = plan.budget / plan.hosts if plan.budget is not None else None
    done: list[BenchResult] = []
    try:
        if req.parallel:
            done = _at_once(req, plan, names, store, echo, ledger, share)
        else:
            done = _in_turn(req, plan, names, store, echo, ledger, share)
    finally:
        _take_down_leftovers(names, ledger, plan.provider, echo)
    return _combined(name, done)


def _in_turn(req, plan, names, store, echo, ledger, share) -> list:
    from gpubench.bench import bench_machine

    used: set = set()
    done = []
    for i, machine in enumerate(names, start=1):
        offers = not_used(plan.offers, used)
        if not offers:
            raise NotEnoughHostsError(f"no host left to rent for machine {i} of {len(names)}")
        echo(f"machine {i} of {len(names)}: {machine}")
        result = bench_machine(req, plan, offers, machine, store, echo, ledger, share)
        used.add(result.host_id)
        done.append(result)
    return done


def _at_once(req, plan, names, store, echo, ledger, share) -> list:
    from gpubench.bench import MAX_PARALLEL

    _register_key_once(plan.provider)     # K workers must not each create the key
    cancel = threading.Event()
    lists = split_hosts(plan.offers, len(names))
    lock = threading.Lock()

    def worker(machine: str, offers: list):
        from gpubench.bench import bench_machine
        from gpubench.lifecycle.ledger import Ledger

        with Ledger(ledger.path) as own:    # a connection of its own per thread
            return bench_machine(req, plan, offers, machine, store, _said_by(machine, echo, cancel, lock),
                                 own, share)

    results: list = []
    with _ctrl_c_cancels(cancel, echo), ThreadPoolExecutor(min(len(names), MAX_PARALLEL)) as pool:
        futures = [pool.submit(worker, machine, offers) for machine, offers in zip(names, lists)]
        _wait_all(futures)
        errors = []
        for future in futures:
            try:
                results.append(future.result())
            except BaseException as e:
                errors.append(e)
    if cancel.is_set():
        raise KeyboardInterrupt
    if errors:
        raise errors[0]
    return results


def _wait_all(futures) -> None:
    """Until every worker is done: a worker's failure does not stop the others (each
    tears its own machine down); Ctrl-C (the handler sets `cancel`) stops them all."""
    pending = set(futures)
    while pending:     # short waits: the main thread's Ctrl-C handler runs between them
        _, pending = wait(pending, timeout=0.5)


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


def _said_by(machine: str, echo: Echo, cancel: threading.Event, lock: threading.Lock) -> Echo:
    """A worker's echo: its lines prefixed with its machine's name; once Ctrl-C was
    pressed, its next line raises Cancelled (once: its teardown speaks too)."""
    raised = []

    def say(line: str) -> None:
        if cancel.is_set() and not raised:
            raised.append(True)
            raise Cancelled
        with lock:
            echo(f"[{machine}] {line}")

    return say


def _register_key_once(provider) -> None:
    from gpubench.lifecycle.keys import ensure_keypair

    keypair = ensure_keypair()
    provider.ensure_ssh_key(keypair.public_key, "gpubench")


def _take_down_leftovers(names: list[str], ledger, provider, echo: Echo) -> None:
    """The last safety: a machine of this bench the ledger still holds live (a worker
    stopped before its own teardown) is taken down here."""
    from gpubench.bench import TERMINATE_DEADLINE_S, TeardownError
    from gpubench.lifecycle.terminate import take_down_entry

    for machine in names:
        entry = ledger.find_active(machine)
        if entry is None:
            continue
        echo(f"terminating {machine} ({entry.provider} {entry.instance_id or 'id unknown'})")
        down = take_down_entry(ledger, entry, provider, TERMINATE_DEADLINE_S, echo)
        if not down.gone:
            raise TeardownError(f"{machine} is NOT confirmed terminated ({down.message}); "
                                f"run 'gpubench down {machine}' and check 'gpubench ls'")


def _combined(name: str, machines: list) -> "BenchResult":
    from gpubench.bench import BenchResult

    costs = [m.cost for m in machines]
    billed = [m.billed for m in machines]
    return BenchResult(
        name=name, records=[r for m in machines for r in m.records],
        run_ids=[r for m in machines for r in m.run_ids],
        cost=None if None in costs else sum(costs),
        billed=None if (None in billed or not billed) else sum(billed),
        terminated=all(m.terminated for m in machines), kept=any(m.kept for m in machines),
        budget_stop="; ".join(m.budget_stop for m in machines if m.budget_stop) or None,
        machines=machines)
