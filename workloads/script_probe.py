"""Run a user's script unchanged, and say what each of its processes really did.

    torchrun --nproc_per_node=N script_probe.py train.py --its --args

installs a few probes, then runs train.py as `__main__` (its `__file__`,
`sys.argv` and `sys.path[0]` as if torchrun had started it itself), and when the
process ends writes one line to stderr:

    GPUBENCH_PROBE {"rank": 0, "world": 2, "group": {"backend": "gloo", "size": 2}, ...}

with whether a process group was formed (its backend and size), which models
were wrapped in DDP or FSDP, whether a collective was called, which training
frameworks the script imported (Lightning, Accelerate: how they decided to run),
and the script's training steps ("steps"). gpubench reads these lines from the
run's output (gpubench.sweep.probe) and refuses, as a measurement, a run whose
processes did not form one group of the expected size, did not train together,
or took no training step.

A training step ends at each optimizer step (of the first optimizer that steps:
torch's global step hook), or, in a script with no optimizer step, at the end of
each backward pass through a model wrapped in DDP or FSDP. Its samples are the
batches drawn from a DataLoader with gradients on since the step before, where a
DataLoader fed it (a GAN's discriminator runs three times on one batch: one batch);
else dim 0 of the inputs of the model's forward calls with gradients on since the
step before (every micro-batch of a gradient accumulation), dim 1 for a time-major
model (an RNN without batch_first: (sequence, batch)); integer (batch, length)
inputs also count their tokens. The model is the first module with trainable parameters whose
forward runs with gradients on (the outermost: DDP's, FSDP's, the one Accelerate or
Lightning prepared; not a transform without parameters). The probe's hooks on it are left out of the model when it is pickled (torch.save
of the whole model, copy.deepcopy). On a GPU the device is synchronised at each step's end so that the
clock reads the step's work. Each process reports its own steps; the figures of
the steady state (after a warm-up of max(2, a tenth) of the steps) are its
median step time, spread and samples per step; gpubench sums the processes.

Each step is also split into its parts (step_parts.py), which the line's "steps" carry as
"parts" (seconds adding up to the median step), "shares" and "parts_note": the time its
DataLoaders' __next__ took inside the step (data), the communication of a DDP model's
backward that did not overlap its compute, as DDP times it itself (asked to time every
iteration: _set_ddp_runtime_logging_sample_rate(1)), the span from the model's first
forward to the optimizer step's end less those (compute: the host's clock, CUDA events on a
GPU), and what the step leaves (other). GPUBENCH_STEP_PARTS=off leaves them out.

With GPUBENCH_TRACE_DIR set (gpubench run --trace), each process traces a few of the
script's steps with torch.profiler (rank_trace.py beside it): from the end of its second
step, one unrecorded, then GPUBENCH_TRACE_STEPS recorded, into one gzipped Chrome trace per
rank; those steps, and the one after (which writes the file), are left out of its timing
("traced" says how many were recorded).

With `--max-steps N` before the script (gpubench run --max-steps), the process writes
its line and ends (exit status 0) once it has taken N steps, as a calibration does, its
DataLoader workers stopped and its process group destroyed; its steps' "ended_at" says so.

With GPUBENCH_CALIBRATE_STEPS=N (N >= 2) it is a calibration run instead (gpubench
predict and advise of a user's script): CUDA is emulated on this CPU before the script
starts (cuda_emulation.py, with the card of GPUBENCH_EMULATE_CUDA), and every operation
from the end of the script's first optimizer step to the end of its second is counted
on the meta device (step_count.py: FLOPs, bytes, kernels and views, peak live memory),
with the step's samples and tokens, the gradient bytes and parameters of its model, its
optimizer, its autocast dtype, whether it compiled, and, where a DataLoader shows it, the
samples of an epoch; after N optimizer steps (backward passes, in a script that makes
no optimizer) it writes the probe line with a "calibration" object and ends the process
(exit status 0) without finishing the script. With GPUBENCH_CALIBRATE_WORLD=GPUS,NODES
the script runs as rank 0 of that world: torchrun's variables say so, the emulated card
counts the node's GPUs and the fake process group has the world's size, so a script
that checks its GPUs or divides its work by the world does what it would do there.
A script that fails under the emulation has its failing line named ("unfollowed").
Without the variable none of this is installed.

Standard library and torch only: it is shipped with the suite to machines that
have no gpubench. Nothing here changes what the script computes: the probes only
note that a call happened, then make it.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import importlib.abc
import importlib.util
import json
import os
import runpy
import sys
import time
import weakref

PREFIX = "GPUBENCH_PROBE "
# This file's folder, read now: by the time the report is written (atexit, after the
# script ran as __main__) the module's own __file__ may be gone.
HERE = os.path.dirname(os.path.abspath(__file__))
CALIBRATE_ENV = "GPUBENCH_CALIBRATE_STEPS"
WORLD_ENV = "GPUBENCH_CALIBRATE_WORLD"  # "GPUS,NODES": the world a calibration's one process is rank 0 of
EMULATE_ENV = "GPUBENCH_EMULATE_CUDA"  # the card a calibration tells the script of (cuda_emulation.Card)
FLOP_STEP = 2  # the optimizer step counted: the first makes the optimizer's states and warms up
# After the counted step the feeding DataLoader's batches are fetched, with nothing counting,
# to time the host's side of a batch: at most this many, and for at most this long.
LOADER_DRAWS = 8
LOADER_SECONDS = 10.0

WARMUP_SHARE, WARMUP_LEAST = 0.1, 2  # steps left out of the steady state: compilation, caches
PARTS_ENV = "GPUBENCH_STEP_PARTS"  # "off": the steps are not split into parts (benchmarks)

_seen = {"group": None, "wrapped": [], "accelerate": None, "collective": False}
_calibration = None  # a _Calibration under GPUBENCH_CALIBRATE_STEPS, else None
_trace = None  # a _Trace under GPUBENCH_TRACE_DIR (run --trace), else None


def _note_group() -> None:
    """The default process group as it stands now, if there is one."""
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            backend = str(dist.get_backend())
            if backend == "undefined":  # one backend per device type: "cpu:gloo,cuda:nccl"
                backend = str(dist.get_backend_config())
            _seen["group"] = {"backend": backend, "size": dist.get_world_size()}
    except Exception:  # a probe must never be what fails the script
        pass


def _after(function, note):
    """`function`, noting what `note` reads once it has returned."""
    @functools.wraps(function)
    def probed(*args, **kwargs):
        result = function(*args, **kwargs)
        note()
        return result
    probed.__gpubench_probe__ = True
    return probed


def _before(function, note):
    @functools.wraps(function)
    def probed(*args, **kwargs):
        note()
        return function(*args, **kwargs)
    probed.__gpubench_probe__ = True
    return probed


def _wrapped(kind: str):
    def note(model=None) -> None:
        _note_group()
        _seen["wrapped"].append(kind)
        if _calibration is not None:
            _calibration.watch(model)
        elif kind == "DDP":
            _steps.watch_ddp(model)
    return note


def _after_wrap(function, note, of_result: bool):
    """`function` (a wrapper's __init__, or fully_shard), then `note` of the model it
    wrapped: the instance itself (`self`, DDP's or FSDP's), or what it returned."""
    @functools.wraps(function)
    def probed(*args, **kwargs):
        result = function(*args, **kwargs)
        note(result if of_result else (args[0] if args else None))
        return result
    probed.__gpubench_probe__ = True
    return probed


# The collectives that share work or gradients between processes (not barrier, nor
# the object collectives a script uses to agree on a seed or a path).
COLLECTIVES = ("all_reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter",
               "reduce_scatter_tensor", "broadcast", "reduce", "all_to_all", "all_to_all_single",
               "send", "recv", "isend", "irecv")
_collective_originals: list = []  # (module, name, original) until the first collective


def _note_collective() -> None:
    """The first collective: noted, and the originals put back (nothing more to learn)."""
    _seen["collective"] = True
    while _collective_originals:
        module, name, original = _collective_originals.pop()
        if getattr(getattr(module, name, None), "__gpubench_probe__", False):
            setattr(module, name, original)


def _patch_groups(module) -> None:
    """init_process_group and destroy_process_group, and the collectives until the
    first is called (torch.distributed re-exports distributed_c10d's: both names are
    patched, each once)."""
    for name, probe in (("init_process_group", _after), ("destroy_process_group", _before)):
        original = getattr(module, name, None)
        if original is not None and not getattr(original, "__gpubench_probe__", False):
            setattr(module, name, probe(original, _note_group))
    for name in COLLECTIVES if not _seen["collective"] else ():
        original = getattr(module, name, None)
        if original is not None and not getattr(original, "__gpubench_probe__", False):
            _collective_originals.append((module, name, original))
            setattr(module, name, _before(original, _note_collective))


def _patch_mesh(module) -> None:
    """A device mesh (tensor or pipeline parallelism over DTensor): its collectives are
    functional ones, which the patches above do not see."""
    original = getattr(module, "init_device_mesh", None)
    if original is not None and not getattr(original, "__gpubench_probe__", False):
        setattr(module, "init_device_mesh", _before(original, _note_collective))


def _patch_class(class_name: str, kind: str):
    """Note each construction of the class (a class is one object wherever it was
    imported from, so patching its __init__ catches every use)."""
    def patch(module) -> None:
        cls = getattr(module, class_name, None)
        if cls is not None and not getattr(cls.__init__, "__gpubench_probe__", False):
            cls.__init__ = _after_wrap(cls.__init__, _wrapped(kind), of_result=False)
    return patch


def _patch_fully_shard(module) -> None:
    original = getattr(module, "fully_shard", None)
    if original is not None and not getattr(original, "__gpubench_probe__", False):
        setattr(module, "fully_shard", _after_wrap(original, _wrapped("FSDP2"), of_result=True))


def _patch_fsdp(module) -> None:
    _patch_class("FullyShardedDataParallel", "FSDP")(module)
    _patch_fully_shard(module)


# --------------------------------------------------------------------------- steps
class _Steps:
    """The script's training steps, as they end (see the module's docstring)."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.torch = None  # the module, once the script has imported it
        self.model = None  # the module whose forward calls are counted
        self.hooks = []  # the global forward hook, until the model is found
        self.first_work = None  # perf_counter at the model's first forward with gradients
        self.optimizer = None  # id of the optimizer whose steps are the steps
        self.ends: list[float] = []  # perf_counter at each step's end
        self.samples: list[int] = []  # samples of each step
        self.tokens: list[int] = []
        self.pending = [0, 0]  # samples and tokens since the last optimizer step
        self.back_ends: list[float] = []  # the same, ended by backward passes (no optimizer)
        self.back_samples: list[int] = []
        self.back_tokens: list[int] = []
        self.back_pending = [0, 0]
        self.loaded = [0, 0]  # samples and tokens of the DataLoader batches drawn since the last step
        self.time_major = False  # the model reads (sequence, batch): an RNN without batch_first
        self.backwards = 0
        self.cuda = False  # CUDA is in use: synchronise before reading the clock
        self.dataset = None  # length of the dataset of the DataLoader iterated last
        self.epoch_samples = None  # ... as the first step ended: the one feeding the model
        self.iterators: list = []  # weakrefs to the DataLoaders' iterators
        self.max_steps = None  # --max-steps: the script is ended after this many steps
        self.ended_at = None   # ... and was, after this many
        # the steps in parts (step_parts.py): each step's, aligned with ends / back_ends
        self.parts: list = []
        self.back_parts: list = []
        self.waited = 0.0  # seconds in the DataLoaders' __next__ since the last step's end
        self.waited_in_span = 0.0  # ... of which after the step's first forward
        self.span = None  # the step's first forward with gradients: a clock reading or CUDA event
        self.ddp: list = []  # weakrefs to the DDP models made, whose timing is read at each step
        self.ddp_iterations: dict = {}  # id of a DDP model -> the iteration it logged last
        self.ddp_read = 0  # steps whose exposed communication DDP's timing gave
        self.ddp_failed = None  # why DDP's timing could not be read

    @property
    def measuring_parts(self) -> bool:
        """The steps are split into parts: not in a calibration, nor with GPUBENCH_STEP_PARTS=off."""
        return _calibration is None and os.environ.get(PARTS_ENV) != "off"

    # -- the model
    def install_finder(self, module) -> None:
        """Until a module's forward runs with gradients on, every forward call is looked
        at (torch's global hook); the first is the model, hooked alone from then on."""
        register = getattr(module, "register_module_forward_pre_hook", None)
        if register is not None and not self.hooks and self.model is None:
            self.hooks.append(register(self._find))

    def _find(self, model, args):
        try:
            torch = self.torch or sys.modules["torch"]
            self.torch = torch
            if self.model is not None or not torch.is_grad_enabled():
                return None
            if not any(p.requires_grad for p in model.parameters()):
                return None   # a transform (torchvision's Normalize) is no model being trained
            self.model = model
            for hook in self.hooks:
                hook.remove()
            self.hooks = []
            self.first_work = time.perf_counter()
            self._span_starts()
            self.time_major = _time_major(torch, model)
            _hooked.append((model, model.register_forward_pre_hook(self._forward, with_kwargs=True)))
            self._count(args, {})
            if _calibration is not None:
                _calibration.on_model(model)
        except Exception:
            pass
        return None

    def _forward(self, model, args, kwargs):
        try:
            if self.torch.is_grad_enabled():  # evaluation under no_grad is no step's
                self._count(args, kwargs)
                if self.span is None:
                    self._span_starts()
        except Exception:
            pass
        return None

    def _count(self, args, kwargs) -> None:
        samples, tokens = _inputs_of(self.torch, args, kwargs, self.time_major)
        self.pending[0] += samples
        self.pending[1] += tokens
        self.back_pending[0] += samples
        self.back_pending[1] += tokens

    def on_batch(self, batch, waited: float = 0.0) -> None:
        """A batch drawn from a DataLoader with gradients on: the step's data. A step's
        samples are its batches' where a DataLoader fed it (a GAN's discriminator runs on
        one batch three times), else its forward calls' (nanoGPT's micro-batches).
        `waited`: the seconds its __next__ took, the step's data part (any batch's)."""
        self.waited += waited
        if self.span is not None:
            self.waited_in_span += waited
        try:
            torch = self.torch or sys.modules["torch"]
            if not torch.is_grad_enabled():   # an evaluation's batches are no step's
                return
            samples, tokens = _inputs_of(torch, (batch,), {}, self.time_major)
            self.loaded[0] += samples
            self.loaded[1] += tokens
        except Exception:
            pass

    def _take(self, pending: list) -> tuple:
        """(samples, tokens) of the step ending now, the counts started afresh."""
        taken = tuple(self.loaded) if self.loaded[0] else tuple(pending)
        self.loaded = [0, 0]
        return taken

    # -- the ends of steps
    def _now(self) -> float:
        if not self.cuda:
            cuda = getattr(self.torch, "cuda", None)
            self.cuda = bool(cuda is not None and cuda.is_initialized())
        if self.cuda:
            self.torch.cuda.synchronize()
        return time.perf_counter()

    def on_optimizer_step(self, optimizer, args, kwargs) -> None:
        """torch's global post-hook of every optimizer's step: the first optimizer that
        steps ends the steps (a GAN's second, or a wrapper's inner, is the same step)."""
        try:
            if self.optimizer is None:
                self.optimizer = id(optimizer)
                self.torch = self.torch or sys.modules["torch"]
                self.epoch_samples = self.dataset
            elif self.optimizer != id(optimizer):
                return
            span = self._span_ends()
            self.ends.append(self._now())
            samples, tokens = self._take(self.pending)
            self.samples.append(samples)
            self.tokens.append(tokens)
            self.pending = [0, 0]
            self._step_parts(self.parts, self.ends, span)
        except Exception:
            return
        if _trace is not None:
            _trace.after_step("optimizer", len(self.ends), self.cuda)
        self._end_if_done(len(self.ends))

    def on_backward(self) -> None:
        """After each backward pass: a step's end while no optimizer has stepped."""
        try:
            self.backwards += 1
            if self.optimizer is not None or self.model is None:
                return
            span = self._span_ends()
            self.back_ends.append(self._now())
            samples, tokens = self._take(self.back_pending)
            self.back_samples.append(samples)
            self.back_tokens.append(tokens)
            self.back_pending = [0, 0]
            self._step_parts(self.back_parts, self.back_ends, span)
            if self.epoch_samples is None:
                self.epoch_samples = self.dataset
        except Exception:
            return
        if _trace is not None:
            _trace.after_step("backward", len(self.back_ends), self.cuda)
        self._end_if_done(len(self.back_ends))

    def _end_if_done(self, taken: int) -> None:
        """At --max-steps steps: the report, then the end of the process (exit status 0)."""
        if self.max_steps and _calibration is None and taken >= self.max_steps:
            self.ended_at = taken
            _end_process(self.iterators)

    # -- the steps in parts
    def watch_ddp(self, model) -> None:
        """A DDP model made: its own timing of the backward's communication is read at each
        step's end, DDP asked to time every iteration (by default the first ten, then one
        in a hundred; on a GPU its timing synchronises the device at each sampled forward,
        which the probe's synchronisation at the step's end has already done)."""
        if not self.measuring_parts or model is None:
            return
        try:
            model._set_ddp_runtime_logging_sample_rate(1)
            self.ddp.append(weakref.ref(model))
        except Exception as e:
            self.ddp_failed = f"{type(e).__name__}: {e}"

    def _mark(self):
        if self.cuda:
            event = self.torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter()

    def _span_starts(self) -> None:
        if self.measuring_parts:
            self.span = self._mark()

    def _span_ends(self):
        """The span from the step's first forward to now (before the step end's
        synchronisation): seconds on the host's clock, or (start, end) CUDA events to read
        once synchronised; None where no forward started one."""
        start, self.span = self.span, None
        if start is None or not self.measuring_parts:
            return None
        if isinstance(start, float):
            return time.perf_counter() - start
        return start, self._mark()

    def _exposed(self) -> float:
        """Seconds of the DDP models' backward communication that did not overlap their
        compute, in the iterations they logged since the last step's end (at each forward
        DDP logs the iteration before: the figure is the step before's)."""
        if not self.ddp or self.ddp_failed:
            return 0.0
        exposed, read = 0.0, False
        for ref in self.ddp:
            model = ref()
            if model is None:
                continue
            try:
                iteration, seconds = _step_parts().ddp_exposed(model._get_ddp_logging_data())
            except Exception as e:
                self.ddp_failed = f"{type(e).__name__}: {e}"
                return 0.0
            last = self.ddp_iterations.get(id(model))
            if iteration is None or iteration == last:
                continue
            self.ddp_iterations[id(model)] = iteration
            exposed += seconds * (iteration - last if last is not None and iteration > last else 1)
            read = True
        self.ddp_read += read
        return exposed

    def _step_parts(self, parts: list, ends: list, span) -> None:
        """The parts of the step that ended at ends[-1] (None for the first: its start is
        not seen), its data wait started afresh."""
        waited, in_span = self.waited, self.waited_in_span
        self.waited = self.waited_in_span = 0.0
        if not self.measuring_parts:
            return
        try:
            comm = self._exposed()
            if isinstance(span, tuple):
                span = span[0].elapsed_time(span[1]) / 1000.0
            parts.append(None if len(ends) < 2 else _step_parts().split_step(
                ends[-1] - ends[-2], data=waited, span=span, comm=comm, data_in_span=in_span))
        except Exception:  # the step stands without its parts
            parts.append(None)

    def parts_summary(self, parts: list, warmup: int, median) -> dict:
        """The probe line's parts: the timed steps' (step_parts.summarise), their shares, how."""
        if not self.measuring_parts:
            return {}
        timed = [p for p in parts[warmup:] if p is not None]
        module = _step_parts()
        found = module.summarise(timed, median)
        clock = "CUDA events" if self.cuda else "the host's clock"
        if self.ddp_failed:
            comm = f"exposed communication not read: DDP's timing failed ({self.ddp_failed})"
        elif self.ddp:
            comm = (f"exposed all-reduce from DDP's own timing at {self.ddp_read} steps (each "
                    "step's figure is the step before's: DDP logs an iteration at the next forward)")
        elif int(os.environ.get("WORLD_SIZE", "1") or 1) > 1:
            comm = "no DDP model: any communication is inside compute and other"
        else:
            comm = "one process: no communication"
        return {"parts": module.rounded(found), "shares": module.rounded(module.shares(found)),
                "parts_note": f"{clock}; data: the DataLoader's __next__ inside the step; compute: "
                              "the model's first forward to the optimizer step's end (the backward's "
                              f"where none steps) less the exposed communication; {comm}"}

    def on_loader(self, loader) -> None:
        try:
            self.dataset = int(len(loader.dataset))
        except Exception:  # an IterableDataset: no length
            pass

    def summary(self) -> dict:
        """What the report says of this process's steps."""
        if self.ends:
            kind, ends, samples, tokens = "optimizer step", self.ends, self.samples, self.tokens
        elif self.back_ends and _seen["wrapped"]:
            kind, ends, samples, tokens = "backward", self.back_ends, self.back_samples, self.back_tokens
        else:
            kind, ends, samples, tokens = None, [], [], []
        skip = _trace.skipped(kind.split()[0] if kind else None) if _trace is not None else set()
        figures = step_figures(ends, samples, tokens, skip)
        first = self.first_work if self.first_work is not None else (ends[0] if ends else None)
        parts = self.parts if kind == "optimizer step" else self.back_parts if kind else []
        parts = [None if j in skip else p for j, p in enumerate(parts)]
        return {"kind": kind, "backwards": self.backwards, **figures,
                **(_trace.summary() if _trace is not None else {}),
                **self.parts_summary(parts, figures["warmup"], figures["median_s"]),
                "startup_s": first - self.started if first is not None and kind else None,
                "wall_s": time.perf_counter() - self.started,
                "epoch_samples": self.epoch_samples, "ended_at": self.ended_at}


