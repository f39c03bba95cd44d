"""Naming workloads on the command line: `run WORKLOAD [--workdir DIR]` and
`bench --workload A,B [--workdir DIR]` resolve through gpubench.suite."""

from __future__ import annotations

import pytest

from gpubench import suite
from gpubench.errors import UnknownWorkloadError, UsageError


@pytest.fixture
def project(tmp_path):
    (tmp_path / "proj").mkdir()
    script = tmp_path / "proj" / "train.py"
    script.write_text("print('hi')\n")
    return tmp_path / "proj"


def test_resolve_with_a_workdir_sends_the_project(project):
    ref = suite.resolve(str(project / "train.py"), project)
    assert (ref.in_suite, ref.workdir) == (False, project.resolve())
    assert ref.script == (project / "train.py").resolve()
    assert suite.resolve(str(project / "train.py")).workdir is None
    with pytest.raises(UsageError, match="^--workdir is for your own scripts; mnist-ddp is a suite "
                                         "workload$"):
        suite.resolve("mnist-ddp", project)


def test_resolve_list_takes_names_and_scripts_in_order(project):
    refs = suite.resolve_list(f" mnist-ddp, ,{project / 'train.py'},gpt-ddp,")
    assert [r.in_suite for r in refs] == [True, False, True]
    assert refs[0].name == "mnist-ddp" and refs[2].name == "gpt-ddp"
    assert all(r.workdir is None for r in refs)


def test_resolve_list_gives_the_workdir_to_scripts_only(project):
    suite_ref, own = suite.resolve_list(f"mnist-ddp,{project / 'train.py'}", project)
    assert suite_ref.workdir is None and own.workdir == project.resolve()


@pytest.mark.parametrize("names, message", [
    ("", "--workload: name at least one workload (see 'gpubench workloads')"),
    (" , ", "--workload: name at least one workload (see 'gpubench workloads')"),
])
def test_resolve_list_needs_a_workload(names, message):
    with pytest.raises(UsageError) as e:
        suite.resolve_list(names)
    assert str(e.value) == message and e.value.exit_code == 2


def test_a_workdir_with_only_suite_workloads_is_a_usage_error(project):
    with pytest.raises(UsageError, match="^--workdir is for your own scripts; --workload names only "
                                         "suite workloads$"):
        suite.resolve_list("mnist-ddp,gpt-ddp", project)


def test_resolve_list_names_an_unknown_workload(project, tmp_path):
    with pytest.raises(UnknownWorkloadError, match="unknown workload 'nope'"):
        suite.resolve_list("mnist-ddp,nope")
    outside = tmp_path / "elsewhere.py"
    outside.write_text("")
    with pytest.raises(UsageError, match="is not inside"):
        suite.resolve_list(f"{outside}", project)


# --------------------------------------------------------------------------- the script's settings

def _no_script_env(monkeypatch):
    """None of the variables script_env reads, whatever the machine running the tests set."""
    import os

    for name in list(os.environ):
        if name.startswith(suite.SCRIPT_ENV_PREFIXES) or name in suite.SCRIPT_ENV_NAMES:
            monkeypatch.delenv(name)


def test_script_env_is_what_the_user_set_that_changes_what_a_script_does(monkeypatch, project):
    _no_script_env(monkeypatch)
    ref = suite.resolve(str(project / "train.py"))
    assert suite.script_identity(ref)["script_env"] is None  # as a record from before it reads
    for name, value in {"NCCL_ALGO": "Ring", "ACCELERATE_MIXED_PRECISION": "bf16",
                        "OMP_NUM_THREADS": "4", "PL_SEED": "1", "PATH_EXTRA": "x", "TORCHX": "y",
                        "CUDA_VISIBLE_DEVICES_X": "z"}.items():
        monkeypatch.setenv(name, value)
    assert suite.script_identity(ref)["script_env"] == {
        "ACCELERATE_MIXED_PRECISION": "bf16", "NCCL_ALGO": "Ring", "OMP_NUM_THREADS": "4",
        "PL_SEED": "1"}
    assert list(suite.script_identity(ref)["script_env"]) == sorted(suite.script_env())
    assert suite.script_identity(suite.resolve("mnist-ddp")) == {}


