"""Every operation of one training step of a suite workload, counted on the meta device:
what a GPU step is made of, for gpubench's performance and memory model
(gpubench/predict/ops.py reads the result, shipped as step_profiles.json beside this file).

    python workloads/op_profile.py            # print a summary of each configuration
    python workloads/op_profile.py --write    # and write workloads/step_profiles.json

One step (forward, loss, backward and the optimizer's step, zero_grad included) runs on
the meta device under step_count.StepCounter (the counter a user's script's calibration
uses too): shapes and dtypes only, no arithmetic, so GPT-3 6.7B counts in
seconds. Each aten operation dispatched is kept with its FLOPs (torch's own formulas,
torch.utils.flop_counter), the bytes it reads and writes (every tensor it takes and
returns, at its dtype), and whether it is a view (no kernel: host time only). The
tensors alive between operations are tracked, so the step's peak of allocated bytes
is counted too: what torch.cuda.max_memory_allocated reports on a GPU.

What a CUDA run does that the meta device would not, done here by hand:
- autocast (bf16, fp16): torch.autocast does nothing for meta tensors, so a torch
  function mode applies CUDA autocast's policy: matrix products, convolutions and
  attention in the low precision (their fp32 inputs cast, a leaf weight once a
  forward as autocast's cache does), losses, norms and softmax in fp32, the rest in
  the dtype of its inputs;
- attention: scaled_dot_product_attention runs the kernel a GPU of compute capability
  8.0 or newer picks: flash attention in bf16/fp16, memory-efficient attention in fp32
  (neither keeps the T x T scores);
- the optimizer: its foreach form (CUDA's default); a fused AdamW (gpt-ddp and
  gpt-fsdp on CUDA) is one kernel reading parameter, gradient and both moments and
  writing three of them back.
- activation checkpointing (gpt-fsdp --activation-checkpointing): each block wrapped in
  torch.utils.checkpoint as gpt_fsdp.py does, so the backward recomputes the forward.

Each configuration is counted at two batches, 8 and 16: every operation's FLOPs and
bytes are then a + b x batch (the same sequence of operations at both), which is
what the model evaluates at any batch. Identical operations (a GPT's layers repeat)
are kept once, with their number.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
from torch.utils.checkpoint import checkpoint  # noqa: E402

import mnist_data  # noqa: E402
import model_profile  # noqa: E402
import recsys_ddp  # noqa: E402
from step_count import LOW, MetaAutocast, StepCounter, nbytes  # noqa: E402

STEP_PROFILES_FILE = HERE / "step_profiles.json"
COMMAND = "python workloads/op_profile.py --write"
# The configurations shipped: every suite workload at each precision its GPU runs take,
# and every GPT preset (FSDP's checkpointed form too).
# The batches counted: past the smallest, where the peak of a step is where its
# activations peak (at a batch of one or two, a ResNet's peak is elsewhere in the step).
COUNT_BATCH = 8
GPT_PRESETS = ("125M", "350M", "760M", "1.3B", "2.7B", "6.7B")


def _checkpointed(model: nn.Module, dtype: torch.dtype | None) -> None:
    """Each GPT block recomputed in the backward, as gpt_fsdp.py's Checkpointed. The
    recomputation runs where no torch function mode reaches (the backward), so each
    block enters autocast's policy itself, as torch.autocast's recorded state does."""
    def under_policy(forward, x):
        with MetaAutocast(dtype):
            return forward(x)

    for block in model.h:
        block.forward = lambda x, _f=block.forward: checkpoint(under_policy, _f, x, use_reentrant=False)


def _optimizer(workload: str, model: nn.Module) -> torch.optim.Optimizer:
    params = list(model.parameters())
    if workload in model_profile.GPT:  # AdamW, fused on CUDA: counted as one kernel instead
        return None
    if workload == "resnet-ddp":
        return torch.optim.SGD(params, lr=0.1, momentum=0.9, weight_decay=1e-4, foreach=True)
    if workload == "mnist-ddp":
        return torch.optim.Adadelta(params, lr=1.0, foreach=True)
    return torch.optim.Adam(params, lr=1e-3, foreach=True)


def count_step(workload: str, argv: list[str], batch: int) -> dict:
    """One training step at `batch` on the meta device: its operations and peak bytes."""
    args = model_profile.gpu_args(workload, argv)
    args.batch_size = batch
    step = model_profile.build(workload, args, "meta", batch)
    dtype = LOW.get(getattr(args, "precision", "fp32"))
    if getattr(args, "activation_checkpointing", False):
        _checkpointed(step.model, dtype)
    params = list(step.model.parameters())
    optimizer = _optimizer(workload, step.model)
    if optimizer is not None:  # the states exist from the first step on: make them first
        for p in params:
            p.grad = torch.empty_like(p)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    states = [t for s in (optimizer.state.values() if optimizer else []) for t in s.values()
              if isinstance(t, torch.Tensor)]
    counter = StepCounter(params + states)
    fused_bytes = 0
    # autocast's policy stays on through the backward for a checkpointed block's
    # recomputation (grad enabled there only); its cache ends with the forward, as autocast's
    with counter, MetaAutocast(dtype) as autocast:
        loss = step.loss()
        autocast.cache.clear()
        counter.phase = "backward"
        loss.backward()
        counter.phase = "optimizer"
        if optimizer is not None:
            optimizer.step()
        else:
            # fused AdamW: reads parameter, gradient, both moments; writes three back (fp32);
            # its moments are made at the first step and kept (counted as held below)
            fused_bytes = sum(7 * nbytes(p) for p in params)
        step.model.zero_grad(set_to_none=True)
    ops = counter.ops
    if fused_bytes:
        ops.append(("optimizer", "aten._fused_adamw_", 0, fused_bytes, "kernel"))
    held = counter.start_bytes + (sum(2 * nbytes(p) for p in params) if fused_bytes else 0)
    return {"ops": ops, "peak_bytes": counter.peak_bytes + (held - counter.start_bytes),
            "data_bytes": data_bytes(workload, args),
            "held_bytes": held, "work": step.work, "batch": batch,
            "params": sum(p.numel() for p in params)}


def data_bytes(workload: str, args: argparse.Namespace) -> int:
    """What the workload keeps on the device beside the model: MNIST's 60,000 images
    normalised in fp32 and their labels; MovieLens' ratings (two int64 ids and an fp32
    rating each) and the epoch's permutation of them (int64, made by randperm on the
    device, which sorts random keys beside it: as much again while it runs); the other
    workloads make a batch at a time."""
    if workload == "mnist-ddp":
        return mnist_data.TRAIN_SIZE * (28 * 28 * 4 + 8)
    if workload == "recsys-ddp":
        return recsys_ddp.MOVIELENS_SHAPES[args.shape][2] * (8 + 8 + 4 + 2 * 8)
    return 0


def _linear(one: dict, two: dict) -> dict:
    """Two counts at batches B and 2B as a + b x batch per operation, identical ones merged."""
    if len(one["ops"]) != len(two["ops"]):
        raise RuntimeError(f"the step has {len(one['ops'])} operations at batch {one['batch']} "
                           f"and {len(two['ops'])} at {two['batch']}")
    db = two["batch"] - one["batch"]
    merged: dict[tuple, int] = {}
    for a, b in zip(one["ops"], two["ops"]):
        if a[:2] != b[:2]:
            raise RuntimeError(f"operations differ between batches: {a[:2]} and {b[:2]}")
        f1, m1 = (b[2] - a[2]) / db, (b[3] - a[3]) / db
        key = (a[0], a[1], a[4], a[2] - f1 * one["batch"], f1, a[3] - m1 * one["batch"], m1)
        merged[key] = merged.get(key, 0) + 1
    rows = [[phase, name, kind, n, _num(f0), _num(f1), _num(b0), _num(b1)]
            for (phase, name, kind, f0, f1, b0, b1), n in merged.items()]
    peak1 = (two["peak_bytes"] - one["peak_bytes"]) / db
    return {
        "ops": rows,
        "peak_bytes": [_num(one["peak_bytes"] - peak1 * one["batch"]), _num(peak1)],
        "held_bytes": one["held_bytes"],
        "data_bytes": one["data_bytes"],
        "work_per_batch": one["work"] // one["batch"],
        "params": one["params"],
    }


def _num(x: float) -> float | int:
    return int(round(x)) if abs(x - round(x)) < 1e-6 else round(x, 3)


def configurations() -> list[tuple[str, list[str]]]:
    """(workload, arguments) of every configuration shipped."""
    out: list[tuple[str, list[str]]] = [("mnist-ddp", []), ("recsys-ddp", [])]
    for precision in ("fp32", "bf16"):
        out.append(("resnet-ddp", ["--precision", precision]))
        for preset in GPT_PRESETS:
            out.append(("gpt-ddp", ["--params", preset, "--precision", precision]))
    for preset in GPT_PRESETS:
        out.append(("gpt-fsdp", ["--params", preset, "--precision", "bf16", "--activation-checkpointing"]))
    return out


def key(workload: str, argv: list[str]) -> str:
    return " ".join([workload, *argv])


def profile(workload: str, argv: list[str]) -> dict:
    one = count_step(workload, argv, COUNT_BATCH)
    two = count_step(workload, argv, 2 * COUNT_BATCH)
    out = _linear(one, two)
    out.update(workload=workload, args=argv)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help=f"write {STEP_PROFILES_FILE.name}")
    parser.add_argument("--only", default=None, help="one workload's configurations")
    opts = parser.parse_args(argv)
    profiles = {}
    for workload, args in configurations():
        if opts.only and workload != opts.only:
            continue
        t0 = time.perf_counter()
        p = profile(workload, args)
        profiles[key(workload, args)] = p
        kernels = sum(r[3] for r in p["ops"] if r[2] == "kernel")
        host = sum(r[3] for r in p["ops"])
        print(f"{key(workload, args):58} {host:6} ops {kernels:6} kernels  peak "
              f"{p['peak_bytes'][0] / 2**30:7.2f} + {p['peak_bytes'][1] / 2**30:6.3f} GiB x batch  "
              f"({time.perf_counter() - t0:.1f} s)")
    if opts.write:
        document = {"generated_by": COMMAND, "torch": torch.__version__,
                    "date": datetime.date.today().isoformat(),
                    "row": ["phase", "op", "kind", "count", "flops", "flops_per_batch",
                            "bytes", "bytes_per_batch"],
                    "profiles": profiles}
        STEP_PROFILES_FILE.write_text(json.dumps(document, separators=(",", ":")) + "\n", encoding="utf-8")
        print(f"wrote {STEP_PROFILES_FILE} ({STEP_PROFILES_FILE.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
