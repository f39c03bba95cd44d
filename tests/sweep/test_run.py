"""The sweep's plan: the points a machine cannot hold and why, the point a record
was made at; and which points a sweep skips as already recorded: same workload, provider, instance type, GPU, workload arguments
and point, with an ok record."""

from pathlib import Path

import pytest

from gpubench.launch.base import Launcher, Machine, RunOutcome, SweepPoint
from gpubench.store.results import ResultsStore
from gpubench.suite import WorkloadRef, resolve
from gpubench.sweep.run import SweepPlan, misfit, point_of, sweep
from tests.helpers import one_node

P = SweepPoint
H100x4 = Machine("lambda", "gpu_4x_h100", "H100", 4, 8.0)
MACHINE = Machine("ssh", "box: 4x H100", "H100", 4, 8.0, "cuda")


def test_a_plan_holds_points_not_counts():
    with pytest.raises(TypeError, match="sweep_points"):
        SweepPlan(resolve("mnist-ddp"), [1, 2])


def test_points_that_do_not_fit_say_why():
    assert misfit(P(1, 4), H100x4) is None
    assert misfit(P(1, 8), H100x4) == "skipping 8 GPUs: gpu_4x_h100 has 4"
    assert misfit(P(2, 1), H100x4) == "skipping 2 nodes x 1 gpu: gpu_4x_h100 spans at most 1 node"
    pair = Machine("x", "pair", "H100", 4, 8.0, max_nodes=2)
    assert misfit(P(2, 4), pair) is None
    assert misfit(P(2, 8), pair) == "skipping 2 nodes x 8 gpus: pair has 4 per node"
    assert misfit(P(4, 1), pair) == "skipping 4 nodes x 1 gpu: pair spans at most 2 nodes"
    assert misfit(P(1, 64), Machine("local", "cpu", "cpu", 0, 0.0, "cpu")) is None


def test_the_point_of_a_record():
    assert point_of({"gpu_count": 4}) == P(1, 4)  # from before nodes were recorded
    assert point_of({"gpu_count": 4, "nodes": 2}) == P(2, 2)
    assert point_of({"gpu_count": 3, "nodes": 2}) is None
    assert point_of({"gpu_count": None, "nodes": 1}) is None


# -- resuming: what is already recorded is skipped -------------------------------

class FakeLauncher(Launcher):
    def __init__(self, machine: Machine = MACHINE, fail_at: int = 0) -> None:
        self._machine = machine
        self.ran: list[int] = []
        self.prepared: list[str] = []
        self.fail_at = fail_at

    def machine(self) -> Machine:
        return self._machine

    def prepare(self, workload) -> None:
        self.prepared.append(workload.name)

    def run(self, workload, point, workload_args, on_line, timeout) -> RunOutcome:
        procs = point.procs_per_node
        self.ran.append(procs)
        if procs == self.fail_at:
            return RunOutcome(1, None, ["torchrun"], 0.1, "RuntimeError: CUDA out of memory")
        return RunOutcome(0, {"status": "ok", "wall_seconds": 1.0, "throughput": 10.0 * procs},
                          ["torchrun"], 0.1)

    def close(self) -> None:
        pass


def _plan(counts, args=(), force=False) -> SweepPlan:
    return SweepPlan(WorkloadRef("w", Path("w.py"), True), one_node(counts), list(args), "r1", 60,
                     force=force)


def test_skips_ok_counts_and_reruns_failed_ones(tmp_path):
    store = ResultsStore(tmp_path)
    first = FakeLauncher(fail_at=2)
    sweep(first, _plan([1, 2, 4]), store, lambda _: None)
    assert first.ran == [1, 2, 4] and first.prepared == ["w"]

    again = FakeLauncher()
    lines: list[str] = []
    result = sweep(again, _plan([1, 2, 4, 8]), store, lines.append)
    assert again.ran == [2]  # 8 does not fit, 1 and 4 are recorded, 2 had failed
    assert sorted(result.skipped) == [SweepPoint(1, 1), SweepPoint(1, 4)]
    assert any("skipping 8 GPUs: box: 4x H100 has 4" == line for line in lines)


def test_force_and_different_arguments_or_machine_run_again(tmp_path):
    store = ResultsStore(tmp_path)
    sweep(FakeLauncher(), _plan([1, 2]), store, lambda _: None)
    for launcher, plan in [
        (FakeLauncher(), _plan([1, 2], force=True)),
        (FakeLauncher(), _plan([1, 2], ["--steps", "5"])),
        (FakeLauncher(Machine("ssh", "other: 4x H100", "H100", 4, 8.0)), _plan([1, 2])),
        (FakeLauncher(Machine("lambda", "box: 4x H100", "H100", 4, 8.0)), _plan([1, 2])),
    ]:
        sweep(launcher, plan, store, lambda _: None)
        assert launcher.ran == [1, 2]


def test_records_from_before_nodes_were_kept_count_as_one_node(tmp_path):
    store = ResultsStore(tmp_path)
    sweep(FakeLauncher(), _plan([1, 2]), store, lambda _: None)
    old = store.load().records
    for record in old:
        del record["nodes"]
    again = FakeLauncher()
    result = sweep(again, _plan([1, 2]), _Holding(old), lambda _: None)
    assert again.ran == [] and sorted(result.skipped) == [SweepPoint(1, 1), SweepPoint(1, 2)]


class _Holding:
    """A results store that holds the given records and takes new ones in memory."""

    def __init__(self, records: list[dict]) -> None:
        self.records = records

    def load(self):
        return self

    def append(self, run_id: str, record: dict) -> None:
        self.records.append(record)
