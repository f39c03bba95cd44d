"""A spending ceiling from the command line, against the mock cloud: `bench --budget`
(or [defaults] budget in config.toml) refuses a plan expected to cost more before
anything is rented; during a bench no run starts that would pass it, and the machine
is torn down, saying so; `ls` shows the money spent per machine and in all."""

from __future__ import annotations

import json
import time

import pytest

from tests.helpers import mock_cloud
from gpubench import paths
from gpubench.bench.plan import plan_bench
from gpubench.bench.request import BenchRequest
from gpubench.lifecycle import budget
from gpubench.store.ledger import Ledger
from gpubench.providers import registry
from gpubench.store.results import ResultsStore
from gpubench.suite import resolve_list


@pytest.fixture
def cloud(tmp_path, monkeypatch):
    """The mock's API; instances boot only where a test lets them (booting starts sshd)."""
    yield from mock_cloud(tmp_path, monkeypatch)




def _nothing_rented() -> bool:
    return Ledger().entries(include_done=True) == [] and all(
        registry.get(p).list() == [] for p in ("lambda", "vast", "runpod"))


def _config(text: str) -> None:
    path = paths.config_dir(create=True) / "config.toml"
    path.write_text(text)


def test_a_plan_over_budget_is_refused_before_anything_is_rented(cloud, cli, tmp_path):
    code, out, err = cli("bench", "vast", "--gpus", "1", "--workload", "mnist-ddp",
                        "--budget", "0.0001", "--yes", "--results", str(tmp_path))
    assert code == 2 and err.count("\n") == 1
    assert "expected to cost about $" in err and "more than the budget of $0.0001" in err
    assert _nothing_rented()


def test_the_budget_in_config_is_the_default_and_the_flag_wins(cloud, cli, tmp_path):
    _config("[defaults]\nbudget = 0.0001\n")
    code, out, err = cli("bench", "runpod", "--gpus", "1", "--workload", "mnist-ddp",
                        "--yes", "--results", str(tmp_path))
    assert code == 2 and "more than the budget of $0.0001" in err and _nothing_rented()
    req = BenchRequest("runpod", 1, resolve_list("mnist-ddp", None), budget=100.0)
    plan = plan_bench(req)
    assert plan.budget == 100.0 and plan.estimate.runs == 1
    assert plan.max_hours == pytest.approx(plan.estimate.default_max_hours(100.0))
    assert "expected" in plan.describe() and "budget $100.00" in plan.describe()
    assert "stops itself after" in plan.describe()


@pytest.mark.parametrize("text,args,code,words", [
    ("[defaults]\nbudget = \"lots\"\n", [], 1, "budget under [defaults] must be a positive number"),
    (b"[defaults]\nbudget = 1 # \xff\n", [], 1, "not UTF-8"),
    ("", ["--budget", "-3"], 2, "--budget must be a positive number of dollars"),
    ("", ["--max-hours", "0"], 2, "--max-hours must be positive"),
])
def test_a_bad_budget_or_deadline_is_one_line(cloud, cli, tmp_path, text, args, code, words):
    path = paths.config_dir(create=True) / "config.toml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    got, out, err = cli("bench", "lambda", "--gpus", "1", "--workload", "mnist-ddp", "--yes",
                       "--results", str(tmp_path), *args)
    assert (got, err.count("\n")) == (code, 1) and words in err and "Traceback" not in err
    assert _nothing_rented()


class _Hours:
    """time.time() for the budget guard: ten hours later at each look, so the second
    run finds the money spent."""

    def __init__(self) -> None:
        self.looks = 0

    def time(self) -> float:
        self.looks += 1
        return time.time() + (self.looks - 1) * 36000.0


@pytest.mark.slow
def test_the_bench_stops_before_a_run_that_would_pass_the_budget(cloud, cli, tmp_path, monkeypatch):
    from tests.remote.helpers import tiny_script

    monkeypatch.setattr(budget, "time", _Hours())
    results = tmp_path / "results"
    results.mkdir()
    script = tiny_script(tmp_path)
    code, out, err = cli("bench", "vast", "--gpus", "2", "--workload", str(script),
                        "--counts", "1,2", "--name", "b", "--budget", "0.5", "--yes", "--no-preflight",
                        "--results", str(results))
    assert code == 1, err
    assert "plan: 2 run(s)" in out and "budget $0.50" in out
    assert "no more runs; tearing down" in out and "b terminated; the whole bench cost $" in out
    assert err.startswith("error: budget: $") and "of $0.50 spent; the next run (" in err
    assert "tiny_bench.py on 2 gpus), about 10 min, would pass it: no more runs" in err
    records = ResultsStore(results).load().records
    assert [(r["gpu_count"], r["status"]) for r in records] == [(1, "ok")]
    entry = Ledger().find("b")
    assert entry.termination_confirmed and entry.watchdog == "self-removal" and entry.deadline_at

    code, out, err = cli("ls", "--all")
    assert code == 0 and "spent so far: $" in out and "in all (1 machine" in out
    code, out, err = cli("ls", "--all", "--format", "json")
    (row,) = json.loads(out)
    assert row["cost"] > 0 and row["deadline_at"] == entry.deadline_at and row["watchdog"] == "self-removal"
