"""The command-line flags of every suite workload, and their checks, without torch.

The workloads parse their arguments with these parsers on the machine; gpubench
parses a sweep's arguments with the same parsers before anything is launched or
rented, so a typo costs one line, not a torchrun traceback per GPU count:

    python workloads/flags.py mnist-ddp --stepz 20     # the check gpubench makes
    python workloads/flags.py mnist-ddp --help         # a workload's flags, without torch

Sizes that depend on the device (a ResNet-50 batch of 256 takes about 8 GB per
process on a CPU) default to None here; the workload fills them in once it knows
its device (`size_for_device`), and its record says which size ran.

Standard library only: copied to the machine beside the workloads (imported as
`flags`) and installed in gpubench as `gpubench.workloads.flags`.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from typing import Callable

GPU, CPU = "full", "cpu"  # the `size` a record names: the published shape, or one a CPU holds


class FlagError(ValueError):
    """A workload's arguments that its parser refuses (gpubench's check)."""


class WorkloadParser(argparse.ArgumentParser):
    """argparse's parser; with `raising`, a refusal raises FlagError instead of
    printing the usage and exiting, so the controller can say it in one line."""

    def __init__(self, *args, raising: bool = False, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.raising = raising

    def error(self, message: str):
        if self.raising:
            raise FlagError(message)
        super().error(message)


# --------------------------------------------------------------------------- common flags
def common_parser(description: str, default_batch: int | None, raising: bool = False,
                  prog: str | None = None) -> WorkloadParser:
    """The flags every workload shares; a workload adds its own on top."""
    p = WorkloadParser(prog=prog, description=description, raising=raising)
    p.add_argument("--steps", type=int, default=None,
                   help="measured steps after warm-up (default: whole epochs)")
    p.add_argument("--epochs", type=int, default=1, help="measured epochs when --steps is absent")
    p.add_argument("--warmup", type=int, default=5, help="untimed warm-up steps")
    p.add_argument("--batch-size", type=int, default=default_batch,
                   help="batch size per GPU" + ("" if default_batch else " (default: sized for the device)"))
    p.add_argument("--data", default="synthetic", help="'synthetic' or a dataset path")
    p.add_argument("--precision", choices=["fp32", "bf16", "fp16"], default="fp32")
    p.add_argument("--compile", action="store_true", help="wrap the model in torch.compile")
    p.add_argument("--profile", default=None, metavar="DIR",
                   help="after the measured window, profile a few more steps with torch.profiler "
                        "and write a TensorBoard trace to DIR (one file per rank)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--record-file", default=None,
                   help="where rank 0 writes the JSON result record")
    return p


def check_positive(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    for name in ("batch_size", "epochs", "warmup"):
        if getattr(args, name) is not None and getattr(args, name) < (0 if name == "warmup" else 1):
            parser.error(f"--{name.replace('_', '-')} must be positive")
    if args.steps is not None and args.steps < 1:
        parser.error("--steps must be at least 1")


# --------------------------------------------------------------------------- each workload
# (flags added to the common ones, then the checks that need no device)

def _mnist(p: WorkloadParser) -> Callable:
    return lambda args: None


RESNET_DEPTHS = (18, 34, 50, 101, 152)


def _resnet(p: WorkloadParser) -> Callable:
    p.add_argument("--depth", type=int, choices=RESNET_DEPTHS, default=50)
    p.add_argument("--width", type=int, default=64, help="channels of the stem (64 in ResNet-50)")
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--num-classes", type=int, default=1000)
    p.set_defaults(epochs=None, warmup=None)  # warm-up steps sized for the device too

    def check(args) -> None:
        if args.data != "synthetic":
            p.error("--data: resnet-ddp runs on synthetic ImageNet-shaped batches only")
        if args.image_size < 32 or args.width < 1:
            p.error("--image-size must be at least 32 and --width at least 1")
    return check


# The GPT-3 paper's model sizes (Brown et al. 2020, table 2.1) as --params names them:
# (layers, heads, width). 1.3B takes 32 heads of 64 (the paper lists 24 of 128, which do
# not divide its width of 2048). With the suite's 50,304-token vocabulary and 1024 tokens
# of context the counts come out near the names (125M: 124.4M parameters).
GPT_PRESETS: dict[str, tuple[int, int, int]] = {
    "125M": (12, 12, 768),   # GPT-2 small's shape, the default
    "350M": (24, 16, 1024),
    "760M": (24, 16, 1536),
    "1.3B": (24, 32, 2048),
    "2.7B": (32, 32, 2560),
    "6.7B": (32, 32, 4096),
}
GPT_DEFAULT_PRESET = "125M"


def _gpt(p: WorkloadParser) -> Callable:
    p.add_argument("--params", choices=list(GPT_PRESETS), default=None,
                   help="the model size by the GPT-3 paper's table: "
                        + ", ".join(f"{k} ({l} layers, {h} heads, {c} wide)"
                                    for k, (l, h, c) in GPT_PRESETS.items())
                        + f" (default: {GPT_DEFAULT_PRESET}); --n-layer, --n-head and --n-embd, "
                          "where given, win over it, each for the size it names")
    p.add_argument("--n-layer", type=int, default=None, help="transformer blocks (default: --params's)")
    p.add_argument("--n-head", type=int, default=None, help="attention heads (default: --params's)")
    p.add_argument("--n-embd", type=int, default=None, help="model width (default: --params's)")
    p.add_argument("--block-size", type=int, default=None,
                   help="tokens per sequence (default: 1024; 256 on a CPU)")
    p.add_argument("--vocab-size", type=int, default=50304)
    p.add_argument("--tf32", action="store_true",
                   help="let fp32 matmuls use TF32 tensor cores (MFU is then against the TF32 peak)")
    p.set_defaults(epochs=None, warmup=None)  # warm-up steps sized for the device too

    def check(args) -> None:
        if args.data != "synthetic":
            p.error(f"--data: {p.prog} runs on synthetic tokens only")
        resolve_gpt_size(args)
        sizes = [args.n_layer, args.n_head, args.n_embd, args.vocab_size]
        if min(sizes + ([args.block_size] if args.block_size is not None else [])) < 1:
            p.error("model sizes must be positive")
        if args.n_embd % args.n_head:
            p.error("--n-embd must be a multiple of --n-head")
    return check


def resolve_gpt_size(args: argparse.Namespace) -> None:
    """Fill --n-layer, --n-head and --n-embd left out from --params (or its default), and
    set args.params to the preset whose shape the model has, None where it has none:
    `--params 125M` and no flags at all then parse alike."""
    preset = GPT_PRESETS[args.params or GPT_DEFAULT_PRESET]
    for name, value in zip(("n_layer", "n_head", "n_embd"), preset):
        if getattr(args, name) is None:
            setattr(args, name, value)
    shape = (args.n_layer, args.n_head, args.n_embd)
    args.params = next((name for name, size in GPT_PRESETS.items() if size == shape), None)


def _gpt_fsdp(p: WorkloadParser) -> Callable:
    check = _gpt(p)
    p.add_argument("--activation-checkpointing", action="store_true",
                   help="recompute each transformer block's activations in the backward "
                        "(torch.utils.checkpoint) instead of keeping them")
    return check


MOVIELENS_SHAPES = ("ml-1m", "ml-25m", "ml-latest-small")


def _recsys(p: WorkloadParser) -> Callable:
    p.add_argument("--shape", choices=sorted(MOVIELENS_SHAPES), default="ml-1m",
                   help="the MovieLens release synthetic data imitates")
    p.add_argument("--embedding-dim", type=int, default=32)

    def check(args) -> None:
        if args.embedding_dim < 1:
            p.error("--embedding-dim must be positive")
    return check


ALLREDUCE_ITERS = 20  # nccl-tests' -n default
ALLREDUCE_MIN_BYTES = 1 << 10  # 1 KB
ALLREDUCE_MAX_BYTES = 1 << 30  # 1 GB
ELEMENT_BYTES = 4  # float32


def _allreduce(p: WorkloadParser) -> Callable:
    p.add_argument("--min-bytes", type=int, default=ALLREDUCE_MIN_BYTES)
    p.add_argument("--max-bytes", type=int, default=ALLREDUCE_MAX_BYTES)
    p.set_defaults(steps=ALLREDUCE_ITERS)

    def check(args) -> None:
        if args.min_bytes < ELEMENT_BYTES or args.max_bytes < args.min_bytes:
            p.error(f"need {ELEMENT_BYTES} <= --min-bytes <= --max-bytes")
        if args.data != "synthetic" or args.compile or args.precision != "fp32":
            p.error("allreduce takes no --data, --compile or --precision (it sends float32)")
    return check


# name -> (description, default batch per GPU (None: sized for the device), its flags)
WORKLOADS: dict[str, tuple[str, int | None, Callable]] = {
    "mnist-ddp": ("The pytorch/examples MNIST CNN trained with DistributedDataParallel.", 64, _mnist),
    "resnet-ddp": ("ResNet-50 in plain PyTorch trained with DDP on synthetic ImageNet-shaped batches.",
                   None, _resnet),
    "gpt-ddp": ("A GPT-2-small-shaped decoder LM (nanoGPT's) trained with DDP on synthetic tokens.",
                None, _gpt),
    "gpt-fsdp": ("The same GPT (--params 125M to 6.7B) trained with FSDP2 (fully_shard per block "
                 "and the root) on synthetic tokens.", None, _gpt_fsdp),
    "recsys-ddp": ("The MovieLens user/movie embedding model trained with DDP.", 1024, _recsys),
    "allreduce": ("torch.distributed all_reduce bandwidth over message sizes, as nccl-tests measures it.",
                  1, _allreduce),
}


def parse(workload: str, argv: list[str] | None = None, raising: bool = False) -> argparse.Namespace:
    """The workload's arguments parsed and checked (what needs no device). A refusal
    exits with argparse's usage message, or raises FlagError when `raising`."""
    description, batch, add = WORKLOADS[workload]
    parser = common_parser(description, batch, raising=raising, prog=workload)
    check = add(parser)
    args = parser.parse_args(argv)
    check_positive(args, parser)
    check(args)
    return args