def step_figures(ends: list, samples: list, tokens: list, skip: set = frozenset()) -> dict:
    """The steady state of steps ending at `ends` (perf_counter seconds) with their
    samples and tokens: the first max(WARMUP_LEAST, a WARMUP_SHARE) steps left out
    (the first step's start is not seen: it is always among them), and those whose
    index is in `skip` (traced); the median step time, its 10th and 90th percentiles,
    and the mean samples and tokens of a step."""
    count = len(ends)
    warmup = min(count, max(WARMUP_LEAST, int(count * WARMUP_SHARE)))
    kept = [j for j in range(warmup, count) if j not in skip] if warmup else []
    times = [ends[j] - ends[j - 1] for j in kept]
    figures = {"count": count, "warmup": warmup, "timed": len(times),
               "median_s": None, "p10_s": None, "p90_s": None,
               "samples_per_step": None, "tokens_per_step": None}
    if not times:
        return figures
    timed_samples, timed_tokens = [samples[j] for j in kept], [tokens[j] for j in kept]
    ordered = sorted(times)
    figures.update(median_s=_percentile(ordered, 50), p10_s=_percentile(ordered, 10),
                   p90_s=_percentile(ordered, 90),
                   samples_per_step=sum(timed_samples) / len(timed_samples),
                   tokens_per_step=sum(timed_tokens) / len(timed_tokens))
    return figures


