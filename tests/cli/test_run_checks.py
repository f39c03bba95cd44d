"""Bad workload arguments cost one line and nothing else: a suite workload's flags
are checked by gpubench's own copy of its parser, without torch, before a launcher
is opened or a machine rented. And `gpubench logs` shows what each run printed."""

from __future__ import annotations

import pytest

from gpubench.launch import factory
from gpubench.store.results import ResultsStore
from gpubench.sweep.run import sweep, SweepPlan
from gpubench.suite import resolve
from tests.sweep.test_decisions import Fake
from tests.helpers import one_node


@pytest.fixture
def nothing_opens(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a launcher was opened")
    monkeypatch.setattr(factory, "open_launcher", refuse)


def test_a_typo_in_a_suite_workloads_flags_is_one_line_and_no_record(cli, tmp_path, nothing_opens):
    code, out, err = cli("run", "mnist-ddp", "--results", str(tmp_path), "--", "--stepz", "20")
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [
        "error: mnist-ddp: unrecognized arguments: --stepz 20 (did you mean --steps?); nothing was "
        "run (its flags: python -m gpubench.workloads.flags mnist-ddp --help)"]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args, message", [
    (["--precision", "fp64"], "argument --precision: invalid choice: 'fp64'"),
    (["--steps", "0"], "--steps must be at least 1"),
    (["--depth", "51"], "argument --depth: invalid choice: 51"),
])
def test_values_a_workload_refuses_are_caught_too(cli, tmp_path, nothing_opens, args, message):
    code, _, err = cli("run", "resnet-ddp", "--results", str(tmp_path), "--", *args)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_bench_checks_before_renting(cli, tmp_path, monkeypatch):
    from gpubench.bench import machine as bench

    monkeypatch.setattr(bench, "bench", lambda *a, **k: pytest.fail("a machine was rented"))
    code, _, err = cli("bench", "lambda", "--gpus", "2", "--workload", "mnist-ddp,gpt-ddp", "--yes",
                       "--results", str(tmp_path), "--", "--n-layers", "2")
    assert code == 2 and "mnist-ddp: unrecognized arguments: --n-layers 2" in err


def test_logs_shows_each_runs_output(cli, tmp_path):
    store = ResultsStore(tmp_path)
    plan = SweepPlan(resolve("mnist-ddp"), one_node([1, 2]), [], "20260101-000000-abcdef", 60,
                     repeat=2)
    sweep(Fake(), plan, store, lambda _: None)
    code, out, _ = cli("logs", "20260101", "2", "--results", str(tmp_path))
    assert code == 0
    assert out.count("hello from 2") == 2 and "hello from 1" not in out
    assert "==> " in out and "2gpus-r2.log <==" in out
    code, out, _ = cli("logs", "20260101-000000-abcdef", "--results", str(tmp_path))
    assert code == 0 and out.count("hello from") == 4
    code, _, err = cli("logs", "20260101", "8", "--results", str(tmp_path))
    assert code == 2 and err.strip() == ("error: run 20260101-000000-abcdef has no log at 8 GPU(s); "
                                         "its counts: 1, 2")
    code, _, err = cli("logs", "1999", "--results", str(tmp_path))
    assert code == 2 and "no run matching '1999'" in err
