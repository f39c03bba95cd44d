"""A suite workload's step on one GPU from its operations: the host that issues them and
the device that runs them, each bounded by what it is made of.

workloads/op_profile.py counted every operation of one training step on the meta
device (step_profiles.json): its FLOPs and the bytes it reads and writes, as a + b x
batch, and whether it runs a kernel or only costs the host a dispatch (a view). Here:

    device = sum over computing kernels of  FLOPs / (e_flop x peak) + bytes / (e_bw x bandwidth)
           + sum over the others of          bytes / (e_bw x bandwidth)
    host   = kernels x host_per_kernel (forward, optimizer: Python)
           + kernels x host_per_kernel_backward (autograd's engine) + views x host_per_view
    step   = host_per_step + max((host^p + device^p)^(1/p),
                                 host up to a phase + device from it on, for each phase)

The peak is the card's datasheet rate for the operation's math (bf16/fp16 tensor cores
under autocast; TF32 for fp32 convolutions, cuDNN's default; plain FP32 for fp32 matrix
products, the suite's default), the bandwidth its memory's. A step is the slower of the
two streams, host and device, softened where they are close (p): they overlap only
while neither waits on the other, and not across phases the host and the device each
hold back in turn (queued). The constants (the e's, the host's costs, p, and what
torch.compile and FSDP change) are measured: fitted to the suite's runs on a real GPU
(gpubench/predict/step_constants.json, `python -m gpubench.predict.fit`).

torch.compile fuses the memory-bound operations: their bytes and their host cost
shrink by fitted shares; matrix products are left as they are. FSDP2 at N GPUs adds,
per sharded unit (each block and the root), a host cost and the bytes of its
all-gathers (twice) and reduce-scatter, copies included (the link's time is the
model's communication term, model.py).

Memory a GPU is the step's counted peak of live tensors (autocast's casts, the
attention kernel's own saved tensors, the optimizer's states), which is what
torch.cuda.max_memory_allocated reports; under FSDP the parameters, gradients and
optimizer states are sharded over N and the gathered blocks added; under compile the
activations shrink by a fitted share; cuDNN's autotuned convolutions in fp32 take a
measured workspace on top.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from functools import lru_cache
from importlib import resources
from pathlib import Path

from gpubench.predict import gpu_specs
from gpubench.predict.model import MODELLED, Figure
from gpubench.predict.workload_profiles import WorkloadProfile, model_args, suite_profiles
from gpubench.workloads import flags

# The least an interval says (a measurement repeats to a few percent; another machine's
# host, clocks and driver move a step by more).
MIN_UNCERTAINTY = 0.15
# FSDP2's own cost at one GPU: its two measured sizes (125M and 350M on the H200) disagree
# on the cost a sharded unit adds by a factor of three; until more are measured the
# interval says so.
FSDP_UNCERTAINTY = 0.75
PROFILES_PACKAGE, PROFILES_FILE = "gpubench.workloads", "step_profiles.json"
CONSTANTS_FILE = Path(__file__).with_name("step_constants.json")
FLOP_OPS_CONV = ("aten.convolution", "aten.convolution_backward")
LOW_PRECISION = ("bf16", "fp16")
# Batch normalisation reads its input twice: once for the batch's statistics, once to
# normalise it (and its backward, once for the sums, once for the gradient).
TWO_PASS = ("aten.native_batch_norm", "aten.native_batch_norm_backward")


@dataclass(frozen=True)
class OpRow:
    phase: str
    op: str
    kernel: bool
    count: int
    flops: tuple[float, float]     # a + b x batch
    nbytes: tuple[float, float]
    math: str = ""                 # a script's counted op: the arithmetic its FLOPs run at (bf16, tf32, ...)

    def at(self, batch: int) -> tuple[float, float]:
        return self.flops[0] + self.flops[1] * batch, self.nbytes[0] + self.nbytes[1] * batch


@dataclass(frozen=True)
class StepProfile:
    key: str
    rows: tuple[OpRow, ...]
    peak_bytes: tuple[float, float]
    held_bytes: float
    work_per_batch: int
    params: int
    data_bytes: float = 0.0

    def largest_convolution(self, batch: int) -> float:
        """The most bytes one forward convolution reads and writes at `batch`."""
        return max((r.at(batch)[1] for r in self.rows if r.op == "aten.convolution"), default=0.0)

    @property
    def kernels(self) -> int:
        return sum(r.count for r in self.rows if r.kernel)

    @property
    def views(self) -> int:
        return sum(r.count for r in self.rows if not r.kernel)


@dataclass(frozen=True)
class Constants:
    """The fitted figures of the model, and where they come from."""

    e_flop: float            # share of the datasheet tensor/FP32 peak a matrix product reaches
    e_bw: float              # share of the datasheet memory bandwidth a memory-bound kernel reaches
    host_per_kernel: float   # seconds of host time to issue one kernel from Python (eager: the forward, the
    #                          optimizer; Python, dispatch)
    host_per_view: float     # seconds for an operation with no kernel (a view)
    host_per_step: float     # seconds a step costs the host whatever it computes (loop, timing, hooks)
    overlap_p: float         # the soft maximum's exponent: how well host and device overlap
    compile_bytes: float     # share of the memory-bound bytes left after torch.compile's fusion
    compile_host: float      # share of the host's per-kernel cost left under torch.compile
    fsdp_host_per_unit: float    # host seconds per FSDP unit and step (hooks, copies, streams)
    low_precision_bytes: float   # a 16-bit convolution's passes over its tensors beyond the one the roofline
    #                              counts, fitted on channels_last ResNet-50 (an NCHW one's transposes to
    #                              NHWC and back are counted apart, by workloads/step_count.py)
    compile_activations: float   # share of the activations torch.compile keeps
    base_bytes: float            # what any step allocates beside the model (cuBLAS's workspaces)
    device_per_kernel: float     # seconds a kernel takes on the device whatever it does (launch, ramp, tail)
    e_flop_fp32: float           # the share of the plain FP32 peak a matrix product reaches (CUDA cores'
    #                              GEMMs, not the tensor cores' that e_flop is for)
    conv_workspace: float        # cuDNN's autotuned convolutions' workspace, in largest convolutions
    host_per_kernel_backward: float  # seconds to issue one kernel of the backward (autograd's engine, in C++)
    source: str
    fitted_on: tuple[str, ...] = ()
    loo_median_error: float | None = None   # leave-one-out median |error| of the throughput
    loo_max_error: float | None = None      # and the largest, of the DDP configurations
    # the largest leave-one-out error of each family ("gpt-ddp", "gpt-fsdp", "resnet-ddp", ...)
    family_error: tuple[tuple[str, float], ...] = ()
    # the largest error of the card-to-card ratios against published runs, by memory kind
    # ("HBM", "GDDR"): what a card the model was not fitted on adds (published.py)
    other_card_error: tuple[tuple[str, float], ...] = ()

    def uncertainty(self, config: "Config") -> float:
        """How far the step may be off, as a factor (the interval is value/(1+u) to
        value*(1+u)): the largest leave-one-out error of the configuration's family, at
        least 15%; a family with none measured (a user's script) takes the largest of the
        DDP configurations, FSDP without its own FSDP_UNCERTAINTY."""
        own = dict(self.family_error).get(family_of(config))
        if own is None:
            own = FSDP_UNCERTAINTY if config.fsdp else (self.loo_max_error or 0.3)
        return max(MIN_UNCERTAINTY, own)

    def card_spread(self, spec: gpu_specs.GpuSpec) -> float:
        """What a card the model was not fitted on adds to the interval: the largest error
        of the published card-to-card ratios of cards with its kind of memory."""
        return dict(self.other_card_error).get(spec.memory_kind, OTHER_GPU_SPREAD)


def family_of(config: "Config") -> str:
    """A configuration's family, for its interval: the suite workload, FSDP apart."""
    return "gpt-fsdp" if config.fsdp else config.workload


DEFAULT_CONSTANTS = Constants(
    e_flop=0.75, e_bw=0.5, host_per_kernel=40e-6, host_per_view=10e-6, host_per_step=4e-4,
    overlap_p=3.0, compile_bytes=0.5, compile_host=0.1, fsdp_host_per_unit=2.9e-3, low_precision_bytes=1.0,
    compile_activations=0.6, base_bytes=32 * 2**20, conv_workspace=4.0, device_per_kernel=3e-6, e_flop_fp32=0.75,
    host_per_kernel_backward=20e-6, source="unfitted starting values")

_FIELDS = [f for f in Constants.__dataclass_fields__ if f not in ("source", "fitted_on", "loo_median_error",
                                                                    "loo_max_error", "family_error",
                                                                    "other_card_error")]
FITTED = tuple(_FIELDS)


def load_constants(path: Path | None = None) -> Constants:
    """The shipped fit; the starting values where the file is missing or damaged."""
    try:
        doc = json.loads((path or CONSTANTS_FILE).read_text(encoding="utf-8"))
        values = {k: float(doc["constants"][k]) for k in FITTED}
        return Constants(**values, source=str(doc.get("source", "")),
                         fitted_on=tuple(doc.get("fitted_on", ())),
                         loo_median_error=doc.get("loo_median_error"), loo_max_error=doc.get("loo_max_error"),
                         family_error=_pairs(doc.get("family_error")),
                         other_card_error=_pairs(doc.get("other_card_error")))
    except (OSError, ValueError, KeyError, TypeError):
        return DEFAULT_CONSTANTS


def _pairs(mapping) -> tuple[tuple[str, float], ...]:
    return tuple((str(k), float(v)) for k, v in (mapping or {}).items())


@lru_cache(maxsize=1)
def _profiles_document() -> dict:
    try:
        doc = json.loads(resources.files(PROFILES_PACKAGE).joinpath(PROFILES_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError, ModuleNotFoundError):
        return {}
    return doc.get("profiles", {}) if isinstance(doc, dict) else {}


@lru_cache(maxsize=None)
def _profile(key: str) -> StepProfile | None:
    entry = _profiles_document().get(key)
    if not isinstance(entry, dict):
        return None
    try:
        rows = tuple(OpRow(str(p), str(o), k == "kernel", int(n), (float(f0), float(f1)), (float(b0), float(b1)))
                     for p, o, k, n, f0, f1, b0, b1 in entry["ops"])
        return StepProfile(key, rows, (float(entry["peak_bytes"][0]), float(entry["peak_bytes"][1])),
                           float(entry["held_bytes"]), int(entry["work_per_batch"]), int(entry["params"]),
                           float(entry.get("data_bytes", 0)))
    except (KeyError, TypeError, ValueError):
        return None


@dataclass(frozen=True)
class Config:
    """A suite workload's run as the model sees it."""

    workload: str
    key: str                 # its step profile's
    batch: int               # per GPU (sequences for a GPT)
    precision: str
    compiled: bool
    fsdp_units: int          # FSDP units (blocks and the root); 0 under DDP
    tf32_matmul: bool = False
    checkpointed: bool = False   # each block's activations recomputed in the backward
    # a record from a run that wrapped one process in DDP (the suite did until it left a
    # world of one unwrapped: harness.replicate); its peak holds DDP's buckets
    ddp_at_one: bool = False
    # a user's script: the step its calibration counted (no shipped profile covers it)
    counted: "StepProfile | None" = None
    # and its DataLoader: the host's seconds for a batch, and whether they overlap the step
    # (worker processes prepare batches while it runs) or add to it (no workers)
    loader_s: float = 0.0
    loader_overlaps: bool = True

    @property
    def fsdp(self) -> bool:
        return self.fsdp_units > 0


def config_for(workload: str, args: tuple | list) -> Config | None:
    """The configuration `args` give on a GPU, where a step profile was counted for it
    (a GPT at a preset size, the other workloads at any batch); else None."""
    try:
        ns = flags.parse(workload, list(args), raising=True)
    except (flags.FlagError, KeyError, SystemExit):
        return None
    flags.size_for_device(workload, ns, "cuda")
    precision = getattr(ns, "precision", "fp32") or "fp32"
    compiled = bool(getattr(ns, "compile", False))
    if workload in ("gpt-ddp", "gpt-fsdp"):
        if ns.params is None or ns.block_size != 1024 or ns.vocab_size != 50304:
            return None
        checkpointed = bool(getattr(ns, "activation_checkpointing", False))
        prec = precision if precision != "fp16" else "bf16"
        key = (f"gpt-fsdp --params {ns.params} --precision {prec} --activation-checkpointing" if checkpointed
               else f"gpt-ddp --params {ns.params} --precision {prec}")
        units = ns.n_layer + 1 if workload == "gpt-fsdp" else 0
        return Config(workload, key, ns.batch_size, precision, compiled, units, bool(getattr(ns, "tf32", False)),
                      checkpointed)
    if workload == "resnet-ddp":
        if (ns.depth, ns.width, ns.image_size, ns.num_classes) != (50, 64, 224, 1000):
            return None
        return Config(workload, f"resnet-ddp --precision {'bf16' if precision in LOW_PRECISION else 'fp32'}",
                      ns.batch_size, precision, compiled, 0)
    if workload in ("mnist-ddp", "recsys-ddp"):
        defaults = flags.parse(workload, [], raising=True)
        flags.size_for_device(workload, defaults, "cuda")
        if precision != "fp32" or model_args(ns, "batch_size") != model_args(defaults, "batch_size"):
            return None
        return Config(workload, workload, ns.batch_size, precision, compiled, 0)
    return None


def profile_for(config: Config) -> StepProfile | None:
    return config.counted if config.counted is not None else _profile(config.key)


@dataclass(frozen=True)
class Rates:
    """What a GPU type offers the model: its peaks and bandwidth, from the datasheet."""

    name: str
    bf16: float | None       # FLOP/s
    fp16: float | None
    tf32: float | None
    fp32: float | None
    bandwidth: float | None  # bytes/s

    @classmethod
    def of(cls, spec: gpu_specs.GpuSpec) -> "Rates":
        def tera(x):
            return None if x is None else x * 1e12
        return cls(spec.name, tera(spec.bf16_tflops), tera(spec.fp16_tflops), tera(spec.tf32_tflops),
                   tera(spec.fp32_tflops), None if spec.memory_bw_gbs is None else spec.memory_bw_gbs * 1e9)

    def peak(self, math: str) -> float | None:
        """The datasheet's FLOP/s for the arithmetic `math` names (bf16, fp16, tf32, fp32)."""
        return {"bf16": self.bf16, "fp16": self.fp16, "tf32": self.tf32, "fp32": self.fp32}.get(math)


def math_of(config: Config, row: OpRow) -> str:
    """The arithmetic an operation's FLOPs run at: as a script's count says it ran, else
    the run's: its 16-bit autocast, TF32 for convolutions (cuDNN's default) and for
    matrix products where the run allows it, else plain FP32."""
    if row.math:
        return row.math
    if config.precision in LOW_PRECISION:
        return config.precision
    return "tf32" if row.op in FLOP_OPS_CONV or config.tf32_matmul else "fp32"


@dataclass(frozen=True)
class StepEstimate:
    host_s: float
    device_s: float
    flop_s: float            # the device's time in compute-bound kernels
    byte_s: float            # in memory-bound ones
    step_s: float
    work: float              # units of work a GPU does in the step
    memory_bytes: float
    loader_s: float = 0.0    # the DataLoader's host seconds a batch (a user's script)

    @property
    def throughput(self) -> float:
        return self.work / self.step_s

    @property
    def bound_by(self) -> str:
        if self.loader_s >= max(self.host_s, self.device_s):
            return "loader"
        if self.host_s >= self.device_s:
            return "host"
        return "compute" if self.flop_s >= self.byte_s else "memory"


def _weight_cast(row: OpRow) -> bool:
    """autocast's cast of a weight to the compute dtype, or of its gradient back: a copy
    whose size does not grow with the batch. Under FSDP the gathered parameters are
    already in the compute dtype, and the gradients' cast is FSDP's reduce-scatter's."""
    return row.op == "aten._to_copy" and row.nbytes[1] == 0 and row.flops == (0.0, 0.0)


def fsdp_bytes(params: int, precision: str) -> float:
    """Bytes FSDP2 moves through memory a step beside the model's own: each unit's
    parameters cast to the compute dtype and gathered in the forward and again in the
    backward (copy-in, gather, copy-out), and its gradients cast to fp32 and
    reduce-scattered (copy-in, reduce, copy-out)."""
    low = 2.0 if precision in LOW_PRECISION else 4.0
    gather = (4.0 + low) + 2 * low + 2 * low
    reduce = (low + 4.0) + 2 * 4.0 + 2 * 4.0
    return params * (2 * gather + reduce)


def compute_seconds(flops: float, nbytes: float, peak: float, bw: float, e_flop: float) -> float:
    """A kernel that computes (a matrix product, a convolution, attention): its math at
    `e_flop` of the peak plus one pass of its operands and result through memory. The two
    add rather than overlap: a tile's loads and its epilogue's stores wait on each other,
    so a product near the card's ridge point (a narrow layer on a fast card: GPT-2 small's
    768-wide matrices on an H200) reaches well under the rate a large square one does,
    and a card with a low ridge (a GeForce) loses less of its peak than a datacentre
    card does on the same shapes."""
    return flops / (e_flop * peak) + nbytes / bw


# Kernels a library launches from C++ inside an operation the host already paid for
# (cuDNN's layout transposes, workloads/step_count.py): device time, no host time.
LIBRARY_KERNELS = ("cudnn.",)
# The order a step's phases are issued in (the probe's DataLoader fetch, then the model).
PHASES = ("data", "forward", "backward", "optimizer")


def estimate(config: Config, profile: StepProfile, rates: Rates, c: Constants, gpus: int = 1) -> StepEstimate | None:
    """One GPU's step; None where the card lacks a rate the step needs."""
    if rates.bandwidth is None:
        return None
    bw = c.e_bw * rates.bandwidth
    flop_s = byte_s = 0.0
    host_of: dict[str, float] = {}
    device_of: dict[str, float] = {}
    for row in profile.rows:
        issue = c.host_per_kernel_backward if row.phase == "backward" else c.host_per_kernel
        if row.op.startswith(LIBRARY_KERNELS):
            issue = 0.0
        if not row.kernel:
            if not config.compiled:
                host_of[row.phase] = host_of.get(row.phase, 0.0) + row.count * c.host_per_view
            continue
        if config.fsdp and _weight_cast(row):
            continue
        flops, nbytes = row.at(config.batch)
        if flops > 0:
            math = math_of(config, row)
            if math == "tf32" and rates.tf32 is None:
                math = "fp32"        # a card without TF32 (Volta, Turing) runs them in FP32
            peak = rates.peak(math)
            if peak is None:
                return None
            t = row.count * compute_seconds(flops, nbytes, peak, bw, c.e_flop_fp32 if math == "fp32" else c.e_flop)
            flop_s += t
            if row.op in FLOP_OPS_CONV and math in LOW_PRECISION:
                # cuDNN's 16-bit kernels on the H200 pass over their tensors more than once
                extra = row.count * c.low_precision_bytes * nbytes / bw
                byte_s += extra
                t += extra
            kernels = row.count
        else:
            share = c.compile_bytes if config.compiled else 1.0
            t = row.count * share * nbytes / bw * (2.0 if row.op in TWO_PASS else 1.0)
            byte_s += t
            kernels = row.count * (c.compile_bytes if config.compiled else 1.0)
        host_of[row.phase] = host_of.get(row.phase, 0.0) + kernels * issue * (
            c.compile_host if config.compiled else 1.0)
        device_of[row.phase] = device_of.get(row.phase, 0.0) + t + kernels * c.device_per_kernel
    if config.fsdp:
        # each unit's hooks run once in the forward and once in the backward; its copies
        # and collectives' memory traffic likewise
        copies = fsdp_bytes(profile.params, config.precision) / bw
        for phase in ("forward", "backward"):
            host_of[phase] = host_of.get(phase, 0.0) + config.fsdp_units * c.fsdp_host_per_unit / 2
            device_of[phase] = device_of.get(phase, 0.0) + copies / 2
        byte_s += copies
    phases = sorted(set(host_of) | set(device_of), key=lambda ph: PHASES.index(ph) if ph in PHASES else len(PHASES))
    hosts = [host_of.get(ph, 0.0) for ph in phases]
    devices = [device_of.get(ph, 0.0) for ph in phases]
    host, device = sum(hosts) + c.host_per_step, sum(devices)
    step = c.host_per_step + queued(hosts, devices, c.overlap_p)
    if config.loader_s:
        step = max(step, config.loader_s) if config.loader_overlaps else step + config.loader_s
    return StepEstimate(host, device, flop_s, byte_s, step, config.batch * profile.work_per_batch,
                        memory_bytes(config, profile, c, gpus), config.loader_s)


def queued(hosts: list[float], devices: list[float], p: float) -> float:
    """When a step's last kernel ends, its phases' host and device seconds given in the
    order they run: the host issues kernels into a queue the device drains, so the step
    ends no sooner than the host's time up to some phase plus the device's from there on
    (a forward the host holds back, then a backward the device does). The whole host
    and the whole device, the two ends of that, are softened where they are close (p):
    within a phase they do not take turns evenly."""
    bounds = [sum(hosts[:k]) + sum(devices[k:]) for k in range(1, len(hosts))]
    host, device = sum(hosts), sum(devices)
    return max([(host ** p + device ** p) ** (1.0 / p), *bounds])


def memory_bytes(config: Config, profile: StepProfile, c: Constants, gpus: int = 1) -> float:
    """The peak a GPU allocates in a step (torch.cuda.max_memory_allocated)."""
    peak = profile.peak_bytes[0] + profile.peak_bytes[1] * config.batch
    held = profile.held_bytes                   # parameters and optimizer states (fp32)
    activations = max(peak - held, 0.0)
    if config.compiled:
        activations *= c.compile_activations
    if config.fsdp:
        low = 2.0 if config.precision in LOW_PRECISION else 4.0
        block = profile.params / max(config.fsdp_units, 1)
        # held state sharded; autocast's saved casts of the weights are FSDP's gathered
        # copies, freed after the forward: two blocks gathered at a time instead
        held = held / gpus
        if config.precision in LOW_PRECISION and not config.checkpointed:
            activations -= profile.params * low
        activations += 2 * block * low
    elif gpus > 1 or config.ddp_at_one:
        held += 4.0 * profile.params              # DDP's gradient buckets, fp32, one copy of the gradients
    workspace = c.conv_workspace * profile.largest_convolution(config.batch)
    # counted at batches of 8 and 16, where activations peak at the forward's end; at a
    # batch of one or two the step's end can be higher: every gradient made, all states held
    grads = 4.0 * profile.params / (gpus if config.fsdp else 1)
    return max(held + activations, held + grads) + workspace + profile.data_bytes + c.base_bytes


# Where the card is not one the constants were fitted on, its datasheet stands in for
# what was measured: the interval widens by this much where no published run of a card
# with its kind of memory says more (Constants.card_spread).
OTHER_GPU_SPREAD = 0.10


@lru_cache(maxsize=1)
def shipped_constants() -> Constants:
    return load_constants()


@dataclass(frozen=True)
class Modelled:
    """A suite workload's step on one GPU of a type, by the step model."""

    config: Config
    estimate: StepEstimate
    rates: Rates
    seconds_per_unit: Figure
    params: int


def memory_at(config: Config, batch: int, gpus: int = 1, c: Constants | None = None) -> float:
    return memory_bytes(replace(config, batch=batch), profile_for(config), c or shipped_constants(), gpus)


def memory_line(config: Config, gpus: int = 1, c: Constants | None = None) -> tuple[float, float]:
    """What a GPU's peak is made of: the model's (at a batch of 0) and a batch element's."""
    return memory_at(config, 0, gpus, c), (memory_at(config, 16, gpus, c) - memory_at(config, 8, gpus, c)) / 8


def largest_batch(config: Config, room: float, gpus: int = 1, c: Constants | None = None) -> int:
    """The largest batch whose peak fits `room` bytes (0: none); the peak grows with the batch."""
    low, high = 0, 1
    while high < 2**20 and memory_at(config, high, gpus, c) <= room:
        low, high = high, high * 2
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if memory_at(config, mid, gpus, c) <= room else (low, mid)
    return low


def fitted_gpus(c: Constants) -> set[str]:
    return {label.rsplit(" on ", 1)[1] for label in c.fitted_on if " on " in label}


def modelled(workload: str, args: tuple | list, gpu_name: str, memory_gb: float | None = None,
             gpus: int = 1, constants: Constants | None = None, counted: Config | None = None) -> Modelled | None:
    """The step model's figure for `workload` at `args` on one GPU of `gpu_name` (of
    `gpus` in all, for FSDP's shards); None where there is no step profile for the
    arguments, no datasheet row for the card, or the card lacks a rate the step needs.
    `counted`: a user's script's configuration, its step counted by its calibration."""
    config = counted or config_for(workload, args)
    profile = profile_for(config) if config else None
    spec = gpu_specs.spec_for(gpu_name, memory_gb) if gpu_name else None
    if profile is None or spec is None:
        return None
    c = constants or shipped_constants()
    rates = Rates.of(spec)
    est = estimate(config, profile, rates, c, gpus)
    if est is None:
        return None
    here = spec.name in fitted_gpus(c)
    spread = c.uncertainty(config) + (0.0 if here else c.card_spread(spec))
    on = "the card the model was fitted on" if here else "its datasheet's rates"
    how = (f" under FSDP2 over {gpus} GPU{'s' if gpus > 1 else ''}" if config.fsdp else "") + \
        (" compiled" if config.compiled else "")
    source = (f"modelled: {config.key}{how} at a batch of {config.batch}, "
              f"{profile.kernels:,} kernels a step: host {est.host_s * 1e3:.1f} ms, device "
              f"{est.device_s * 1e3:.1f} ms ({est.flop_s * 1e3:.1f} compute-bound, {est.byte_s * 1e3:.1f} "
              f"memory-bound) on {spec.name}, {on}{_loader_words(config)}; constants {c.source}")
    return Modelled(config, est, rates, Figure(est.step_s / est.work, MODELLED, source, spread=spread),
                    profile.params)


def _loader_words(config: Config) -> str:
    if not config.loader_s:
        return ""
    how = "in its workers, beside the step" if config.loader_overlaps else "in the step's process, before it"
    return f"; its DataLoader {config.loader_s * 1e3:.1f} ms a batch ({how}; timed on this machine's CPU)"


def workload_profile(workload: str, args: tuple | list) -> WorkloadProfile | None:
    """What the rest of the model needs of a workload (its FLOPs and gradient bytes a unit
    of work, its batch, its epoch) from its step profile, where one covers `args` (a
    batch other than the default one); else None."""
    config = config_for(workload, args)
    profile = profile_for(config) if config else None
    if profile is None or config.batch < 1:
        return None
    default = suite_profiles().get(workload)
    work = config.batch * profile.work_per_batch
    flops = sum(r.count * r.at(config.batch)[0] for r in profile.rows if r.phase != "optimizer")
    return WorkloadProfile(
        workload, tuple(str(a) for a in args), flops / work, default.unit if default else "samples",
        profile.params, 4 * profile.params, default.epoch_samples if default else None, config.batch,
        f"counted from the step's operations on the meta device ({PROFILES_FILE})", work)
