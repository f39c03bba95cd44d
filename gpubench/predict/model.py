"""The arithmetic of a prediction, and nothing else: a step on N GPUs over K nodes.

One DDP step on each GPU is its compute (forward and backward of its share of the
batch) plus the part of the gradient all-reduce that DDP cannot hide behind the
backward pass; the input pipeline, where it is slower, sets the pace instead:

    compute   = batch_per_gpu x seconds_per_sample            (one GPU alone)
    allreduce = 2 (N-1)/N x gradient bytes / bus bandwidth    (ring, nccl-tests' busbw)
                + 2 (N-1) x link latency
    exposed   = max(allreduce - overlap x backward,            backward = 2/3 of compute
                    overlap x the last bucket's share of allreduce)
    step      = max(compute + exposed, batch_per_gpu / input rate, step floor)

The step floor is what a step costs however little it computes (Python, kernel
launches, the optimizer): it binds only for tiny models.

The bus bandwidth is that of the slowest link the ring crosses: NVLink or PCIe inside
a machine, the network between machines once K > 1. Every input is a Figure: a
value with where it came from; the prediction's interval widens with the least
certain input it rests on.
"""

from __future__ import annotations

from dataclasses import dataclass

# Where a figure comes from, most certain first, and how far off each may be (a share
# of the value). A measurement is repeatable to a few percent but a record of another
# run (other load, other host) less so; a published figure was made with another
# framework and batch; a scaled one assumes the workload is bound where we think; a
# datasheet figure assumes an efficiency; an assumption is a guess with a name.
# "modelled": the step model (ops.py) fitted to measured runs; each such figure carries
# its own spread (its leave-one-out error), the 0.20 here only ranks the bases.
MEASURED, MODELLED, PUBLISHED, SCALED, DATASHEET, ASSUMED = (
    "measured", "modelled", "published", "scaled", "datasheet", "assumed")
UNCERTAINTY = {MEASURED: 0.10, MODELLED: 0.20, PUBLISHED: 0.25, SCALED: 0.35, DATASHEET: 0.50, ASSUMED: 0.60}
MOST_UNCERTAIN = 0.9     # an interval says no more than "within a factor of ten"
BACKWARD_SHARE = 2.0 / 3.0       # backward is about twice the forward's FLOPs
# DDP all-reduces gradients in buckets of 25 MiB (DistributedDataParallel's bucket_cap_mb
# default) as the backward pass fills them; the last bucket is only ready when the
# backward pass ends, so its all-reduce is never hidden.
DDP_BUCKET_BYTES = 25 * 2**20


@dataclass(frozen=True)
class Figure:
    """A number and where it comes from ("measured: 3 records of resnet-ddp on H100 SXM")."""

    value: float
    basis: str                   # MEASURED ... ASSUMED
    source: str
    spread: float | None = None  # its own uncertainty, where it knows better than its basis

    @property
    def uncertainty(self) -> float:
        return UNCERTAINTY[self.basis] if self.spread is None else self.spread


@dataclass(frozen=True)
class Link:
    """The slowest link a gradient all-reduce crosses: its bus bandwidth in GB/s
    (nccl-tests' busbw, so 2(N-1)/N is already its business) and per-hop latency."""

    kind: str                    # "nvlink", "pcie", "network", "gloo" (processes on a CPU)
    busbw_gbs: Figure
    latency_s: float = 0.0


@dataclass(frozen=True)
class StepInputs:
    """What one GPU type and one workload give the model."""

    seconds_per_sample: Figure   # one GPU alone, one unit of work (sample, image, token)
    grad_bytes: Figure           # what DDP all-reduces each step
    batch_per_gpu: int           # units of work per GPU per step
    overlap: Figure              # share of the backward pass the all-reduce can hide behind (0..1)
    input_per_s: Figure | None = None   # the input pipeline's units per second per GPU, where known
    step_floor_s: Figure | None = None  # the least a step takes, however little it computes


