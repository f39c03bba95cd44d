"""A user's script as the performance model needs it, from one short calibration run.

A step of a script is counted the way the suite's are (workloads/op_profile.py): every
operation of one training step, its FLOPs, bytes, kernels and views and the step's peak
of live memory, which the step model (ops.py) turns into time and memory on any GPU.
The script runs unchanged under torchrun, one process, under the probe
(workloads/script_probe.py) with GPUBENCH_CALIBRATE_STEPS: CUDA is emulated on this
machine's CPU (workloads/cuda_emulation.py: "cuda" tensors on the meta device, NCCL
answered by torch's fake process group, CUDA autocast's policy applied), so a script
written for a GPU runs as it would there while nothing is computed; the probe counts
from the end of its first optimizer step to the end of its second (gradient
accumulation's micro-batches, data moved to the device and values read back included),
then ends the process. The local launcher runs it (its command, environment, time limit
and explanation of a failure), so it runs as `gpubench run` would run it, in the same
directory.

A calibration costs a run: its result is kept in the state dir, keyed by the script's
SHA-256 (and --workdir's) and its arguments, and an unchanged script reuses it. No
torch here: the run is a child process.
"""

from __future__ import annotations

import datetime
import functools
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
from gpubench.predict import ops
from gpubench.predict.advise import Subject
from gpubench.predict.memory import OPTIMIZER_BYTES, ModelShape
from gpubench.predict.model import ASSUMED, MEASURED, Figure
from gpubench.predict.workload_profiles import WorkloadProfile
from gpubench.suite import WorkloadRef
from gpubench.workloads.script_probe import CALIBRATE_ENV, EMULATE_ENV, FLOP_STEP, PREFIX, WORLD_ENV

STEPS = FLOP_STEP         # optimizer steps the calibration run takes: the second is counted
TIME_LIMIT_S = 300.0      # torch's import and the script's own start included
CACHE_FILE = "calibrations.json"
# What a calibration counts: raised when the probe reads more of a step or reads it
# otherwise (2: its DataLoader timed; 3: as one core's fetch of a batch), so that one kept by
# an earlier probe is counted afresh rather than read short.
COUNTED = 4   # 4: a step's samples are its DataLoader's batches where one fed it
TIMEOUT_ENV = "GPUBENCH_CALIBRATION_TIMEOUT"   # seconds; TIME_LIMIT_S where unset
DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp64": 8}


class CalibrationError(UsageError):
    """The script's calibration run gave nothing to predict from (one line: why)."""


