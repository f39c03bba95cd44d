"""The sweeps of a bench on what it rented: every workload swept through the
launcher factory (a machine's SSH launcher, a cluster's c10d launcher), each run
asked of the budget first, every record given the host's facts (the preflight
gate's findings, the host and instance ids, the cluster's name)."""

from __future__ import annotations

from typing import Callable

from gpubench.bench.request import BenchRequest, BenchResult
from gpubench.launch.base import Machine, SweepPoint
from gpubench.store.results import ResultsStore, new_run_id

Echo = Callable[[str], None]
PointsFor = Callable[[Machine], list[SweepPoint]]


def sweep_on(target, points_for: PointsFor, req: BenchRequest, store: ResultsStore, echo: Echo,
             result: BenchResult, spending=None, force: bool | None = None, forecast=None) -> None:
    """Sweep every workload of the bench on a rented machine or cluster (`target`, an
    --on value for the launcher factory) at the points `points_for(machine)` gives,
    under the budget's `spending`; a budget reached ends the sweeps (result.budget_stop)."""
    from gpubench.launch.factory import LaunchOptions, open_launcher
    from gpubench.lifecycle.budget import BudgetReached
    from gpubench.suite import args_for
    from gpubench.sweep.run import SweepPlan, default_repeats, sweep

    options = LaunchOptions(remote_python=req.remote_python, remote_dir=req.remote_dir, echo=echo)
    with open_launcher(target, options) as opened:
        launcher = opened if spending is None else Budgeted(opened, spending, forecast)
        machine = launcher.machine()
        points = _link_checked(opened, machine, points_for(machine), req, echo)
        for workload in req.workloads:
            run_plan = SweepPlan(workload, list(points),
                                 args_for(workload, req.workload_args, req.per_workload_args), new_run_id(),
                                 req.timeout, force=req.force if force is None else force,
                                 repeat=req.repeat or default_repeats(machine))
            result.run_ids.append(run_plan.run_id)
            try:
                result.records += sweep(launcher, run_plan, store, echo).records
            except BudgetReached as e:
                result.budget_stop = str(e)
                echo(f"{e}; tearing down")
                return


def _link_checked(launcher, machine, points, req: BenchRequest, echo: Echo):
    """The points to run on a cluster once the link measured between its members has been
    put through the performance model (gpubench.sweep.link_check); asked where more nodes
    are predicted slower than one (a bench without a question to ask was agreed to with --yes)."""
    from gpubench.launch.cluster import ClusterLauncher
    from gpubench.suite import args_for
    from gpubench.sweep.link_check import points_to_run

    if not isinstance(launcher, ClusterLauncher):
        return points
    workloads = [(w.name, args_for(w, req.workload_args, req.per_workload_args)) for w in req.workloads]
    return points_to_run(launcher.cluster, machine, points, workloads, req.results, req.ask is None,
                         req.ask, echo)


def spending_for(ledger, row_id: int, budget: float | None):
    """The budget's watch over the machine of ledger row `row_id`; None without one."""
    if budget is None:
        return None
    from gpubench.lifecycle.budget import Spending

    return Spending(ledger, row_id, budget)


def gate(req: BenchRequest, ledger):
    """The preflight gate for provisioning, run with the bench's remote python, its
    findings kept in the ledger; None when --no-preflight."""
    if not req.preflight:
        return None
    from gpubench.lifecycle.preflight import recorded_gate

    return recorded_gate(ledger, req.remote_python)


class WithHostFacts:
    """The results store, adding the host's facts to every record appended (where
    the workload wrote none of its own)."""

    def __init__(self, store: ResultsStore, fields: dict) -> None:
        self._store = store
        self._fields = fields

    def append(self, run_id: str, record: dict):
        for key, value in self._fields.items():
            if record.get(key) is None:
                record[key] = value
        return self._store.append(run_id, record)

    def __getattr__(self, name: str):
        return getattr(self._store, name)


class Budgeted:
    """The sweep's launcher, asking the budget before each run: no run starts whose
    expected time would take the spending past it, and a run's time limit is cut to
    what the budget has left (a run stopped there is recorded as timed out)."""

    def __init__(self, launcher, spending, forecast=None) -> None:
        self._launcher = launcher
        self._spending = spending
        self._forecast = forecast

    def machine(self):
        return self._launcher.machine()

    def prepare(self, workload) -> None:
        self._launcher.prepare(workload)

    def run(self, workload, point, workload_args, on_line, timeout):
        from gpubench.lifecycle.budget import expected_run_s

        limit = self._spending.allow(expected_run_s(workload.name, timeout, point, self._forecast), timeout,
                                     f"the next run ({workload.name} on {point.describe()})")
        return self._launcher.run(workload, point, workload_args, on_line, limit)

    def close(self) -> None:
        self._launcher.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
