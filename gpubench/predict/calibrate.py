"""A user's script as the performance model needs it, from one short calibration run.

What a step of a script costs per sample (its FLOPs, its batch, the gradient bytes DDP
all-reduces, the samples of an epoch) is the same on any hardware, so a few steps on
this machine's CPU tell it: the script runs unchanged under torchrun, one process,
gloo, no GPU, under the probe (workloads/script_probe.py) with GPUBENCH_CALIBRATE_STEPS,
which counts one step with torch's FlopCounterMode and ends the process after STEPS.
The local launcher runs it (its command, environment, time limit and explanation of a
failure), so it runs as `gpubench run` would run it, in the same directory.

A calibration costs a run: its result is kept in the state dir, keyed by the script's
SHA-256 (and --workdir's) and its arguments, and an unchanged script reuses it. No
torch here: the run is a child process.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import sys
from dataclasses import asdict, dataclass
from typing import Callable

from gpubench import paths, suite
from gpubench.errors import UsageError
from gpubench.format import say_flops
from gpubench.launch.base import SweepPoint
from gpubench.launch.failures import last_words
from gpubench.launch.local import LocalLauncher
from gpubench.predict.advise import Subject
from gpubench.predict.memory import OPTIMIZER_BYTES, ModelShape
from gpubench.predict.model import MEASURED, Figure
from gpubench.predict.workload_profiles import WorkloadProfile
from gpubench.suite import WorkloadRef
from gpubench.workloads.script_probe import CALIBRATE_ENV, FLOP_STEP, PREFIX

STEPS = 4                 # steps the calibration run takes: warm-up, the counted one, two timed
TIME_LIMIT_S = 300.0      # torch's import and a slow first step included
CACHE_FILE = "calibrations.json"
WRAPPERS = "DistributedDataParallel or FSDP"


class CalibrationError(UsageError):
    """The script's calibration run gave nothing to predict from (one line: why)."""


@dataclass(frozen=True)
class Calibration:
    """What the calibration run's probe counted, and when."""

    flops_per_step: float        # forward + backward + optimizer of one process's step
    batch: int                   # samples per process per step (dim 0 of the forward's input)
    grad_bytes: int              # the wrapped parameters that require grad
    params: int
    epoch_samples: int | None    # the length of the DataLoader's dataset feeding the model
    cpu_step_s: float | None     # this machine's CPU: informative only
    steps_seen: int
    whole_step: bool             # False: the count ran to the script's end, not to a next step
    date: str
    seconds: float               # the calibration run, torchrun's start included
    saved_bytes: int | None = None   # what autograd kept for the backward pass in the counted step
    optimizer: str | None = None     # the first optimizer's class, lower case ("adamw", "sgd-momentum")

    @property
    def flops_per_sample(self) -> float:
        return self.flops_per_step / self.batch


def script_subject(ref: WorkloadRef, args: tuple, records: list[dict],
                   say: Callable[[str], None] | None = None) -> Subject:
    """The Subject of a user's script at `args`, from its calibration (kept, or run now).
    `records` are not read here: those of the same script on a GPU give measured
    predictions (predict.basis) whatever the calibration says."""
    say = say or _stderr
    cal = calibration_for(ref, tuple(args), say)
    counted = "one step" if cal.whole_step else f"step {FLOP_STEP} to the script's end"
    profile = WorkloadProfile(
        workload=ref.name, args=tuple(args), flops_per_sample=cal.flops_per_sample, unit="samples",
        params=cal.params, grad_bytes=cal.grad_bytes, epoch_samples=cal.epoch_samples,
        batch_per_gpu=cal.batch,
        source=(f"counted by torch's FlopCounterMode over {counted} of a calibration run on this "
                f"machine's CPU, {cal.date}"),
        work_per_gpu_step=cal.batch)
    grad = Figure(float(cal.grad_bytes), MEASURED,
                  f"{size(cal.grad_bytes)} of gradients, counted by the calibration run's "
                  f"probe: the parameters requiring grad of the model it wraps, {cal.date}")
    return Subject(ref.name, tuple(args), "-", "samples/s", cal.batch, grad, profile,
                   published_ok=False, memory_batch=cal.batch, **memory_of(cal))


def memory_of(cal: Calibration) -> dict:
    """What the memory model needs from a calibration: the parameters and the optimizer's
    states (AdamW where it made another or none it knows), and the activations per
    sample, as autograd kept them for the backward pass on this CPU (fp32: an upper
    bound for a run under bf16 autocast)."""
    optimizer = cal.optimizer if cal.optimizer in OPTIMIZER_BYTES else "adamw"
    out: dict = {"shape": ModelShape(cal.params, optimizer=optimizer, compute_bytes=4.0)}
    if cal.saved_bytes and cal.batch:
        out["activations"] = Figure(cal.saved_bytes / cal.batch, MEASURED,
                                    f"{size(cal.saved_bytes)} saved for the backward pass at a batch of "
                                    f"{cal.batch} in the calibration run (fp32 on this CPU)")
    return out


def calibration_for(ref: WorkloadRef, args: tuple, say: Callable[[str], None]) -> Calibration:
    key = cache_key(ref, args)
    kept = cached(key) if key else None
    if kept is not None:
        say(f"calibration: reused from {kept.date}")
        return kept
    say(f"calibration: running {ref.name} for {STEPS} steps on this machine's CPU (once per "
        "version of the script)")
    cal = run_calibration(ref, args)
    say(f"calibration: {say_flops(cal.flops_per_sample)} per sample at a batch of {cal.batch}, "
        f"{size(cal.grad_bytes)} of gradients ({cal.seconds:.0f} s)")
    if key:
        keep(key, ref, args, cal)
    return cal


