"""Shared pieces of every workload in the suite: DDP set-up from torchrun's
environment, the common flags, honest step timing, and the result record.

This module is copied to remote machines next to the workloads, which have
torch but not gpubench: it must import nothing from gpubench.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator

import torch
import torch.distributed as dist

SCHEMA_VERSION = 1


# --------------------------------------------------------------------------- flags
def common_parser(description: str, default_batch: int) -> argparse.ArgumentParser:
    """The flags every workload shares; a workload adds its own on top."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--steps", type=int, default=None,
                   help="measured steps after warm-up (default: whole epochs)")
    p.add_argument("--epochs", type=int, default=1, help="measured epochs when --steps is absent")
    p.add_argument("--warmup", type=int, default=5, help="untimed warm-up steps")
    p.add_argument("--batch-size", type=int, default=default_batch, help="batch size per GPU")
    p.add_argument("--data", default="synthetic", help="'synthetic' or a dataset path")
    p.add_argument("--precision", choices=["fp32", "bf16", "fp16"], default="fp32")
    p.add_argument("--compile", action="store_true", help="wrap the model in torch.compile")
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


# --------------------------------------------------------------------------- DDP
@dataclass
class Dist:
    rank: int
    local_rank: int
    world_size: int
    device: torch.device
    backend: str

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def setup_distributed() -> Dist:
    """Join the process group torchrun prepared (RANK, LOCAL_RANK, WORLD_SIZE).

    Runs without torchrun too, as a world of one: the same script serves
    `python w.py` and `torchrun --nproc_per_node=N w.py`.
    """
    rank = int(os.environ.get("RANK", 0))
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    world_size = int(os.environ.get("WORLD_SIZE", 1))
    if torch.cuda.is_available():
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        backend = "nccl"
    else:
        device = torch.device("cpu")
        backend = "gloo"
    if "MASTER_ADDR" not in os.environ:  # plain `python w.py`
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ.setdefault("MASTER_PORT", str(_free_port()))
    dist.init_process_group(backend=backend, rank=rank, world_size=world_size,
                            **({"device_id": device} if backend == "nccl" else {}))
    return Dist(rank, local_rank, world_size, device, backend)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def teardown_distributed() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def autocast(ctx: Dist, precision: str):
    if precision == "fp32":
        return contextlib.nullcontext()
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return torch.autocast(device_type=ctx.device.type, dtype=dtype)


# --------------------------------------------------------------------------- timing
def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@dataclass
class StepTimer:
    """Times each measured step without a host sync per step.

    On CUDA each step is bracketed by events that are read once at the end;
    on CPU the clock is read directly. The whole window is bracketed by a
    device sync so its wall time covers all queued work.
    """

    device: torch.device
    _events: list = field(default_factory=list)
    _cpu_times: list = field(default_factory=list)
    _window_start: float = 0.0
    window_seconds: float = 0.0

    def start_window(self) -> None:
        synchronize(self.device)
        self._window_start = time.perf_counter()

    @contextlib.contextmanager
    def step(self) -> Iterator[None]:
        if self.device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            yield
            end.record()
            self._events.append((start, end))
        else:
            t0 = time.perf_counter()
            yield
            self._cpu_times.append(time.perf_counter() - t0)

    def stop_window(self) -> None:
        synchronize(self.device)
        self.window_seconds = time.perf_counter() - self._window_start

    def step_seconds(self) -> list[float]:
        if self._events:
            return [s.elapsed_time(e) / 1000.0 for s, e in self._events]
        return list(self._cpu_times)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[k]


def run_window(timer: StepTimer, step_fn: Callable[[int], None], warmup: int, steps: int) -> None:
    """Run `warmup` untimed steps, then `steps` timed ones."""
    for i in range(warmup):
        step_fn(i)
    timer.start_window()
    for i in range(steps):
        with timer.step():
            step_fn(warmup + i)
    timer.stop_window()


def max_across_ranks(value: float, device: torch.device) -> float:
    """The slowest rank decides the wall time of a synchronous data-parallel job."""
    t = torch.tensor([value], dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t.item())


# --------------------------------------------------------------------------- record
def versions() -> dict:
    info = {
        "torch_version": torch.__version__,
        "cuda_version": torch.version.cuda,
        "python_version": platform.python_version(),
        "driver_version": None,
    }
    if torch.cuda.is_available():
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True, text=True, timeout=10,
            ).stdout.strip().splitlines()
            info["driver_version"] = out[0] if out else None
    return info


def device_name(ctx: Dist) -> str:
    if ctx.device.type == "cuda":
        return torch.cuda.get_device_name(ctx.device)
    return "cpu"


def build_record(ctx: Dist, args: argparse.Namespace, *, workload: str, timer: StepTimer,
                 steps: int, samples_per_step: int, epoch_samples: int | None,
                 unit: str = "samples/s", extra: dict | None = None) -> dict:
    """The workload's half of a result record; gpubench adds provider, price and cost."""
    step_s = timer.step_seconds()
    wall = max_across_ranks(timer.window_seconds, ctx.device)
    samples = samples_per_step * steps
    record = {
        "schema_version": SCHEMA_VERSION,
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "workload": workload,
        "status": "ok",
        "error": None,
        "host": socket.gethostname(),
        "gpu_name": device_name(ctx),
        "device": ctx.device.type,
        "world_size": ctx.world_size,
        "nodes": int(os.environ.get("GROUP_WORLD_SIZE", os.environ.get("NNODES", 1)) or 1),
        "backend": ctx.backend,
        "precision": args.precision,
        "compiled": bool(args.compile),
        "batch_per_gpu": args.batch_size,
        "global_batch": args.batch_size * ctx.world_size,
        "warmup_steps": args.warmup,
        "steps": steps,
        "samples": samples,
        "epoch_samples": epoch_samples,
        "wall_seconds": wall,
        "median_step_s": statistics.median(step_s) if step_s else None,
        "p90_step_s": percentile(step_s, 0.9) if step_s else None,
        "throughput": samples / wall if wall > 0 else None,
        "throughput_unit": unit,
        "threads_per_process": torch.get_num_threads(),
        "workload_argv": sys.argv[1:],
    }
    if ctx.device.type == "cuda":
        record["peak_memory_bytes"] = torch.cuda.max_memory_allocated(ctx.device)
    record.update(versions())
    record.update(extra or {})
    return record


def emit_record(ctx: Dist, args: argparse.Namespace, record: dict) -> None:
    """Rank 0 writes the record where gpubench asked for it, and prints a summary."""
    if not ctx.is_main:
        return
    line = json.dumps(record, sort_keys=True)
    if args.record_file:
        with open(args.record_file, "w", encoding="utf-8") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())
    print(f"{record['workload']}: world {record['world_size']} {record['throughput']:.1f} "
          f"{record['throughput_unit']} over {record['steps']} steps in "
          f"{record['wall_seconds']:.2f}s (median step {record['median_step_s'] * 1000:.2f} ms)",
          flush=True)