class _CountingLauncher:
    """A launcher that runs nothing: it keeps the GPU count of each run asked of it."""

    def __init__(self) -> None:
        self.ran: list[int] = []

    def machine(self):
        from gpubench.launch.base import Machine

        return Machine("local", "local-cpu-2c", "cpu", 0, 0.0, "cpu")

    def prepare(self, workload) -> None:
        pass

    def run(self, workload, point, workload_args, on_line, timeout):
        from gpubench.launch.base import RunOutcome

        self.ran.append(point.procs_per_node)
        return RunOutcome(0, None, ["torchrun"], 0.1)

    def close(self) -> None:
        pass


def _sweep_counts(store, ref, run_id: str) -> list[int]:
    """The GPU counts a sweep of `ref` over 1 and 2 ran (those already recorded are not)."""
    from gpubench.sweep.run import SweepPlan, sweep
    from tests.helpers import one_node

    launcher = _CountingLauncher()
    sweep(launcher, SweepPlan(ref, one_node([1, 2]), [], run_id, 60), store, lambda _: None)
    return launcher.ran


def _assert_declared(records) -> None:
    from gpubench.workloads import record_schema

    for record in records:
        record_schema.require_declared(record, record_schema.GPUBENCH)
        assert record_schema.type_problems(record) == []


def test_another_mixed_precision_is_measured_again_the_same_one_is_not(monkeypatch, project):
    from gpubench.store.results import ResultsStore

    _no_script_env(monkeypatch)
    store = ResultsStore(project.parent / "results")
    ref = suite.resolve(str(project / "train.py"))

    def sweep_under(value: str | None, run_id: str) -> list[int]:
        if value is None:
            monkeypatch.delenv("ACCELERATE_MIXED_PRECISION", raising=False)
        else:
            monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", value)
        return _sweep_counts(store, ref, run_id)

    assert sweep_under("bf16", "r1") == [1, 2]
    assert sweep_under("bf16", "r2") == []  # already recorded
    assert sweep_under("fp16", "r3") == [1, 2]  # another value: another measurement
    assert sweep_under(None, "r4") == [1, 2]  # none set is another too
    assert sweep_under(None, "r5") == []
    records = store.load().records
    assert [r["script_env"] for r in records] == [
        {"ACCELERATE_MIXED_PRECISION": "bf16"}] * 2 + [{"ACCELERATE_MIXED_PRECISION": "fp16"}] * 2 + [
        None] * 2
    _assert_declared(records)


def test_another_max_steps_is_measured_again_and_reported_in_a_row_of_its_own(monkeypatch, project):
    """A script ended after 20 steps is not one that ran to its end, nor one ended after 50:
    each is run, and shown, apart; the same --max-steps again is already recorded."""
    from gpubench.report.compute import build_report
    from gpubench.store.results import ResultsStore

    _no_script_env(monkeypatch)
    store = ResultsStore(project.parent / "results")
    ref = suite.resolve(str(project / "train.py"))
    assert suite.script_identity(ref)["max_steps"] is None  # as a record from before it reads

    def sweep_ended_after(steps: int | None, run_id: str) -> list[int]:
        return _sweep_counts(store, suite.with_max_steps(ref, steps), run_id)

    assert sweep_ended_after(None, "r1") == [1, 2]
    assert sweep_ended_after(20, "r2") == [1, 2]
    assert sweep_ended_after(20, "r3") == []  # already recorded
    assert sweep_ended_after(50, "r4") == [1, 2]
    assert sweep_ended_after(None, "r5") == []
    records = store.load().records
    assert [r["max_steps"] for r in records] == [None] * 2 + [20] * 2 + [50] * 2
    _assert_declared(records)
    rows = build_report(records).rows
    assert sorted(zip(rows["max_steps"].astype(str), rows["gpu_count"])) == [
        ("", 1), ("", 2), ("20", 1), ("20", 2), ("50", 1), ("50", 2)]


def test_gpubenchs_own_output_is_not_part_of_the_workdir(tmp_path, monkeypatch, project):
    from gpubench.onhost import workdir_guard

    ref = suite.resolve(str(project / "train.py"), project)
    log = project / "out.log"
    log.write_text("one line\n")
    st = log.stat()
    monkeypatch.setattr(workdir_guard, "own_output", lambda: {(st.st_dev, st.st_ino): str(log)})
    before = suite.script_identity(ref)["workdir_sha256"]
    log.write_text("one line\nand another\n")  # gpubench wrote more
    assert suite.script_identity(ref)["workdir_sha256"] == before
    monkeypatch.setattr(workdir_guard, "own_output", lambda: {})
    assert suite.script_identity(ref)["workdir_sha256"] != before
