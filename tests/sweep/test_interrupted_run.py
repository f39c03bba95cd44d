"""A run interrupted by Ctrl-C keeps what it said so far: its log is written, says
how it ended, and `gpubench logs` finds it; it gets no record, so the sweep run
again runs it again."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpubench.launch.base import Launcher, Machine, RunOutcome
from gpubench.store.results import ResultsStore
from gpubench.suite import WorkloadRef
from gpubench.sweep import runlogs
from gpubench.sweep.run import SweepPlan, sweep
from tests.helpers import one_node

MACHINE = Machine("local", "local-cpu-2c", "cpu", 0, 0.0, "cpu")


class CtrlCLauncher(Launcher):
    """Says a few lines at 2 processes, then the user presses Ctrl-C."""

    def machine(self) -> Machine:
        return MACHINE

    def prepare(self, workload) -> None:
        pass

    def run(self, workload, point, workload_args, on_line, timeout) -> RunOutcome:
        if point.procs_per_node == 1:
            on_line("one process: trained")
            return RunOutcome(0, {"status": "ok", "throughput": 10.0}, ["torchrun"], 0.1)
        on_line("epoch 1: loss 2.30")
        on_line("epoch 2: loss 1.10")
        raise KeyboardInterrupt

    def close(self) -> None:
        pass


def test_ctrl_c_keeps_the_interrupted_runs_output(tmp_path, cli):
    store = ResultsStore(tmp_path / "results")
    said: list[str] = []
    plan = SweepPlan(WorkloadRef("w", Path("w.py"), True), one_node([1, 2]), [], "r1", 60)
    with pytest.raises(KeyboardInterrupt):
        sweep(CtrlCLauncher(), plan, store, lambda line: said.append(str(line)))
    log = store.directory / runlogs.relative_path("r1", "2gpus")
    text = log.read_text()
    assert "epoch 1: loss 2.30\nepoch 2: loss 1.10\n" in text
    assert text.rstrip().splitlines()[-1].startswith("# interrupted (Ctrl-C) after ")
    assert said[-1] == "[2 gpus] interrupted (Ctrl-C); its output so far: gpubench logs r1 2"
    assert [r["gpu_count"] for r in store.load().records] == [1]  # no record: it runs again
    code, out, err = cli("logs", "r1", "2", "--results", str(store.directory))
    assert code == 0, err
    assert "epoch 2: loss 1.10" in out and "interrupted (Ctrl-C)" in out
