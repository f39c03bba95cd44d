"""torch.distributed all_reduce bandwidth over message sizes from 1 KB to 1 GB,
measured and reported the way nccl-tests' all_reduce_perf does.

    python workloads/allreduce.py                                        # one process
    torchrun --standalone --nproc_per_node=8 workloads/allreduce.py      # 8 GPUs, 1K..1G
    torchrun --nnodes=2 --nproc_per_node=8 --rdzv_backend=c10d \\
        --rdzv_endpoint=HEAD:29500 workloads/allreduce.py                # across 2 nodes
    torchrun --standalone --nproc_per_node=2 workloads/allreduce.py --max-bytes 65536 --steps 3

Compare with `all_reduce_perf -b 1K -e 1G -f 2 -g 1` (one process per GPU) on the
same machine: same sizes (float32 elements, doubling), same columns (size,
time_us, algbw, busbw) and formulas (metrics.busbw: GB = 1e9, busbw = algbw *
2(n-1)/n). For each size: --warmup untimed all_reduces, then --steps timed ones
between two device synchronisations; the time of one is the loop's time over
--steps, averaged across the ranks. Sizes above what the device can hold are
left out. The record holds the whole curve and the peak; its throughput is
the peak algbw (GB/s). On one process an all-reduce moves nothing: the curve
keeps its times, and the record no bandwidth (null figures, `no_bandwidth`
saying why).
"""

from __future__ import annotations

import os
import sys
import time

import torch
import torch.distributed as dist

import flags
import harness
import metrics
import rank_trace

WORKLOAD = "allreduce"
DEFAULT_MIN_BYTES = flags.ALLREDUCE_MIN_BYTES  # 1 KB
DEFAULT_MAX_BYTES = flags.ALLREDUCE_MAX_BYTES  # 1 GB
DEFAULT_ITERS = flags.ALLREDUCE_ITERS          # nccl-tests' -n default
SIZE_FACTOR = 2               # nccl-tests' -f 2
DTYPE, DTYPE_BYTES = torch.float32, 4
MEMORY_SHARE = 0.5            # at most this share of the free memory goes to the buffer
NOTHING_MOVED = "one process: an all-reduce moves nothing; no bandwidth to measure"
BANDWIDTHS = ("peak_busbw", "peak_busbw_size", "peak_algbw", "largest_size_busbw",
              "largest_size_algbw", "throughput", "throughput_metric")


def message_sizes(min_bytes: int, max_bytes: int, cap_bytes: int) -> list[int]:
    """min, 2*min, 4*min ... up to max and to what memory allows, whole elements."""
    sizes, size = [], max(DTYPE_BYTES, min_bytes - min_bytes % DTYPE_BYTES)
    while size <= min(max_bytes, cap_bytes):
        sizes.append(size)
        size *= SIZE_FACTOR
    return sizes


def memory_cap(ctx: harness.Dist) -> int:
    """Bytes one buffer may take on this rank, the same on all ranks (the smallest)."""
    if ctx.device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(ctx.device)
        local_procs = 1
    else:
        free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        local_procs = int(os.environ.get("LOCAL_WORLD_SIZE", 1))
    cap = torch.tensor([free * MEMORY_SHARE / local_procs], dtype=torch.float64, device=ctx.device)
    dist.all_reduce(cap, op=dist.ReduceOp.MIN)
    return int(cap.item())


