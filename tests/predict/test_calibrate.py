"""`gpubench predict ./train.py`: a user's script calibrated by a short run on this
machine's CPU under CUDA's emulation (gpubench.predict.calibrate, the probe's
GPUBENCH_CALIBRATE_STEPS), its counted step as the step model's Subject; a script that
fails, or trains nothing, in one line; an unchanged script not run twice."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from gpubench import suite
from gpubench.errors import UsageError
from gpubench.predict import calibrate
from gpubench.predict.calibrate import STEPS, CalibrationError
from gpubench.workloads.script_probe import CALIBRATE_ENV, PREFIX
from tests.helpers import JOIN, LEAVE, REPO, TRAINS_ALONE, counted_calibration

# A script that asks torch.cuda for what its emulation does not answer.
UNFOLLOWED = """\
import torch
model = torch.nn.Linear(8, 1).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
print("starting")
torch.cuda.utilization()
"""

MISSING_DATA = JOIN + """\
open("no-such-data.csv").read()
""" + LEAVE

NO_DDP = TRAINS_ALONE


def script(tmp_path, monkeypatch, source: str):
    """The script in a project folder of its own, run from there (as `gpubench advise`
    is): the run's working directory, whose new files are moved aside, is not the repo."""
    project = tmp_path / "project"
    project.mkdir()
    path = project / "train.py"
    path.write_text(source)
    monkeypatch.chdir(project)
    return suite.resolve(str(path))


# --------------------------------------------------------------------------- fast
def report(**step) -> dict:
    counted = {"ops": [list(row) for row in counted_calibration().ops], "peak_bytes": 1_300_000,
               "held_bytes": 1_200_000, "samples": 32, "tokens": 0, **step}
    return {"rank": 0, "wrapped": [], "calibration": {
        "step": counted, "steps_seen": STEPS, "grad_bytes": 400_000, "params": 100_000,
        "epoch_samples": 4000, "optimizer": "adamw", "autocast": "bf16", "compiled": False,
        "fsdp_units": 0, "count_seconds": 0.1, "unfollowed": None}}


def test_a_report_of_a_counted_step_is_a_calibration():
    cal = calibrate.from_report("train.py", report(), 12.3)
    assert (cal.samples, cal.work, cal.unit, cal.grad_bytes, cal.precision) == (32, 32, "samples", 400_000, "bf16")
    assert cal.kernels == 5 and cal.flops_per_step == pytest.approx(1.87e6 * 32)


@pytest.mark.parametrize("found, words", [
    ({"steps_seen": 1, "step": None}, "calibration: train.py took 1 training step(s) before it ended "
                                      "(optimizer steps, or backward passes where it makes no optimizer); "
                                      f"{STEPS} are needed (the second is counted)"),
    ({"step": {"ops": [["forward", "aten.view", "host", 1, 0, 0, ""]], "samples": 32}},
     "its training step ran no operation on CUDA"),
    ({"step": {"ops": [["forward", "aten.mm", "kernel", 1, 10, 10, "fp32"]], "samples": 0}},
     "no tensor in its model's forward calls to read the batch from"),
])
def test_a_report_with_nothing_to_predict_from_says_why_in_one_line(found, words):
    got = report()
    got["calibration"].update(found)
    with pytest.raises(CalibrationError) as raised:
        calibrate.from_report("train.py", got, 1.0)
    assert words in str(raised.value) and "\n" not in str(raised.value)
    assert isinstance(raised.value, UsageError)


def test_a_counted_step_is_predicted_by_the_step_model_with_its_memory():
    """No assumed floor, no assumed share of the peak: the counted kernels against the
    card's rates, and the counted peak (plus what any step allocates) as its memory."""
    from gpubench.predict import ops

    cal = counted_calibration(samples=4096, flops_per_sample=4e9, params=100_000, precision="bf16")
    config = calibrate.step_config("train.py", cal)
    step = ops.modelled("train.py", (), "H200", 141, counted=config)
    assert step.estimate.work == 4096 and step.config.batch == 4096
    c = ops.shipped_constants()
    # the counted peak, or the held state with every gradient made (the step's end)
    held_and_grads = cal.held_bytes + 4 * cal.params
    assert step.estimate.memory_bytes == pytest.approx(max(cal.peak_bytes, held_and_grads) + c.base_bytes)
    assert step.seconds_per_unit.basis == "modelled"
    assert "train.py (counted) at a batch of 4096" in step.seconds_per_unit.source
    # twice the batch: the activations grow, the held state does not
    assert ops.memory_at(config, 8192) - ops.memory_at(config, 4096) == pytest.approx(cal.peak_bytes - cal.held_bytes)


