"""Which counts a sweep skips as already recorded: same workload, provider,
instance type, GPU, workload arguments and count, with an ok record."""

from pathlib import Path

from gpubench.launch.base import Machine, RunOutcome
from gpubench.results import ResultsStore
from gpubench.suite import WorkloadRef
from gpubench.sweep import SweepPlan, sweep

MACHINE = Machine("ssh", "box: 4x H100", "H100", 4, 8.0, "cuda")


class FakeLauncher:
    def __init__(self, machine: Machine = MACHINE, fail_at: int = 0) -> None:
        self._machine = machine
        self.ran: list[int] = []
        self.fail_at = fail_at

    def machine(self) -> Machine:
        return self._machine

    def run(self, workload, procs, workload_args, on_line, timeout) -> RunOutcome:
        self.ran.append(procs)
        if procs == self.fail_at:
            return RunOutcome(1, None, ["torchrun"], 0.1, "RuntimeError: CUDA out of memory")
        return RunOutcome(0, {"status": "ok", "wall_seconds": 1.0, "throughput": 10.0 * procs},
                          ["torchrun"], 0.1)


def _plan(counts, args=(), force=False) -> SweepPlan:
    return SweepPlan(WorkloadRef("w", Path("w.py"), True), list(counts), list(args), "r1", 60,
                     force=force)


def test_skips_ok_counts_and_reruns_failed_ones(tmp_path):
    store = ResultsStore(tmp_path)
    first = FakeLauncher(fail_at=2)
    sweep(first, _plan([1, 2, 4]), store, lambda _: None)
    assert first.ran == [1, 2, 4]

    again = FakeLauncher()
    lines: list[str] = []
    result = sweep(again, _plan([1, 2, 4, 8]), store, lines.append)
    assert again.ran == [2]  # 8 does not fit, 1 and 4 are recorded, 2 had failed
    assert sorted(result.skipped) == [1, 4]
    assert any("skipping 8 GPUs" in line for line in lines)


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