@dataclass(frozen=True)
class Calibration:
    """What the calibration run's probe counted of one training step, and when."""

    ops: tuple[tuple, ...]       # (phase, op, kind, count, flops, bytes, math), identical ones merged
    peak_bytes: int              # the most bytes live on the device during the step
    held_bytes: int              # live as it started: parameters, optimizer states, data on the device
    samples: int                 # samples a step (every micro-batch of an accumulation)
    tokens: int                  # tokens a step, where the model takes token ids; else 0
    grad_bytes: int              # the model's parameters that require grad
    params: int
    epoch_samples: int | None    # the length of the DataLoader's dataset feeding the model
    precision: str               # "bf16" or "fp16" under CUDA autocast, else "fp32"
    compiled: bool
    fsdp_units: int
    steps_seen: int
    date: str
    seconds: float               # the calibration run, torchrun's start included
    count_seconds: float | None = None   # the counted step, on the meta device
    optimizer: str | None = None     # the first optimizer's class, lower case ("adamw", "sgd-momentum")
    # the feeding DataLoader, after the counted step: its worker processes, and one core's
    # seconds to make a batch on this machine (fetched in the probe's process, one thread)
    loader_workers: int | None = None
    loader_batch_s: float | None = None
    world: int = 1                   # the GPUs of the world it ran as rank 0 of (its node's: world // nodes)
    nodes: int = 1
    step_kind: str = "optimizer"     # "backward": no optimizer; its backward passes ended its steps
    data_parallel: bool = False      # it wrapped its model in nn.DataParallel
    # shapes that depend on values the GPU computes, taken at their bound, each at the
    # script's line ("nonzero at train.py line 12: ..."); CUDA extension modules it went on without
    assumed: tuple[str, ...] = ()
    not_loaded: tuple[str, ...] = ()
    # tensor parallelism: the device meshes made ((shape, dim names) each), and the
    # collectives DTensor issued in the counted step ((name, calls, bytes as an all-reduce
    # would move them) each)
    meshes: tuple[tuple[tuple[int, ...], tuple[str, ...]], ...] = ()
    collectives: tuple[tuple[str, int, int], ...] = ()
    # FSDP2's MixedPrecisionPolicy: the dtype its parameters are gathered in and its
    # gradients reduced in ("bf16", "fp32"), where it set one
    fsdp_dtypes: tuple[str, str] | None = None

    @property
    def collective_bytes(self) -> int:
        return sum(moved for _, _, moved in self.collectives)

    @property
    def tensor_parallel(self) -> int:
        """The GPUs one model replica is sharded over: the first mesh's "tp" dimension (one
        named so, else its last; a 1-D mesh is all of it); 1 without DTensor's collectives."""
        if not self.collectives or not self.meshes:
            return 1
        shape, names = self.meshes[0]
        named = [n for n, name in zip(shape, names) if "tp" in name.lower() or "tensor" in name.lower()]
        return max(1, min(int(named[0] if named else shape[-1]), self.world))

    @property
    def work(self) -> int:
        """Units of work a step: its tokens where it has them, else its samples."""
        return self.tokens or self.samples

    @property
    def unit(self) -> str:
        return "tokens" if self.tokens else "samples"

    @property
    def activation_bytes(self) -> int:
        """What the step's peak holds beyond the state it started with."""
        return max(self.peak_bytes - self.held_bytes, 0)

    @property
    def loader_s(self) -> float:
        """The DataLoader's host seconds a batch on the GPU's machine, each worker given a
        core of its own there at this machine's speed (its workers make batches side by
        side). 0.0 where no DataLoader fed the step."""
        if not self.loader_batch_s:
            return 0.0
        return self.loader_batch_s / max(self.loader_workers or 0, 1)

    @property
    def flops_per_step(self) -> float:
        return float(sum(row[3] * row[4] for row in self.ops))

    @property
    def kernels(self) -> int:
        return sum(row[3] for row in self.ops if row[2] == "kernel")