def test_an_unchanged_script_reuses_its_calibration_and_an_edited_one_runs_again(tmp_path, monkeypatch):
    ref = script(tmp_path, monkeypatch, NO_DDP)
    runs = []

    def run(ref, args, world=(1, 1)):
        runs.append((args, world))
        return counted_calibration()

    monkeypatch.setattr(calibrate, "run_calibration", run)
    said = []
    first = calibrate.script_subject(ref, ("--lr", "0.1"), [], said.append)
    again = calibrate.script_subject(ref, ("--lr", "0.1"), [], said.append)
    assert first == again and runs == [(("--lr", "0.1"), (1, 1))]
    assert said[-1] == "calibration: reused from 2026-01-02 03:04"
    calibrate.script_subject(ref, ("--lr", "0.2"), [], said.append)   # other arguments
    calibrate.script_subject(ref, ("--lr", "0.1"), [], said.append, gpus=8)   # another world
    assert runs[-1] == (("--lr", "0.1"), (8, 1))
    ref.script.write_text(NO_DDP + "# edited\n")
    calibrate.script_subject(ref, ("--lr", "0.1"), [], said.append)   # another version
    assert len(runs) == 4


def test_a_damaged_cache_is_no_cache(tmp_path, monkeypatch):
    ref = script(tmp_path, monkeypatch, NO_DDP)
    calibrate.cache_path().parent.mkdir(parents=True)
    calibrate.cache_path().write_text("{not json")
    monkeypatch.setattr(calibrate, "run_calibration", lambda ref, args, world=(1, 1): counted_calibration(samples=1))
    assert calibrate.script_subject(ref, (), [], lambda line: None).batch_per_gpu == 1
    assert len(json.loads(calibrate.cache_path().read_text())["calibrations"]) == 1


def test_the_dataloader_timed_after_the_step_is_a_bound_beside_it_or_a_cost_before_it():
    """Workers prepare batches while the step runs: the slower of the two. Without
    workers the batch is made in the step's process: the two add, and its CPU
    operations there are not counted again as the host's dispatch."""
    from gpubench.predict import ops

    plain = ops.modelled("train.py", (), "H200", 141,
                         counted=calibrate.step_config("train.py", calibrate.from_report("train.py", report(), 1.0)))
    for workers, bound, step in ((2, "loader", 0.05), (0, "loader", plain.estimate.step_s + 0.05)):
        got = report()
        got["calibration"]["loader"] = {"workers": workers, "batch_seconds": 0.05 * max(workers, 1)}
        got["calibration"]["step"]["ops"].append(["data", "aten.stack", "host", 300, 0, 0, ""])
        cal = calibrate.from_report("train.py", got, 1.0)
        config = calibrate.step_config("train.py", cal)
        est = ops.modelled("train.py", (), "H200", 141, counted=config).estimate
        assert (cal.loader_workers, cal.loader_batch_s) == (workers, 0.05 * max(workers, 1))
        assert est.bound_by == bound and est.step_s == pytest.approx(step)
        assert config.counted.views == (2 if workers == 0 else 302)
        assert "its DataLoader 50.0 ms a batch" in ops.modelled("train.py", (), "H200", 141,
                                                               counted=config).seconds_per_unit.source


@pytest.mark.parametrize("loader, seconds", [
    ({"workers": 4, "batch_seconds": 0.02}, 0.005),  # one core's batch, 4 workers side by side
    ({"workers": 1, "batch_seconds": 0.01}, 0.01),
    ({"workers": 0, "batch_seconds": 0.01}, 0.01),   # made in the step's process
    ({"workers": "many", "batch_seconds": -1}, 0.0),  # nonsense: no loader figure
    (None, 0.0),
])
def test_the_loaders_time_is_one_cores_batch_over_its_workers(loader, seconds):
    got = report()
    got["calibration"]["loader"] = loader
    assert calibrate.from_report("train.py", got, 1.0).loader_s == pytest.approx(seconds)


# --------------------------------------------------------------------------- slow: torch runs
SCRIPTS = REPO / "benchmarks" / "scripts"
SMALL_GPT = ("--n-layer", "2", "--n-embd", "64", "--n-head", "4", "--block-size", "32", "--vocab-size", "256",
             "--batch-size", "4")
SMALL_MNIST = ("--images", "512")


