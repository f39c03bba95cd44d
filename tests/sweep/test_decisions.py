"""The sweep's own decisions, with a fake launcher: repeats taking turns and their
records, a failed point not repeated, a resumed sweep topping up its repeats, a
failure that will repeat stopping the sweep, an edited script measured again,
files a script leaves behind, every run's output kept."""

from __future__ import annotations

from pathlib import Path

from gpubench import suite
from gpubench.launch.base import FileChanges, Launcher, Machine, RunOutcome
from gpubench.launch.failures import Failure
from gpubench.store.results import ResultsStore
from gpubench.sweep.run import SweepPlan, default_repeats, sweep
from tests.helpers import one_node

GPU_BOX = Machine("ssh", "box: 4x H100", "H100", 4, 8.0, "cuda")
CPU_BOX = Machine("local", "local-cpu-2c", "cpu", 0, 0.0, "cpu")


class Fake(Launcher):
    """Runs nothing: each point answers with what `answers` says (default: ok)."""

    def __init__(self, answers=None, machine: Machine = GPU_BOX) -> None:
        self.answers = answers or {}
        self._machine = machine
        self.ran: list[int] = []

    def machine(self) -> Machine:
        return self._machine

    def prepare(self, workload) -> None:
        pass

    def run(self, workload, point, workload_args, on_line, timeout) -> RunOutcome:
        procs = point.procs_per_node
        self.ran.append(procs)
        on_line(f"hello from {procs}")
        answer = self.answers.get(procs)
        if isinstance(answer, RunOutcome):
            return answer
        return RunOutcome(0, {"status": "ok", "wall_seconds": 1.0, "throughput": 10.0 * procs},
                          ["torchrun"], 0.1, output_tail=[f"hello from {procs}"],
                          measured={"cpu_cores": 2, "machine_busy": None}, files=answer)

    def close(self) -> None:
        pass


def _plan(ref, counts, repeat=1, run_id="r1") -> SweepPlan:
    return SweepPlan(ref, one_node(counts), [], run_id, 60, repeat=repeat)


SUITE_REF = suite.WorkloadRef("w", Path("w.py"), True)


def test_repeats_take_turns_and_each_record_says_which_it_was(tmp_path):
    store = ResultsStore(tmp_path)
    fake = Fake()
    lines: list[str] = []
    result = sweep(fake, _plan(SUITE_REF, [1, 2], repeat=3), store, lines.append)
    assert fake.ran == [1, 2, 1, 2, 1, 2]
    assert [(r["gpu_count"], r["repeat"], r["repeat_count"]) for r in result.records] == [
        (1, 1, 3), (2, 1, 3), (1, 2, 3), (2, 2, 3), (1, 3, 3), (2, 3, 3)]
    assert "[2 gpus, run 3 of 3] hello from 2" in lines
    assert {r["cpu_cores"] for r in result.records} == {2}  # what the launcher measured


def test_a_failed_point_is_not_run_again_and_a_resumed_sweep_tops_up(tmp_path):
    store = ResultsStore(tmp_path)
    failed = RunOutcome(1, None, ["torchrun"], 0.1, "RuntimeError: CUDA out of memory")
    first = Fake({2: failed})
    sweep(first, _plan(SUITE_REF, [1, 2], repeat=3), store, lambda _: None)
    assert first.ran == [1, 2, 1, 1]
    # a sweep asking for 5 runs: count 1 has 3, runs 2 more; count 2 has none ok, runs 5
    again = Fake()
    result = sweep(again, _plan(SUITE_REF, [1, 2], repeat=5, run_id="r2"), store, lambda _: None)
    assert again.ran == [2, 2, 2, 1, 2, 1, 2]
    assert [r["repeat"] for r in result.records if r["gpu_count"] == 1] == [4, 5]


def test_a_failure_that_will_repeat_stops_the_sweep(tmp_path):
    store = ResultsStore(tmp_path)
    usage = Failure("train.py: error: unrecognized arguments: --epohcs", "usage")
    fake = Fake({1: RunOutcome(2, None, ["torchrun"], 0.1, usage.error, failure=usage)})
    lines: list[str] = []
    result = sweep(fake, _plan(SUITE_REF, [1, 2, 4], repeat=2), store, lines.append)
    assert fake.ran == [1] and not result.all_ok
    assert result.stopped == lines[-1] == (
        "stopping the sweep: the workload refused its arguments at 1 gpu, and it would fail the "
        "same way at every count (train.py: error: unrecognized arguments: --epohcs)")
    assert [r["failure_kind"] for r in store.load().records] == ["usage"]


