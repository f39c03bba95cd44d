"""A GPT-2-small-shaped decoder language model (nanoGPT's) trained with
DistributedDataParallel on synthetic tokens; tokens/s, model TFLOP/s and MFU.

    python workloads/gpt_ddp.py --steps 50 --precision bf16                 # one process
    torchrun --standalone --nproc_per_node=8 workloads/gpt_ddp.py --steps 100 --precision bf16 --compile
    torchrun --nnodes=2 --nproc_per_node=8 --rdzv_backend=c10d \\
        --rdzv_endpoint=HEAD:29500 workloads/gpt_ddp.py --steps 100 --precision bf16
    python workloads/gpt_ddp.py --n-layer 2 --n-head 2 --n-embd 64 --block-size 64 \\
        --vocab-size 512 --batch-size 2 --steps 3                            # tiny, for a CPU

The default shape is GPT-2 small (12 layers, 12 heads, 768 wide, 1024 tokens
of context, vocabulary 50304: GPT-2's 50257 padded to a multiple of 64); --params
names a GPT-3 paper size instead (125M to 6.7B, flags.GPT_PRESETS).
Attention is F.scaled_dot_product_attention (flash attention where the GPU
has it). Tokens are random ids made on the device, so the loop measures the
model and the all-reduce. An "epoch" is OpenWebText's ~9B training tokens;
without --steps or --epochs the run is 50 steps after the warm-up. On a CPU the
defaults shrink to what a CPU machine holds (1 sequence of 256 tokens, 2 warm-up
and 5 measured steps: flags.DEVICE_SIZES), and the record says so (size: cpu).

Model FLOPs per token are the PaLM / nanoGPT count, 6*N + 12*L*H*Q*T
(metrics.gpt_flops_per_token); MFU is the achieved model FLOP/s of one GPU
over its peak dense tensor-core figure at the precision (metrics.PEAK_TFLOPS).
The record also carries the memory of one process (peak_memory_bytes and
peak_reserved_bytes on a GPU, process_peak_rss_bytes on a CPU: peak_memory_kind
says which to compare), the parameter bytes each process holds and the sharding
("DDP (replicated)"), as gpt-fsdp's does: gpt_fsdp.py runs this model, this loop
and this record under FSDP2.
"""

from __future__ import annotations

import math
import sys
from dataclasses import asdict, dataclass
from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

import flags
import harness
import metrics

WORKLOAD = "gpt-ddp"
# sequences per GPU: 8 (nanoGPT uses 12 with gradient accumulation); 2 of 256 tokens on a CPU
OPENWEBTEXT_TRAIN_TOKENS = 9_035_582_198  # nanoGPT's prepared train.bin


@dataclass
class GPTConfig:
    block_size: int = 1024
    vocab_size: int = 50304
    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768
    dropout: float = 0.0


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.n_head = cfg.n_head
        self.c_attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd, bias=False)
        self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd, bias=False)
        self.dropout = cfg.dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                           dropout_p=self.dropout if self.training else 0.0)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class MLP(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.c_fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd, bias=False)
        self.c_proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(F.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.n_embd, bias=False)
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.n_embd, bias=False)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.wpe = nn.Embedding(cfg.block_size, cfg.n_embd)
        self.drop = nn.Dropout(cfg.dropout)
        self.h = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd, bias=False)
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.wte.weight = self.lm_head.weight  # weight tying, as GPT-2
        self.init_weights()

    def init_weights(self) -> None:
        """nanoGPT's initialisation; called again on a model made on the meta device once
        its (sharded) parameters have memory (gpt_fsdp.py)."""
        self.apply(self._init_weights)
        for name, p in self.named_parameters():  # GPT-2's scaled init of the residual projections
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * self.cfg.n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        elif isinstance(module, nn.LayerNorm):
            module.reset_parameters()  # ones, as made (no random numbers drawn)

    def num_params(self, non_embedding: bool = True) -> int:
        """Parameters, without the position embedding by default (nanoGPT's N):
        the token embedding is counted once, as the tied output projection."""
        n = sum(p.numel() for p in self.parameters())
        return n - self.wpe.weight.numel() if non_embedding else n

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        T = idx.shape[1]
        pos = torch.arange(T, dtype=torch.long, device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))


@dataclass
class Wrapped:
    """The GPT made for a run and how it is spread over the processes."""

    model: GPT  # its parameters are what the optimizer steps (FSDP's: the local shards)
    module: nn.Module  # what the step calls: the DDP wrapper (the model alone in a world
    # of one), or the FSDP model itself
    sharding: str  # the record's sharding
    fields: dict  # the wrapping's own record fields


def wrap_ddp(ctx: harness.Dist, args, cfg: GPTConfig) -> Wrapped:
    """One whole replica per process; DDP all-reduces the gradients (harness.replicate:
    in a world of one, the model alone)."""
    model = GPT(cfg).to(ctx.device)
    replica = harness.replicate(ctx, model)
    return Wrapped(model, replica, harness.sharding_of(replica, ctx.world_size), {})