@pytest.mark.slow
@pytest.mark.parametrize("name, args, samples, tokens, precision", [
    ("nanogpt_shaped.py", (), 4 * 8, 4 * 8 * 64, "bf16"),
    ("portable_gpt2.py", SMALL_GPT, 4, 4 * 32, "bf16"),
    ("mnist_net.py", SMALL_MNIST, 64, 0, "fp32"),
    ("mnist_net.py", SMALL_MNIST + ("--always-ddp",), 64, 0, "fp32"),
])
def test_a_script_written_for_cuda_is_counted_on_this_cpu_and_predicted(tmp_path, monkeypatch, name, args,
                                                                        samples, tokens, precision):
    """nanoGPT's shape (CUDA and NCCL hard-coded, fused AdamW, pinned batches, four
    micro-batches a step, a loss read back), a portable GPT under bf16 autocast where
    CUDA is, pytorch/examples' MNIST Net wrapped in DDP only at a world of two, or
    always: each counted as it would run on a GPU, and predicted with its memory."""
    from gpubench.predict import ops

    source = (REPO / "tests" / "fixtures" / name) if name == "nanogpt_shaped.py" else SCRIPTS / name
    ref = script(tmp_path, monkeypatch, source.read_text())
    said = []
    subject = calibrate.script_subject(ref, args, [], said.append)
    cal = calibrate.cached(calibrate.cache_key(ref, args))
    assert (cal.samples, cal.tokens, cal.precision, cal.steps_seen) == (samples, tokens, precision, STEPS)
    assert cal.kernels > 10 and cal.peak_bytes > cal.held_bytes > 0
    assert subject.grad_bytes.value == 4 * subject.profile.params
    assert subject.unit == ("tokens/s" if tokens else "samples/s")
    if precision == "bf16":   # the matrix products under autocast, counted at bf16
        assert {row[6] for row in cal.ops if row[1] == "aten.mm"} == {"bf16"}
    step = ops.modelled(subject.workload, args, "H200", 141, counted=subject.counted)
    assert step is not None and step.estimate.memory_bytes > cal.peak_bytes
    assert said[0].startswith("calibration: running") and "kernels and" in said[1]


@pytest.mark.slow
def test_a_script_waiting_on_its_dataloader_is_predicted_bound_by_it(tmp_path, monkeypatch):
    """pytorch/examples' shape (torch.accelerator's device, DataParallel, Adadelta, pinned
    batches from a worker) followed under the emulation; the worker's batch of 32 samples
    costs the CPU at least 32 x 1 ms: whatever the GPU, the step cannot be shorter."""
    from gpubench.predict import ops

    args = ("--workers", "1", "--item-ms", "1")
    ref = script(tmp_path, monkeypatch, (REPO / "tests" / "fixtures" / "slow_loader.py").read_text())
    subject = calibrate.script_subject(ref, args, [], lambda line: None)
    cal = calibrate.cached(calibrate.cache_key(ref, args))
    assert cal.loader_workers == 1 and cal.loader_batch_s >= 0.032
    est = ops.modelled(subject.workload, args, "H200", 141, counted=subject.counted).estimate
    assert est.bound_by == "loader" and est.step_s == pytest.approx(cal.loader_batch_s)


@pytest.mark.slow
def test_a_call_the_emulation_cannot_follow_is_named_in_one_line(tmp_path, monkeypatch):
    ref = script(tmp_path, monkeypatch, UNFOLLOWED)
    with pytest.raises(CalibrationError) as raised:
        calibrate.script_subject(ref, (), [], lambda line: None)
    words = str(raised.value)
    assert words.startswith(f"calibration: {ref.name}: stopped under CUDA's emulation on this machine's CPU "
                            "at train.py line 5: `torch.cuda.utilization()`")
    assert "\n" not in words
    assert calibrate.cached(calibrate.cache_key(ref, ())) is None   # a failure is not kept


@pytest.mark.slow
def test_a_script_that_fails_its_calibration_says_its_own_error_in_one_line(tmp_path, monkeypatch):
    ref = script(tmp_path, monkeypatch, MISSING_DATA)
    with pytest.raises(CalibrationError) as raised:
        calibrate.script_subject(ref, (), [], lambda line: None)
    words = str(raised.value)
    assert "FileNotFoundError" in words and "no-such-data.csv" in words and "\n" not in words


@pytest.mark.slow
def test_without_the_variable_the_probe_line_is_what_it_was(tmp_path):
    """The probe run directly (no torchrun, no group): without GPUBENCH_CALIBRATE_STEPS
    its line has its keys of old and the script runs to its end."""
    path = tmp_path / "train.py"
    path.write_text(NO_DDP)
    env = {k: v for k, v in os.environ.items() if k != CALIBRATE_ENV}
    proc = subprocess.run([sys.executable, str(REPO / "workloads" / "script_probe.py"), str(path)],
                          capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.strip() == "done"
    lines = [line for line in proc.stderr.splitlines() if line.startswith(PREFIX)]
    assert len(lines) == 1
    line = json.loads(lines[0][len(PREFIX):])
    assert {k: line[k] for k in ("rank", "world", "group", "wrapped", "frameworks")} == {
        "rank": 0, "world": 1, "group": None, "wrapped": [], "frameworks": {}}
    assert "calibration" not in line and line["steps"]["count"] == 5     # its steps timed, not counted
