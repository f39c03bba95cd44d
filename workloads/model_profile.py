"""What one training step of each suite workload costs, counted from the model itself:
the FLOPs per unit of work (forward + loss + backward), the parameters, and the bytes
of gradient DDP all-reduces. gpubench's performance model reads the result, shipped
as profiles.json beside this file (gpubench/predict/workload_profiles.py).

    python workloads/model_profile.py            # print the profiles of the suite's workloads
    python workloads/model_profile.py --write    # and write workloads/profiles.json

Each workload's model is built by the workload's own classes at the sizes its flags
give on a GPU (flags.parse, then flags.size_for_device(..., "cuda"): ResNet-50 at a
batch of 256, GPT-2 small at 8 sequences of 1024 tokens, not the smaller defaults a
CPU run takes), and one step is run under torch's FlopCounterMode on the meta device:
shapes only, no memory and no arithmetic, so GPT-2 small counts in well under a second.
Where an operation has no meta kernel the step is counted on the CPU at a batch of 1
or 2 instead (`counted_on` says which). The optimizer step is not counted.

FlopCounterMode's convention: a multiply-add is 2 FLOPs; it counts matrix products,
convolutions and attention (forward and each gradient the backward computes), and
nothing else: no normalisation, activation, loss, embedding lookup or element-wise
op. Attention is counted over the whole T x T score matrix (the causal mask is not
subtracted), as nanoGPT's 6N + 12LHQT estimate does. On the meta device
scaled_dot_product_attention runs its math form (two batched matmuls, which are
counted); on a CPU its fused kernel has no FLOP formula and would count as 0, so the
CPU fallback forces the math form.

Not named profile.py: this folder is the first entry of sys.path of every workload run
(they are scripts), and a profile.py here would shadow the standard library's profile
module, which cProfile imports (torch._dynamo imports cProfile under --compile).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # the workloads import their siblings by name
    sys.path.insert(0, str(HERE))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

import flags  # noqa: E402
import gpt_ddp  # noqa: E402
import harness  # noqa: E402
import mnist_data  # noqa: E402
import mnist_ddp  # noqa: E402
import recsys_ddp  # noqa: E402
import resnet_ddp  # noqa: E402

SUITE = ("mnist-ddp", "resnet-ddp", "gpt-ddp", "gpt-fsdp", "recsys-ddp")  # allreduce has no model
GPT = ("gpt-ddp", "gpt-fsdp")  # one model: FSDP shards it, the step's FLOPs are gpt-ddp's
PROFILES_FILE = HERE / "profiles.json"
COMMAND = "python workloads/model_profile.py --write"
CPU_BATCH = 2  # the batch of the CPU fallback (GPT: 1 sequence of the full length)


@dataclass
class Step:
    """One workload's model at its flags, and its training step's loss."""

    model: nn.Module
    loss: Callable[[], torch.Tensor]  # forward + loss on a batch made on the model's device
    work: int  # units of work in that batch (images, tokens, ratings)
    unit: str  # the record's throughput_unit without "/s"
    batch_per_gpu: int  # the record's batch_per_gpu (sequences for gpt-ddp and gpt-fsdp)
    work_per_gpu_step: int  # units of work one GPU does in one step at batch_per_gpu
    epoch_samples: int | None  # units of work in one epoch (the record's epoch_samples)


def gpu_args(workload: str, argv: list[str]) -> argparse.Namespace:
    """The workload's arguments as a GPU run has them: flags.parse, then the sizes
    left to the device filled as on CUDA (never the CPU's smaller defaults)."""
    args = flags.parse(workload, list(argv), raising=True)
    flags.size_for_device(workload, args, "cuda")
    return args


def _mnist(args, device: torch.device, batch: int) -> Step:
    model = mnist_ddp.Net()

    def loss() -> torch.Tensor:
        x = torch.empty(batch, 1, 28, 28, device=device).normal_()
        y = torch.zeros(batch, dtype=torch.long, device=device)
        return F.nll_loss(model(x), y)

    return Step(model, loss, batch, "images", args.batch_size, args.batch_size,
                mnist_data.TRAIN_SIZE)  # the synthetic split and MNIST's train split alike


def _resnet(args, device: torch.device, batch: int) -> Step:
    model = resnet_ddp.ResNet(args.depth, args.width, args.num_classes)
    criterion = nn.CrossEntropyLoss()

    def loss() -> torch.Tensor:
        x = torch.empty(batch, 3, args.image_size, args.image_size, device=device).normal_()
        y = torch.zeros(batch, dtype=torch.long, device=device)
        return criterion(model(x.contiguous(memory_format=torch.channels_last)), y)

    return Step(model, loss, batch, "images", args.batch_size, args.batch_size,
                resnet_ddp.IMAGENET_TRAIN_IMAGES)


def _gpt(args, device: torch.device, batch: int) -> Step:
    cfg = gpt_ddp.GPTConfig(args.block_size, args.vocab_size, args.n_layer, args.n_head, args.n_embd)
    model = gpt_ddp.GPT(cfg)

    def loss() -> torch.Tensor:
        tokens = torch.zeros(batch, cfg.block_size + 1, dtype=torch.long, device=device)
        return model(tokens[:, :-1], tokens[:, 1:])

    return Step(model, loss, batch * cfg.block_size, "tokens", args.batch_size,
                args.batch_size * cfg.block_size, gpt_ddp.OPENWEBTEXT_TRAIN_TOKENS)


def _recsys(args, device: torch.device, batch: int) -> Step:
    if args.data != "synthetic":
        raise ValueError("recsys-ddp's profile is of its synthetic data (--data synthetic): "
                         "the embedding tables' sizes come from the ratings file")
    n_users, n_movies, n_ratings = recsys_ddp.MOVIELENS_SHAPES[args.shape]
    model = recsys_ddp.RecSysModel(n_users, n_movies, args.embedding_dim)

    def loss() -> torch.Tensor:
        users = torch.zeros(batch, dtype=torch.long, device=device)
        movies = torch.zeros(batch, dtype=torch.long, device=device)
        ratings = torch.empty(batch, device=device).normal_()
        return F.mse_loss(model(users, movies).float(), ratings)

    return Step(model, loss, batch, "ratings", args.batch_size, args.batch_size, n_ratings)


BUILDERS: dict[str, Callable[[argparse.Namespace, torch.device, int], Step]] = {
    "mnist-ddp": _mnist, "resnet-ddp": _resnet, "gpt-ddp": _gpt, "gpt-fsdp": _gpt,
    "recsys-ddp": _recsys,
}


def build(workload: str, args: argparse.Namespace, device: str, batch: int) -> Step:
    """The workload's model, made on `device` (meta: shapes only), in training mode."""
    dev = torch.device(device)
    with dev:  # parameters and buffers are made there, initialisation included
        step = BUILDERS[workload](args, dev, batch)
    if workload == "resnet-ddp":
        step.model = step.model.to(memory_format=torch.channels_last)
    step.model.train()
    return step


def count_flops(model: nn.Module, loss: Callable[[], torch.Tensor]) -> int:
    """FLOPs of one forward, loss and backward under FlopCounterMode (no optimizer step)."""
    counter = FlopCounterMode(display=False)
    with counter:
        loss().backward()
    model.zero_grad(set_to_none=True)
    return int(counter.get_total_flops())


def _count(workload: str, args: argparse.Namespace, device: str, batch: int) -> tuple[Step, int]:
    torch.manual_seed(args.seed)
    step = build(workload, args, device, batch)
    math_attention = contextlib.nullcontext()
    if device == "cpu":  # the fused CPU attention kernel has no FLOP formula: use the math form
        from torch.nn.attention import SDPBackend, sdpa_kernel
        math_attention = sdpa_kernel(SDPBackend.MATH)
    with math_attention:
        return step, count_flops(step.model, step.loss)


def profile(workload: str, argv: list[str]) -> dict:
    """One training step of `workload` at `argv` (the GPU sizes), counted: FLOPs per unit of
    work (images, tokens, ratings: what the record's throughput counts), parameters,
    gradient bytes, the epoch and the batch. Counted on the meta device; on the CPU at a
    batch of CPU_BATCH (1 for the GPT) where meta fails. gpt-fsdp's model is gpt-ddp's,
    counted unsharded: FSDP changes where the parameters live, not the step's FLOPs, and
    its gradients are reduce-scattered rather than all-reduced, the same bytes in fp32;
    recomputation under --activation-checkpointing is not counted (no model FLOPs)."""
    if workload not in BUILDERS:
        raise ValueError(f"no model to profile in '{workload}'; profiled: {', '.join(BUILDERS)}")
    args = gpu_args(workload, argv)
    try:
        step, flops = _count(workload, args, "meta", args.batch_size)
        counted_on = "meta"
    except (NotImplementedError, RuntimeError) as e:
        print(f"{workload}: meta device failed ({type(e).__name__}: {str(e).splitlines()[0]}); "
              f"counting on the CPU at a small batch", file=sys.stderr)
        step, flops = _count(workload, args, "cpu", 1 if workload in GPT else CPU_BATCH)
        counted_on = "cpu"
    per_unit = flops / step.work
    return {
        "workload": workload,
        "args": list(argv),
        "flops_per_sample": int(per_unit) if per_unit == int(per_unit) else per_unit,
        "unit": step.unit,
        **harness.model_sizes(step.model),  # what the workload's record carries
        "epoch_samples": step.epoch_samples,
        "batch_per_gpu": step.batch_per_gpu,
        "work_per_gpu_step": step.work_per_gpu_step,
        "counted_on": counted_on,
        "torch": torch.__version__,
    }


def suite_profiles() -> tuple[dict[str, dict], dict[str, float]]:
    """Every suite workload's profile at its default arguments, and seconds each took."""
    profiles, seconds = {}, {}
    for workload in SUITE:
        t0 = time.perf_counter()
        profiles[workload] = profile(workload, [])
        seconds[workload] = time.perf_counter() - t0
    return profiles, seconds


def document(profiles: dict[str, dict]) -> dict:
    return {
        "generated_by": COMMAND,
        "torch": torch.__version__,
        "date": datetime.date.today().isoformat(),
        "sizes": "the GPU defaults: flags.parse, then flags.size_for_device(workload, args, 'cuda')",
        "convention": "FLOPs of one forward + loss + backward (no optimizer step) per unit of work, "
                      "counted by torch.utils.flop_counter.FlopCounterMode: a multiply-add is 2 FLOPs; "
                      "matmuls, convolutions and attention only (full T x T, causal mask not "
                      "subtracted); grad_bytes: the parameters requiring grad, fp32",
        "profiles": profiles,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help=f"write {PROFILES_FILE.name} beside this file")
    opts = parser.parse_args(argv)
    profiles, seconds = suite_profiles()
    for name, p in profiles.items():
        print(f"{name:11} {p['flops_per_sample'] / 1e9:10.4f} GFLOP/{p['unit'][:-1]:6} "
              f"{p['params']:>12,} params {p['grad_bytes']:>13,} grad bytes  batch {p['batch_per_gpu']}"
              f"  counted on {p['counted_on']} in {seconds[name]:.2f} s")
    if opts.write:
        PROFILES_FILE.write_text(json.dumps(document(profiles), indent=2) + "\n", encoding="utf-8")
        print(f"wrote {PROFILES_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
