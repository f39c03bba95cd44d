"""Money before and during a bench: what a plan is expected to cost, the ceiling
(--budget, or [defaults] budget in config.toml) it must stay under, and a guard that
reads the money spent from the ledger (price x time since the provider created the
machine) before each run.

Expected time is a plan's honest guess, not its bound: setting up (boot, SSH, sync,
packages) plus, per run, the performance model's prediction for the workload on the
offer's GPU type at that count (gpubench/predict/runs.py), else the suite workload's
typical time on a GPU (a user's script: DEFAULT_RUN_S), never more than the run's
--timeout. The default deadline of a bench's machine is that time plus a margin, and
never past the budget.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable, Optional

from gpubench.errors import GpubenchError, UsageError
from gpubench.store.ledger import Ledger

SETUP_S = 600.0            # renting, booting, SSH, syncing, installing: typical, not a deadline
# Typical seconds of one run of each suite workload at its default size on a rented GPU.
RUN_S = {"mnist-ddp": 120.0, "resnet-ddp": 300.0, "gpt-ddp": 240.0, "gpt-fsdp": 240.0,
         "recsys-ddp": 120.0, "allreduce": 180.0}
DEFAULT_RUN_S = 600.0      # a user's own script: nothing is known of it
MARGIN_S = 1800.0          # the default deadline: expected time plus the larger of this
MARGIN_SHARE = 0.5         # ... and this share of it
CONFIG_SECTION, CONFIG_KEY = "defaults", "budget"
TYPICAL = "typical times"
# (workload, sweep point) -> (predicted seconds of the run, the prediction's basis), or None
Forecast = Callable[[str, object], Optional[tuple[float, str]]]


class BudgetError(UsageError):
    """A budget that is not a positive amount, or a plan whose estimate passes it."""


class BudgetReached(GpubenchError):
    """The next run would take the spending past the budget."""


def expected_run_s(workload: str, timeout: float, point=None, forecast: Forecast | None = None) -> float:
    """The model's prediction where there is one, else the typical time; within --timeout."""
    predicted = forecast(workload, point) if forecast is not None else None
    return min(predicted[0] if predicted else RUN_S.get(workload, DEFAULT_RUN_S), timeout)


@dataclass(frozen=True)
class Estimate:
    """What a bench plan is expected to take and cost on one machine."""

    runs: int
    expected_s: float
    price_per_hour: float
    basis: str = TYPICAL           # where the run times come from, in words

    @property
    def hours(self) -> float:
        return self.expected_s / 3600.0

    @property
    def dollars(self) -> float:
        return self.price_per_hour * self.hours

    def default_max_hours(self, budget: float | None = None) -> float:
        """The plan's expected time plus a margin, and no later than the budget lasts."""
        hours = (self.expected_s + max(MARGIN_S, MARGIN_SHARE * self.expected_s)) / 3600.0
        if budget is not None and self.price_per_hour > 0:
            hours = min(hours, budget / self.price_per_hour)
        return hours

    def describe(self) -> str:
        from gpubench.format import format_dollars

        return (f"{self.runs} run(s), about {say_hours(self.hours)} expected ({self.basis}), about "
                f"{format_dollars(self.dollars)} at {format_dollars(self.price_per_hour)}/h")


def estimate(workloads: list[str], points: list, timeout: float, price_per_hour: float,
             forecast: Forecast | None = None) -> Estimate:
    """Every workload run once at each of the sweep's points (bench/plan.py says which),
    each run as long as `forecast` predicts it, else its typical time."""
    seconds, bases = [], []
    for w in workloads:
        for point in points:
            predicted = forecast(w, point) if forecast is not None else None
            seconds.append(min(predicted[0] if predicted else RUN_S.get(w, DEFAULT_RUN_S), timeout))
            bases.append(predicted[1] if predicted else None)
    return Estimate(len(seconds), SETUP_S + sum(seconds), price_per_hour, _bases(bases))


def _bases(bases: list[str | None]) -> str:
    """'predicted from published figures', or which runs are typical times."""
    known = sorted({b for b in bases if b})
    if not known:
        return TYPICAL
    said = f"predicted from {' and '.join(known)} figures"
    missing = bases.count(None)
    return said if not missing else f"{said}; {missing} run(s) at typical times"


def check_budget(dollars: float | None, source: str = "--budget") -> float | None:
    if dollars is None:
        return None
    if isinstance(dollars, bool) or not isinstance(dollars, (int, float)) or not dollars > 0:
        raise BudgetError(f"{source} must be a positive number of dollars (got {dollars!r})")
    return float(dollars)


