"""The suite's GPT (gpt-ddp, gpt-fsdp) at any size its flags give, by arithmetic: its
parameters, its FLOPs per token and its memory shape, without building it (no torch).

The model is GPT-2's without biases (workloads/gpt_ddp.py): a block holds 12h^2
weights and two LayerNorm weights; the token embedding is tied to the output layer. A
token's training FLOPs are nanoGPT's estimate_mfu count, 6N + 12*L*h*T (N the
parameters without the position embedding), which FlopCounterMode's count of the real
model matches to 0.02% (tests/workloads/test_profiles.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpubench.predict.memory import ModelShape, gpt_activation_bytes
from gpubench.predict.model import Figure
from gpubench.predict.workload_profiles import WorkloadProfile
from gpubench.workloads import flags

GPT_WORKLOADS = ("gpt-ddp", "gpt-fsdp")
OPENWEBTEXT_TRAIN_TOKENS = 9_035_582_198     # as workloads/gpt_ddp.py counts an epoch
SOURCE = "GPT arithmetic from its flags: 6N + 12*L*h*T FLOPs a token (nanoGPT's estimate_mfu)"


@dataclass(frozen=True)
class GptSize:
    n_layer: int
    n_head: int
    n_embd: int
    block_size: int
    vocab_size: int
    batch_size: int
    checkpointed: bool
    precision: str

    @property
    def block_params(self) -> int:
        return 12 * self.n_embd ** 2 + 2 * self.n_embd

    @property
    def params(self) -> int:
        """Every parameter, the position embedding included (what DDP and FSDP hold)."""
        return self.nanogpt_n + self.block_size * self.n_embd

    @property
    def nanogpt_n(self) -> int:
        return self.n_layer * self.block_params + self.n_embd + self.vocab_size * self.n_embd

    @property
    def flops_per_token(self) -> float:
        """What the GPU computes: with each block checkpointed, the forward a second time
        (4/3 of the 3 passes' work)."""
        once = 6.0 * self.nanogpt_n + 12.0 * self.n_layer * self.n_embd * self.block_size
        return once * 4.0 / 3.0 if self.checkpointed else once


def gpt_size(workload: str, args: tuple) -> GptSize | None:
    """The size the flags give on a GPU; None for another workload or flags it refuses."""
    if workload not in GPT_WORKLOADS:
        return None
    try:
        ns = flags.parse(workload, list(args), raising=True)
    except (flags.FlagError, KeyError):
        return None
    flags.size_for_device(workload, ns, "cuda")
    return GptSize(ns.n_layer, ns.n_head, ns.n_embd, ns.block_size, ns.vocab_size, ns.batch_size,
                   bool(getattr(ns, "activation_checkpointing", False)), ns.precision)


def profile(workload: str, args: tuple, size: GptSize) -> WorkloadProfile:
    return WorkloadProfile(workload, tuple(args), size.flops_per_token, "tokens", size.params,
                           4 * size.params, OPENWEBTEXT_TRAIN_TOKENS, size.batch_size, SOURCE,
                           size.batch_size * size.block_size)


def shape(size: GptSize) -> ModelShape:
    compute = 2.0 if size.precision in ("bf16", "fp16") else 4.0
    return ModelShape(size.params, size.block_params, "adamw", compute)


def activations(size: GptSize) -> Figure:
    """Per sequence (the batch counts sequences; the work, tokens)."""
    act_bytes = 2.0 if size.precision in ("bf16", "fp16") else 4.0
    return gpt_activation_bytes(size.n_layer, size.n_embd, size.n_head, size.block_size, act_bytes,
                                size.checkpointed)
