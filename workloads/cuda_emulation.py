"""CUDA as a script written for it sees it, on a machine without a GPU: the calibration
run's stage (workloads/script_probe.py under GPUBENCH_CALIBRATE_STEPS), so that a
script that hard-codes CUDA and NCCL runs unchanged while its step is counted.

    GPUBENCH_EMULATE_CUDA='{"name": "NVIDIA H200", "memory_bytes": 150754820096,
                            "capability": [9, 0], "count": 1}'   # Card's defaults

What the script is told and where its work goes:
- torch.cuda answers as the card would: available, its count, name, properties and
  capability, bf16 support; set_device, synchronize, empty_cache, seeds, streams and
  events do nothing (an event's elapsed time is the host's clock between its records);
  the memory counters read 0.
- a tensor or module put on "cuda" is put on the meta device (shapes and dtypes, no
  arithmetic), and reports itself as cuda:0; torch's foreach and fused optimizer
  kernels take meta tensors as they take CUDA ones.
- a value read from such a tensor (item, tolist, bool, float, format, cpu, numpy) reads
  as zeros: a loss to log, a norm to print. Control flow on a value the GPU computed
  (stop when the loss is below x) follows zeros.
- NCCL is answered by torch's fake process group (every collective a no-op, the world
  the launcher gave); DistributedDataParallel and FSDP wrap the model without copying
  or reducing anything (the step model adds their communication); fully_shard leaves
  the module as it is and is counted as a unit.
- CUDA autocast applies its policy to meta tensors (step_count.MetaAutocast); pinned
  memory is the tensor itself; torch.compile returns what it was given, and is noted.

A call that none of this covers fails as it would on a CPU-only torch; the probe names
it (Emulation.unfollowed). Standard library and torch only.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import time
import types
from dataclasses import dataclass

import torch
from torch.overrides import TorchFunctionMode

import step_count

CUDA = torch.device("cuda", 0)
META = torch.device("meta")
# Tensor methods that read a value off the device; on a meta tensor they read zeros.
VALUE_READS = ("item", "tolist", "__bool__", "__int__", "__float__", "__index__", "numpy", "cpu",
               "__format__", "__array__")


@dataclass(frozen=True)
class Card:
    """The card the script is told it runs on. What a script may branch on (bf16 support,
    flash attention) every card of compute capability 8.0 or newer answers alike."""

    name: str = "NVIDIA H200"
    memory_bytes: int = 150_754_820_096
    capability: tuple[int, int] = (9, 0)
    count: int = 1
    multiprocessors: int = 132

    @classmethod
    def from_text(cls, text: str | None) -> "Card":
        """The card a JSON object names (script_probe.EMULATE_ENV's value); the defaults
        where there is none or it cannot be read."""
        if not text:
            return cls()
        try:
            found = json.loads(text)
            return cls(str(found.get("name", cls.name)), int(found.get("memory_bytes", cls.memory_bytes)),
                       tuple(int(x) for x in found.get("capability", cls.capability))[:2],
                       max(1, int(found.get("count", 1))), int(found.get("multiprocessors", cls.multiprocessors)))
        except (ValueError, TypeError, AttributeError):
            return cls()


def _is_cuda(device) -> bool:
    if isinstance(device, torch.device):
        return device.type == "cuda"
    if isinstance(device, str):
        return device.split(":")[0] == "cuda"
    return isinstance(device, int) and not isinstance(device, bool)  # .to(0): device index 0


def _on_meta(value) -> bool:
    return isinstance(value, torch.Tensor) and value.is_meta


def _zeros_like_on_cpu(t: torch.Tensor) -> torch.Tensor:
    return torch.zeros(t.shape, dtype=t.dtype)


class CudaOnMeta(TorchFunctionMode):
    """The device map: cuda -> meta for every tensor made or moved; meta tensors say
    cuda:0; a value read off one reads zeros."""

    def __torch_function__(self, func, types_, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        owner = getattr(func, "__self__", None)
        if owner is torch.Tensor.device and args and _on_meta(args[0]):
            return CUDA
        if owner is torch.Tensor.is_cuda and args and _on_meta(args[0]):
            return True
        name = getattr(func, "__name__", "")
        if args and _on_meta(args[0]) and name in VALUE_READS and getattr(torch.Tensor, name, None) is func:
            return _read(name, args[0], args[1:])
        if func is torch.Tensor.cuda:
            return args[0].to(META)
        if func in (torch.Tensor.pin_memory,):
            return args[0]
        if func is torch.Tensor.record_stream:
            return None
        if "device" in kwargs and _is_cuda(kwargs["device"]):
            kwargs["device"] = META
        if func is torch.Tensor.to:
            if args and _on_meta(args[0]) and _to_cpu(args[1:], kwargs):
                return _zeros_like_on_cpu(args[0]).to(*args[1:], **kwargs)
            args = tuple(META if i and _is_cuda(a) else a for i, a in enumerate(args))
            kwargs.pop("non_blocking", None)
        return func(*args, **kwargs)


def _to_cpu(args, kwargs) -> bool:
    device = kwargs.get("device", args[0] if args else None)
    return (isinstance(device, torch.device) and device.type == "cpu") or device == "cpu"


def _read(name: str, t: torch.Tensor, rest):
    zeros = _zeros_like_on_cpu(t)
    if name == "__format__":
        return format(zeros.item() if zeros.dim() == 0 else zeros, *rest)
    return getattr(zeros, name)(*rest)


class _Event:
    """torch.cuda.Event: the host's clock at each record."""

    def __init__(self, *args, **kwargs) -> None:
        self.at = None

    def record(self, stream=None) -> None:
        self.at = time.perf_counter()

    def synchronize(self) -> None:
        pass

    def wait(self, stream=None) -> None:
        pass

    def query(self) -> bool:
        return True

    def elapsed_time(self, end: "_Event") -> float:
        return ((end.at or 0.0) - (self.at or 0.0)) * 1e3


class _Stream:
    def __init__(self, *args, **kwargs) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def wait_stream(self, other) -> None:
        pass

    def wait_event(self, event) -> None:
        pass

    def record_event(self, event=None):
        event = event or _Event()
        event.record()
        return event

    def query(self) -> bool:
        return True

    def is_capturing(self) -> bool:   # the optimizers' CUDA-graph check
        return False


def _nothing():
    """A function that does nothing: one each, as torch._dynamo's rules map each torch
    function by identity."""
    def nothing(*args, **kwargs):
        return None
    return nothing


class Emulation:
    """What the script was told and did that the step model needs: whether it compiled,
    the autocast dtype its steps ran under, FSDP's units."""

    def __init__(self, card: Card) -> None:
        self.card = card
        self.compiled = False
        self.autocast: str | None = None   # "bf16" or "fp16": CUDA autocast was entered
        self.fsdp_units = 0
        self.fsdp = None                    # "FSDP" or "FSDP2" where the model was sharded
        self.mode = CudaOnMeta()

    # -- install
    def install(self) -> None:
        self._cuda()
        self._accelerator()
        self._optimizers()
        self._autocast()
        self._distributed()
        self._compile()
        # DataParallel scatters each batch over the process's GPUs; at one GPU it is the module
        _stand_in(torch.nn.DataParallel, "module")
        torch.Tensor.pin_memory = lambda self, device=None: self   # DataLoader's pinning thread
        torch.Tensor.is_pinned = lambda self, device=None: False
        self.mode.__enter__()   # for the whole process: the script runs inside it

    def _cuda(self) -> None:
        cuda, card = torch.cuda, self.card
        major, minor = card.capability
        properties = types.SimpleNamespace(
            name=card.name, total_memory=card.memory_bytes, major=major, minor=minor,
            multi_processor_count=card.multiprocessors, is_integrated=False, is_multi_gpu_board=False,
            uuid="GPU-emulated", L2_cache_size=50 * 2**20, warp_size=32)
        answers = {
            "is_available": lambda: True, "device_count": lambda: card.count,
            "current_device": lambda: 0, "is_initialized": lambda: True,
            "get_device_name": lambda device=None: card.name,
            "get_device_properties": lambda device=None: properties,
            "get_device_capability": lambda device=None: (major, minor),
            "get_arch_list": lambda: [f"sm_{major}{minor}"],
            "is_bf16_supported": lambda including_emulation=True: major >= 8,
            "memory_allocated": lambda device=None: 0, "max_memory_allocated": lambda device=None: 0,
            "memory_reserved": lambda device=None: 0, "max_memory_reserved": lambda device=None: 0,
            "mem_get_info": lambda device=None: (card.memory_bytes, card.memory_bytes),
            "is_current_stream_capturing": lambda: False,
            "Event": _Event, "Stream": _Stream, "current_stream": lambda device=None: _Stream(),
            "default_stream": lambda device=None: _Stream(),
            "stream": lambda stream=None: contextlib.nullcontext(),
            "device": lambda device=None: contextlib.nullcontext(),
        }
        for name in ("set_device", "synchronize", "empty_cache", "init", "manual_seed", "manual_seed_all",
                     "seed", "seed_all", "reset_peak_memory_stats", "reset_max_memory_allocated",
                     "reset_accumulated_memory_stats", "ipc_collect", "set_per_process_memory_fraction"):
            answers[name] = _nothing()
        for name, answer in answers.items():
            setattr(cuda, name, answer)
        try:
            cuda.nvtx.range_push, cuda.nvtx.range_pop, cuda.nvtx.mark = _nothing(), _nothing(), _nothing()
        except AttributeError:
            pass

    def _accelerator(self) -> None:
        """torch.accelerator, which pytorch/examples' scripts and the DataLoader's pinning
        ask instead of torch.cuda: CUDA, as torch.cuda answers."""
        accelerator = getattr(torch, "accelerator", None)
        if accelerator is None:
            return
        card = self.card
        major, minor = card.capability
        answers = {
            "is_available": lambda: True, "device_count": lambda: card.count,
            "current_accelerator": lambda check_available=False: torch.device("cuda"),
            "current_device_index": lambda: 0, "current_device_idx": lambda: 0,
            "get_device_capability": lambda device=None: {"major": major, "minor": minor},
            "current_stream": lambda device=None: _Stream(),
            "device_index": lambda device=None: contextlib.nullcontext(),
            "memory_allocated": lambda device=None: 0, "max_memory_allocated": lambda device=None: 0,
            "memory_reserved": lambda device=None: 0, "max_memory_reserved": lambda device=None: 0,
        }
        for name in ("set_device_index", "set_device_idx", "set_stream", "synchronize", "empty_cache",
                     "reset_peak_memory_stats", "reset_accumulated_memory_stats"):
            answers[name] = _nothing()
        for name, answer in answers.items():
            if hasattr(accelerator, name):
                setattr(accelerator, name, answer)

    def _optimizers(self) -> None:
        """foreach and fused kernels for meta tensors, as for CUDA's."""
        import torch.optim.optimizer as optimizer
        import torch.utils._foreach_utils as foreach

        for module in (foreach, optimizer):
            for name in ("_get_foreach_kernels_supported_devices", "_get_fused_kernels_supported_devices"):
                original = getattr(foreach, name, None)
                if original is not None and hasattr(module, name):
                    setattr(module, name, functools.partial(_with_meta, original))

    def _autocast(self) -> None:
        """CUDA autocast on meta tensors: its policy as a function mode while it is on."""
        cls = torch.amp.autocast_mode.autocast
        init, enter, leave = cls.__init__, cls.__enter__, cls.__exit__
        emulation = self

        @functools.wraps(init)
        def probed_init(self, device_type, dtype=None, enabled=True, cache_enabled=None):
            self._gpubench_cuda = device_type == "cuda"
            if not self._gpubench_cuda:
                return init(self, device_type, dtype, enabled, cache_enabled)
            self.device, self.fast_dtype, self._enabled = "cuda", dtype or torch.float16, bool(enabled)
            self._cache_enabled, self._gpubench_mode = cache_enabled, None

        @functools.wraps(enter)
        def probed_enter(self):
            if not getattr(self, "_gpubench_cuda", False):
                return enter(self)
            if self._enabled:
                emulation.autocast = "bf16" if self.fast_dtype == torch.bfloat16 else "fp16"
                self._gpubench_mode = step_count.MetaAutocast(self.fast_dtype)
                self._gpubench_mode.__enter__()
            return self

        @functools.wraps(leave)
        def probed_exit(self, *exc):
            if not getattr(self, "_gpubench_cuda", False):
                return leave(self, *exc)
            mode, self._gpubench_mode = self._gpubench_mode, None
            if mode is not None:
                mode.__exit__(*exc)
            return False

        cls.__init__, cls.__enter__, cls.__exit__ = probed_init, probed_enter, probed_exit

    def _distributed(self) -> None:
        import torch.distributed as dist

        if not dist.is_available():
            return
        import torch.distributed.distributed_c10d as c10d
        from torch.nn.parallel import DistributedDataParallel

        init = c10d.init_process_group

        @functools.wraps(init)
        def probed_init(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1,
                        store=None, **kwargs):
            from torch.testing._internal.distributed.fake_pg import FakeStore

            world = world_size if world_size > 0 else int(os.environ.get("WORLD_SIZE", "1") or 1)
            me = rank if rank >= 0 else int(os.environ.get("RANK", "0") or 0)
            kwargs.pop("device_id", None)
            return init("fake", store=FakeStore(), world_size=world, rank=me, **kwargs)

        new_group = c10d.new_group

        @functools.wraps(new_group)
        def probed_new_group(*args, backend=None, **kwargs):
            return new_group(*args, **kwargs)

        for module in (c10d, dist):
            module.init_process_group, module.new_group = probed_init, probed_new_group
            module.is_nccl_available = lambda: True
        _stand_in(DistributedDataParallel, "module")
        try:
            from torch.distributed.fsdp import FullyShardedDataParallel
            import torch.distributed.fsdp as fsdp
        except ImportError:
            return
        # FSDP's .module is a property over the module it holds
        _stand_in(FullyShardedDataParallel, "_fsdp_wrapped_module", on_wrap=self._sharded("FSDP"))
        shard = getattr(fsdp, "fully_shard", None)
        if shard is not None:
            def fully_shard(module, *args, **kwargs):
                self._sharded("FSDP2")()
                return module
            fsdp.fully_shard = fully_shard
            try:
                import torch.distributed._composable.fsdp as composable
                composable.fully_shard = fully_shard
            except ImportError:
                pass

    def _sharded(self, kind: str):
        def note() -> None:
            self.fsdp = self.fsdp or kind
            self.fsdp_units += 1
        return note

    def _compile(self) -> None:
        emulation = self

        def compile(model=None, **kwargs):
            emulation.compiled = True
            return model if model is not None else (lambda f: f)
        torch.compile = compile

    # -- the call it could not follow
    @contextlib.contextmanager
    def lifted(self):
        """The device map lifted for a while, where it is the innermost mode: the script's
        CPU work (its DataLoader's batches) timed as it runs without the emulation."""
        stack = torch.overrides._get_current_function_mode_stack()
        if not stack or stack[-1] is not self.mode:
            yield
            return
        self.mode.__exit__(None, None, None)
        try:
            yield
        finally:
            self.mode.__enter__()

    def unfollowed(self, error: BaseException, script: str) -> str:
        """One line: the script's own call that failed under the emulation (a call none
        of it covers, or the script's own error), and why."""
        import traceback

        frames = traceback.extract_tb(error.__traceback__)
        mine = os.path.abspath(script)
        at = None
        for i, frame in enumerate(frames):
            if os.path.abspath(frame.filename) == mine:
                at = (frame, frames[i + 1] if i + 1 < len(frames) else None)
        words = " ".join(f"{type(error).__name__}: {error}".split())[:240]
        if at is None:
            return f"stopped under CUDA's emulation on this machine's CPU: {words}"
        frame, callee = at
        call = (frame.line or "").strip()[:120]
        inner = f" (in {os.path.basename(callee.filename)}, {callee.name})" if callee else ""
        return (f"stopped under CUDA's emulation on this machine's CPU at {os.path.basename(script)} "
                f"line {frame.lineno}: `{call}`{inner}: {words}")


def _with_meta(original) -> list[str]:
    devices = list(original())
    return devices if "meta" in devices else devices + ["meta"]


def _stand_in(cls, holds: str, on_wrap=None) -> None:
    """The wrapper keeps its class (isinstance checks, .module, no_sync) and wraps the
    model, as its attribute `holds`, without copying, bucketing or reducing anything."""
    def init(self, module, *args, **kwargs):
        torch.nn.Module.__init__(self)
        torch.nn.Module.__setattr__(self, holds, module)
        self.require_backward_grad_sync = self.require_forward_param_sync = True
        self.device_ids = kwargs.get("device_ids")
        self.process_group = kwargs.get("process_group")
        self.static_graph = False
        if on_wrap is not None:
            on_wrap()

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    cls.__init__, cls.forward = init, forward


def install(card: Card) -> Emulation:
    emulation = Emulation(card)
    emulation.install()
    return emulation