def _percentile(ordered: list, q: float) -> float:
    """numpy's default (linear) percentile of sorted values."""
    at = (len(ordered) - 1) * q / 100.0
    low = int(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


def _time_major(torch, model) -> bool:
    """Whether the model reads its inputs as (sequence, batch, ...): it holds an RNN, LSTM
    or GRU without batch_first (pytorch/examples' word_language_model)."""
    rnn = getattr(torch.nn.modules, "rnn", None)
    base = getattr(rnn, "RNNBase", None)
    if base is None:
        return False
    return any(isinstance(m, base) and not m.batch_first for m in model.modules())


def _inputs_of(torch, args, kwargs, time_major: bool = False) -> tuple:
    """(samples, tokens) of one forward call: dim 0 of its first tensor (one level into
    a dict, list or tuple: model(**batch), Lightning's (batch, index)), dim 1 where the
    model is time-major; tokens where that tensor is integer (batch, length): token ids."""
    for value in (*args, *kwargs.values()):
        if isinstance(value, dict):
            candidates = value.values()
        elif isinstance(value, (list, tuple)):
            candidates = value
        else:
            candidates = (value,)
        for candidate in candidates:
            if isinstance(candidate, torch.Tensor) and candidate.dim() > 0:
                shape = candidate.shape
                integer = not candidate.is_floating_point() and not candidate.is_complex()
                tokens = shape[0] * shape[1] if integer and len(shape) == 2 else 0
                batch = shape[1] if time_major and len(shape) >= 2 else shape[0]
                return int(batch), int(tokens)
    return 0, 0


def _step_parts():
    """step_parts.py beside this file, loaded under a name of gpubench's own: the script's
    sys.path and modules are its own (a module of its named step_parts stays its)."""
    return _beside("step_parts")


def _beside(stem: str):
    """The module `stem`.py of this file's folder, as _gpubench_<stem>."""
    name = f"_gpubench_{stem}"
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, f"{stem}.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # before it runs: its dataclasses look their module up
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
    return module


class _Trace:
    """run --trace of a user's script (rank_trace.py, asked through the environment): the
    profiler starts once the script has taken rank_trace.SCRIPT_AFTER steps and is stepped
    at each step's end until its file is written. The steps it ran over, and the one after
    (which paid for writing the file), are left out of the timed steps (`skipped`)."""

    def __init__(self, module, ask) -> None:
        self.module = module
        self.ask = ask
        self.tracer = None
        self.kind = None  # "optimizer" or "backward": the ends it follows
        self.first = None  # index in those ends of the first interval it touched
        self.error = None

    @classmethod
    def from_env(cls):
        if not os.environ.get("GPUBENCH_TRACE_DIR"):  # rank_trace.DIR_ENV, unloaded when not asked
            return None
        try:
            module = _beside("rank_trace")
            ask = module.asked()
        except Exception:
            return None
        return cls(module, ask) if ask is not None else None

    def after_step(self, kind: str, taken: int, cuda: bool) -> None:
        """A step of `kind` ended, the `taken`-th."""
        if self.error or (self.kind is not None and kind != self.kind):
            return
        try:
            if self.tracer is None:
                if taken >= self.module.SCRIPT_AFTER:
                    self.kind, self.first = kind, taken
                    self.tracer = self.module.RankTracer(self.ask, int(os.environ.get("RANK", "0") or 0),
                                                         cuda)
                    self.tracer.start()
                return
            self.tracer.step()
        except Exception as e:  # a trace must never be what fails the script
            self.error = f"{type(e).__name__}: {e}"

    def skipped(self, kind: str | None) -> set:
        """Indices of `kind`'s ends whose step the trace touched."""
        if self.tracer is None or kind != self.kind:
            return set()
        return set(range(self.first, self.first + self.tracer.calls + 1))

    def finish(self) -> None:
        """What was recorded, written (the script ended before the last traced step)."""
        try:
            if self.tracer is not None:
                self.tracer.finish()
        except Exception as e:
            self.error = self.error or f"{type(e).__name__}: {e}"

    def summary(self) -> dict:
        traced = self.tracer.traced_steps if self.tracer is not None else 0
        error = self.error or (self.tracer.error if self.tracer is not None else None)
        return {"traced": traced, "trace_error": error}


_steps = _Steps()
_hooked: list = []  # (model, handle) of the probe's hooks on a script's models


def _patch_optimizer(module) -> None:
    register = getattr(module, "register_optimizer_step_post_hook", None)
    if register is not None and not getattr(module, "__gpubench_probe__", False):
        module.__gpubench_probe__ = True
        register(_steps.on_optimizer_step)


def _patch_backward(module) -> None:
    """torch.autograd.backward, which Tensor.backward calls by that name."""
    original = getattr(module, "backward", None)
    if original is not None and not getattr(original, "__gpubench_probe__", False):
        setattr(module, "backward", _after(original, _steps.on_backward))


def _patch_loader(module) -> None:
    loader = getattr(module, "DataLoader", None)
    if loader is None or getattr(loader.__iter__, "__gpubench_probe__", False):
        return
    iterate = loader.__iter__

    @functools.wraps(iterate)
    def probed_iter(self):
        _steps.on_loader(self)
        iterator = iterate(self)
        _steps.iterators.append(weakref.ref(iterator))   # its workers stopped at --max-steps
        return iterator

    probed_iter.__gpubench_probe__ = True
    loader.__iter__ = probed_iter
    base = getattr(module, "_BaseDataLoaderIter", None)
    if base is not None:
        take = base.__next__

        @functools.wraps(take)
        def probed_next(self):
            started = time.perf_counter()
            batch = take(self)
            _steps.on_batch(batch, time.perf_counter() - started)
            return batch

        base.__next__ = probed_next


def _patch_getstate(module) -> None:
    """A model pickled (torch.save of the whole model, copy.deepcopy) leaves out the probe's
    hooks on it: they belong to this process, and their class to no module a reader has."""
    cls = getattr(module, "Module", None)
    if cls is None or getattr(cls.__dict__.get("__getstate__"), "__gpubench_probe__", False):
        return
    original = cls.__dict__.get("__getstate__")

    def probed_getstate(self):
        state = original(self) if original is not None else self.__dict__.copy()
        ours = {handle.id for model, handle in _hooked if model is self}
        if ours and isinstance(state, dict):
            state = dict(state)
            for name in ("_forward_pre_hooks", "_forward_pre_hooks_with_kwargs"):
                hooks = state.get(name)
                if isinstance(hooks, dict) and ours & set(hooks):
                    kept = type(hooks)() if not hasattr(hooks, "copy") else hooks.copy()
                    for key in ours:
                        kept.pop(key, None)
                    state[name] = kept
        return state

    probed_getstate.__gpubench_probe__ = True
    cls.__getstate__ = probed_getstate


# Each probe goes in when the script's own imports load the module it watches: a
# script pays nothing for a module it never imports (importing torch and FSDP up
# front cost 3.5 s a run on a 2-core machine).
PATCHES = {
    "torch.distributed.distributed_c10d": _patch_groups,
    "torch.distributed": _patch_groups,
    "torch.nn.parallel": _patch_class("DistributedDataParallel", "DDP"),
    "torch.distributed.fsdp": _patch_fsdp,
    "torch.distributed._composable.fsdp": _patch_fully_shard,
    "torch.distributed.device_mesh": _patch_mesh,
    "torch.nn.modules.module": lambda module: (_steps.install_finder(module), _patch_getstate(module)),
    "torch.optim.optimizer": _patch_optimizer,
    "torch.autograd": _patch_backward,
    "torch.utils.data.dataloader": _patch_loader,
}


class _Patching(importlib.abc.Loader):
    """A module's own loader, then its patch; anything else asked of it goes to the
    module's own loader (get_source, resources)."""

    def __init__(self, loader, patch) -> None:
        self.loader, self.patch = loader, patch

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:
        self.loader.exec_module(module)
        try:
            self.patch(module)
        except Exception:  # a probe must never be what fails the script
            pass

    def __getattr__(self, name):
        return getattr(self.loader, name)


class _AfterImport(importlib.abc.MetaPathFinder):
    """Finds a watched module as the other finders do, and has it patched once loaded."""

    def __init__(self) -> None:
        self.finding: set[str] = set()

    def find_spec(self, name, path, target=None):
        patch = PATCHES.get(name)
        if patch is None or name in self.finding:
            return None
        self.finding.add(name)
        try:
            spec = importlib.util.find_spec(name)
        except Exception:
            return None
        finally:
            self.finding.discard(name)
        if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _Patching(spec.loader, patch)
        return spec


def _install() -> None:
    sys.meta_path.insert(0, _AfterImport())
    for name, patch in PATCHES.items():   # loaded already (a calibration imports torch)
        if name in sys.modules:
            patch(sys.modules[name])
    if _calibration is not None:
        _calibration.install_loaders()
        _calibration.install_optimizers()
        _calibration.install_hooks()


def _frameworks() -> dict:
    """The training frameworks the script imported, and how they chose to run."""
    found = {}
    for name in ("lightning", "pytorch_lightning", "accelerate", "transformers", "deepspeed"):
        if name in sys.modules:
            found[name] = getattr(sys.modules[name], "__version__", "")
    state = sys.modules.get("accelerate.state")
    if state is not None:
        try:
            shared = getattr(state, "PartialState")._shared_state
            kind = shared.get("distributed_type")
            if kind is not None:
                found["accelerate_distributed_type"] = str(getattr(kind, "value", kind))
        except Exception:
            pass
    return found


def _end_process(iterators: list) -> None:
    """The report, then the end of the process: a script in the middle of its training
    cannot be unwound, so os._exit, after its process group is gone (torchrun would wait
    on a peer) and its DataLoader workers (`iterators`, weakrefs) are stopped."""
    _report()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    for ref in iterators:
        try:
            getattr(ref(), "_shutdown_workers", lambda: None)()
        except Exception:
            pass
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()
    except Exception:
        pass
    os._exit(0)


def _report() -> None:
    if _trace is not None:
        _trace.finish()
    if "torch.distributed" in sys.modules:   # never imported: no group, and nothing to import now
        _note_group()
    report = {
        "rank": int(os.environ.get("RANK", "0") or 0),
        "world": int(os.environ.get("WORLD_SIZE", "1") or 1),
        "group": _seen["group"],
        "wrapped": sorted(set(_seen["wrapped"])),
        "frameworks": _frameworks(),
        "collective": _seen["collective"],
    }
    try:
        report["steps"] = _steps.summary()
    except Exception:
        report["steps"] = None
    if _calibration is not None:
        try:
            report["calibration"] = _calibration.summary()
        except Exception:
            report["calibration"] = None
    try:
        sys.stderr.write(PREFIX + json.dumps(report, sort_keys=True) + "\n")
        sys.stderr.flush()
    except Exception:
        pass


# --------------------------------------------------------------------------- calibration
class _Calibration:
    """One training step of the script as a GPU would run it, for gpubench's performance
    model (gpubench/predict/calibrate.py): the script runs under CUDA's emulation
    (cuda_emulation.py: its "cuda" tensors on the meta device), and every operation from
    the end of its first optimizer step to the end of its second (FLOP_STEP) is counted
    (step_count.StepCounter): the micro-batches of a gradient accumulation, the loss, the
    backward, the optimizer, the data moved to the device and what is read back. Then it
    writes the probe line and ends the process."""

    def __init__(self, steps: int) -> None:
        self.steps = steps
        self.emulation = None
        self.models: list = []  # every model wrapped, for the parameters
        self.optimizer_steps = 0
        self.backward_steps = 0  # a script without an optimizer: its backward passes
        self.counter = None  # StepCounter while it counts
        self.count_started = 0.0
        self.counted = None  # what it counted, once the step is over
        self.optimizers: list[str] = []  # the optimizers' class names, as made
        self.datasets = {"largest": None, "feeding": None, "iterated": None}
        self.iterators: list = []  # weakrefs, so workers can be stopped at the early exit
        self.unfollowed = None  # the line saying which call the emulation could not follow
        self.count_seconds = None
        self.loader = None  # the feeding DataLoader's batches, timed after the counted step

    @classmethod
    def from_env(cls):
        try:
            steps = int(os.environ.get(CALIBRATE_ENV, "") or 0)
        except ValueError:
            return None
        return cls(max(steps, FLOP_STEP)) if steps > 0 else None

    def start(self, script: str) -> None:
        """CUDA's emulation, before the script imports anything, as rank 0 of the world
        asked: the script sees its node's devices and torchrun's variables of that world,
        and its process group (torch's fake one) has that size. A call the emulation cannot
        follow ends the calibration at once, its line reported (_refused)."""
        world, nodes = _world_asked(os.environ.get(WORLD_ENV))
        per_node = max(world // nodes, 1)
        os.environ.update({"WORLD_SIZE": str(world), "RANK": "0", "LOCAL_RANK": "0", "GROUP_RANK": "0",
                           "LOCAL_WORLD_SIZE": str(per_node), "ROLE_RANK": "0", "ROLE_WORLD_SIZE": str(world),
                           "GROUP_WORLD_SIZE": str(nodes)})
        # the emulation's modules first: a file of the script's folder may have one's name
        sys.path.insert(0, HERE)
        try:
            import cuda_emulation
        finally:
            sys.path.remove(HERE)
        sys.path.insert(1, HERE)

        self.emulation = cuda_emulation.install(cuda_emulation.Card.from_text(os.environ.get(EMULATE_ENV)),
                                                script, self._refused)

    def _refused(self, line: str) -> None:
        """Not followed: said now, the process ended (a script that caught the error would
        go on to its time limit, or count a step that is not the GPU's)."""
        self.unfollowed = line
        _end_process(self.iterators)

    def install_hooks(self) -> None:
        """After the probes' own: _steps' optimizer hook runs first."""
        import torch
        from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

        register_optimizer_step_pre_hook(self._before_optimizer)
        register_optimizer_step_post_hook(self._after_optimizer)
        torch.autograd.backward = _after(_before(torch.autograd.backward, lambda: self._phase("backward")),
                                         self._after_backward)

    def watch(self, model) -> None:
        try:
            import torch

            if isinstance(model, (list, tuple)):  # fully_shard([a, b])
                for one in model:
                    self.watch(one)
                return
            if isinstance(model, torch.nn.Module) and not any(m is model for m in self.models):
                self.models.append(model)
        except Exception:
            pass

    def on_model(self, model) -> None:
        """The module whose forward calls with gradients are the script's (_Steps found it)."""
        try:
            _hooked.append((model, model.register_forward_pre_hook(self._on_forward)))
            self._phase("forward")
        except Exception:
            pass

    def _on_forward(self, module, args) -> None:
        self._phase("forward")

    def _phase(self, phase: str) -> None:
        if self.counter is not None:
            self.counter.phase = phase

    def _before_optimizer(self, optimizer, args, kwargs) -> None:
        if _steps.optimizer in (None, id(optimizer)):
            self._phase("optimizer")

    def _after_optimizer(self, optimizer, args, kwargs) -> None:
        """Runs after _steps' own hook, registered before it: the step's samples are in."""
        try:
            if _steps.optimizer != id(optimizer):
                return
            self.optimizer_steps += 1
            self._step_ended(self.optimizer_steps)
        except Exception:
            pass

    def _after_backward(self) -> None:
        """A script that makes no optimizer (a hand-written update of its parameters):
        its step ends with each backward pass, as a measured run's does (_steps)."""
        try:
            if self.optimizers or _steps.optimizer is not None or _steps.model is None:
                return
            self.backward_steps += 1
            self._step_ended(self.backward_steps)
        except Exception:
            pass

    def _step_ended(self, taken: int) -> None:
        if taken == self.steps - 1:
            self._start_counting()
        elif taken == self.steps:
            self._stop_counting()
            self._time_loader()
            self._finish()
        self._phase("data")

    def _start_counting(self) -> None:
        import gc

        import torch
        import rank_count

        # (a DTensor is held as its local shard, which is a meta tensor of its own)
        held = [o for o in gc.get_objects() if isinstance(o, torch.Tensor) and o.is_meta
                and not hasattr(o, "_local_tensor")]
        self.datasets["feeding"] = self.datasets["iterated"]
        self.count_started = time.perf_counter()
        counter = rank_count.RankCounter(held, device_only=True)   # a mesh's rank: its shards
        counter.phase = "data"
        counter.__enter__()
        self.counter = counter

    def _leave_counter(self):
        """The counter, left where it can be left (a dispatch mode leaves the stack from
        its top, so one entered above it since, by the script, keeps it in); else None."""
        import torch.utils._python_dispatch as dispatch

        counter, self.counter = self.counter, None
        if counter is None or dispatch._get_current_dispatch_mode() is not counter:
            return None
        counter.__exit__(None, None, None)
        return counter

    def _stop_counting(self) -> None:
        counter = self._leave_counter()
        if counter is None:
            return
        self.count_seconds = time.perf_counter() - self.count_started
        rows: dict[tuple, int] = {}
        for phase, name, flops, moved, kind, math in counter.ops:
            key = (phase, name, kind, math, flops, moved)
            rows[key] = rows.get(key, 0) + 1
        self.counted = {"ops": [[p, n, k, c, f, b, m] for (p, n, k, m, f, b), c in rows.items()],
                        "peak_bytes": counter.peak_bytes, "held_bytes": counter.start_bytes,
                        "samples": _last(_steps.samples or _steps.back_samples),
                        "tokens": _last(_steps.tokens or _steps.back_tokens),
                        "collectives": counter.collectives}

    def _time_loader(self) -> None:
        """One core's time for a batch of the DataLoader iterated last (the one feeding the
        model): its next batches fetched in this process as one of its workers would (the
        sampler's indices, the dataset's items and transforms, the collation; one thread, as
        a worker has, where it has workers), the median kept. Timed so rather than as its workers hand batches over: on a machine
        of fewer cores than workers, that measures how they share the cores, not the work."""
        try:
            import torch
            import torch.utils.data.dataloader as dataloader   # its fetchers: what a worker runs

            iterator = next((it for it in (ref() for ref in reversed(self.iterators)) if it is not None), None)
            if iterator is None:
                return
            workers = int(getattr(iterator, "_num_workers", 0) or 0)
            # its workers stopped first: making batches ahead, they would share the cores timed
            getattr(iterator, "_shutdown_workers", lambda: None)()
            fetcher = dataloader._DatasetKind.create_fetcher(iterator._dataset_kind, iterator._dataset,
                                                             iterator._auto_collation, iterator._collate_fn,
                                                             iterator._drop_last)
            indices = iter(iterator._index_sampler)
            threads = torch.get_num_threads()
            if workers:
                torch.set_num_threads(1)   # as in a worker (torch's worker loop sets it)
            deadline = time.perf_counter() + LOADER_SECONDS
            times: list[float] = []
            # without the emulation's device map, whose dispatch the real run does not pay
            lifted = self.emulation.lifted() if self.emulation else contextlib.nullcontext()
            try:
                with lifted:
                    while len(times) < LOADER_DRAWS and time.perf_counter() < deadline:
                        started = time.perf_counter()
                        try:
                            fetcher.fetch(next(indices))
                        except StopIteration:
                            break
                        times.append(time.perf_counter() - started)
            finally:
                torch.set_num_threads(threads)
            times.sort()
            self.loader = {"workers": workers, "batches": len(times), "how": "one core",
                           "batch_seconds": times[len(times) // 2] if times else None}
        except Exception:   # a loader that cannot be fetched from again: the count stands without its time
            pass

    def failed(self, error: BaseException, script: str) -> None:
        if isinstance(error, SystemExit) and error.code in (None, 0):
            return
        try:
            self.unfollowed = self.emulation.unfollowed(error, script) if self.emulation else None
        except Exception:
            self.unfollowed = None

    def _finish(self) -> None:
        _end_process(self.iterators)

    def install_loaders(self) -> None:
        """Note each DataLoader's dataset length (its whole length, whatever a
        DistributedSampler gives this rank): the largest made, and the one iterated
        last before the counted step, which is the one feeding the model."""
        try:
            from torch.utils.data import DataLoader
        except Exception:
            return
        if getattr(DataLoader.__init__, "__gpubench_probe__", False):
            return
        init, iterate = DataLoader.__init__, DataLoader.__iter__

        @functools.wraps(init)
        def probed_init(loader, *args, **kwargs):
            init(loader, *args, **kwargs)
            size = _length(loader)
            if size is not None and size > (self.datasets["largest"] or 0):
                self.datasets["largest"] = size

        @functools.wraps(iterate)
        def probed_iter(loader):
            iterator = iterate(loader)
            try:
                self.datasets["iterated"] = _length(loader)
                self.iterators.append(weakref.ref(iterator))
            except Exception:
                pass
            return iterator

        probed_init.__gpubench_probe__ = probed_iter.__gpubench_probe__ = True
        DataLoader.__init__, DataLoader.__iter__ = probed_init, probed_iter

    def install_optimizers(self) -> None:
        """Note the class of each optimizer made (its states are memory: AdamW's two
        moments, SGD's momentum)."""
        try:
            import torch
        except Exception:
            return
        init = torch.optim.Optimizer.__init__
        if getattr(init, "__gpubench_probe__", False):
            return

        @functools.wraps(init)
        def probed_init(optimizer, *args, **kwargs):
            init(optimizer, *args, **kwargs)
            try:
                momentum = any(g.get("momentum") for g in optimizer.param_groups)
                name = type(optimizer).__name__.lower()
                self.optimizers.append(f"{name}-momentum" if name == "sgd" and momentum else name)
            except Exception:
                pass

        probed_init.__gpubench_probe__ = True
        torch.optim.Optimizer.__init__ = probed_init

    def summary(self) -> dict:
        if self.counter is not None:  # the script ended within the counted step: no whole step
            self._leave_counter()
        models = self.models or ([_steps.model] if _steps.model is not None else [])
        params, grad_bytes = _parameters(models)
        e = self.emulation
        return {"step": self.counted, "grad_bytes": grad_bytes, "params": params,
                "epoch_samples": self.datasets["feeding"] or self.datasets["largest"],
                "optimizer": self.optimizers[0] if self.optimizers else None,
                "steps_seen": self.optimizer_steps or self.backward_steps, "steps_asked": self.steps,
                "step_kind": "backward" if self.backward_steps and not self.optimizer_steps else "optimizer",
                "world": int(os.environ.get("WORLD_SIZE", "1") or 1),
                "nodes": _world_asked(os.environ.get(WORLD_ENV))[1],
                "data_parallel": bool(getattr(e, "data_parallel", False)),
                "fsdp_param_dtype": getattr(e, "fsdp_param_dtype", None),
                "fsdp_reduce_dtype": getattr(e, "fsdp_reduce_dtype", None),
                "card": e.card.name if e else None, "compiled": bool(e and e.compiled),
                "autocast": e.autocast if e else None, "fsdp": e.fsdp if e else None,
                "fsdp_units": e.fsdp_units if e else 0, "loader": self.loader,
                "count_seconds": self.count_seconds, "unfollowed": self.unfollowed,
                "assumed": e.assumed if e else [], "not_loaded": e.not_loaded if e else [],
                "meshes": e.meshes if e else []}


def _last(values: list):
    return values[-1] if values else None


def _world_asked(text: str | None) -> tuple[int, int]:
    """(GPUs, nodes) of WORLD_ENV's "GPUS,NODES"; (1, 1) where it says nothing usable."""
    try:
        world, nodes = (int(x) for x in (text or "").split(","))
    except ValueError:
        return 1, 1
    return (world, nodes) if world >= 1 and nodes >= 1 and world % nodes == 0 else (1, 1)


def _length(loader):
    try:
        return int(len(loader.dataset))
    except Exception:  # an IterableDataset: no length
        return None


def _parameters(models: list) -> tuple:
    """(parameters, bytes of the gradients DDP/FSDP reduce): each parameter once, however
    many wrapped models hold it (nested FSDP)."""
    if not models:
        return None, None
    seen, params, grad_bytes = set(), 0, 0
    for model in models:
        for p in model.parameters():
            if id(p) in seen:
                continue
            seen.add(id(p))
            local = getattr(p, "_local_tensor", p)   # a DTensor's: this rank's shard
            params += local.numel()
            if p.requires_grad:
                grad_bytes += local.numel() * local.element_size()
    return params, grad_bytes


def main(argv: list[str]) -> None:
    if argv[:1] == ["--max-steps"] and len(argv) > 1 and argv[1].isdigit():
        _steps.max_steps, argv = int(argv[1]), argv[2:]
    if not argv:
        sys.stderr.write("usage: script_probe.py [--max-steps N] SCRIPT [ARGS...]\n")
        raise SystemExit(2)
    script = argv[0]
    sys.argv = list(argv)
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    global _calibration, _trace
    _calibration = _Calibration.from_env()
    if _calibration is not None:
        _calibration.start(script)
    else:  # a calibration's steps are counted on the meta device: nothing to trace
        _trace = _Trace.from_env()
    _install()
    atexit.register(_report)
    try:
        runpy.run_path(script, run_name="__main__")
    except BaseException as error:
        if _calibration is not None:
            _calibration.failed(error, script)
        raise


if __name__ == "__main__":
    main(sys.argv[1:])
