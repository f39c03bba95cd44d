"""Measure the two ceilings of this device: the dense matrix-product rate and the
memory copy bandwidth.

    python benchmarks/device_ceilings.py                  # a table
    python benchmarks/device_ceilings.py --json           # one JSON object (workload_suite.py reads it)

A datasheet peak (MFU's denominator) is rarely reached even by a bare matrix
product, so a workload's model TFLOP/s is also worth comparing with what a
large matrix product achieves on the same card, measured the same way: random
inputs (never zeros: they run faster than real data), inputs rotated so that
no product finds its operands in cache, warm-up excluded, CUDA events read
after a device sync, the median of the repeats.

On CUDA the product is N x N x N in bf16 (fp16 where the GPU lacks bf16),
with N = 8192; the copy moves 1 GiB device to device, counted as bytes read
plus bytes written (nvbandwidth's and STREAM's convention). On a CPU the sizes
are small, and the figures check the plumbing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from typing import Callable

import torch

INPUT_SETS = 3  # rotated, so repeated products never reuse cached operands


@dataclass(frozen=True)
class Ceilings:
    device_name: str
    matmul_dtype: str       # bf16 | fp16 | fp32
    matmul_n: int
    matmul_tflops: float    # median over the repeats
    copy_bytes: int         # bytes read + bytes written per copy
    copy_gb_per_s: float    # median, GB = 1e9 bytes
    repeats: int
    warmup: int
    torch_version: str


def median_seconds(fn: Callable[[int], None], device: torch.device, warmup: int,
                   repeats: int) -> float:
    """The median time of fn(i) over `repeats` calls after `warmup` untimed ones."""
    for i in range(warmup):
        fn(i)
    times: list[float] = []
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                  for _ in range(repeats)]
        for i, (start, end) in enumerate(events):
            start.record()
            fn(warmup + i)
            end.record()
        torch.cuda.synchronize(device)
        times = [start.elapsed_time(end) / 1000.0 for start, end in events]
    else:
        for i in range(repeats):
            t0 = time.perf_counter()
            fn(warmup + i)
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def matmul_dtype(device: torch.device) -> torch.dtype:
    if device.type != "cuda":
        return torch.float32
    return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16


def measure(device: torch.device, n: int, copy_bytes: int, warmup: int, repeats: int) -> Ceilings:
    dtype = matmul_dtype(device)
    gen = torch.Generator(device=device).manual_seed(0)
    operands = [(torch.randn(n, n, device=device, dtype=dtype, generator=gen),
                 torch.randn(n, n, device=device, dtype=dtype, generator=gen))
                for _ in range(INPUT_SETS)]
    out = torch.empty(n, n, device=device, dtype=dtype)

    def product(i: int) -> None:
        a, b = operands[i % INPUT_SETS]
        torch.mm(a, b, out=out)

    matmul_s = median_seconds(product, device, warmup, repeats)
    if not torch.isfinite(out).all():
        raise RuntimeError("the matrix product gave non-finite values")
    del operands, out

    elements = copy_bytes // 2 // 4  # float32; half the bytes are read, half written
    src = torch.rand(elements, device=device, generator=gen)
    dst = torch.empty_like(src)
    copy_s = median_seconds(lambda i: dst.copy_(src), device, warmup, repeats)
    if not torch.equal(dst[-1024:], src[-1024:]):
        raise RuntimeError("the copy did not arrive")

    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    moved = 2 * elements * 4
    return Ceilings(
        device_name=name,
        matmul_dtype={torch.bfloat16: "bf16", torch.float16: "fp16"}.get(dtype, "fp32"),
        matmul_n=n,
        matmul_tflops=2 * n ** 3 / matmul_s / 1e12,
        copy_bytes=moved,
        copy_gb_per_s=moved / copy_s / 1e9,
        repeats=repeats,
        warmup=warmup,
        torch_version=torch.__version__,
    )


def rate(value: float) -> str:
    return f"{value:,.1f}" if value >= 10 else f"{value:.3f}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=None,
                   help="matrix size (default: 8192 on a GPU, 1024 on a CPU)")
    p.add_argument("--copy-mib", type=int, default=None,
                   help="MiB moved per copy, read plus written (default: 1024 on a GPU, 128 on a CPU)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    for flag in ("n", "copy_mib", "repeats"):
        value = getattr(args, flag)
        if value is not None and value < 1:
            p.error(f"--{flag.replace('_', '-')} must be at least 1")
    if args.warmup < 0:
        p.error("--warmup must not be negative")

    on_gpu = torch.cuda.is_available()
    device = torch.device("cuda", 0) if on_gpu else torch.device("cpu")
    n = args.n or (8192 if on_gpu else 1024)
    copy_mib = args.copy_mib or (1024 if on_gpu else 128)
    c = measure(device, n, copy_mib << 20, args.warmup, args.repeats)
    if args.json:
        print(json.dumps(asdict(c), sort_keys=True))
    else:
        print(f"{c.device_name}: {c.matmul_dtype} {n}x{n}x{n} matrix product "
              f"{rate(c.matmul_tflops)} TFLOP/s; copy {rate(c.copy_gb_per_s)} GB/s "
              f"({c.copy_bytes / 2**20:,.0f} MiB read + written); medians of {c.repeats}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