class Bench:
    """Times all_reduce at one message size after another."""

    def __init__(self, ctx: harness.Dist, warmup: int, iters: int) -> None:
        self.ctx = ctx
        self.warmup = warmup
        self.iters = iters

    def time_one(self, size: int) -> dict:
        ctx = self.ctx
        buf = torch.zeros(size // DTYPE_BYTES, dtype=DTYPE, device=ctx.device)
        for _ in range(self.warmup):
            dist.all_reduce(buf)
        dist.barrier()
        harness.synchronize(ctx.device)
        start = time.perf_counter()
        for _ in range(self.iters):
            dist.all_reduce(buf)
        harness.synchronize(ctx.device)
        seconds = (time.perf_counter() - start) / self.iters
        # nccl-tests averages the time across ranks before dividing
        t = torch.tensor([seconds], dtype=torch.float64, device=ctx.device)
        dist.all_reduce(t)
        seconds = t.item() / ctx.world_size
        del buf
        moved = ctx.world_size > 1     # alone, size / time would be the speed of a no-op
        return {"size": size, "count": size // DTYPE_BYTES, "type": "float", "redop": "sum",
                "time_us": seconds * 1e6,
                "algbw": metrics.algbw(size, seconds) if moved else None,
                "busbw": metrics.busbw(size, seconds, ctx.world_size, "all_reduce") if moved else None}


def peaked(curve: list[dict]) -> dict:
    return max(curve, key=lambda row: (row["busbw"], row["algbw"]))


def bandwidths(curve: list[dict], world_size: int) -> dict:
    """The record's bandwidth fields; on one process none, and why."""
    if world_size == 1:
        return {**dict.fromkeys(BANDWIDTHS), "no_bandwidth": NOTHING_MOVED}
    peak = peaked(curve)
    return {"peak_busbw": peak["busbw"], "peak_busbw_size": peak["size"],
            "peak_algbw": max(row["algbw"] for row in curve),
            "largest_size_busbw": curve[-1]["busbw"], "largest_size_algbw": curve[-1]["algbw"],
            "throughput": max(row["algbw"] for row in curve), "throughput_metric": "peak algbw"}


def main(argv: list[str] | None = None) -> int:
    args = flags.parse(WORKLOAD, argv)
    ctx = harness.setup_distributed()
    try:
        cap = memory_cap(ctx)
        sizes = message_sizes(args.min_bytes, args.max_bytes, cap)
        if not sizes:
            print(f"error: not even {args.min_bytes} bytes fit in memory", file=sys.stderr)
            return 2
        bench = Bench(ctx, args.warmup, args.steps)
        timer = harness.StepTimer(ctx.device, monitor=harness.GpuMonitor.for_device(ctx.device))
        timer.start_window()
        curve = [bench.time_one(size) for size in sizes]
        timer.stop_window()
        if args.profile or rank_trace.asked():  # a step: one all-reduce of the largest size
            buf = torch.zeros(sizes[-1] // DTYPE_BYTES, dtype=DTYPE, device=ctx.device)
            timer.tracer = harness.trace_if_asked(ctx, lambda i: dist.all_reduce(buf), 0)
            if args.profile:
                harness.profile_steps(ctx, lambda i: dist.all_reduce(buf), args.profile, first_step=0)
            del buf

        record = harness.build_record(
            ctx, args, workload=WORKLOAD, timer=timer, steps=args.steps,
            samples_per_step=0, epoch_samples=None, unit="GB/s",
            extra={"collective": "all_reduce", "dtype": "float32",
                   "busbw_factor": metrics.busbw_factor("all_reduce", ctx.world_size),
                   "min_bytes": sizes[0], "max_bytes": sizes[-1], "memory_cap_bytes": cap,
                   "iters_per_size": args.steps, "batch_per_gpu": None, "global_batch": None,
                   "samples": None, "curve": curve, **bandwidths(curve, ctx.world_size)},
        )
        harness.emit_record(ctx, args, record)
        if ctx.is_main and ctx.world_size == 1:
            print(NOTHING_MOVED, flush=True)
        elif ctx.is_main:
            peak = peaked(curve)
            print(f"{'size':>12} {'count':>12} {'time_us':>10} {'algbw':>8} {'busbw':>8}")
            for row in curve:
                print(f"{row['size']:>12} {row['count']:>12} {row['time_us']:>10.1f} "
                      f"{row['algbw']:>8.2f} {row['busbw']:>8.2f}")
            print(f"peak busbw {peak['busbw']:.2f} GB/s at {peak['size']} bytes "
                  f"({ctx.world_size} ranks, {ctx.backend})", flush=True)
        return 0
    finally:
        harness.teardown_distributed()


if __name__ == "__main__":
    sys.exit(main())
