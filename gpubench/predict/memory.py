"""Will it fit: the memory one GPU needs to train a model, under DDP or FSDP at N GPUs.

Per parameter, with PyTorch's AdamW and the master weights in fp32 (autocast and FSDP2's
bf16 mixed precision both keep them so): 4 bytes of parameter, 4 of gradient, 8 of the
optimizer's two moments: 16 bytes. DDP holds all of them on every GPU; FSDP shards them
over the N GPUs, and holds in full only the blocks it has gathered for the layer at hand
(the current block and the one it prefetches, in the compute precision, and the current
block's unsharded gradients). Activations come on top, per sample of the batch:
measured where a record says (peak memory over the static part), else, for a GPT, the
published per-layer count (Korthikanti et al. 2022, "Reducing Activation Recomputation
in Large Transformer Models", section 4: s*h*(34 + 5*a*s/h) bytes a layer with 16-bit
activations; 2*s*h with each block checkpointed, plus one block's during recompute).

A card gives training a share of its memory (the CUDA context, cuBLAS workspaces and
the caching allocator's fragmentation take the rest).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpubench.predict.model import ASSUMED, Figure

GB = 1e9
# bytes per parameter of each kind, by what holds it
PARAM_BYTES = 4.0           # fp32 master weights
GRAD_BYTES = 4.0            # fp32 gradients (DDP reduces in fp32; FSDP2 reduce_dtype fp32)
OPTIMIZER_BYTES = {"adamw": 8.0, "adam": 8.0, "sgd-momentum": 4.0, "sgd": 0.0}
USABLE_SHARE = Figure(0.9, ASSUMED, "90% of the card for training (CUDA context, workspaces, "
                                    "allocator fragmentation take the rest)")


def usable_bytes(card_gb: float) -> float:
    """What training may allocate of a card of `card_gb` GB."""
    return card_gb * GB * USABLE_SHARE.value


@dataclass(frozen=True)
class ModelShape:
    """What memory depends on: parameters in all, in the largest block FSDP gathers at once."""

    params: int
    block_params: int | None = None      # one transformer block; None: unknown (DDP only)
    optimizer: str = "adamw"
    compute_bytes: float = 2.0           # bf16 parameters as FSDP gathers them; 4 in fp32


@dataclass(frozen=True)
class MemoryNeed:
    strategy: str                        # "DDP" or "FSDP"
    gpus: int
    parts: dict                          # name -> bytes, the static part
    per_sample: Figure | None            # activation bytes per sample; None: unknown

    @property
    def static_bytes(self) -> float:
        return sum(self.parts.values())

    def total(self, batch: int) -> float | None:
        return None if self.per_sample is None else self.static_bytes + batch * self.per_sample.value

    def max_batch(self, card_bytes: float) -> int | None:
        """The largest batch per GPU that fits `card_bytes` (0: not even the model);
        None where activations are unknown."""
        room = card_bytes * USABLE_SHARE.value - self.static_bytes
        if room < 0:
            return 0
        if self.per_sample is None or self.per_sample.value <= 0:
            return None
        return int(room // self.per_sample.value)


def need(shape: ModelShape, strategy: str, gpus: int, per_sample: Figure | None = None) -> MemoryNeed:
    """What one GPU holds to train `shape` under `strategy` ("DDP" or "FSDP") at `gpus`."""
    optimizer = OPTIMIZER_BYTES[shape.optimizer]
    if strategy == "DDP":
        parts = {"parameters": shape.params * PARAM_BYTES, "gradients": shape.params * GRAD_BYTES,
                 "optimizer": shape.params * optimizer}
    elif strategy == "FSDP":
        share = shape.params / gpus
        block = shape.block_params or 0
        parts = {"parameters": share * PARAM_BYTES, "gradients": share * GRAD_BYTES,
                 "optimizer": share * optimizer,
                 # the block at hand and the one prefetched, gathered; the block's gradients
                 "gathered blocks": 2 * block * shape.compute_bytes + block * shape.compute_bytes}
    else:
        raise ValueError(f"strategy {strategy!r}")
    return MemoryNeed(strategy, gpus, parts, per_sample)


def gpt_activation_bytes(n_layer: int, n_embd: int, n_head: int, block_size: int,
                         act_bytes: float = 2.0, checkpointed: bool = False) -> Figure:
    """Activation bytes per sequence of a GPT's training step (Korthikanti et al. 2022)."""
    s, h, a = block_size, n_embd, n_head
    per_layer_16bit = s * h * (34 + 5 * a * s / h)
    scale = act_bytes / 2.0
    if checkpointed:
        total = (n_layer * 2 * s * h + per_layer_16bit) * scale
        how = "2*s*h a checkpointed layer plus one layer recomputed"
    else:
        total = n_layer * per_layer_16bit * scale
        how = "s*h*(34 + 5*a*s/h) a layer"
    return Figure(total, ASSUMED, f"activations of a GPT per sequence, {how} (Korthikanti et al. 2022)")


def say_gb(nbytes: float) -> str:
    return f"{nbytes / GB:.0f} GB" if nbytes >= 10 * GB else f"{nbytes / GB:.1f} GB"


def say_params(params: int) -> str:
    return f"{params / 1e9:.1f}B" if params >= 1e9 else f"{params / 1e6:.0f}M"


def why_not(shape: ModelShape, m: MemoryNeed, card_bytes: float, batch: int) -> str | None:
    """Why the model at `batch` per GPU does not fit the card, in words; None if it fits
    (or if activations are unknown and the static part fits)."""
    most = m.max_batch(card_bytes)
    if most is None or most >= batch:
        return None
    head = (f"{say_params(shape.params)} with {shape.optimizer.replace('adamw', 'AdamW')} under "
            f"{m.strategy}{'' if m.strategy == 'DDP' else f' over {m.gpus} GPU' + ('s' if m.gpus > 1 else '')} needs about "
            f"{say_gb(m.static_bytes)} a GPU plus activations; this card has {say_gb(card_bytes)}")
    if most == 0:
        return head + ": not even the model fits"
    return head + f": batch {most} at most (asked {batch})"
