"""`gpubench advise ./train.py`: a user's script calibrated by a short run on this
machine's CPU (gpubench.predict.calibrate, the probe's GPUBENCH_CALIBRATE_STEPS), its
FLOPs per sample, batch and gradient bytes as the performance model's Subject; a script
that fails, or never wraps a model, in one line; an unchanged script not run twice."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from gpubench import suite
from gpubench.errors import UsageError
from gpubench.predict import calibrate
from gpubench.predict.calibrate import STEPS, Calibration, CalibrationError
from gpubench.workloads.script_probe import CALIBRATE_ENV, PREFIX
from tests.helpers import JOIN, LEAVE, REPO, TRAINS_ALONE

# A Linear(32, 16) under DDP on gloo, batch 8, 20 steps from a DataLoader of 400 samples
# (a smaller validation loader made after it); it would write its marker at the end.
TINY_DDP = JOIN + """\
import os, torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
model = DDP(nn.Linear(32, 16))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
train = DataLoader(TensorDataset(torch.randn(400, 32)), batch_size=8)
val = DataLoader(TensorDataset(torch.randn(40, 32)), batch_size=8)
for step, (x,) in enumerate(train):
    if step == 20:
        break
    loss = model(x).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
with torch.no_grad():
    for (x,) in val:
        model(x)
