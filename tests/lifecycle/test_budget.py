"""The spending ceiling without a cloud: a plan's expected time and cost, the default
deadline it gives a bench's machine, [defaults] budget in config.toml, a plan over
budget refused, and the guard that reads the money spent from the ledger before each
run."""

from __future__ import annotations

import time

import pytest

from gpubench import paths
from gpubench.lifecycle import budget
from gpubench.lifecycle.budget import BudgetError, BudgetReached, Estimate, Spending
from gpubench.store.ledger import Ledger
from gpubench.store.status import LedgerStatus
from gpubench.providers.credentials import ConfigError


def test_a_plan_is_setup_plus_its_runs_each_within_its_timeout():
    plan = budget.estimate(["mnist-ddp", "my_script"], [1, 2, 4], 3600.0, 2.0)
    assert plan.runs == 6
    assert plan.expected_s == budget.SETUP_S + 3 * budget.RUN_S["mnist-ddp"] + 3 * budget.DEFAULT_RUN_S
    assert plan.dollars == pytest.approx(2.0 * plan.expected_s / 3600)
    short = budget.estimate(["gpt-ddp"], [1], 30.0, 2.0)          # --timeout 30 bounds the run
    assert short.expected_s == budget.SETUP_S + 30.0
    assert "1 run(s), about 10 min expected (typical times), about $0.35 at $2.00/h" == short.describe()


def test_the_default_deadline_is_a_margin_past_the_plan_and_never_past_the_budget():
    plan = Estimate(4, 3600.0, 2.0)
    assert plan.default_max_hours() == pytest.approx(1.5)        # 1 h + the larger of 30 min, 50 %
    assert Estimate(4, 600.0, 2.0).default_max_hours() == pytest.approx(600 / 3600 + 0.5)
    assert plan.default_max_hours(budget=2.5) == pytest.approx(1.25)   # $2.50 lasts 1.25 h at $2/h


def test_a_plan_over_budget_is_refused_saying_what_it_would_cost():
    plan = Estimate(4, 3600.0, 2.0)
    budget.refuse_over_budget(plan, None)
    budget.refuse_over_budget(plan, 2.0)
    with pytest.raises(BudgetError) as e:
        budget.refuse_over_budget(plan, 1.5)
    assert "about $2.00" in str(e.value) and "budget of $1.50" in str(e.value)
    assert "nothing rented" in str(e.value) and e.value.exit_code == 2


@pytest.mark.parametrize("text,expected", [
    ("", None),
    ("[defaults]\n", None),
    ("[defaults]\nbudget = 12.5\n", 12.5),
    ("[defaults]\nbudget = 3\n", 3.0),
])
def test_defaults_budget_in_config(text, expected):
    path = paths.config_dir(create=True) / "config.toml"
    path.write_text(text)
    assert budget.configured_budget() == expected


@pytest.mark.parametrize("text,words", [
    ("[defaults]\nbudget = \"ten\"\n", "must be a positive number of dollars"),
    ("[defaults]\nbudget = -1\n", "must be a positive number of dollars"),
    ("[defaults]\nbudget = true\n", "must be a positive number of dollars"),
    ("defaults = 3\n", "must be a section"),
])
def test_a_bad_budget_in_config_is_one_line_naming_the_file(text, words):
    path = paths.config_dir(create=True) / "config.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as e:
        budget.configured_budget()
    assert words in str(e.value) and str(path) in str(e.value) and "\n" not in str(e.value)


def test_a_config_that_is_not_utf8_is_one_line_too():
    path = paths.config_dir(create=True) / "config.toml"
    path.write_bytes(b"[defaults]\nbudget = 5 # caf\xe9\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        budget.configured_budget()


def _row_created(ledger: Ledger, seconds_ago: float, price: float = 3.6):
    entry = ledger.begin("b", "mem", "gpubench-b", price_per_hour=price)
    return ledger.mark(entry.row_id, LedgerStatus.LAUNCHED, instance_id="i1",
                       created_at=time.time() - seconds_ago)


def test_the_guard_cuts_a_run_to_what_the_budget_has_left():
    ledger = Ledger()
    entry = _row_created(ledger, seconds_ago=500)              # $3.60/h: $0.50 spent
    spending = Spending(ledger, entry.row_id, budget=1.0)
    assert spending.spent() == pytest.approx(0.5, abs=0.01)
    assert spending.seconds_left() == pytest.approx(500, abs=10)
    assert spending.allow(expected_s=120, timeout=3600, what="the next run") == pytest.approx(500, abs=10)
    assert spending.allow(expected_s=120, timeout=60, what="the next run") == 60


def test_the_guard_stops_a_run_that_would_pass_the_budget():
    ledger = Ledger()
    entry = _row_created(ledger, seconds_ago=900)              # $0.90 of $1.00 spent: 100 s left
    spending = Spending(ledger, entry.row_id, budget=1.0)
    with pytest.raises(BudgetReached) as e:
        spending.allow(expected_s=300, timeout=3600, what="the next run (mnist-ddp on 2 gpus)")
    assert "$0.90 of $1.00 spent" in str(e.value) and "mnist-ddp on 2 gpus" in str(e.value)


def test_a_plan_takes_each_runs_predicted_time_where_the_model_has_one():
    def forecast(workload, point):
        return (120.0, "published") if workload == "resnet-ddp" else None

    plan = budget.estimate(["resnet-ddp", "my.py"], [1, 2], 3600.0, 2.0, forecast)
    assert plan.expected_s == budget.SETUP_S + 2 * 120.0 + 2 * budget.DEFAULT_RUN_S
    assert plan.basis == "predicted from published figures; 2 run(s) at typical times"
    assert "(predicted from published figures; 2 run(s) at typical times)" in plan.describe()
    capped = budget.estimate(["resnet-ddp"], [1], 60.0, 2.0, forecast)     # never past --timeout
    assert capped.expected_s == budget.SETUP_S + 60.0
    assert budget.expected_run_s("resnet-ddp", 3600.0, 1, forecast) == 120.0
    assert budget.expected_run_s("resnet-ddp", 3600.0) == budget.RUN_S["resnet-ddp"]
