"""Predicted time and cost of a piece of work for every configuration the offers allow,
ranked, with the time-versus-cost Pareto front marked and the advice in one sentence.

A configuration is an offer at a GPU count over some machines: a machine of a fixed
size (Lambda, Vast.ai) at its own count; a provider that rents any count up to a
ceiling (RunPod's max_count) at each count asked for, priced per GPU.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from gpubench.predict import gpt_size, gpu_specs, links, ops
from gpubench.predict.basis import seconds_per_unit
from gpubench.predict.memory import GB, ModelShape, need, say_gb, say_params, usable_bytes, why_not
from gpubench.predict.model import ASSUMED, MEASURED, MODELLED, UNCERTAINTY, Figure, StepInputs, scaling
from gpubench.predict.workload_profiles import WorkloadProfile
from gpubench.providers.common import Offer
from gpubench.providers.gpus import offer_vram_gb

NO_BASIS = "no basis"
NO_FIT = "does not fit"
SHARDED_TWIN = {"gpt-ddp": "gpt-fsdp"}     # the same model and flags, trained under FSDP
DEFAULT_COUNTS = (1, 2, 4, 8)      # tried where a provider rents any count
COMMUNICATION_SHARE = 0.10         # an exposed all-reduce this share of a step tells on the figure
# DDP on a GPU runs the all-reduce on its own stream while the backward pass goes on.
GPU_OVERLAP = Figure(1.0, ASSUMED, "DDP overlaps the all-reduce with the backward pass (own stream)")
# However little a step computes, eager PyTorch spends about this on it (Python, kernel
# launches, the optimizer, DDP's hooks): what bounds a tiny model.
GPU_STEP_FLOOR = Figure(1e-3, ASSUMED, "1 ms a step at least (Python, kernel launches, optimizer)")


@dataclass(frozen=True)
class Work:
    """What is to be done: units of work (samples, images, tokens) and its name."""

    units: float
    what: str                    # "1 epoch", "3 epochs", "1,000,000 samples"
    detail: str = ""             # what an epoch is: "9.04 billion OpenWebText tokens"

    @property
    def title(self) -> str:
        """'1 epoch (9.04 billion OpenWebText tokens)': what the figures are for."""
        return f"{self.what} ({self.detail})" if self.detail else self.what


@dataclass(frozen=True)
class Subject:
    """The workload being predicted: its name, arguments and precision, and what is
    known of it whatever the GPU (its profile, or a calibration run's figures)."""

    workload: str
    args: tuple
    precision: str
    unit: str                    # "images/s"
    batch_per_gpu: int
    grad_bytes: Figure
    profile: WorkloadProfile | None
    published_ok: bool           # at the size published figures were made at
    shape: ModelShape | None = None        # what its memory depends on, where known
    activations: Figure | None = None      # activation bytes per batch element (sample, sequence)
    memory_batch: int = 0                  # batch elements per GPU
    strategy: str = "DDP"                  # "DDP": every GPU holds it all; "FSDP": sharded
    counted: ops.Config | None = None      # a user's script: the step its calibration counted
    overlap: Figure | None = None          # how much of its communication hides behind the
                                           # backward; GPU_OVERLAP (DDP's) where None
    tensor_parallel: int = 1               # GPUs that share each batch (a model sharded over a
                                           # mesh: they step together on one batch)


@dataclass(frozen=True)
class Config:
    offer: Offer
    gpus: int                    # in all, over every machine
    nodes: int
    price_per_hour: float        # every machine together

    @property
    def label(self) -> str:
        on = f"{self.nodes}x({self.gpus // self.nodes}x {self.offer.gpu_name})" if self.nodes > 1 \
            else f"{self.gpus}x {self.offer.gpu_name}"
        return f"{on} on {self.offer.provider}"


@dataclass(frozen=True)
class Prediction:
    config: Config
    throughput: float | None = None
    uncertainty: float = 0.0     # a share of the throughput either way
    seconds: float | None = None
    dollars: float | None = None
    speedup: float | None = None
    efficiency: float | None = None
    basis: str = NO_BASIS        # the least certain of the inputs' bases
    sources: tuple[str, ...] = ()
    bound_by: str = ""
    left_out: str | None = None  # why there is no figure
    pareto: bool = False
    strategy: str = "DDP"        # the subject's: "DDP", or "FSDP" (sharded)
    memory_bytes: float | None = None   # the peak a GPU allocates, where the step model knows it
    step_seconds: float | None = None

    @property
    def has_figure(self) -> bool:
        return self.throughput is not None


def configs(offers: list[Offer], counts: list[int] | None, nodes: list[int]) -> list[Config]:
    out = []
    for offer in offers:
        ceiling = offer.extra.get("max_count")
        if isinstance(ceiling, int) and not isinstance(ceiling, bool):
            sizes = [(n, offer.price_per_gpu_hour * n) for n in (counts or DEFAULT_COUNTS) if n <= ceiling]
        elif counts is None or offer.gpu_count in counts:
            sizes = [(offer.gpu_count, offer.price_per_hour)]
        else:
            sizes = []
        for per_machine, price in sizes:
            out += [Config(offer, per_machine * k, k, price * k) for k in nodes]
    return out


def cheapest_of_each(configs_: list[Config]) -> tuple[list[Config], int]:
    """One configuration per provider, GPU type, GPU count and node count: the cheapest
    (a marketplace lists many hosts of one type); and how many were folded away."""
    best: dict[tuple, Config] = {}
    for c in configs_:
        key = (c.offer.provider, c.offer.gpu_name, c.gpus, c.nodes)
        if key not in best or c.price_per_hour < best[key].price_per_hour:
            best[key] = c
    return list(best.values()), len(configs_) - len(best)


def predict(subject: Subject, config: Config, records: list[dict], work: Work,
            measured_link_mbit_s: float | None = None) -> Prediction:
    """One configuration's prediction, or a Prediction saying why there is none."""
    return replace(_predict(subject, config, records, work, measured_link_mbit_s), strategy=subject.strategy)


def _predict(subject: Subject, config: Config, records: list[dict], work: Work,
             measured_link_mbit_s: float | None) -> Prediction:
    gpu, memory = config.offer.gpu_name, offer_vram_gb(config.offer)
    step = ops.modelled(subject.workload, subject.args, gpu, memory, config.gpus, counted=subject.counted)
    too_big = (modelled_does_not_fit(subject, step, config.gpus, memory) if step is not None
               else does_not_fit(subject, config.gpus, memory))
    if too_big:
        return Prediction(config, basis=NO_FIT, left_out=too_big)
    per_unit = seconds_per_unit(subject.profile, subject.workload, subject.args, subject.precision,
                                gpu, records, subject.published_ok, memory, subject.counted)
    if per_unit is None:
        why = ("no basis: no record of it, no published figure and no datasheet row for "
               f"{gpu or 'this GPU'}")
        return Prediction(config, left_out=why)
    spec = gpu_specs.spec_for(gpu, memory)
    link = links.for_count(config.offer, spec, config.gpus, config.nodes, measured_link_mbit_s)
    # the step model counts what a step costs the host: no floor on top of it
    by_model = per_unit.basis == MODELLED
    overlap = subject.overlap or GPU_OVERLAP
    inputs = StepInputs(per_unit, subject.grad_bytes, subject.batch_per_gpu, overlap,
                        step_floor_s=None if by_model else GPU_STEP_FLOOR)
    s = scaling(inputs, config.gpus, config.nodes, link)
    figures = [per_unit] + ([subject.grad_bytes, link.busbw_gbs, overlap] if link else [])
    # The label is the least certain input that moves the figure: the link only where
    # the all-reduce it carries is a tenth of the step or more.
    telling = figures if link and s.at.exposed_s >= COMMUNICATION_SHARE * s.at.step_s else [per_unit]
    if s.at.bound_by == "overhead":
        telling, figures = [GPU_STEP_FLOOR], figures + [GPU_STEP_FLOOR]
    # GPUs that share a batch (tensor parallelism) make one step of it together; against
    # one GPU it is another program (the whole model on one card): no speedup from this count
    shared = max(1, min(subject.tensor_parallel, config.gpus))
    throughput = s.at.throughput / shared
    speedup, efficiency = (s.speedup, s.efficiency) if shared == 1 else (None, None)
    seconds = work.units / throughput
    bound = s.at.bound_by
    if step is not None and bound == "compute":
        bound = step.estimate.bound_by          # host, compute or memory, as the step model says
    return Prediction(config, throughput, s.at.uncertainty, seconds,
                      config.price_per_hour * seconds / 3600.0, speedup, efficiency,
                      weakest(telling), tuple(f.source for f in figures), bound,
                      memory_bytes=step.estimate.memory_bytes if step is not None else None,
                      step_seconds=s.at.step_s)


def does_not_fit(subject: Subject, gpus: int, card_gb: float | None) -> str | None:
    """Why the workload cannot train on a card of `card_gb` at `gpus` GPUs (its strategy,
    its batch), with what FSDP would need where DDP does not fit; None where it fits or
    nothing is known of its memory or of the card's."""
    if subject.shape is None or not card_gb:
        return None
    card = card_gb * GB
    m = need(subject.shape, subject.strategy, gpus, subject.activations)
    reason = why_not(subject.shape, m, card, max(subject.memory_batch, 1))
    if reason and subject.strategy == "DDP" and subject.shape.block_params and gpus > 1:
        sharded = need(subject.shape, "FSDP", gpus, subject.activations)
        if not why_not(subject.shape, sharded, card, max(subject.memory_batch, 1)):
            reason += (f"; FSDP over {gpus} GPUs would need about {say_gb(sharded.static_bytes)} "
                       f"a GPU plus activations (gpt-fsdp)")
    return reason


def modelled_does_not_fit(subject: Subject, step: ops.Modelled, gpus: int, card_gb: float | None) -> str | None:
    """Why the step model's peak for the workload does not fit the card, with the largest
    batch that would and, where DDP cannot hold the model, what FSDP would need; None
    where it fits."""
    if not card_gb:
        return None
    card, usable = card_gb * GB, usable_bytes(card_gb)
    if step.estimate.memory_bytes <= usable:
        return None
    static, per_batch = ops.memory_line(step.config, gpus)
    strategy = "FSDP" if step.config.fsdp else "DDP"
    if step.config.fsdp:
        how = f"under FSDP over {gpus} GPU{'s' if gpus > 1 else ''}"
    else:  # one process trains the model alone: no DDP buckets (workloads/harness.replicate)
        how = "under DDP" if gpus > 1 else "on one GPU"
    head = (f"{say_params(step.params)} with AdamW {how} needs about {say_gb(static)} a GPU "
            f"plus {say_gb(per_batch)} a {subject_word(subject)}; this card has {say_gb(card)}")
    most = ops.largest_batch(step.config, usable, gpus)
    reason = head + (": not even the model fits" if most < 1 else
                     f": batch {most} at most (asked {step.config.batch})")
    if strategy == "DDP" and subject.workload in SHARDED_TWIN and gpus > 1:
        sharded = ops.modelled(SHARDED_TWIN[subject.workload], subject.args, step.rates.name, card_gb, gpus)
        if sharded is not None:
            s_static, _ = ops.memory_line(sharded.config, gpus)
            reason += (f"; FSDP over {gpus} GPUs would need about {say_gb(s_static)} a GPU plus activations "
                       f"({SHARDED_TWIN[subject.workload]})")
    return reason


def subject_word(subject: Subject) -> str:
    """What one element of the workload's batch is."""
    return "sequence" if subject.workload in gpt_size.GPT_WORKLOADS else "sample"


def fsdp_where_ddp_cannot_fit(predictions: list[Prediction], sharded: Subject | None,
                              records: list[dict], work: Work) -> list[Prediction]:
    """The configurations on which the model cannot train under DDP, predicted again under
    FSDP (`sharded`: the same model, sharded), where it fits there: what a user whose
    model outgrew a card can rent instead."""
    if sharded is None:
        return []
    again = [predict(sharded, p.config, records, work)      # one GPU: nothing to shard over
             for p in predictions if p.basis == NO_FIT and p.strategy == "DDP" and p.config.gpus > 1]
    return [p for p in again if p.has_figure]


def weakest(figures: list[Figure]) -> str:
    return max((f.basis for f in figures), key=lambda b: UNCERTAINTY[b], default=MEASURED)


def mark_pareto(predictions: list[Prediction]) -> list[Prediction]:
    """Those no other prediction beats on both time and cost get pareto=True."""
    shown = [p for p in predictions if p.has_figure]
    out = []
    for p in predictions:
        dominated = p.has_figure and any(
            q.seconds <= p.seconds and q.dollars <= p.dollars and (q.seconds, q.dollars) != (p.seconds, p.dollars)
            for q in shown)
        out.append(replace(p, pareto=p.has_figure and not dominated))
    return out


def ranked(predictions: list[Prediction], by: str = "cost") -> list[Prediction]:
    """By dollars for the work (or by time), ties to the faster; those without a figure last."""
    def key(p: Prediction) -> tuple:
        if not p.has_figure:
            return (1, 0.0, 0.0)
        return (0, p.dollars, p.seconds) if by == "cost" else (0, p.seconds, p.dollars)
    return sorted(predictions, key=key)


@dataclass(frozen=True)
class Advice:
    cheapest: Prediction | None
    fastest: Prediction | None
    within_deadline: Prediction | None
    deadline_s: float | None
    budget: float | None
    tied_cheapest: int = 0       # others whose cost reads the same as the cheapest's


def advice(predictions: list[Prediction], deadline_s: float | None = None,
           budget: float | None = None) -> Advice:
    from gpubench.format import format_dollars

    usable = [p for p in predictions if p.has_figure and (budget is None or p.dollars <= budget)]
    cheapest = min(usable, key=lambda p: (p.dollars, p.seconds), default=None)
    fastest = min(usable, key=lambda p: (p.seconds, p.dollars), default=None)
    meets = [p for p in usable if deadline_s is not None and p.seconds <= deadline_s]
    within = min(meets, key=lambda p: (p.dollars, p.seconds), default=None)
    # a tie as the user reads it: the same cost as printed
    ties = 0 if cheapest is None else sum(
        1 for p in usable if p is not cheapest and format_dollars(p.dollars) == format_dollars(cheapest.dollars))
    return Advice(cheapest, fastest, within, deadline_s, budget, ties)


def within_budget(predictions: list[Prediction], budget: float | None) -> tuple[list[Prediction], int]:
    """The predictions less those predicted dearer than `budget` (those with no figure
    stay, to say why), and how many were left out."""
    if budget is None:
        return list(predictions), 0
    kept = [p for p in predictions if not p.has_figure or p.dollars <= budget]
    return kept, len(predictions) - len(kept)


def for_offers(subject: Subject, offers: list[Offer], records: list[dict], work: Work) -> list[Prediction]:
    """Each offer as it is rented (its own GPU count, one machine), in the offers' order."""
    return [predict(subject, Config(o, o.gpu_count, 1, o.price_per_hour), records, work) for o in offers]
