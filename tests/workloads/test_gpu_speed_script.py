"""benchmarks/gpu_speed.py's reading of what it measures: nanoGPT's bench.py line, a
record's mean step, and each figure's verdict against its target."""

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def gpu_speed():
    spec = importlib.util.spec_from_file_location("gpu_speed", ROOT / "benchmarks" / "gpu_speed.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_speed"] = module   # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_reads_bench_py_mean_step_from_its_last_line(gpu_speed):
    printed = "19/20 loss: 6.1953\ntime per iteration: 25.9269ms, MFU: 129.85%\n"   # nanoGPT 3adf61e
    assert gpu_speed.bench_step(printed) == pytest.approx(0.0259269)
    with pytest.raises(RuntimeError, match="time per iteration"):
        gpu_speed.bench_step("Compiling model...\nTraceback ...")


def test_a_records_mean_step_is_its_window_over_its_steps_not_its_median(gpu_speed):
    record = {"wall_seconds": 0.8169, "steps": 30, "median_step_s": 0.02716}
    assert gpu_speed.mean_step(record) == pytest.approx(0.02723, rel=1e-3)


def test_each_figure_is_met_by_the_side_of_its_target(gpu_speed):
    Figure = gpu_speed.Figure
    assert Figure("faster", 1.02, ">= 1.0").met is True
    assert Figure("slower", 0.955, ">= 1.0").met is False
    assert Figure("fsdp", 2.27, "<= 1.2").met is False
    assert Figure("fsdp", 1.1, "<= 1.2").met is True
    assert Figure("not run", None, ">= 1.0").met is None
    assert Figure("no target", 3.0, "-").met is None
