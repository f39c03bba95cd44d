"""workloads/record_schema.py is the one description of the result record: the
workload's harness and gpubench's recording write only what it lists, with the
types it states, and it needs nothing but the standard library."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import record_schema
from record_schema import BOTH, GPUBENCH, REPORT, WORKLOAD

ROOT = Path(__file__).resolve().parents[2]
WORKLOADS = ROOT / "workloads"


def test_imports_only_the_standard_library():
    code = ("import sys; sys.path.insert(0, sys.argv[1]); before = set(sys.modules); "
            "import record_schema; "
            "new = {m.split('.')[0] for m in set(sys.modules) - before} - {'record_schema'}; "
            "print(sorted(m for m in new if m not in sys.stdlib_module_names))")
    done = subprocess.run([sys.executable, "-S", "-c", code, str(WORKLOADS)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_schema_version_is_defined_once_and_shared():
    import harness
    from gpubench.store import results
    from gpubench.workloads import record_schema as installed

    defined = [str(p.relative_to(ROOT)) for folder in ("gpubench", "workloads", "providers", "benchmarks")
               for p in (ROOT / folder).rglob("*.py")
               if re.search(r"^SCHEMA_VERSION\s*=", p.read_text(), re.M)]
    assert defined == ["workloads/record_schema.py"]
    assert harness.SCHEMA_VERSION == results.SCHEMA_VERSION == installed.SCHEMA_VERSION


def test_every_entry_is_well_formed():
    names = [f.name for f in record_schema.FIELDS]
    assert len(names) == len(set(names))
    for f in record_schema.FIELDS:
        assert f.filled_by in (WORKLOAD, GPUBENCH, BOTH, REPORT, record_schema.LAUNCHER,
                               record_schema.HOST_CHECK, record_schema.BILLING), f.name
        assert f.read_as in (None, record_schema.LABEL, record_schema.NUMBER, record_schema.TEXT), f.name
        assert f.column in (None, record_schema.EVERY_ROW, record_schema.FAILED_ROWS), f.name
        assert f.meaning and "\n" not in f.meaning, f.name
        assert f.filled_by != REPORT or f.read_as is None, f"{f.name}: the report computes it"
        if f.heading is not None:
            assert f.heading.when in (record_schema.ALWAYS, record_schema.VARIES,
                                      record_schema.ABOVE_ONE, record_schema.SOME_ROW,
                                      record_schema.MULTI_NODE), f.name
            assert f.heading.tables in (None, record_schema.WORK_TABLES,
                                        record_schema.BANDWIDTH_TABLES), f.name
        if f.default is not None:  # what the report's column holds for a record without it
            assert f.read_as is not None, f.name
            assert isinstance(f.default, (int, float) if f.read_as == record_schema.NUMBER else str), f.name


def test_undeclared_fields_are_refused():
    record_schema.require_declared({"throughput": 1.0, "host": "h"}, WORKLOAD)
    with pytest.raises(record_schema.UndeclaredFieldError, match="throughput_per_watt"):
        record_schema.require_declared({"throughput_per_watt": 1.0}, WORKLOAD)
    with pytest.raises(record_schema.UndeclaredFieldError, match="provider"):
        record_schema.require_declared({"provider": "p"}, WORKLOAD)  # gpubench's to fill
    assert record_schema.type_problems({"gpu_count": "2", "throughput": 3, "nodes": True}) == [
        "gpu_count: str '2', expected int", "nodes: bool True, expected int"]


@pytest.fixture
def world_of_one(monkeypatch):
    """A gloo process group of one, in this process, as a workload has under torchrun."""
    import harness

    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "GROUP_WORLD_SIZE", "NNODES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(harness._free_port()))
    ctx = harness.setup_distributed()
    try:
        yield ctx
    finally:
        harness.teardown_distributed()


def test_the_harness_writes_the_workloads_fields(world_of_one):
    import harness

    args = harness.common_parser("a test workload", default_batch=4).parse_args(["--steps", "3"])
    timer = harness.StepTimer(world_of_one.device, monitor=harness.GpuMonitor.for_device(world_of_one.device))
    harness.run_window(timer, lambda step: None, warmup=1, steps=3)
    record = harness.build_record(world_of_one, args, workload="t", timer=timer, steps=3,
                                  samples_per_step=4, epoch_samples=12, extra={"model": "m"})
    record_schema.require_declared({k: v for k, v in record.items() if k != "model"}, WORKLOAD)
    assert record_schema.type_problems(record) == []
    only_some_runs = {"peak_memory_bytes", "profile_dir", "cudnn_benchmark",  # CUDA, --profile, fixed shapes
                      "size",  # the workloads whose default size depends on the device
                      "train_state_bytes_per_process",  # a GPT with its optimizer
                      "peak_busbw", "peak_busbw_size", "peak_algbw", "max_bytes",  # a bandwidth test
                      "largest_size_busbw", "largest_size_algbw"}
    assert set(record_schema.names(WORKLOAD)) - set(record) == only_some_runs
    assert record["schema_version"] == record_schema.SCHEMA_VERSION


def finished(record: dict | None, in_suite: bool, error: str | None = None) -> dict:
    from gpubench.launch.base import Machine, RunOutcome, SweepPoint
    from gpubench.sweep.records import finish_record
    from gpubench.suite import WorkloadRef
    from gpubench.sweep.run import SweepPlan

    ref = WorkloadRef("w" if in_suite else "train.py", Path("train.py"), in_suite)
    plan = SweepPlan(ref, [SweepPoint(1, 2)], ["--steps", "3"], "run-1")
    machine = Machine("p", "p.8x", "G100", 8, 8.0)
    outcome = RunOutcome(0 if error is None else 1, record, ["torchrun", "w.py"], 12.0, error)
    return finish_record(outcome, plan, machine, SweepPoint(1, 2))


def test_gpubench_writes_its_fields():
    failed = finished(None, in_suite=True, error="boom")
    timed = finished(None, in_suite=False)
    own = finished({"throughput": 10.0, "throughput_unit": "samples/s"}, in_suite=False)
    written = set()
    for record in (failed, timed, own):
        record_schema.require_declared(record, GPUBENCH)
        assert record_schema.type_problems(record) == []
        written |= set(record)
    assert set(record_schema.names(GPUBENCH)) <= written
    assert failed["status"] == "failed" and timed["timing"] == "whole process"
