"""`gpubench run`'s sweep step, called directly: a new run over the points asked for
or the machine's own, nothing that fits is an error, nothing left to run is not."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpubench.launch.base import Launcher, Machine, RunOutcome, SweepPoint
from gpubench.store.results import ResultsStore
from gpubench.suite import WorkloadRef
from gpubench.sweep.run import NothingFitsError, SweepResult, sweep_new_run
from tests.helpers import one_node

FOUR_GPUS = Machine("ssh", "box: 4x H100", "H100", 4, 8.0, "cuda")
WORKLOAD = WorkloadRef("w", Path("w.py"), True)


class CountingLauncher(Launcher):
    """Runs nothing: each point 'measures' 10 samples/s per process, or fails at fail_at."""

    def __init__(self, machine: Machine = FOUR_GPUS, fail_at: int = 0) -> None:
        self._machine = machine
        self.fail_at = fail_at
        self.ran: list[SweepPoint] = []

    def machine(self) -> Machine:
        return self._machine

    def prepare(self, workload) -> None:
        pass

    def run(self, workload, point, workload_args, on_line, timeout) -> RunOutcome:
        self.ran.append(point)
        if point.procs_per_node == self.fail_at:
            return RunOutcome(1, None, ["torchrun"], 0.1, "RuntimeError: CUDA out of memory")
        return RunOutcome(0, {"status": "ok", "wall_seconds": 1.0,
                              "throughput": 10.0 * point.procs_per_node}, ["torchrun"], 0.1)

    def close(self) -> None:
        pass


def test_no_points_means_the_machines_default_points(tmp_path):
    launcher = CountingLauncher()
    plan, result = sweep_new_run(launcher, WORKLOAD, None, ["--steps", "3"], ResultsStore(tmp_path),
                                 lambda _: None)
    assert launcher.ran == one_node([1, 2, 4]) == plan.points
    assert [r["gpu_count"] for r in result.records] == [1, 2, 4] and result.all_ok
    assert plan.workload_args == ["--steps", "3"] and plan.run_id
    assert (tmp_path / f"{plan.run_id}.jsonl").is_file()


def test_each_call_is_a_new_run_that_skips_what_is_recorded(tmp_path):
    store = ResultsStore(tmp_path)
    first, _ = sweep_new_run(CountingLauncher(), WORKLOAD, one_node([1, 2]), [], store, lambda _: None)
    again = CountingLauncher()
    second, result = sweep_new_run(again, WORKLOAD, one_node([1, 2]), [], store, lambda _: None)
    assert second.run_id != first.run_id
    assert again.ran == [] and result.records == [] and sorted(result.skipped) == one_node([1, 2])
    forced = CountingLauncher()
    _, result = sweep_new_run(forced, WORKLOAD, one_node([1]), [], store, lambda _: None, force=True)
    assert forced.ran == one_node([1]) and len(result.records) == 1


def test_no_point_that_fits_is_an_error(tmp_path):
    lines: list[str] = []
    with pytest.raises(NothingFitsError) as e:
        sweep_new_run(CountingLauncher(), WORKLOAD, one_node([8, 16]), [], ResultsStore(tmp_path),
                      lines.append, timeout=60)
    assert str(e.value) == "no GPU count of the sweep fits this machine" and e.value.exit_code == 1
    assert lines == ["skipping 8 GPUs: box: 4x H100 has 4", "skipping 16 GPUs: box: 4x H100 has 4"]
    assert list(tmp_path.iterdir()) == []


def test_a_failed_run_is_recorded_and_not_all_ok(tmp_path):
    _, result = sweep_new_run(CountingLauncher(fail_at=2), WORKLOAD, one_node([1, 2]), [],
                              ResultsStore(tmp_path), lambda _: None)
    assert [r["status"] for r in result.records] == ["ok", "failed"] and not result.all_ok
    assert SweepResult().all_ok  # nothing ran: nothing failed