class Trainer:
    """One DDP replica (or FSDP shard: gpt_fsdp.py): AdamW (nanoGPT's settings) on random
    token sequences."""

    def __init__(self, ctx: harness.Dist, args, cfg: GPTConfig,
                 wrap: Callable[[harness.Dist, object, GPTConfig], Wrapped] = wrap_ddp) -> None:
        self.ctx = ctx
        self.args = args
        self.wrapped = wrap(ctx, args, cfg)
        model = self.wrapped.model
        self.n_params = model.num_params()  # a sharded parameter counts whole
        self.model = self.wrapped.module
        if args.compile:
            self.model = torch.compile(self.model)
        decay = [p for p in model.parameters() if p.dim() >= 2]
        no_decay = [p for p in model.parameters() if p.dim() < 2]
        self.optimizer = harness.adamw(
            [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
            lr=6e-4, betas=(0.9, 0.95))
        self.scaler = harness.grad_scaler(ctx, args.precision)
        g = torch.Generator(device=ctx.device).manual_seed(args.seed + ctx.rank)
        # one extra token per row: the targets are the inputs shifted by one
        self.tokens = torch.randint(0, cfg.vocab_size, (4, args.batch_size, cfg.block_size + 1),
                                    generator=g, device=ctx.device)

    def step(self, step: int) -> None:
        batch = self.tokens[step % len(self.tokens)]
        x, y = batch[:, :-1], batch[:, 1:]
        self.optimizer.zero_grad(set_to_none=True)
        with harness.autocast(self.ctx, self.args.precision):
            loss = self.model(x, y)
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()


def main(argv: list[str] | None = None) -> int:
    return run(WORKLOAD, argv, wrap_ddp)


def run(workload: str, argv: list[str] | None,
        wrap: Callable[[harness.Dist, object, GPTConfig], Wrapped]) -> int:
    """Train the GPT its flags give, wrapped by `wrap` (DDP here, FSDP2 in gpt_fsdp.py),
    and write the record: tokens/s, model TFLOP/s, MFU, and memory per process."""
    args = flags.parse(workload, argv)
    torch.manual_seed(args.seed)
    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    ctx = harness.setup_distributed()
    size = flags.size_for_device(workload, args, ctx.device.type)
    cfg = GPTConfig(args.block_size, args.vocab_size, args.n_layer, args.n_head, args.n_embd)
    try:
        trainer = Trainer(ctx, args, cfg, wrap)
        tokens_per_step = args.batch_size * cfg.block_size * ctx.world_size
        steps_per_epoch = max(1, OPENWEBTEXT_TRAIN_TOKENS // tokens_per_step)
        steps = harness.measured_steps(args, steps_per_epoch,
                                       flags.GPU_DEFAULT_STEPS[workload])  # without --steps/--epochs
        timer = harness.measure(ctx, args, trainer.step, steps, model=trainer.model)

        # Model FLOPs per token: 6*N (2 FLOPs per multiply-add, forward + backward = 3x the
        # forward) + 12*L*H*Q*T (attention scores and their weighted sum). MFU: the model
        # FLOP/s of one GPU over its peak. Tokens/s comes from the measured window only.
        # Recomputed activations (gpt-fsdp --activation-checkpointing) are not model FLOPs.
        head_dim = cfg.n_embd // cfg.n_head
        flops_per_token = metrics.gpt_flops_per_token(trainer.n_params, cfg.n_layer, cfg.n_head,
                                                      head_dim, cfg.block_size)
        record = harness.build_record(
            ctx, args, workload=workload, timer=timer, steps=steps,
            samples_per_step=tokens_per_step, epoch_samples=OPENWEBTEXT_TRAIN_TOKENS,
            unit="tokens/s", model=trainer.model, sharding=trainer.wrapped.sharding,
            extra={"model": "gpt", **asdict(cfg), "non_embedding_params": trainer.n_params,
                   "params_preset": args.params, "data": "synthetic",
                   "optimizer": harness.optimizer_name(trainer.optimizer),
                   "sequences_per_gpu": args.batch_size, "tokens_per_step": tokens_per_step,
                   "steps_per_epoch": steps_per_epoch, "epochs": steps / steps_per_epoch,
                   "tf32": args.tf32, "flops_per_token": flops_per_token, "size": size,
                   "flops_formula": "6*N + 12*L*H*Q*T (PaLM appendix B, nanoGPT estimate_mfu)",
                   "train_state_bytes_per_process": int(harness.max_across_ranks(
                       harness.train_state_bytes(trainer.wrapped.model, trainer.optimizer), ctx.device)),
                   **trainer.wrapped.fields},
        )
        tokens_per_s = record["throughput"] or 0.0
        tokens_per_s_per_gpu = tokens_per_s / ctx.world_size
        peak = metrics.peak_tflops(record["gpu_name"], args.precision, tf32=args.tf32) \
            if ctx.device.type == "cuda" else None
        record.update({
            "tokens_per_s": tokens_per_s,
            "tokens_per_s_per_gpu": tokens_per_s_per_gpu,
            "model_tflops": flops_per_token * tokens_per_s / metrics.TERA,
            "model_tflops_per_gpu": flops_per_token * tokens_per_s_per_gpu / metrics.TERA,
            "peak_tflops_per_gpu": peak,
            "mfu": metrics.mfu(flops_per_token, tokens_per_s_per_gpu, peak),
        })
        harness.emit_record(ctx, args, record)
        if ctx.is_main:
            mfu = f"{record['mfu']:.1%}" if record["mfu"] is not None else "n/a (no peak for this device)"
            print(f"{workload}: {record['model_tflops_per_gpu']:.2f} model TFLOP/s per GPU, MFU {mfu}; "
                  f"{memory_line(record)}", flush=True)
        return 0
    finally:
        harness.teardown_distributed()


def memory_line(record: dict) -> str:
    """'peak 3.21 GiB a process (cuda allocated); parameters 237.2 MiB a process (DDP (replicated))'"""
    peak = record.get("peak_memory_bytes") if record.get("device") == "cuda" \
        else record.get("process_peak_rss_bytes")
    return (f"peak {_bytes(peak)} a process ({record.get('peak_memory_kind')}); parameters "
            f"{_bytes(record.get('param_bytes_per_process'))} a process ({record.get('sharding')})")


def _bytes(n: float | None) -> str:
    if n is None:
        return "n/a"
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.2f} GiB"


if __name__ == "__main__":
    sys.exit(main())