def test_files_a_script_leaves_are_named_and_one_it_changed_stops_the_sweep(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("print('train')\n")
    ref = suite.resolve(str(script))
    left = FileChanges(True, ["snapshot.pt"], "/w/.gpubench-left-behind/a")
    changed = FileChanges(True, [], None, ["train.log"])
    store = ResultsStore(tmp_path)
    lines: list[str] = []
    fake = Fake({1: left, 2: changed})
    result = sweep(fake, _plan(ref, [1, 2, 4]), store, lines.append)
    assert fake.ran == [1, 2]
    assert ("[1 gpu] the run left 1 file(s) in its working directory (snapshot.pt); moved to "
            "/w/.gpubench-left-behind/a, so that the next run starts from the same files") in lines
    assert result.records[0]["left_behind"] == ["snapshot.pt"]
    assert result.stopped.startswith("stopping the sweep: the run at 2 gpus changed files that "
                                     "were in its working directory before it (train.log)")


def test_an_edited_script_is_measured_again_and_another_path_to_it_is_the_same(tmp_path, monkeypatch):
    script = tmp_path / "train.py"
    script.write_text("print('v1')\n")
    store = ResultsStore(tmp_path)
    first = sweep(Fake(), _plan(suite.resolve(str(script)), [1, 2]), store, lambda _: None)
    record = first.records[0]
    assert record["script_path"] == str(script.resolve())
    assert record["script_sha256"] == suite.file_sha256(script)
    monkeypatch.chdir(tmp_path)
    for called in ("train.py", "./train.py", str(tmp_path / "." / "train.py")):
        same = Fake()
        assert suite.resolve(called).name == record["workload"]
        sweep(same, _plan(suite.resolve(called), [1, 2]), store, lambda _: None)
        assert same.ran == [], called  # already recorded, however it is called
    script.write_text("print('v2')\n")
    edited = Fake()
    lines: list[str] = []
    sweep(edited, _plan(suite.resolve("train.py"), [1, 2]), store, lines.append)
    assert edited.ran == [1, 2] and not any("already recorded" in line for line in lines)


def test_a_workdirs_contents_are_part_of_what_a_script_is(tmp_path):
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "train.py").write_text("import model\n")
    (proj / "model.py").write_text("LAYERS = 2\n")
    ref = suite.resolve(str(proj / "train.py"), proj)
    before = suite.script_identity(ref)
    (proj / "model.py").write_text("LAYERS = 3\n")
    after = suite.script_identity(ref)
    assert before["script_sha256"] == after["script_sha256"]
    assert before["workdir_sha256"] != after["workdir_sha256"]


def test_every_runs_output_is_kept_beside_its_records(tmp_path):
    store = ResultsStore(tmp_path)
    result = sweep(Fake(), _plan(SUITE_REF, [1, 2], repeat=2), store, lambda _: None)
    assert [r["log_file"] for r in result.records] == [
        "logs/r1/1gpu-r1.log", "logs/r1/2gpus-r1.log", "logs/r1/1gpu-r2.log", "logs/r1/2gpus-r2.log"]
    text = (tmp_path / "logs" / "r1" / "2gpus-r2.log").read_text()
    assert "hello from 2" in text and text.splitlines()[-1].startswith("# exit code 0 after")


def test_repeat_defaults_to_one_on_gpus_and_three_on_a_cpu():
    assert default_repeats(GPU_BOX) == 1
    assert default_repeats(CPU_BOX) == 3


def test_a_script_that_runs_at_one_count_only_skips_to_it(tmp_path):
    fixed = Failure("the script wants 2 processes but this count runs 1", "devices", runs_only_at=2)
    wrong = RunOutcome(1, None, ["torchrun"], 0.1, fixed.error, failure=fixed)
    fake = Fake({1: wrong, 4: wrong})
    lines: list[str] = []
    result = sweep(fake, _plan(SUITE_REF, [1, 2, 4]), ResultsStore(tmp_path), lines.append)
    assert fake.ran == [1, 2] and result.stopped is None
    assert [(r["gpu_count"], r["status"]) for r in result.records] == [(1, "failed"), (2, "ok")]
    assert "skipping 4 gpus: the script runs only at 2 processes" in lines
    # without its count in the plan, the sweep stops at once
    alone = sweep(Fake({1: wrong, 4: wrong}), _plan(SUITE_REF, [1, 4], run_id="r2"), ResultsStore(tmp_path),
                  lines.append)
    assert alone.stopped is not None and [r["gpu_count"] for r in alone.records] == [1]
