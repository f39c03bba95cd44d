"""Shared pieces of every workload in the suite: DDP set-up from torchrun's
environment, the common flags, honest step timing, profiling, and the result
record. The GPU sampling is in gpu_monitor.py beside it, the collective timeout
in pg_timeout.py; the workloads find both here (harness.GpuMonitor, ...).

This module is copied to remote machines next to the workloads, which have
torch but not gpubench: it must import nothing from gpubench. The record's
fields are listed in record_schema.py beside it.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import math
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
from torch.nn.parallel import DistributedDataParallel as DDP

import host_malloc
import metrics
import rank_trace
import record_schema
import step_parts
from flags import check_positive, common_parser  # noqa: F401  (the flags every workload shares)
from gpu_monitor import GpuMonitor
from pg_timeout import collective_timeout
from record_schema import ONE_PROCESS, REPLICATED, SCHEMA_VERSION


# --------------------------------------------------------------------------- DDP
@dataclass
class Dist:
    rank: int
    local_rank: int
    world_size: int
    device: torch.device
    backend: str
    malloc: str = host_malloc.DEFAULT  # the record's host_malloc: what malloc keeps of freed memory

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def setup_distributed() -> Dist:
    """Join the process group torchrun prepared (RANK, LOCAL_RANK, WORLD_SIZE).

    Runs without torchrun too, as a world of one: the same script serves
    `python w.py` and `torchrun --nproc_per_node=N w.py`. On a CPU, malloc keeps
    the memory each step frees for the next (host_malloc).
    """
    rank = int(os.environ.get("RANK", 0))
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    world_size = int(os.environ.get("WORLD_SIZE", 1))
    malloc = host_malloc.DEFAULT
    if torch.cuda.is_available():
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        backend = "nccl"
    else:
        device = torch.device("cpu")
        backend = "gloo"
        malloc = host_malloc.keep_freed_memory()
    if "MASTER_ADDR" not in os.environ:  # plain `python w.py`
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ.setdefault("MASTER_PORT", str(_free_port()))
    dist.init_process_group(backend=backend, rank=rank, world_size=world_size,
                            **({"device_id": device} if backend == "nccl" else {}),
                            **collective_timeout())
    return Dist(rank, local_rank, world_size, device, backend, malloc)


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


def grad_scaler(ctx: Dist, precision: str) -> torch.amp.GradScaler:
    """fp16 needs loss scaling to keep small gradients from flushing to zero;
    bf16 and fp32 do not (the scaler is then a pass-through)."""
    return torch.amp.GradScaler(ctx.device.type, enabled=precision == "fp16")


def replicate(ctx: Dist, model: torch.nn.Module) -> torch.nn.Module:
    """`model` wrapped in DDP, one replica per process; in a world of one, the model
    itself. One replica's gradients are already their mean, and DDP at world size 1
    still copies every gradient into its buckets and hands them to an all-reduce:
    3 to 6% of a CPU step (benchmarks/overhead.py parts). A single-device trainer
    (Lightning's, Accelerate's, the Hugging Face Trainer's) does not wrap one process
    either: the 1-GPU baseline of a speedup is the training loop alone."""
    if ctx.world_size == 1:
        return model
    return DDP(model, device_ids=[ctx.local_rank] if ctx.device.type == "cuda" else None)


def adamw(groups: list[dict], **settings) -> torch.optim.AdamW:
    """AdamW with its fused kernel wherever this torch has one for the parameters' device
    (CUDA; the CPU since torch 2.4): one update kernel for all the parameters instead of
    several per tensor, the optimizer's step 3.4x faster on a CPU and a whole GPT step
    10% (benchmarks/overhead.py parts gpt). Elsewhere the default implementation."""
    try:
        return torch.optim.AdamW([dict(g) for g in groups], fused=True, **settings)
    except RuntimeError:  # "`fused=True` requires ... supported devices"
        return torch.optim.AdamW([dict(g) for g in groups], **settings)


def optimizer_name(optimizer: torch.optim.Optimizer) -> str:
    """'AdamW (fused)', 'AdamW': the record's optimizer."""
    fused = any(g.get("fused") for g in optimizer.param_groups)
    return type(optimizer).__name__ + (" (fused)" if fused else "")


def fixed_shapes() -> dict:
    """Every batch has the same shape: let cuDNN time its convolution algorithms once,
    during the warm-up, and keep the fastest (as NVIDIA's reference trainers do).
    Returns the record field that says so."""
    torch.backends.cudnn.benchmark = True
    return {"cudnn_benchmark": True}


# --------------------------------------------------------------------------- timing
def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@dataclass
class StepTimer:
    """Times each measured step without a host sync per step.

    On CUDA each step is bracketed by events that are read once at the end;
    on CPU the clock is read directly. The whole window is bracketed by a
    device sync so its wall time covers all queued work. `parts` (StepParts)
    splits each step into its parts on the same clock, its hooks in place only
    while the window runs.
    """

    device: torch.device
    monitor: "GpuMonitor | None" = None  # samples the GPU while the window runs
    parts: "StepParts | None" = None  # the steps in parts (data, compute, communication)
    tracer: "rank_trace.RankTracer | None" = None  # the steps traced after the window (--trace)
    _events: list = field(default_factory=list)
    _cpu_times: list = field(default_factory=list)
    _window_start: float = 0.0
    window_seconds: float = 0.0

    def start_window(self) -> None:
        synchronize(self.device)
        if self.monitor is not None:
            self.monitor.start()
        if self.parts is not None:
            self.parts.start()
        self._window_start = time.perf_counter()

    @contextlib.contextmanager
    def step(self) -> Iterator[None]:
        parts = self.parts
        if self.device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            if parts is not None:
                parts.begin(start)
            yield
            end.record()
            self._events.append((start, end))
            if parts is not None:
                parts.end(end)
        else:
            t0 = time.perf_counter()
            if parts is not None:
                parts.begin(t0)
            yield
            t1 = time.perf_counter()
            self._cpu_times.append(t1 - t0)
            if parts is not None:
                parts.end(t1)  # after the step's clock: DDP's timing is read outside the step

    def stop_window(self) -> None:
        synchronize(self.device)
        self.window_seconds = time.perf_counter() - self._window_start
        if self.monitor is not None:
            self.monitor.stop()
        if self.parts is not None:
            self.parts.stop()

    def step_seconds(self) -> list[float]:
        if self._events:
            return [s.elapsed_time(e) / 1000.0 for s, e in self._events]
        return list(self._cpu_times)

    def step_parts(self) -> dict | None:
        """This rank's step in parts (step_parts.summarise: seconds adding up to its median
        step), or None where the parts were not measured."""
        if self.parts is None:
            return None
        seconds = self.step_seconds()
        median = statistics.median(seconds) if seconds else None
        return step_parts.summarise(self.parts.split(seconds), median)


PARTS_ENV = "GPUBENCH_STEP_PARTS"  # "off": the steps are not split (benchmarks/probe_overhead.py)
DDP_SAMPLES = 16  # on a GPU, DDP's timing is read at about this many steps of the window


class StepParts:
    """Each timed step in parts (step_parts.split_step), on the step timer's clock (CUDA
    events on a GPU, read after the window; the host's clock on a CPU): the data, from the
    step's start to the model's first forward (the batch's indexing and copy, zero_grad);
    the compute, from there to the end of the last optimizer step (the step's end where
    none ran), less the exposed communication; the exposed communication as DDP times it
    itself (backward_comm_time less backward_compute_comm_overlap_time of
    _get_ddp_logging_data(), read after each step outside its timing: the iteration DDP
    logged at this step's forward, the step before; on a CPU DDP is asked to time every
    iteration, on a GPU about DDP_SAMPLES of the window's, as its timing synchronises
    the device at each sampled forward, the others taking the median of the sampled);
    and the rest (the host after the optimizer, synchronisation). Its hooks (a forward
    pre-hook on the model, a global optimizer step post-hook) are in place only while
    the window runs."""

    def __init__(self, device: torch.device, model: torch.nn.Module, steps: int) -> None:
        self.device = device
        self.model = model
        inner = getattr(model, "_orig_mod", model)  # torch.compile's wrapper
        self.ddp = inner if isinstance(inner, DDP) else None
        self.cuda = device.type == "cuda"
        self.sample_rate = max(1, steps // DDP_SAMPLES) if self.cuda else 1
        self._handles: list = []
        self._step: list = [None, None, None]  # start, first forward, last optimizer end
        self._marks: list[tuple] = []  # (start, forward, optimizer end, end) a step
        self._comm: list[float | None] = []  # exposed communication a step, where sampled
        self._iteration = None  # the iteration DDP logged last
        self.ddp_failed = None  # why DDP's timing could not be read

    @classmethod
    def for_model(cls, model: torch.nn.Module | None, device: torch.device,
                  steps: int) -> "StepParts | None":
        if model is None or os.environ.get(PARTS_ENV) == "off":
            return None
        return cls(device, model, steps)

    def _mark(self):
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter()

    def _on_forward(self, module, args) -> None:
        if self._step[0] is not None and self._step[1] is None:
            self._step[1] = self._mark()

    def _on_optimizer(self, optimizer, args, kwargs) -> None:
        if self._step[0] is not None:
            self._step[2] = self._mark()

    def start(self) -> None:
        from torch.optim.optimizer import register_optimizer_step_post_hook

        self._handles = [self.model.register_forward_pre_hook(self._on_forward),
                         register_optimizer_step_post_hook(self._on_optimizer)]
        if self.ddp is not None:
            try:
                self.ddp._set_ddp_runtime_logging_sample_rate(self.sample_rate)
            except Exception as e:  # a DDP without its C++ reducer's logger
                self.ddp_failed = f"{type(e).__name__}: {e}"

    def begin(self, mark) -> None:
        self._step = [mark, None, None]

    def end(self, mark) -> None:
        start, forward, optimizer = self._step
        self._marks.append((start, forward, optimizer, mark))
        self._step = [None, None, None]
        self._comm.append(self._read_ddp())

    def _read_ddp(self) -> float | None:
        """The exposed communication DDP logged since the last read, or None."""
        if self.ddp is None or self.ddp_failed:
            return None
        try:
            iteration, exposed = step_parts.ddp_exposed(self.ddp._get_ddp_logging_data())
        except Exception as e:
            self.ddp_failed = f"{type(e).__name__}: {e}"
            return None
        if iteration is None or iteration == self._iteration:
            return None
        self._iteration = iteration
        return exposed

    def stop(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def _between(self, a, b) -> float:
        return a.elapsed_time(b) / 1000.0 if self.cuda else b - a

    def split(self, seconds: list[float]) -> list[dict]:
        """Each step's parts (after the window: its events are done)."""
        sampled = [c for c in self._comm if c is not None]
        typical = statistics.median(sampled) if sampled else 0.0
        steps = []
        for step, (start, forward, optimizer, end), comm in zip(seconds, self._marks, self._comm):
            if forward is None:  # no forward of the model seen: all of it is the rest
                steps.append(step_parts.split_step(step))
                continue
            steps.append(step_parts.split_step(
                step, data=self._between(start, forward),
                span=self._between(forward, optimizer if optimizer is not None else end),
                comm=typical if comm is None else comm))
        return steps

    def note(self, world_size: int) -> str:
        """How the parts were measured, in words (the record's step_parts_note)."""
        clock = "CUDA events" if self.cuda else "the host's clock"
        if self.ddp is not None and not self.ddp_failed:
            sampled = sum(c is not None for c in self._comm)
            comm = (f"exposed all-reduce from DDP's own timing at {sampled} of the "
                    f"{len(self._comm)} timed steps")
        elif self.ddp_failed:
            comm = f"exposed communication not read: DDP's timing failed ({self.ddp_failed})"
        elif world_size == 1:
            comm = "one process: no communication"
        else:
            comm = "not DDP: its communication (FSDP's gathers, reductions) is inside compute"
        return (f"{clock}; data: step start to the model's forward; compute: forward to the "
                f"optimizer step's end less the exposed communication; {comm}")


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[k]


class ProgressPrinter:
    """Rank 0's progress line (metrics.progress_line) at most once per EVERY_S.

    Called after each step, outside the step's own timing and with no device sync:
    between lines it costs one clock read; the rate is the host's view of the steps
    queued since the previous line, which is what a progress display needs."""

    EVERY_S = 0.5

    def __init__(self, samples_per_step: int, unit: str = "samples/s",
                 monitor: "GpuMonitor | None" = None, every_s: float | None = None,
                 write: Callable[[str], None] | None = None) -> None:
        self.samples_per_step = samples_per_step
        self.unit = unit
        self.monitor = monitor
        self.every_s = self.EVERY_S if every_s is None else every_s
        self._write = write or (lambda line: print(line, flush=True))
        self.begin("warmup", 0)

    def begin(self, phase: str, total: int) -> None:
        self.phase, self.total = phase, total
        self._start = self._last = time.perf_counter()
        self._last_step = 0

    def after_step(self, step: int) -> None:
        now = time.perf_counter()
        if now - self._last < self.every_s or now <= self._last:
            return
        rate = (step - self._last_step) * self.samples_per_step / (now - self._last)
        util = mem = None
        if self.monitor is not None and self.monitor.samples:
            util, mem = self.monitor.samples[-1][:2]
        self._write(metrics.progress_line(self.phase, step, self.total, now - self._start, rate,
                                          self.unit, util, mem))
        self._last, self._last_step = now, step


def run_window(timer: StepTimer, step_fn: Callable[[int], None], warmup: int, steps: int,
               progress: ProgressPrinter | None = None) -> None:
    """Run `warmup` untimed steps, then `steps` timed ones; `progress` (rank 0's,
    None elsewhere) hears of each step after it, outside the step's timing."""
    # Every object alive now (torch's modules, and TorchDynamo's that DDP imports: about
    # a million) is left out of the garbage collector from here on, so no collection in
    # a timed step walks them, nor the interpreter's last one at exit (a second a process).
    gc.freeze()
    if progress is not None:
        progress.begin("warmup", warmup)
    for i in range(warmup):
        step_fn(i)
        if progress is not None:
            progress.after_step(i + 1)
    timer.start_window()
    if progress is not None:
        progress.begin("measure", steps)
    for i in range(steps):
        with timer.step():
            step_fn(warmup + i)
        if progress is not None:
            progress.after_step(i + 1)
    timer.stop_window()


def max_across_ranks(value: float, device: torch.device) -> float:
    """The slowest rank decides the wall time of a synchronous data-parallel job."""
    t = torch.tensor([value], dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t.item())


def measured_steps(args: argparse.Namespace, steps_per_epoch: int,
                   default_steps: int | None = None) -> int:
    """How many steps the timed window holds: --steps if given, else --epochs whole
    epochs, else the workload's default (for workloads whose epoch is too long to time)."""
    if args.steps is not None:
        return args.steps
    if args.epochs is not None:
        return args.epochs * steps_per_epoch
    if default_steps is None:
        raise ValueError("a workload whose --epochs defaults to none must give default_steps")
    return default_steps


def measure(ctx: Dist, args: argparse.Namespace, step_fn: Callable[[int], None],
            steps: int, model: torch.nn.Module | None = None) -> StepTimer:
    """The measurement every workload makes: `args.warmup` untimed steps, then
    `steps` timed ones while the GPU is sampled, each split into its parts where the
    step calls `model` (StepParts; GPUBENCH_STEP_PARTS=off: not split), then (with
    --profile) a few more under torch.profiler, outside the timed window so they cost
    it nothing; likewise the steps every rank traces when gpubench asks (rank_trace).
    Rank 0 prints a progress line now and then (ProgressPrinter); no other rank does."""
    timer = StepTimer(ctx.device, monitor=GpuMonitor.for_device(ctx.device),
                      parts=StepParts.for_model(model, ctx.device, steps))
    run_window(timer, step_fn, args.warmup, steps, progress_for(ctx, args, timer.monitor))
    after = args.warmup + steps
    timer.tracer = trace_if_asked(ctx, step_fn, after)
    if timer.tracer is not None:
        after += rank_trace.PROFILER_WARMUP + timer.tracer.ask.steps
    if args.profile:
        profile_steps(ctx, step_fn, args.profile, first_step=after)
    return timer


def trace_if_asked(ctx: Dist, step_fn: Callable[[int], None],
                   first_step: int) -> "rank_trace.RankTracer | None":
    """The steps gpubench asked every rank to trace (GPUBENCH_TRACE_DIR), run after the
    timed window, so that no timed figure holds them; None where none were asked."""
    ask = rank_trace.asked()
    if ask is None:
        return None
    return rank_trace.trace_steps(step_fn, ask, ctx.rank, ctx.device.type == "cuda", first_step,
                                  lambda: synchronize(ctx.device))


def progress_for(ctx: Dist, args: argparse.Namespace,
                 monitor: "GpuMonitor | None" = None) -> ProgressPrinter | None:
    """Rank 0's progress printer (a sample is a batch element on every rank: the
    rate is the global one); None on every other rank, so one line comes per run,
    and None with GPUBENCH_PROGRESS=off (benchmarks/progress_overhead.py)."""
    if not ctx.is_main or os.environ.get("GPUBENCH_PROGRESS") == "off":
        return None
    return ProgressPrinter((args.batch_size or 1) * ctx.world_size, monitor=monitor)


# --------------------------------------------------------------------------- profiling
PROFILE_WAIT, PROFILE_WARMUP, PROFILE_ACTIVE = 1, 1, 3


def profile_steps(ctx: Dist, step_fn: Callable[[int], None], directory: str,
                  first_step: int) -> None:
    """Run a few steps under torch.profiler and write a trace TensorBoard opens
    (`tensorboard --logdir DIR`, PyTorch Profiler tab; or chrome://tracing)."""
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

    activities = [ProfilerActivity.CPU]
    if ctx.device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    total = PROFILE_WAIT + PROFILE_WARMUP + PROFILE_ACTIVE
    with profile(activities=activities,
                 schedule=schedule(wait=PROFILE_WAIT, warmup=PROFILE_WARMUP,
                                   active=PROFILE_ACTIVE, repeat=1),
                 on_trace_ready=tensorboard_trace_handler(directory, worker_name=f"rank{ctx.rank}"),
                 record_shapes=True, profile_memory=True) as prof:
        for i in range(total):
            step_fn(first_step + i)
            prof.step()
    synchronize(ctx.device)


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


def model_sizes(model: torch.nn.Module | None) -> dict:
    """The parameters of the (DDP-wrapped) model, each once (a tied weight is one), and
    the bytes of gradient DDP all-reduces each step: those that require grad, in their
    own dtype (fp32 under autocast too). Null without a model (a bandwidth test)."""
    if model is None:
        return {"params": None, "grad_bytes": None}
    params = list(model.parameters())
    return {"params": sum(p.numel() for p in params),
            "grad_bytes": sum(p.numel() * p.element_size() for p in params if p.requires_grad)}


def local_param_bytes(model: torch.nn.Module | None) -> int | None:
    """Bytes of the parameters this process holds, each once: a sharded parameter
    (FSDP2's DTensor) by its local shard, any other whole (a DDP replica). None
    without a model."""
    if model is None:
        return None
    return sum(t.numel() * t.element_size() for t in map(_held, model.parameters()))


def _held(t: torch.Tensor) -> torch.Tensor:
    return t.to_local() if hasattr(t, "to_local") else t


def train_state_bytes(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> int:
    """Bytes of what training keeps from step to step in this process: the parameters
    and their gradients (local shards under FSDP2) and the optimizer's states (AdamW's
    two moments and its step counters): the static part the memory model predicts
    (gpubench/predict/memory.py), with no activation or buffer of a step in it."""
    tensors = [_held(p) for p in model.parameters()]
    tensors += [_held(p.grad) for p in model.parameters() if p.grad is not None]
    tensors += [_held(v) for state in optimizer.state.values() for v in state.values()
                if isinstance(v, torch.Tensor)]
    return sum(t.numel() * t.element_size() for t in tensors)


def sharding_of(model: torch.nn.Module | None, world_size: int) -> str | None:
    """REPLICATED for a DDP-wrapped model (compiled or not), ONE_PROCESS for a
    model that replicate() left alone in a world of one; None otherwise: a workload
    that shards says how itself (build_record's `sharding`)."""
    inner = getattr(model, "_orig_mod", model)  # torch.compile's wrapper
    if isinstance(inner, DDP):
        return REPLICATED
    return ONE_PROCESS if model is not None and world_size == 1 else None


CUDA_ALLOCATED, CPU_RSS = "cuda allocated", "process peak RSS (CPU)"  # peak_memory_kind


def peak_rss_bytes() -> int | None:
    """This process's peak resident set so far (getrusage ru_maxrss: kilobytes on Linux,
    bytes on macOS); None where there is no getrusage."""
    try:
        import resource
    except ImportError:  # Windows
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


def peak_memory(ctx: Dist) -> dict:
    """The most memory any rank held so far (a collective: every rank calls it), and which
    memory is the figure to compare: on a GPU what torch allocated (peak_memory_bytes) and
    reserved from the driver; on a CPU the process's peak RSS, which holds Python, torch
    and its libraries besides the tensors, and what glibc's malloc keeps of memory freed
    (FSDP's per-step gather and reduce buffers: its saving shows in the RSS under
    MALLOC_MMAP_THRESHOLD_=65536). The peak RSS comes on a GPU too (host memory)."""
    cuda = ctx.device.type == "cuda"
    rss = peak_rss_bytes()
    figures = [-1 if rss is None else rss]
    if cuda:
        figures += [torch.cuda.max_memory_allocated(ctx.device), torch.cuda.max_memory_reserved(ctx.device)]
    t = torch.tensor(figures, dtype=torch.float64, device=ctx.device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    peaks = [int(v) for v in t.tolist()]
    memory = {"process_peak_rss_bytes": peaks[0] if peaks[0] >= 0 else None,
              "peak_reserved_bytes": peaks[2] if cuda else None,
              "peak_memory_kind": CUDA_ALLOCATED if cuda else CPU_RSS}
    if cuda:
        memory["peak_memory_bytes"] = peaks[1]
    return memory


def build_record(ctx: Dist, args: argparse.Namespace, *, workload: str, timer: StepTimer,
                 steps: int, samples_per_step: int, epoch_samples: int | None,
                 unit: str = "samples/s", model: torch.nn.Module | None = None,
                 sharding: str | None = None, extra: dict | None = None) -> dict:
    """The workload's half of a result record (its fields: record_schema.FIELDS, filled
    by the workload); gpubench adds provider, price and cost. `model` (as the step
    calls it) gives params, grad_bytes and the bytes of parameters each process holds;
    `sharding` says how they are spread (default: sharding_of's);
    `extra` holds the workload's own fields."""
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
        "host_malloc": ctx.malloc,
        "workload_argv": sys.argv[1:],
        **model_sizes(model),
        "sharding": sharding or sharding_of(model, ctx.world_size),
        "param_bytes_per_process": None if model is None else int(max_across_ranks(
            local_param_bytes(model), ctx.device)),
        **peak_memory(ctx),
    }
    if timer.monitor is not None:
        record.update(timer.monitor.summary_across_ranks(ctx))
    if timer.parts is not None:
        record.update(parts_across_ranks(ctx, timer))
    if args.profile:
        record["profile_dir"] = os.path.abspath(args.profile)
    if timer.tracer is not None:
        record["traced_steps"] = timer.tracer.traced_steps
    record.update(versions())
    record_schema.require_declared(record, record_schema.WORKLOAD)
    record.update(extra or {})
    return record


def parts_across_ranks(ctx: Dist, timer: StepTimer) -> dict:
    """The record's step in parts (a collective: every rank calls it): rank 0's parts and
    shares, and every rank's parts (one all_gather of four numbers each, NaN where a rank
    has none), with how they were measured."""
    mine = timer.step_parts()
    values = [math.nan] * len(step_parts.PARTS) if mine is None else [mine[p] for p in step_parts.PARTS]
    local = torch.tensor(values, dtype=torch.float64, device=ctx.device)
    gathered = [torch.empty_like(local) for _ in range(ctx.world_size)]
    dist.all_gather(gathered, local)
    by_rank = []
    for rank, row in enumerate(t.tolist() for t in gathered):
        if not any(math.isnan(v) for v in row):
            by_rank.append({"rank": rank, **step_parts.rounded(dict(zip(step_parts.PARTS, row)))})
    return {"step_parts": step_parts.rounded(mine), "step_shares": step_parts.rounded(step_parts.shares(mine)),
            "step_parts_by_rank": by_rank or None, "step_parts_note": timer.parts.note(ctx.world_size)}


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
    median = record.get("median_step_s")
    figure = (f"{record['throughput']:.1f} {record['throughput_unit']}"
              if record.get("throughput") is not None else "no throughput")
    print(f"{record['workload']}: world {record['world_size']} {figure} over {record['steps']} steps in "
          f"{record['wall_seconds']:.2f}s"
          + (f" (median step {median * 1000:.2f} ms)" if median is not None else ""),
          flush=True)