@dataclass(frozen=True)
class StepTime:
    gpus: int
    nodes: int
    compute_s: float
    allreduce_s: float
    exposed_s: float
    input_s: float
    step_s: float
    uncertainty: float           # a share of the throughput either way
    bound_by: str                # "compute", "communication", "input"
    batch_per_gpu: int

    @property
    def throughput(self) -> float:
        """Units of work per second, all GPUs together."""
        return self.batch_per_gpu * self.gpus / self.step_s


def allreduce_seconds(grad_bytes: float, gpus: int, link: Link) -> float:
    """Ring all-reduce of `grad_bytes` over `gpus` ranks: 2(N-1)/N of the bytes through
    the bus bandwidth, plus 2(N-1) hops of latency. Zero for one GPU."""
    if gpus <= 1:
        return 0.0
    share = 2.0 * (gpus - 1) / gpus
    return share * grad_bytes / (link.busbw_gbs.value * 1e9) + 2 * (gpus - 1) * link.latency_s


def step_time(inputs: StepInputs, gpus: int, nodes: int, link: Link | None) -> StepTime:
    """One step at `gpus` GPUs in all over `nodes` machines; `link` is the slowest link
    (None only for one GPU)."""
    if gpus < 1 or nodes < 1 or gpus < nodes:
        raise ValueError(f"{gpus} GPU(s) over {nodes} node(s)")
    compute = inputs.batch_per_gpu * inputs.seconds_per_sample.value
    allreduce = allreduce_seconds(inputs.grad_bytes.value, gpus, link) if gpus > 1 and link else 0.0
    hidden = inputs.overlap.value * BACKWARD_SHARE * compute
    tail = allreduce * min(1.0, DDP_BUCKET_BYTES / inputs.grad_bytes.value) if inputs.grad_bytes.value else 0.0
    exposed = max(allreduce - hidden, min(tail, allreduce))
    feed = inputs.batch_per_gpu / inputs.input_per_s.value if inputs.input_per_s else 0.0
    floor = inputs.step_floor_s.value if inputs.step_floor_s else 0.0
    step = max(compute + exposed, feed, floor)
    if floor > max(compute + exposed, feed):
        bound = "overhead"
    elif feed >= compute + exposed:
        bound = "input"
    else:
        bound = "communication" if exposed > compute else "compute"
    return StepTime(gpus, nodes, compute, allreduce, exposed, feed, step,
                    _uncertainty(inputs, link, compute, allreduce, hidden, step, feed), bound,
                    inputs.batch_per_gpu)


def _uncertainty(inputs: StepInputs, link: Link | None, compute: float, allreduce: float,
                 hidden: float, step: float, feed: float) -> float:
    """How far the step may be off, as a share of it: the compute as uncertain as its
    figure; the exposed all-reduce moved by a link that slow or an overlap that poor."""
    if inputs.input_per_s and feed >= step:
        return inputs.input_per_s.uncertainty
    if inputs.step_floor_s and inputs.step_floor_s.value >= step:
        return inputs.step_floor_s.uncertainty
    share = compute / step * inputs.seconds_per_sample.uncertainty
    if link is not None and allreduce > 0:
        exposed = max(0.0, allreduce - hidden)
        slower_link = max(0.0, allreduce * (1 + link.busbw_gbs.uncertainty) - hidden)
        less_overlap = max(0.0, allreduce - hidden * (1 - inputs.overlap.uncertainty))
        share += (slower_link - exposed + less_overlap - exposed) / step
    return min(share, MOST_UNCERTAIN)


@dataclass(frozen=True)
class Scaling:
    """Throughput at a count against one GPU of the same type."""

    at: StepTime
    one: StepTime

    @property
    def speedup(self) -> float:
        return self.at.throughput / self.one.throughput

    @property
    def efficiency(self) -> float:
        return self.speedup / self.at.gpus


def scaling(inputs: StepInputs, gpus: int, nodes: int, link: Link | None) -> Scaling:
    return Scaling(step_time(inputs, gpus, nodes, link), step_time(inputs, 1, 1, None))


def work_seconds(units: float, throughput: float) -> float:
    """Seconds to get through `units` of work at `throughput` units per second."""
    return units / throughput
