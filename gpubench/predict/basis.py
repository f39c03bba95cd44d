"""How fast one GPU of a type does one unit of a workload's work, and on what basis.

In order, the first that exists wins:
1. measured: ok records of the same workload, arguments and precision on that GPU type
   at one GPU (the user's results, then the reference records that ship with gpubench);
2. modelled: the step model (ops.py), where a step profile covers the arguments: each
   operation of the step against the card's datasheet rates, with constants fitted to
   measured runs (published figures stay a check beside it: `gpubench predict`);
3. published: a single-GPU training throughput published for that GPU type (the
   workload at its default size only: that is what was published);
4. scaled: the nearest measured GPU type (else the nearest with a published figure),
   times the datasheet ratio of the resource the workload is bound by (tensor FLOP/s,
   or memory bandwidth for embedding tables);
5. datasheet: the workload's counted FLOPs over the GPU's peak at an assumed share of it.
An unknown GPU type with no records is no basis: None, never a made-up figure.

Records of a CPU standing in for a GPU (a mock instance, device "cpu") are never taken
for that GPU. The model keeps no state: each prediction reads the records afresh.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from pathlib import Path

from gpubench.format import say_flops
from gpubench.predict import gpu_specs, ops
from gpubench.predict.model import DATASHEET, MEASURED, PUBLISHED, SCALED, Figure
from gpubench.predict.workload_profiles import WorkloadProfile
from gpubench.providers.gpus import normalize_gpu_name

# The share of the datasheet peak a DDP training step reaches when nothing better is
# known: nanoGPT reports 37% MFU for GPT-2 124M on an A100 (transformer_sizing.ipynb),
# torchtitan 33-39% for Llama 3.1 8B on H100s (benchmarks/llama3_h100_202412).
ASSUMED_MFU = 0.35
MFU_SOURCE = "35% of peak assumed (nanoGPT 37% on A100, torchtitan 33-39% on H100)"
# Workloads bound by memory traffic rather than tensor FLOPs: scaled by bandwidth.
MEMORY_BOUND = {"recsys-ddp"}
# Which datasheet rate a precision runs at. fp32 convolutions use TF32 by default
# (torch.backends.cudnn.allow_tf32 is True), fp32 matmuls do not (allow_tf32 False).
PRECISION_RATE = {"bf16": "bf16", "fp16": "fp16", "fp32": "fp32", "tf32": "tf32"}
CONV_WORKLOADS = {"resnet-ddp"}


@dataclass(frozen=True)
class Measured:
    """The 1-GPU throughput of a workload on one GPU type, from records."""

    gpu_name: str
    per_gpu: float
    runs: int
    batch_per_gpu: int | None
    where: str


def rate_kind(workload: str, precision: str) -> str:
    kind = PRECISION_RATE.get(precision, "fp32")
    return "tf32" if kind == "fp32" and workload in CONV_WORKLOADS else kind


# Arguments that change neither the model nor a step's work: how long a run is, its seed,
# where it writes. Two runs that differ only in these measure the same configuration.
RUN_LENGTH_FLAGS = ("--steps", "--warmup", "--epochs", "--seed", "--record-file", "--profile")


def step_args(args) -> tuple[str, ...]:
    """`args` less the run-length flags and their values (--steps 20, --warmup=5)."""
    out, skip = [], False
    for a in args:
        a = str(a)
        if skip:
            skip = False
        elif a in RUN_LENGTH_FLAGS:
            skip = True
        elif not a.startswith(tuple(f + "=" for f in RUN_LENGTH_FLAGS)):
            out.append(a)
    return tuple(out)


def _same_config(record: dict, workload: str, args: tuple, precision: str) -> bool:
    return (record.get("workload") == workload and step_args(record.get("workload_args") or ()) == step_args(args)
            and (record.get("precision") or "fp32") == precision and record.get("status", "ok") == "ok"
            and (record.get("nodes") or 1) == 1 and record.get("gpu_count") == 1
            and isinstance(record.get("throughput"), (int, float)) and record["throughput"] > 0)


def measured_by_gpu(records: list[dict], workload: str, args: tuple, precision: str,
                    device: str = "cuda") -> dict[str, Measured]:
    """GPU type -> the median 1-GPU throughput of the matching records run on `device`
    (cuda for a GPU; cpu for processes on this machine's cores)."""
    found: dict[str, list[dict]] = {}
    for r in records:
        if (_same_config(r, workload, args, precision) and r.get("device") == device
                and not r.get("mock_instance")):
            name = "cpu" if device == "cpu" else _canonical(str(r.get("gpu_name") or ""))
            found.setdefault(name, []).append(r)
    out = {}
    for name, rows in found.items():
        if name:
            batches = {r.get("batch_per_gpu") for r in rows}
            out[name] = Measured(name, statistics.median(r["throughput"] for r in rows), len(rows),
                                 batches.pop() if len(batches) == 1 else None,
                                 f"{len(rows)} record(s) of {workload} on 1x {name}")
    return out


def _canonical(gpu_name: str, memory_gb: float | None = None) -> str:
    """The datasheet table's name for a card ("NVIDIA H200" and "H200" are "H200 SXM"),
    else its normalised spelling."""
    spec = gpu_specs.spec_for(gpu_name, memory_gb)
    return spec.name if spec is not None else normalize_gpu_name(gpu_name)


def seconds_per_unit(profile: WorkloadProfile | None, workload: str, args: tuple, precision: str,
                     gpu_name: str, records: list[dict], published_ok: bool,
                     memory_gb: float | None = None, counted: ops.Config | None = None) -> Figure | None:
    """Seconds for one unit of work on one GPU of `gpu_name`, with its basis, or None.
    `published_ok`: the workload runs at the size the published figures were made at;
    `counted`: a user's script's step, as its calibration counted it."""
    measured = measured_by_gpu(records, workload, args, precision)
    name = _canonical(gpu_name, memory_gb)
    if name in measured:
        m = measured[name]
        return Figure(1.0 / m.per_gpu, MEASURED, f"measured: {m.where}")
    spec = gpu_specs.spec_for(gpu_name, memory_gb)
    if spec is None:
        return None
    step = ops.modelled(workload, args, gpu_name, memory_gb, counted=counted)
    if step is not None:
        return step.seconds_per_unit
    if counted is not None:   # a script's counted step on a card the step model cannot rate
        return None
    if published_ok:
        rows = [p for p in gpu_specs.published_for(workload, spec.name, precision) if p.gpus == 1]
        if rows:
            p = rows[0]
            return Figure(1.0 / p.per_gpu, PUBLISHED,
                          f"published: {p.per_gpu:,.0f} {p.unit} on 1x {spec.name} ({p.source}, {p.date})")
    nearest = _nearest(spec, measured, workload, precision)
    if nearest is None and published_ok:
        nearest = _nearest(spec, published_by_gpu(workload, precision), workload, precision)
    if nearest is not None:
        m, ratio, resource = nearest
        return Figure(1.0 / (m.per_gpu * ratio), SCALED,
                      f"scaled from {m.where} by the {resource} ratio {ratio:.2f}")
    peak = gpu_specs.peak_tflops(spec, rate_kind(workload, precision))
    if profile is not None and peak:
        return Figure(profile.flops_per_sample / (peak * 1e12 * ASSUMED_MFU), DATASHEET,
                      f"datasheet: {say_flops(profile.flops_per_sample)} per {unit_word(profile.unit)} "
                      f"at {peak:g} TFLOP/s {rate_kind(workload, precision)}, {MFU_SOURCE}")
    return None


def published_by_gpu(workload: str, precision: str) -> dict[str, Measured]:
    """GPU type -> its published single-GPU figure for the workload, as if measured there."""
    out = {}
    for name in gpu_specs.known_gpus():
        rows = [p for p in gpu_specs.published_for(workload, name, precision) if p.gpus == 1]
        if rows:
            p = rows[0]
            out[name] = Measured(name, p.per_gpu, 1, p.batch_per_gpu,
                                 f"the published {p.per_gpu:,.0f} {p.unit} on 1x {name} ({p.source}, {p.date})")
    return out


def _resource(spec: gpu_specs.GpuSpec, workload: str, precision: str) -> tuple[float | None, str]:
    if workload in MEMORY_BOUND:
        return spec.memory_bw_gbs, "memory bandwidth"
    kind = rate_kind(workload, precision)
    return gpu_specs.peak_tflops(spec, kind), f"{kind} peak"


def _nearest(spec: gpu_specs.GpuSpec, measured: dict[str, Measured], workload: str,
             precision: str) -> tuple[Measured, float, str] | None:
    """The measured GPU type closest to `spec` in the bound resource, and the ratio."""
    mine, resource = _resource(spec, workload, precision)
    if not mine:
        return None
    best = None
    for name, m in measured.items():
        other = gpu_specs.spec_for(name)
        theirs = _resource(other, workload, precision)[0] if other else None
        if theirs:
            distance = abs(math.log(mine / theirs))
            if best is None or distance < best[0]:
                best = (distance, m, mine / theirs)
    return (best[1], best[2], resource) if best else None


def reference_dirs() -> list[Path]:
    """The reference records that ship beside gpubench (results/reference/<device>/)."""
    root = Path(__file__).resolve().parents[2] / "results" / "reference"
    return sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []


def unit_word(unit: str) -> str:
    """'images/s' -> 'image'."""
    word = unit.split("/")[0]
    return word[:-1] if word.endswith("s") else word