def problem(workload: str, argv: list[str]) -> str | None:
    """What is wrong with `argv` for the workload, in one line; None when nothing is.
    An unknown flag comes with the known one it most resembles."""
    try:
        parse(workload, list(argv), raising=True)
    except FlagError as e:
        return _with_suggestion(workload, str(e))
    return None


def _with_suggestion(workload: str, message: str) -> str:
    prefix = "unrecognized arguments: "
    if not message.startswith(prefix):
        return message
    description, batch, add = WORKLOADS[workload]
    parser = common_parser(description, batch)
    add(parser)
    known = [flag for action in parser._actions for flag in action.option_strings]
    hints = []
    for word in message[len(prefix):].split():
        if word.startswith("-"):
            close = difflib.get_close_matches(word.split("=", 1)[0], known, n=1, cutoff=0.6)
            if close:
                hints.append(close[0])
    return message + (f" (did you mean {' '.join(hints)}?)" if hints else "")


# --------------------------------------------------------------------------- device sizes
# Defaults left None above, per device; a flag given wins. On a CPU the heavy
# workloads take a shape that fits in a CPU machine's memory and a run of about a
# minute (one thread per process, measured on a 2-core machine): ResNet-50 at 224x224
# takes about 8 GB per process at the GPU batch of 256 and 1.7 GB at 8, 2.6 s a
# step; GPT-2 small at 1 sequence of 256 tokens 3.2 GB, 3.5 s a step.
DEVICE_SIZES: dict[str, dict[str, dict[str, int]]] = {
    "resnet-ddp": {GPU: {"batch_size": 256, "warmup": 5},
                   CPU: {"batch_size": 8, "warmup": 2}},
    "gpt-ddp": {GPU: {"batch_size": 8, "block_size": 1024, "warmup": 5},
                CPU: {"batch_size": 1, "block_size": 256, "warmup": 2}},
}
DEVICE_SIZES["gpt-fsdp"] = DEVICE_SIZES["gpt-ddp"]  # the same model at the same sizes
CPU_DEFAULT_STEPS = {"resnet-ddp": 10, "gpt-ddp": 5, "gpt-fsdp": 5}  # without --steps on a CPU
# Without --steps or --epochs on a GPU (an epoch of ImageNet or OpenWebText is hours):
# the report derives epoch time from throughput.
GPU_DEFAULT_STEPS = {"resnet-ddp": 200, "gpt-ddp": 50, "gpt-fsdp": 50}


def size_for_device(workload: str, args: argparse.Namespace, device_type: str) -> str | None:
    """Fill the sizes left to the device; returns the record's `size`: 'full' on a
    GPU, 'cpu' where the CPU defaults filled any of them, 'given' where the flags
    named every one, None for a workload of one size everywhere."""
    sizes = DEVICE_SIZES.get(workload)
    if not sizes:
        return None  # one size on every device
    kind = GPU if device_type == "cuda" else CPU
    filled = False
    for name, value in sizes[kind].items():
        if getattr(args, name) is None:
            setattr(args, name, value)
            filled = filled or name != "warmup"
    if kind == CPU and filled and args.steps is None and args.epochs is None:
        args.steps = CPU_DEFAULT_STEPS[workload]
    return kind if filled else "given"


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in WORKLOADS:
        print(f"usage: flags.py {{{','.join(WORKLOADS)}}} [ARGS...]", file=sys.stderr)
        sys.exit(2)
    if {"-h", "--help"} & set(sys.argv[2:]):
        parse(sys.argv[1], ["--help"])  # prints the workload's flags and exits
    found = problem(sys.argv[1], sys.argv[2:])
    print(found or "ok")
    sys.exit(1 if found else 0)