def configured_budget() -> float | None:
    """[defaults] budget in config.toml, or None. A broken file or value is one line."""
    from gpubench.providers.credentials import ConfigError, config_path, config_section

    section = config_section(CONFIG_SECTION)
    if section is None:
        return None
    value = section.get(CONFIG_KEY)
    if value is None:
        return None
    try:
        return check_budget(value, f"{config_path()}: {CONFIG_KEY} under [{CONFIG_SECTION}]")
    except BudgetError as e:
        raise ConfigError(str(e)) from None


def refuse_over_budget(plan: Estimate, budget: float | None) -> None:
    """A plan whose estimate passes the budget is refused before anything is rented."""
    if budget is not None and plan.dollars > budget:
        from gpubench.format import format_dollars

        raise BudgetError(f"the plan is expected to cost about {format_dollars(plan.dollars)} "
                          f"({plan.runs} run(s), about {say_hours(plan.hours)} at "
                          f"{format_dollars(plan.price_per_hour)}/h), more than the budget of "
                          f"{format_dollars(budget)}: nothing rented (fewer workloads or counts, "
                          f"a cheaper machine, or a larger --budget)")


class Spending:
    """The money spent on one ledger row's machine against a budget, read from the
    ledger each time (price x time since the provider created it)."""

    def __init__(self, ledger: Ledger, row_id: int, budget: float) -> None:
        self.ledger = ledger
        self.row_id = row_id
        self.budget = budget

    def spent(self, now: float | None = None) -> float:
        return self.ledger.get(self.row_id).cost(now) or 0.0

    def seconds_left(self, now: float | None = None) -> float:
        """How long the machine may still run before the spending passes the budget."""
        price = self.ledger.get(self.row_id).price_per_hour
        if not price:
            return math.inf
        return max(self.budget - self.spent(now), 0.0) / price * 3600.0

    def allow(self, expected_s: float, timeout: float, what: str) -> float:
        """Before a run expected to take `expected_s`: its time limit, cut to what the
        budget has left; BudgetReached when even its expected time would pass it."""
        from gpubench.format import format_dollars

        now = time.time()
        left = self.seconds_left(now)
        if left < expected_s:
            raise BudgetReached(f"budget: {format_dollars(self.spent(now))} of "
                                f"{format_dollars(self.budget)} spent; {what}, about "
                                f"{say_hours(expected_s / 3600.0)}, would pass it: no more runs")
        return min(timeout, left)


class SharedBudget:
    """One budget over several machines rented at once (a bench across providers):
    the money spent is every ledger row under `names` asked for since `since` (the
    machines thrown away on the way included), and the time left is what that leaves
    at the price of all of them still running. Once it has refused a run, it refuses
    every later one: the budget is reached for all the machines. Each thread watches
    it through its own ledger connection (`watch`)."""

    def __init__(self, budget: float, names: list[str], since: float) -> None:
        import threading

        self.budget = budget
        self.names = set(names)
        self.since = since
        self.reached: str | None = None
        self.lock = threading.Lock()

    def watch(self, ledger: Ledger) -> "SharedSpending":
        return SharedSpending(self, ledger)

    def rows(self, ledger: Ledger) -> list:
        return [r for r in ledger.entries(include_done=True)
                if r.name in self.names and (r.requested_at or 0) >= self.since]


class SharedSpending:
    """A Spending (the same `allow`) over a SharedBudget, read through one ledger connection."""

    def __init__(self, shared: SharedBudget, ledger: Ledger) -> None:
        self.shared = shared
        self.ledger = ledger
        self.budget = shared.budget

    def spent(self, now: float | None = None) -> float:
        return sum(r.cost(now) or 0.0 for r in self.shared.rows(self.ledger))

    def seconds_left(self, now: float | None = None) -> float:
        rows = self.shared.rows(self.ledger)
        price = sum(r.price_per_hour or 0.0 for r in rows if r.active)
        if not price:
            return math.inf
        spent = sum(r.cost(now) or 0.0 for r in rows)
        return max(self.budget - spent, 0.0) / price * 3600.0

    def allow(self, expected_s: float, timeout: float, what: str) -> float:
        """As Spending.allow, for all the machines together."""
        from gpubench.format import format_dollars

        with self.shared.lock:
            if self.shared.reached is not None:
                raise BudgetReached(self.shared.reached)
            now = time.time()
            left = self.seconds_left(now)
            if left < expected_s:
                self.shared.reached = (f"budget: {format_dollars(self.spent(now))} of "
                                       f"{format_dollars(self.budget)} spent on all the machines; "
                                       f"{what}, about {say_hours(expected_s / 3600.0)}, would pass "
                                       f"it: no more runs on any")
                raise BudgetReached(self.shared.reached)
        return min(timeout, left)


def say_hours(hours: float) -> str:
    """'45 min', '2.5 h': a duration as the messages say it."""
    minutes = int(round(hours * 60))
    return f"{minutes} min" if minutes < 120 else f"{hours:.1f} h"