# --------------------------------------------------------------------------- the run
class _CalibrationLauncher(LocalLauncher):
    """The local launcher on the CPU, with the probe told to calibrate and CUDA hidden
    (the FLOPs are the same anywhere; a GPU here would only be another place to fail)."""

    def __init__(self) -> None:
        super().__init__(gpus=[])

    def environment(self, procs: int) -> dict[str, str]:
        return {**super().environment(procs), CALIBRATE_ENV: str(STEPS), "CUDA_VISIBLE_DEVICES": ""}


def run_calibration(ref: WorkloadRef, args: tuple) -> Calibration:
    """Run the script for STEPS steps and read what its probe counted; CalibrationError
    (one line) when it fails, takes too long or never trains a wrapped model."""
    reports: list[dict] = []
    with _CalibrationLauncher() as launcher:
        outcome = launcher.run(ref, SweepPoint(1, 1), list(args), lambda line: _take(line, reports),
                               TIME_LIMIT_S)
    if outcome.failure is not None and outcome.failure.kind == "timeout":
        raise CalibrationError(f"calibration: {ref.name} did not reach {STEPS} training steps within "
                               f"{TIME_LIMIT_S:.0f} s on this machine's CPU; nothing to predict from")
    if outcome.returncode != 0:
        raise CalibrationError(f"calibration: {ref.name} failed: {_one_line(outcome.error or '')}")
    report = reports[-1] if reports else None
    if report is None:
        raise CalibrationError(f"calibration: {ref.name} ended without the probe's report "
                               "(it left by os._exit, or its probe did not run); nothing to predict from")
    return from_report(ref.name, report, outcome.elapsed_seconds, last_words(outcome.output_tail))


def _take(line: str, reports: list[dict]) -> None:
    """The probe's line, where `line` is one (sweep.probe reads them for a sweep; the
    layers keep that above this)."""
    at = line.find(PREFIX)
    if at >= 0:
        try:
            found = json.loads(line[at + len(PREFIX):])
        except ValueError:
            return
        if isinstance(found, dict):
            reports.append(found)


def from_report(name: str, report: dict, seconds: float, said: str = "") -> Calibration:
    """The probe's calibration object as a Calibration, or why there is none."""
    found = report.get("calibration") or {}
    if not report.get("wrapped"):
        words = f" (its last words: {_one_line(said)[:160]})" if said else ""
        raise CalibrationError(f"calibration: {name} never wrapped a model in {WRAPPERS} within "
                               f"{STEPS} steps; nothing to predict from{words}")
    steps, counted, batch = found.get("steps_seen") or 0, found.get("flops_per_step"), found.get("batch")
    if steps < FLOP_STEP:
        raise CalibrationError(f"calibration: {name} wrapped a model but ran {steps} training step(s) "
                               f"(forward calls with gradients) before it ended; {FLOP_STEP} are needed "
                               "to count one; nothing to predict from")
    if counted is None or not batch:
        why = "no tensor in its forward call to read the batch from" if counted is not None else \
            "FlopCounterMode could not be entered or left around it"
        raise CalibrationError(f"calibration: {name}: its step could not be counted ({why}); "
                               "nothing to predict from")
    if counted <= 0:
        raise CalibrationError(f"calibration: {name}: FlopCounterMode counted no FLOPs in its step (it "
                               "counts matrix products, convolutions and attention only); nothing to "
                               "predict from")
    return Calibration(float(counted), int(batch), int(found.get("grad_bytes") or 0),
                       int(found.get("params") or 0), found.get("epoch_samples"),
                       found.get("cpu_step_s"), int(steps), found.get("flops_window") == "step",
                       datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), round(seconds, 1),
                       found.get("saved_bytes"), found.get("optimizer"))


def size(nbytes: int) -> str:
    """2112 -> '2,112 bytes', 102_760_448 -> '102.8 MB'."""
    return f"{nbytes / 1e6:,.1f} MB" if nbytes >= 100_000 else f"{nbytes:,} bytes"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- the cache
def cache_path():
    return paths.state_dir() / CACHE_FILE


def cache_key(ref: WorkloadRef, args: tuple) -> str | None:
    """The script's contents (and --workdir's) and its arguments; None for a script that
    cannot be read (then nothing is kept)."""
    identity = suite.script_identity(ref)
    if not identity.get("script_sha256"):
        return None
    what = [identity["script_sha256"], identity.get("workdir_sha256"), list(args)]
    return hashlib.sha256(json.dumps(what).encode()).hexdigest()


def _entries() -> dict:
    """The kept calibrations; {} when the file is missing or damaged (then it is rewritten)."""
    try:
        document = json.loads(cache_path().read_text(encoding="utf-8"))
        entries = document["calibrations"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    return entries if isinstance(entries, dict) else {}


def cached(key: str) -> Calibration | None:
    entry = _entries().get(key)
    try:
        return Calibration(**entry["calibration"])
    except (TypeError, KeyError):    # absent, or kept by another version of this file
        return None


def keep(key: str, ref: WorkloadRef, args: tuple, cal: Calibration) -> None:
    """Best effort: a state dir that cannot be written costs the next advise a run."""
    entries = _entries()
    entries[key] = {"script": ref.name, "args": list(args), "calibration": asdict(cal)}
    path = cache_path()
    try:
        paths.state_dir(create=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(json.dumps({"calibrations": entries}, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass
