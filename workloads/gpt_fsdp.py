"""gpt-ddp's GPT trained with FSDP2 (torch.distributed.fsdp.fully_shard): each
transformer block is sharded on its own and the root (embeddings, final LayerNorm,
the tied output layer) as one more group, every parameter split over the processes
(full shard: a block's parameters are gathered for its forward, freed after it, and
gathered again for its backward). Tokens/s, model TFLOP/s, MFU, and the memory of
one process.

    torchrun --standalone --nproc_per_node=8 workloads/gpt_fsdp.py --params 1.3B --precision bf16
    torchrun --standalone --nproc_per_node=8 workloads/gpt_fsdp.py --params 6.7B --precision bf16 \\
        --activation-checkpointing --batch-size 4
    torchrun --standalone --nproc_per_node=2 workloads/gpt_fsdp.py --n-layer 2 --n-head 2 \\
        --n-embd 64 --block-size 64 --vocab-size 512 --batch-size 2 --steps 3   # tiny, for a CPU

The model, its data, its optimizer (AdamW, nanoGPT's settings), the timed loop,
the FLOPs per token and MFU are gpt-ddp's (gpt_ddp.py); so are the flags, with
--activation-checkpointing added. --params picks a GPT-3 paper size (125M, 350M,
760M, 1.3B, 2.7B, 6.7B); --n-layer/--n-head/--n-embd win over it where given.

Precision: --precision bf16 (or fp16) runs FSDP2's MixedPrecisionPolicy: parameters
gathered and computed in bf16, gradients reduce-scattered in fp32 into the fp32
shards the optimizer steps; the step also runs under autocast, which keeps the
LayerNorms, the softmax and the loss in fp32. fp32 (the default, as gpt-ddp's) runs
no policy. On a GPU the model is made on the meta device, sharded, and only then
given memory and initialised shard by shard, so no process ever holds it whole;
on a CPU (gloo, tiny sizes) it is made whole with gpt-ddp's initialisation and
then sharded.

The record says "sharding": "FSDP2 full shard per block + root", the parameter
bytes this process holds (param_bytes_per_process: its shards, about 1/N of
gpt-ddp's), the peak memory of one process (peak_memory_bytes/peak_reserved_bytes
on a GPU, process_peak_rss_bytes on a CPU; peak_memory_kind says which), and
the mixed precision and activation checkpointing in force.
"""

from __future__ import annotations

import sys

import torch
import torch.nn as nn
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.utils.checkpoint import checkpoint

import gpt_ddp
import harness

WORKLOAD = "gpt-fsdp"
SHARDING = "FSDP2 full shard per block + root"
LOW_PRECISION = {"bf16": torch.bfloat16, "fp16": torch.float16}
# where the model is made on the meta device and initialised once sharded; on a CPU
# DTensor's random ops draw the same numbers on every rank (torch supports its RNG
# tracker on CUDA-like devices only), so each shard would repeat the first one's
META_INIT_DEVICES = ("cuda",)


class Checkpointed(nn.Module):
    """A transformer block whose activations are recomputed in the backward instead of
    kept (torch.utils.checkpoint, non-reentrant); FSDP shards the wrapper."""

    def __init__(self, block: nn.Module) -> None:
        super().__init__()
        self.block = block

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return checkpoint(self.block, x, use_reentrant=False)


def mixed_precision(precision: str) -> MixedPrecisionPolicy:
    """bf16/fp16 parameters and compute, fp32 gradient reduction; fp32: no casting."""
    if precision in LOW_PRECISION:
        return MixedPrecisionPolicy(param_dtype=LOW_PRECISION[precision], reduce_dtype=torch.float32)
    return MixedPrecisionPolicy()


def wrap_fsdp(ctx: harness.Dist, args, cfg: gpt_ddp.GPTConfig) -> gpt_ddp.Wrapped:
    """fully_shard each block (checkpointed first with --activation-checkpointing), then
    the root; on a GPU from the meta device, materialised and initialised once sharded."""
    on_meta = ctx.device.type in META_INIT_DEVICES
    with torch.device("meta" if on_meta else ctx.device):
        model = gpt_ddp.GPT(cfg)
    if args.activation_checkpointing:
        for i, block in enumerate(model.h):
            model.h[i] = Checkpointed(block)
    policy = mixed_precision(args.precision)
    for block in model.h:
        fully_shard(block, mp_policy=policy)
    fully_shard(model, mp_policy=policy)  # embeddings, final LayerNorm, the tied lm_head
    if on_meta:
        model.to_empty(device=ctx.device)
        model.init_weights()  # on the shards: DTensor's random ops keep the ranks' draws apart
    fields = {
        "reshard_after_forward": True,
        "activation_checkpointing": bool(args.activation_checkpointing),
        "mixed_precision": ({"param_dtype": str(policy.param_dtype).removeprefix("torch."),
                             "reduce_dtype": str(policy.reduce_dtype).removeprefix("torch.")}
                            if args.precision in LOW_PRECISION else None),
        "initialized_on": "meta, then each shard" if on_meta else "whole, then sharded",
    }
    return gpt_ddp.Wrapped(model, model, SHARDING, fields)


def main(argv: list[str] | None = None) -> int:
    return gpt_ddp.run(WORKLOAD, argv, wrap_fsdp)


if __name__ == "__main__":
    sys.exit(main())
