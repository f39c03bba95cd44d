"""Published training runs of one piece of software on several cards, and how well the
step model's card-to-card ratios match theirs.

The model is fitted on one card (the H200 of results/reference/). On any other, only the
datasheet stands in for a measurement, so its answer is checked the one way published
runs allow: the same software's throughput on card X over its throughput on the series'
anchor card, against the model's figure for the suite's equivalent workload on the same
two cards. Absolute figures would compare different programs (Lambda's ResNet-50 with
its own input pipeline is not the suite's); a ratio of one program's runs compares
cards. The largest error per kind of memory (HBM, GDDR) is what an answer on a card
outside the fit adds to its interval (ops.Constants.card_spread).

Figures from ../shared/reference/gpu-figures.md (section 2 and 5), each with its source.
NVIDIA's FP32 ResNet-50 runs are left out: they keep NCHW, where the suite's ResNet (and
the AMP runs here) use channels_last, so their cards' ratio is another program's.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from gpubench.predict import gpu_specs, ops

LAMBDA_V1 = ("lambdal/deeplearning-benchmark pytorch/pytorch-train-throughput-fp16.csv "
             "(NGC PyTorch 22.10, ResNet-50, fp16 AMP, synthetic data)")
NVIDIA_DLE = ("NVIDIA/DeepLearningExamples PyTorch/Classification/ConvNets/resnet50v1.5/README.md "
              "(NGC pytorch 21.03)")


@dataclass(frozen=True)
class PublishedRun:
    series: str                  # one program and its settings; ratios are taken inside a series
    gpu: str
    memory_gb: float
    workload_args: tuple[str, ...]   # the suite workload that does the same work (resnet-ddp ...)
    throughput: float            # units/s on one GPU, as published
    source: str
    anchor: bool = False         # the series' card every other is divided by


# the suite's run each published one is set beside: ResNet-50 in fp16 AMP at a batch of 256
# (channels_last, as NVIDIA's and Lambda's AMP runs are); a 16 GB V100 holds that batch
RESNET_AMP = ("resnet-ddp", "--precision", "fp16", "--batch-size", "256")


def _lambda_v1(gpu: str, memory_gb: float, throughput: float, batch: int, anchor: bool = False) -> PublishedRun:
    return PublishedRun("lambda-v1-fp16", gpu, memory_gb, RESNET_AMP, throughput, f"{LAMBDA_V1}, batch {batch}",
                        anchor)


RUNS: tuple[PublishedRun, ...] = (
    _lambda_v1("A100 SXM", 80, 1582, 1280, anchor=True),
    _lambda_v1("H100 SXM", 80, 2616, 1280),
    _lambda_v1("H100 PCIe", 80, 1866, 1280),
    _lambda_v1("A100 PCIe", 80, 1527, 1280),
    _lambda_v1("V100 SXM", 16, 833, 256),
    _lambda_v1("A10", 24, 638, 448),
    _lambda_v1("RTX 3090", 24, 905, 448),
    _lambda_v1("RTX 4090", 24, 1301, 448),
    PublishedRun("dle-amp", "A100 SXM", 80, RESNET_AMP, 2470, f"{NVIDIA_DLE}, DGX A100, AMP NHWC, batch 256",
                 anchor=True),
    PublishedRun("dle-amp", "V100 SXM", 16, RESNET_AMP, 1200, f"{NVIDIA_DLE}, DGX-1 V100 16GB, AMP, batch 256"),
)


@dataclass(frozen=True)
class CardCheck:
    series: str
    gpu: str
    memory_kind: str
    published_ratio: float       # the card over the series' anchor, as published
    predicted_ratio: float       # the same by the model
    source: str

    @property
    def error(self) -> float:
        """As a factor less one, under or over alike."""
        r = self.predicted_ratio / self.published_ratio
        return max(r, 1 / r) - 1.0

    @property
    def signed(self) -> float:
        return self.predicted_ratio / self.published_ratio - 1.0


def _modelled(run: PublishedRun, c: ops.Constants) -> float | None:
    m = ops.modelled(run.workload_args[0], run.workload_args[1:], run.gpu, run.memory_gb, constants=c)
    return None if m is None else m.estimate.throughput


def card_checks(c: ops.Constants, runs: tuple[PublishedRun, ...] = RUNS) -> list[CardCheck]:
    """Every published card against its series' anchor, by the constants `c`."""
    anchors = {r.series: (r, _modelled(r, c)) for r in runs if r.anchor}
    out = []
    for run in runs:
        base, theirs = anchors.get(run.series, (None, None))
        if run.anchor or base is None:
            continue
        mine = _modelled(run, c)
        spec = gpu_specs.spec_for(run.gpu, run.memory_gb)
        if mine is None or theirs is None or spec is None:
            continue
        out.append(CardCheck(run.series, run.gpu, spec.memory_kind, run.throughput / base.throughput,
                             mine / theirs, run.source))
    return out


def largest_by_kind(checks: list[CardCheck]) -> dict[str, float]:
    found: dict[str, float] = {}
    for k in checks:
        found[k.memory_kind] = max(found.get(k.memory_kind, 0.0), k.error)
    return found


def table(checks: list[CardCheck]) -> str:
    lines = ["| series | card | memory | published / anchor | model / anchor | error |",
             "|---|---|---|---:|---:|---:|"]
    for k in checks:
        lines.append(f"| {k.series} | {k.gpu} | {k.memory_kind} | {k.published_ratio:.2f} | "
                     f"{k.predicted_ratio:.2f} | {k.signed:+.0%} |")
    if checks:
        lines.append("")
        lines.append(f"median |error| {statistics.median(abs(k.signed) for k in checks):.1%}; largest by memory: "
                     + ", ".join(f"{kind} {e:.0%}" for kind, e in sorted(largest_by_kind(checks).items())))
    return "\n".join(lines)
