"""A whole bench in one call: rent a machine, run the sweeps on it over SSH,
and give it back, whatever happens in between (an error, Ctrl-C), unless asked
to keep it. The ledger row written by provisioning is what teardown acts on,
so a machine whose launch was interrupted half-way is found and removed too.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from dataclasses import dataclass, field
from typing import Callable, Iterator

from gpubench.errors import GpubenchError
from gpubench.results import ResultsStore, new_run_id
from gpubench.suite import WorkloadRef

Echo = Callable[[str], None]
TERMINATE_DEADLINE_S = 180.0


@dataclass
class BenchRequest:
    provider: str
    gpus: int
    workloads: list[WorkloadRef]
    workload_args: list[str] = field(default_factory=list)
    counts: list[int] | None = None   # None: 1 and powers of two up to the machine's GPUs
    gpu_type: str | None = None
    max_price: float | None = None
    disk_gb: int = 100
    image: str | None = None
    name: str | None = None
    keep: bool = False
    force: bool = False
    timeout: float = 3600.0           # per run
    remote_python: str = "python3"
    remote_dir: str = "gpubench"
    repeat: int | None = None         # runs of each count; None: the sweep's default for the machine


@dataclass
class BenchResult:
    name: str = ""
    instance_id: str | None = None
    records: list[dict] = field(default_factory=list)
    run_ids: list[str] = field(default_factory=list)
    cost: float | None = None         # the whole machine, from launch to terminate (or now)
    terminated: bool = False
    kept: bool = False

    @property
    def all_ok(self) -> bool:
        """No run of any sweep failed."""
        return all(r["status"] == "ok" for r in self.records)


class TeardownError(GpubenchError):
    """The machine may still be running (and billing)."""


def bench(req: BenchRequest, store: ResultsStore, echo: Echo, ledger=None,
          provider=None) -> BenchResult:
    """Provision, sweep every workload, terminate; the result says what it cost."""
    from gpubench.lifecycle import provision as lifecycle_provision
    from gpubench.lifecycle.ledger import Ledger
    from gpubench.lifecycle.provision import DEFAULT_IMAGE, ProvisionRequest, default_name
    from gpubench.providers import registry

    registry.check(req.provider)
    name = req.name or default_name(req.provider)
    preq = ProvisionRequest(req.provider, req.gpus, req.gpu_type, req.disk_gb,
                            req.image or DEFAULT_IMAGE, name=name, max_price=req.max_price)
    prov, offers = lifecycle_provision.connect_and_plan(preq, provider)
    best = offers[0]
    echo(f"renting {best.gpu_count}x {best.gpu_name} on {req.provider} "
         f"({best.instance_type or best.offer_id}) at ${best.price_per_hour:.2f}/h")
    result = BenchResult(name=name)
    own_ledger = ledger is None
    ledger = ledger or Ledger()
    try:
        try:
            outcome = lifecycle_provision.provision(prov, preq, offers, ledger,
                                                    lambda phase, detail: echo(f"{phase}: {detail}"))
            result.instance_id = outcome.entry.instance_id
            echo(f"ready in {outcome.seconds_to_ready:.1f}s: {name} ({req.provider} "
                 f"{outcome.entry.instance_id})")
            _sweeps(req, outcome.entry, store, echo, result)
        except BaseException as first:
            try:
                _teardown(req, name, ledger, prov, echo, result)
            except Exception as second:
                # Both matter: why the bench stopped, and that the machine may still bill.
                raise TeardownError(f"{_one_line(first)}\nerror: {second}") from first
            raise
        _teardown(req, name, ledger, prov, echo, result)
    finally:
        if own_ledger:
            ledger.close()
    return result


def _sweeps(req: BenchRequest, entry, store: ResultsStore, echo: Echo, result: BenchResult) -> None:
    from gpubench.launch.factory import LaunchOptions, open_launcher
    from gpubench.remote.targets import host_from_entry
    from gpubench.sweep import SweepPlan, default_points, default_repeats, on_one_node, sweep

    options = LaunchOptions(remote_python=req.remote_python, remote_dir=req.remote_dir, echo=echo)
    with open_launcher(host_from_entry(entry), options) as launcher:
        machine = launcher.machine()
        points = on_one_node(req.counts) if req.counts else default_points(machine)
        for workload in req.workloads:
            run_plan = SweepPlan(workload, list(points), list(req.workload_args), new_run_id(),
                                 req.timeout, force=req.force,
                                 repeat=req.repeat or default_repeats(machine))
            result.run_ids.append(run_plan.run_id)
            result.records += sweep(launcher, run_plan, store, echo).records


def _teardown(req: BenchRequest, name: str, ledger, prov, echo: Echo, result: BenchResult) -> None:
    """Terminate the machine named `name`, if the ledger has it, unless --keep."""
    from gpubench.lifecycle.sshconfig import sync_ssh_config
    from gpubench.lifecycle.terminate import take_down_entry

    entry = ledger.find_active(name)
    if entry is None:
        return  # never launched: nothing to pay for
    if req.keep:
        result.kept = True
        result.cost = entry.cost()
        echo(f"keeping {name} ({req.provider} {entry.instance_id}), {_money(result.cost)} so far; "
             f"'gpubench down {name}' stops paying for it")
        return
    echo(f"terminating {name} ({req.provider} {entry.instance_id or 'id unknown'})")
    with _ctrl_c_deferred(echo):
        down = take_down_entry(ledger, entry, prov, TERMINATE_DEADLINE_S, echo)
        sync_ssh_config(ledger)
    result.cost = down.cost
    result.terminated = down.gone
    if down.gone:
        echo(f"{name} terminated; the whole bench cost {_money(down.cost)}")
    else:
        raise TeardownError(f"{name} is NOT confirmed terminated ({down.message}); "
                            f"run 'gpubench down {name}' and check 'gpubench ls'")


@contextlib.contextmanager
def _ctrl_c_deferred(echo: Echo) -> Iterator[None]:
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


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    if isinstance(exc, GpubenchError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}".splitlines()[0]


def _money(dollars: float | None) -> str:
    if dollars is None:
        return "an unknown amount (no price on record)"
    from gpubench.format import format_dollars

    return format_dollars(dollars)