open(os.environ["DONE_MARKER"], "w").write("done")
print("done")
""" + LEAVE

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
def report(**calibration) -> dict:
    found = {"steps_seen": STEPS + 1, "flops_per_step": 16384, "batch": 8, "flops_window": "step",
             "grad_bytes": 2112, "params": 528, "cpu_step_s": 0.01, "epoch_samples": None}
    return {"rank": 0, "wrapped": ["DDP"], "calibration": {**found, **calibration}}


def test_a_report_of_a_counted_step_is_a_calibration():
    cal = calibrate.from_report("train.py", report(), 12.3)
    assert (cal.flops_per_sample, cal.batch, cal.grad_bytes, cal.whole_step) == (2048, 8, 2112, True)


@pytest.mark.parametrize("wrapped, calibration, words", [
    ([], {}, f"calibration: train.py never wrapped a model in DistributedDataParallel or FSDP within "
             f"{STEPS} steps; nothing to predict from"),
    (["DDP"], {"steps_seen": 1, "flops_per_step": None, "batch": None},
     "calibration: train.py wrapped a model but ran 1 training step(s)"),
    (["DDP"], {"flops_per_step": 0}, "FlopCounterMode counted no FLOPs in its step"),
    (["DDP"], {"batch": None}, "no tensor in its forward call to read the batch from"),
])
def test_a_report_with_nothing_to_predict_from_says_why_in_one_line(wrapped, calibration, words):
    with pytest.raises(CalibrationError) as raised:
        calibrate.from_report("train.py", {**report(**calibration), "wrapped": wrapped}, 1.0)
    assert words in str(raised.value) and "\n" not in str(raised.value)
    assert isinstance(raised.value, UsageError)


def test_an_unchanged_script_reuses_its_calibration_and_an_edited_one_runs_again(tmp_path, monkeypatch):
    ref = script(tmp_path, monkeypatch, NO_DDP)
    runs = []

    def run(ref, args):
        runs.append(args)
        return Calibration(16384.0, 8, 2112, 528, 400, 0.01, 5, True, "2026-01-02 03:04", 9.0)

    monkeypatch.setattr(calibrate, "run_calibration", run)
    said = []
    first = calibrate.script_subject(ref, ("--lr", "0.1"), [], said.append)
    again = calibrate.script_subject(ref, ("--lr", "0.1"), [], said.append)
    assert first == again and runs == [("--lr", "0.1")]
    assert said[-1] == "calibration: reused from 2026-01-02 03:04"
    calibrate.script_subject(ref, ("--lr", "0.2"), [], said.append)   # other arguments
    ref.script.write_text(NO_DDP + "# edited\n")
    calibrate.script_subject(ref, ("--lr", "0.1"), [], said.append)   # another version
    assert len(runs) == 3


def test_a_damaged_cache_is_no_cache(tmp_path, monkeypatch):
    ref = script(tmp_path, monkeypatch, NO_DDP)
    calibrate.cache_path().parent.mkdir(parents=True)
    calibrate.cache_path().write_text("{not json")
    monkeypatch.setattr(calibrate, "run_calibration",
                        lambda ref, args: Calibration(2.0, 1, 4, 1, None, None, 5, True, "d", 1.0))
    assert calibrate.script_subject(ref, (), [], lambda line: None).batch_per_gpu == 1
    assert len(json.loads(calibrate.cache_path().read_text())["calibrations"]) == 1


# --------------------------------------------------------------------------- slow: torch runs
@pytest.mark.slow
def test_a_ddp_script_is_counted_in_a_few_steps_and_ended_early(tmp_path, monkeypatch):
    ref = script(tmp_path, monkeypatch, TINY_DDP)
    marker = tmp_path / "done-marker"
    monkeypatch.setenv("DONE_MARKER", str(marker))
    said = []
    subject = calibrate.script_subject(ref, (), [], said.append)
    # FlopCounterMode counts 2 FLOPs per multiply-add: the forward 2 x 32 x 16 per sample,
    # and the backward only the weight's gradient (as much again): the input is data, which
    # needs no gradient. The bias add and the SGD update count nothing.
    assert subject.profile.flops_per_sample == 2 * (2 * 32 * 16)
    assert subject.batch_per_gpu == subject.profile.batch_per_gpu == 8
    assert subject.grad_bytes.value == subject.profile.grad_bytes == (32 * 16 + 16) * 4
    assert subject.profile.params == 32 * 16 + 16
    assert subject.profile.epoch_samples == 400               # the loader feeding it, not val's 40
    assert (subject.workload, subject.precision, subject.unit) == (ref.name, "-", "samples/s")
    assert subject.published_ok is False and subject.grad_bytes.basis == "measured"
    assert "FlopCounterMode over one step of a calibration run" in subject.profile.source
    assert not marker.exists()                                 # ended after STEPS steps
    cal = calibrate.cached(calibrate.cache_key(ref, ()))
    assert cal.steps_seen == STEPS + 1 and cal.cpu_step_s > 0
    # memory: the optimizer it made, and what autograd kept for the backward pass (at least
    # the input batch the weight's gradient needs: 8 x 32 fp32 values)
    assert cal.optimizer == "sgd" and subject.shape.optimizer == "sgd"
    assert subject.shape.params == 32 * 16 + 16
    assert cal.saved_bytes >= 8 * 32 * 4
    assert subject.activations.value == cal.saved_bytes / 8 and subject.memory_batch == 8
    assert said[0].startswith("calibration: running") and "2.05 kFLOP per sample" in said[1]


@pytest.mark.slow
def test_a_script_that_fails_its_calibration_says_its_own_error_in_one_line(tmp_path, monkeypatch):
    ref = script(tmp_path, monkeypatch, MISSING_DATA)
    with pytest.raises(CalibrationError) as raised:
        calibrate.script_subject(ref, (), [], lambda line: None)
    words = str(raised.value)
    assert words.startswith(f"calibration: {ref.name} failed: FileNotFoundError")
    assert "no-such-data.csv" in words and "\n" not in words
    assert calibrate.cached(calibrate.cache_key(ref, ())) is None   # a failure is not kept


@pytest.mark.slow
def test_a_script_that_never_wraps_a_model_has_nothing_to_predict_from(tmp_path, monkeypatch):
    ref = script(tmp_path, monkeypatch, NO_DDP)
    with pytest.raises(CalibrationError) as raised:
        calibrate.script_subject(ref, (), [], lambda line: None)
    assert str(raised.value) == (
        f"calibration: {ref.name} never wrapped a model in DistributedDataParallel or FSDP within "
        f"{STEPS} steps; nothing to predict from (its last words: done)")


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