def step_config(name: str, cal: Calibration) -> ops.Config:
    """The step model's view of the counted step: the operations at the script's own batch."""
    # a DataLoader without workers prepares its batch in the step's process: its CPU
    # operations there are in the loader's own time, not the host's dispatch
    in_loader = cal.loader_s > 0 and not cal.loader_workers
    rows = tuple(ops.OpRow(str(p), str(o), k == "kernel", int(n), (float(f), 0.0), (float(b), 0.0), str(m))
                 for p, o, k, n, f, b, m in cal.ops if not (in_loader and p == "data" and k == "host"))
    # the activations grow with the batch, the held state does not
    rank = f" as rank 0 of {cal.world} GPUs" if cal.world > 1 else ""
    profile = ops.StepProfile(f"{name} (counted{rank})", rows, (float(cal.held_bytes), cal.activation_bytes / cal.samples),
                              float(cal.held_bytes), cal.work // cal.samples, cal.params)
    return ops.Config(name, profile.key, cal.samples, cal.precision, cal.compiled, cal.fsdp_units,
                      counted=profile, loader_s=cal.loader_s, loader_overlaps=bool(cal.loader_workers))


def script_subject(ref: WorkloadRef, args: tuple, records: list[dict],
                   say: Callable[[str], None] | None = None, gpus: int = 1, nodes: int = 1) -> Subject:
    """The Subject of a user's script at `args` on `gpus` GPUs over `nodes` machines, from
    its calibration as rank 0 of that world (kept, or run now). `records` are not read
    here: those of the same script on a GPU give measured predictions (predict.basis)
    whatever the calibration says."""
    say = say or _stderr
    return subject_of(ref, args, calibration_for(ref, tuple(args), say, (gpus, nodes)))


def subject_of(ref: WorkloadRef, args: tuple, cal: Calibration) -> Subject:
    """The Subject a calibration of the script at `args` makes."""
    flops = sum(r[3] * r[4] for r in cal.ops if r[0] != "optimizer")
    source = (f"counted on the meta device over one training step of a calibration run on this "
              f"machine's CPU, CUDA emulated, {cal.date}" + _world_said(cal) + _assumed_said(cal))
    profile = WorkloadProfile(
        workload=ref.name, args=tuple(args), flops_per_sample=flops / cal.work, unit=cal.unit,
        params=cal.params, grad_bytes=cal.grad_bytes, epoch_samples=cal.epoch_samples,
        batch_per_gpu=cal.samples, source=source, work_per_gpu_step=cal.work)
    grad = Figure(float(cal.grad_bytes), MEASURED,
                  f"{size(cal.grad_bytes)} of gradients, counted by the calibration run's "
                  f"probe: the parameters requiring grad of the model it trains, {cal.date}")
    overlap = None
    if cal.collectives:
        grad, overlap = tensor_parallel(cal)
    elif cal.fsdp_units:
        grad, overlap = sharded(cal)
    return Subject(ref.name, tuple(args), cal.precision, f"{cal.unit}/s", cal.work, grad, profile,
                   published_ok=False, memory_batch=cal.samples, counted=step_config(ref.name, cal),
                   strategy="FSDP" if cal.fsdp_units else "DDP", overlap=overlap,
                   tensor_parallel=cal.tensor_parallel, **memory_of(cal))


def sharded(cal: Calibration) -> tuple[Figure, Figure]:
    """A model sharded with FSDP: each step gathers its parameters twice (forward, and
    backward again) in its param dtype and reduce-scatters its gradients in its reduce
    dtype, (N-1)/N of each: as the bytes of DDP's all-reduce (2 (N-1)/N), half their sum."""
    param, reduce = cal.fsdp_dtypes or ("fp32", "fp32")
    gathered = 2 * cal.params * DTYPE_BYTES[param]
    scattered = cal.params * DTYPE_BYTES[reduce] if cal.grad_bytes else 0
    sent = (gathered + scattered) / 2
    policy = (f"MixedPrecisionPolicy(param_dtype={param}, reduce_dtype={reduce})" if cal.fsdp_dtypes
              else "no mixed precision policy: fp32")
    words = (f"{size(int(sent))} a step under FSDP ({cal.fsdp_units} units, {policy}) as DDP's all-reduce "
             f"would move it: 2 all-gathers of {size(cal.params * DTYPE_BYTES[param])} of {param} parameters, "
             f"1 reduce-scatter of {reduce} gradients, counted by the calibration run, {cal.date}")
    return (Figure(sent, MEASURED, words),
            Figure(1.0, ASSUMED, "FSDP prefetches its all-gathers and overlaps its reduce-scatters with the "
                                 "backward pass (own streams)"))


def tensor_parallel(cal: Calibration) -> tuple[Figure, Figure]:
    """A model sharded over a device mesh: its communication is the collectives DTensor
    issued in the counted step (as the all-reduce bytes they move), which sit between its
    layers' matrix products, none hidden behind the backward."""
    mesh = " and ".join("x".join(str(n) for n in shape) for shape, _ in cal.meshes) or "a device mesh"
    calls = ", ".join(f"{n} {name}" for name, n, _ in cal.collectives)
    sent = Figure(float(cal.collective_bytes), MEASURED,
                  f"{size(cal.collective_bytes)} a step through tensor parallelism's collectives over {mesh} "
                  f"GPUs ({calls}), as all-reduces would move them, counted on rank 0's shards by the "
                  f"calibration run, {cal.date}; a data-parallel dimension's gradients are not added; "
                  f"{cal.tensor_parallel} GPUs share each batch")
    return sent, Figure(0.0, ASSUMED, "tensor parallelism's collectives sit between its layers: none overlap")


def memory_of(cal: Calibration) -> dict:
    """What the memory model needs from a calibration where the step model does not
    answer (a card without a datasheet row): the parameters and the optimizer's states
    (AdamW where it made another or none it knows), and the activations per sample, as
    they were live at the step's peak."""
    optimizer = cal.optimizer if cal.optimizer in OPTIMIZER_BYTES else "adamw"
    compute = 2.0 if cal.precision in ops.LOW_PRECISION else 4.0
    out: dict = {"shape": ModelShape(cal.params, optimizer=optimizer, compute_bytes=compute)}
    if cal.activation_bytes and cal.samples:
        out["activations"] = Figure(cal.activation_bytes / cal.samples, MEASURED,
                                    f"{size(cal.activation_bytes)} live at the counted step's peak beside its "
                                    f"held state, at a batch of {cal.samples}")
    return out


def _world_said(cal: Calibration) -> str:
    if cal.world <= 1:
        return ""
    where = f"{cal.world // cal.nodes} on its node" + (f", {cal.nodes} nodes" if cal.nodes > 1 else "")
    return (f", as rank 0 of {cal.world} GPUs ({where}): what the script does on rank 0 alone "
            "(logging, evaluation, checkpoints) is in the step counted")


def _assumed_said(cal: Calibration) -> str:
    """What the count took rather than knew: shapes at their bound, extensions gone without."""
    said = ""
    if cal.assumed:
        said += "; assumed, where a shape depends on values computed on the GPU: " + "; ".join(cal.assumed)
    if cal.not_loaded:
        said += (f"; not loaded, the script's fallback counted instead: {', '.join(cal.not_loaded)} "
                 "(a compiled CUDA extension)")
    return said


def calibration_for(ref: WorkloadRef, args: tuple, say: Callable[[str], None],
                    world: tuple[int, int] = (1, 1)) -> Calibration:
    key = cache_key(ref, args, world)
    kept = cached(key) if key else None
    if kept is not None:
        say(f"calibration: reused from {kept.date}")
        return kept
    rank = f" as rank 0 of {world[0]} GPUs" if world[0] > 1 else ""
    say(f"calibration: running {ref.name} for {STEPS} training steps{rank} on this machine's CPU, CUDA "
        "emulated (once per version of the script)")
    cal = run_calibration(ref, args, world)
    say(f"calibration: {cal.kernels:,} kernels and {say_flops(cal.flops_per_step)} a step of "
        f"{cal.samples:,} samples{f' ({cal.tokens:,} tokens)' if cal.tokens else ''}, "
        f"{size(cal.grad_bytes)} of gradients{_loader_said(cal)} ({cal.seconds:.0f} s)")
    if key:
        keep(key, ref, args, cal)
    return cal


def _loader_said(cal: Calibration) -> str:
    if not cal.loader_batch_s:
        return ""
    workers = f"{cal.loader_workers} worker{'s' if cal.loader_workers != 1 else ''}" if cal.loader_workers \
        else "no workers"
    return (f"; its DataLoader ({workers}) made a batch in {cal.loader_batch_s * 1e3:,.1f} ms on one of this "
            "machine's cores")


# --------------------------------------------------------------------------- the run
class _CalibrationLauncher(LocalLauncher):
    """The local launcher on the CPU, with the probe told to calibrate under CUDA's
    emulation as rank 0 of `world` (GPUs, nodes), and any real GPU hidden."""

    def __init__(self, world: tuple[int, int] = (1, 1)) -> None:
        super().__init__(gpus=[])
        self.world = world

    def environment(self, procs: int) -> dict[str, str]:
        gpus, nodes = self.world
        return {**super().environment(procs), CALIBRATE_ENV: str(STEPS), "CUDA_VISIBLE_DEVICES": "",
                WORLD_ENV: f"{gpus},{nodes}", EMULATE_ENV: json.dumps({"count": max(gpus // nodes, 1)})}


def time_limit() -> float:
    """The calibration's bound: GPUBENCH_CALIBRATION_TIMEOUT seconds where set, else TIME_LIMIT_S."""
    try:
        value = float(os.environ.get(TIMEOUT_ENV, "") or TIME_LIMIT_S)
    except ValueError:
        raise UsageError(f"{TIMEOUT_ENV}: '{os.environ[TIMEOUT_ENV]}' is not a number of seconds") from None
    if value <= 0:
        raise UsageError(f"{TIMEOUT_ENV}: {value:g} is not a positive number of seconds")
    return value


def run_calibration(ref: WorkloadRef, args: tuple, world: tuple[int, int] = (1, 1)) -> Calibration:
    """Run the script for STEPS training steps as rank 0 of `world` and read what its probe
    counted; CalibrationError (one line) when it fails, takes too long or trains nothing."""
    reports: list[dict] = []
    limit = time_limit()
    with _CalibrationLauncher(world) as launcher:
        outcome = launcher.run(ref, SweepPoint(1, 1), list(args), lambda line: _take(line, reports),
                               limit)
    report = reports[-1] if reports else None
    unfollowed = ((report or {}).get("calibration") or {}).get("unfollowed")
    if unfollowed:
        raise CalibrationError(f"calibration: {ref.name}: {unfollowed}")
    if outcome.failure is not None and outcome.failure.kind == "timeout":
        steps = ((report or {}).get("calibration") or {}).get("steps_seen") or 0
        raise CalibrationError(f"calibration: {ref.name} took {steps} of the {STEPS} training steps needed "
                               f"(optimizer steps, or backward passes where it makes no optimizer) within "
                               f"{limit:.0f} s on this machine's CPU; nothing to predict from "
                               f"({TIMEOUT_ENV}=SECONDS allows longer)")
    if outcome.returncode != 0:
        raise CalibrationError(f"calibration: {ref.name} failed: {_one_line(outcome.error or '')}")
    if report is None:
        raise CalibrationError(f"calibration: {ref.name} ended without the probe's report "
                               "(it left by os._exit, or its probe did not run); nothing to predict from")
    cal = from_report(ref.name, report, outcome.elapsed_seconds, last_words(outcome.output_tail))
    if world[0] > 1 and not report.get("group") and not cal.data_parallel:
        raise CalibrationError(f"calibration: {ref.name} forms no process group (it never calls "
                               f"torch.distributed.init_process_group): at {world[0]} GPUs each of its processes "
                               "would train the whole model alone, on the same work, as `gpubench run` would find; "
                               "ask for --gpus 1, or form a group and wrap the model in DDP")
    if cal.data_parallel and world[0] > 1:
        raise CalibrationError(f"calibration: {ref.name} wraps its model in nn.DataParallel: one process "
                               f"driving {world[0]} GPUs (it scatters each batch, replicates the model and "
                               "gathers the outputs from one Python thread), which gpubench does not predict; "
                               "with torchrun and DistributedDataParallel it can, or ask for --gpus 1")
    return cal


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
    steps, step = int(found.get("steps_seen") or 0), found.get("step")
    if steps < STEPS or not step:
        words = f" (its last words: {_one_line(said)[:160]})" if said else ""
        raise CalibrationError(f"calibration: {name} took {steps} training step(s) before it ended (optimizer "
                               f"steps, or backward passes where it makes no optimizer); {STEPS} are needed "
                               f"(the second is counted); nothing to predict from{words}")
    rows = tuple(tuple(row) for row in step.get("ops") or ())
    if not any(row[2] == "kernel" for row in rows):
        raise CalibrationError(f"calibration: {name}: its training step ran no operation on CUDA (the "
                               "model and its batches stay on the CPU); nothing to predict on a GPU")
    samples = int(step.get("samples") or 0)
    if samples < 1:
        raise CalibrationError(f"calibration: {name}: no tensor in its model's forward calls to read the "
                               "batch from; nothing to predict from")
    autocast = found.get("autocast")
    loader = found.get("loader") if isinstance(found.get("loader"), dict) else {}
    return Calibration(rows, int(step.get("peak_bytes") or 0), int(step.get("held_bytes") or 0), samples,
                       int(step.get("tokens") or 0), int(found.get("grad_bytes") or 0),
                       int(found.get("params") or 0), found.get("epoch_samples"),
                       autocast if autocast in ops.LOW_PRECISION else "fp32", bool(found.get("compiled")),
                       int(found.get("fsdp_units") or 0), steps,
                       datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), round(seconds, 1),
                       found.get("count_seconds"), found.get("optimizer"),
                       _number(loader.get("workers"), int), _number(loader.get("batch_seconds"), float),
                       int(found.get("world") or 1), int(found.get("nodes") or 1),
                       "backward" if found.get("step_kind") == "backward" else "optimizer",
                       bool(found.get("data_parallel")), _words(found.get("assumed")),
                       _words(found.get("not_loaded")), _meshes(found.get("meshes")),
                       _collectives(step.get("collectives")), _fsdp_dtypes(found))


def _fsdp_dtypes(found: dict) -> tuple[str, str] | None:
    param = found.get("fsdp_param_dtype")
    if param not in DTYPE_BYTES:
        return None
    reduce = found.get("fsdp_reduce_dtype")
    return str(param), str(reduce if reduce in DTYPE_BYTES else param)


def _meshes(value) -> tuple:
    try:
        return tuple((tuple(int(n) for n in mesh["shape"]), tuple(str(n) for n in mesh.get("names") or ()))
                     for mesh in value or () if mesh["shape"])
    except (TypeError, ValueError, KeyError, AttributeError):
        return ()


def _collectives(value) -> tuple[tuple[str, int, int], ...]:
    try:
        return tuple((str(name), int(calls), int(moved)) for name, (calls, moved) in sorted((value or {}).items()))
    except (TypeError, ValueError, AttributeError):
        return ()


def _words(value) -> tuple[str, ...]:
    """A probe's list of lines, or () where it gave none or nonsense."""
    return tuple(str(v) for v in value) if isinstance(value, list) else ()


def _number(value, kind):
    """A probe's figure, or None where it gave none or nonsense."""
    try:
        return kind(value) if value is not None and float(value) >= 0 else None
    except (TypeError, ValueError):
        return None


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


def cache_key(ref: WorkloadRef, args: tuple, world: tuple[int, int] = (1, 1)) -> str | None:
    """The script's contents (and --workdir's), its arguments and the world it ran as rank 0
    of; None for a script that cannot be read (then nothing is kept)."""
    identity = suite.script_identity(ref)
    if not identity.get("script_sha256"):
        return None
    what = [identity["script_sha256"], identity.get("workdir_sha256"), list(args), COUNTED, list(world),
            counter_sha256()]
    return hashlib.sha256(json.dumps(what).encode()).hexdigest()


# The probe's code that decides what a step counts: a calibration kept by another version
# of it is counted afresh.
COUNTER_FILES = ("step_count.py", "script_probe.py", "cuda_emulation.py", "meta_values.py", "not_followed.py",
                 "user_frames.py", "rank_count.py", "step_parts.py")


@functools.lru_cache(maxsize=1)
def counter_sha256() -> str:
    digest = hashlib.sha256()
    for name in COUNTER_FILES:
        try:
            digest.update((suite.workloads_dir() / name).read_bytes())
        except OSError:
            digest.update(name.encode())
    return digest.hexdigest()


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
        found = dict(entry["calibration"])
        found["ops"] = tuple(tuple(row) for row in found["ops"])
        return Calibration(**found)
    except (TypeError, KeyError, ValueError):    # absent, or kept by another version of this file
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
