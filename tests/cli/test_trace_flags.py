"""run --trace's flags and the pieces around it that need no run: a step count out of
bounds, or a script ended too soon to trace and still time, is one line and nothing
started; the sweep traces the first run of each count into its own folder; torch's
profiler's chatter stays out of the run's output; the probe leaves traced steps out of
its timing. (The traced sweep itself: tests/cli/test_local_sweep.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpubench import suite
from gpubench.launch.base import SweepPoint
from gpubench.sweep import traces
from gpubench.workloads import rank_trace
from gpubench.workloads.script_probe import step_figures
from tests.cli.test_bad_input import assert_one_line_error


@pytest.mark.parametrize("steps", ["0", "21", "-3"])
def test_a_trace_step_count_out_of_bounds_is_one_line_and_nothing_runs(cli, tmp_path, steps):
    code, _, err = cli("run", "mnist-ddp", "--trace-steps", steps, "--results", str(tmp_path))
    assert_one_line_error(code, err, f"--trace-steps: {steps} is not a number of steps to trace",
                          "1 to 20")
    assert not list(tmp_path.iterdir())


def test_a_script_ended_too_soon_to_trace_and_time_is_told_how_many_steps_it_needs(cli, tmp_path):
    script = tmp_path / "train.py"
    script.write_text("print('never run')\n")
    code, _, err = cli("run", str(script), "--max-steps", "6", "--trace", "--results", str(tmp_path / "r"))
    assert_one_line_error(code, err, "--max-steps 6 is too few to trace 3 step(s)", "at least 8")
    assert not (tmp_path / "r").exists()
    code, _, err = cli("bench", "lambda", "--gpus", "1", "--workload", "mnist-ddp", "--trace-steps", "0",
                       "--yes", "--results", str(tmp_path / "r"))
    assert_one_line_error(code, err, "--trace-steps: 0")


def test_trace_steps_alone_asks_for_a_trace_and_trace_alone_for_three_steps():
    assert suite.trace_steps(False, None) is None
    assert suite.trace_steps(True, None) == rank_trace.DEFAULT_STEPS == 3
    assert suite.trace_steps(False, 5) == 5
    ref = suite.with_trace(suite.resolve("mnist-ddp"), 5)
    assert ref.trace == rank_trace.TraceAsk(5)


def test_the_first_run_of_each_count_is_traced_into_its_own_folder(tmp_path):
    ref = suite.with_trace(suite.resolve("mnist-ddp"), 2)
    traced: set = set()
    two = SweepPoint(1, 2)
    first = traces.for_run(ref, tmp_path, "run1", two, traced)
    assert first.trace.directory == str(tmp_path.resolve() / "run1" / "traces" / "2gpus")
    assert first.trace.environment() == {"GPUBENCH_TRACE_DIR": first.trace.directory,
                                         "GPUBENCH_TRACE_STEPS": "2"}
    assert traces.for_run(ref, tmp_path, "run1", two, traced).trace is None  # its repeat
    assert traces.for_run(ref, None, "run1", SweepPoint(1, 1), set()).trace is None  # no files kept
    assert traces.for_run(suite.resolve("mnist-ddp"), tmp_path, "run1", two, set()).trace is None
    assert traces.record_fields(tmp_path, first) == {"trace_dir": None, "trace_files": 0}
    folder = Path(first.trace.directory)
    folder.mkdir(parents=True)
    for rank in (0, 1):
        (folder / rank_trace.file_name(rank, "node a")).write_bytes(b"")
    assert traces.record_fields(tmp_path, first) == {"trace_dir": "run1/traces/2gpus", "trace_files": 2}
    assert rank_trace.file_name(1, "node a") == "rank1-node_a.pt.trace.json.gz"


def test_the_profilers_chatter_is_kept_out_of_the_runs_output():
    start = "USDT:2026-12-05 02:54:22 9445:9445 SyncActivityProfilerHandler.cpp:52] profiler_start"
    stop = start.replace(":52] profiler_start", ":59] profiler_stop")
    chatter = traces.ProfilerChatter()
    said = [chatter.keep(line) for line in
            ["step 1", start, stop + stop, "", "", "loss 0.3", "", start + " then mine"]]
    # two ranks' stops on one line leave one empty line of theirs; the next empty one is the run's
    assert said == ["step 1", None, None, None, "", "loss 0.3", "", " then mine"]
    # a cluster's lines come with their node in front
    assert [chatter.keep(f"[node1] {line}") for line in (stop + stop, "", "done")] == [
        None, None, "[node1] done"]


def test_the_environment_asks_for_a_trace_only_within_bounds():
    assert rank_trace.asked({}) is None
    assert rank_trace.asked({"GPUBENCH_TRACE_DIR": "/t"}) == rank_trace.TraceAsk(3, "/t")
    assert rank_trace.asked({"GPUBENCH_TRACE_DIR": "/t", "GPUBENCH_TRACE_STEPS": "4"}).steps == 4
    for bad in ("0", "99", "x"):
        assert rank_trace.asked({"GPUBENCH_TRACE_DIR": "/t", "GPUBENCH_TRACE_STEPS": bad}) is None


def test_the_probe_leaves_traced_steps_out_of_its_timing():
    ends = [float(i) for i in range(12)]          # steps of 1 s ...
    ends[6:] = [e + 9.0 for e in ends[6:]]        # ... but the sixth interval took 10 s (traced)
    samples, tokens = [8] * 12, [0] * 12
    plain = step_figures(ends, samples, tokens)
    assert (plain["timed"], plain["p90_s"] > 1.0) == (10, True)
    traced = step_figures(ends, samples, tokens, skip={2, 3, 4, 5, 6})
    assert (traced["timed"], traced["median_s"], traced["p90_s"]) == (5, 1.0, 1.0)
    assert traced["samples_per_step"] == 8
