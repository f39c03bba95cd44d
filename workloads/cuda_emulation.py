"""CUDA as a script written for it sees it, on a machine without a GPU: the calibration
run's stage (workloads/script_probe.py under GPUBENCH_CALIBRATE_STEPS), so that a
script that hard-codes CUDA and NCCL runs unchanged while its step is counted.

    GPUBENCH_EMULATE_CUDA='{"name": "NVIDIA H200", "memory_bytes": 150754820096,
                            "capability": [9, 0], "count": 1}'   # Card's defaults

What the script is told and where its work goes:
- torch.cuda answers as the card would: available, its count, name, properties and
  capability, bf16 support; set_device, synchronize, empty_cache, seeds, streams and
  events do nothing (an event's elapsed time is the host's clock between its records);
  torch.cuda.device is its class and a context manager that changes nothing; the memory
  counters read 0; the CUDA RNG's state is kept and given back (DTensor's random tracker,
  fork_rng and checkpoints read it). torch.accelerator answers as torch.cuda does.
- a tensor or module put on "cuda" (or on a device index: model.to(local_rank)) is put on
  the meta device (shapes and dtypes, no arithmetic), and reports itself as cuda:0; torch's foreach and fused optimizer
  kernels take meta tensors as they take CUDA ones. torch.load with a CUDA map_location
  (or of a checkpoint saved on a GPU) puts its tensors there too; torch.save writes meta
  tensors as torch does (shapes and dtypes), and a module pickled or deep-copied leaves
  out the hooks the calibration put on it.
- a value read from such a tensor (item, tolist, bool, float, format, cpu, numpy) reads
  as zeros: a loss to log, a norm to print. Control flow on a value the GPU computed
  (stop when the loss is below x) follows zeros. A tensor made from values the script
  has (its labels and token ids moved there, a mask compared from them, arange or randint
  made there) keeps a small CPU twin (meta_values), which a read reads and which sizes
  the shapes that depend on values: boolean-mask indexing, nonzero, masked_select,
  unique, torch.where(cond); without one, those are taken at their bound (every element
  selected, every value distinct), noted at the script's line (Emulation.assumed).
- NCCL is answered by torch's fake process group (every collective a no-op, the world
  the launcher gave); DistributedDataParallel and FSDP wrap the model without copying
  or reducing anything (the step model adds their communication); nn.DataParallel is
  the module it wraps, as at one GPU, and is noted (Emulation.data_parallel).
  fully_shard (FSDP2) gives the module the class real FSDP2 gives it, FSDP<Class>
  (FSDPModule, Class), without sharding: unshard, reshard, the prefetch and
  gradient-sync settings change nothing but the parameters' dtype, and a
  MixedPrecisionPolicy's param_dtype is what the unit's forward (and so its backward)
  computes in, its parameters and inputs cast as FSDP2 casts them; each call is
  counted as a unit, and the policy's dtypes noted. Its parameters show FSDP2's
  placements (Shard(0)) to a script that inspects them. init_device_mesh forms its mesh
  over the fake group (its shape noted), so parallelize_module shards a model on the meta
  device and a DTensor's local shard is rank 0's (workloads/rank_count.py counts it).
- CUDA autocast applies its policy to meta tensors (step_count.MetaAutocast), nested
  regions as torch nests them (autocast(enabled=False) inside one turns it off), and
  torch's autocast queries for "cuda" (is_autocast_enabled, get_autocast_dtype,
  is_autocast_cache_enabled, get_autocast_gpu_dtype) answer its state: activation
  checkpointing recomputes under the same autocast, as custom_fwd/custom_bwd do;
  meta tensors have no RNG state for checkpointing to keep. scaled_dot_product_attention
  on meta tensors is the kernel a GPU picks (flash, memory-efficient), as under autocast.
  Pinned memory is the tensor itself; torch.compile returns what it was given, and is
  noted.

Not followed, refused at the call in one line naming the user's line (not_followed):
FlexAttention, CUDA graphs, Triton kernels launched, CUDA extensions built at run time;
a compiled extension module linking CUDA is not loaded (ImportError: a script's fallback
runs, noted); bincount and repeat_interleave of values the GPU computed. NVML's figures
(torch.cuda.utilization) and any call that none of this covers fail as they would on a
CPU-only torch; the probe names it (Emulation.unfollowed): the deepest line of
the user's own project in the traceback (user_frames). Standard library and torch only.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import json
import os
import sys
import time
import types
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten, tree_map

import meta_values
import not_followed
import step_count
import user_frames

CUDA = torch.device("cuda", 0)
META = torch.device("meta")
# Tensor methods that read a value off the device; on a meta tensor they read its host copy.
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


def _is_index(device) -> bool:
    return isinstance(device, int) and not isinstance(device, bool)


def _is_cuda_type(device) -> bool:
    """An autocast query's device type: "cuda", or none (the older forms' GPU)."""
    return device is None or device == "cuda" or (isinstance(device, torch.device) and device.type == "cuda")


def _on_meta(value) -> bool:
    return isinstance(value, torch.Tensor) and value.is_meta


# Comparisons that read values: on the host copies (meta_values' twins, else zeros).
VALUE_COMPARISONS = {torch.equal, torch.Tensor.equal, torch.allclose, torch.Tensor.allclose}


class CudaOnMeta(TorchFunctionMode):
    """The device map: cuda -> meta for every tensor made or moved; meta tensors say
    cuda:0; a value read off one reads its twin where meta_values keeps one, else zeros;
    each call is shown to meta_values, which keeps the twins."""

    def __init__(self) -> None:
        super().__init__()
        self.values = meta_values.VALUES

    def __torch_function__(self, func, types_, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        owner = getattr(func, "__self__", None)
        if owner is torch.Tensor.device and args and _on_meta(args[0]):
            return CUDA
        if owner is torch.Tensor.is_cuda and args and _on_meta(args[0]):
            return True
        name = getattr(func, "__name__", "")
        if args and _on_meta(args[0]) and name in VALUE_READS and getattr(torch.Tensor, name, None) is func:
            return _read(name, self.values.host_copy(args[0]), args[1:])
        if func in VALUE_COMPARISONS and any(_on_meta(a) for a in args):
            return func(*(self.values.host_copy(a) if _on_meta(a) else a for a in args), **kwargs)
        if func is torch.Tensor.cuda:
            out = args[0].to(META)
            self.values.after(func, args, kwargs, out, False)
            return out
        if func in (torch.Tensor.pin_memory,):
            return args[0]
        if func is torch.Tensor.record_stream:
            return None
        if func is F.scaled_dot_product_attention and args and _on_meta(args[0]) and not kwargs.get("enable_gqa"):
            # the kernel a GPU picks (flash, memory-efficient), not the CPU's math decomposition:
            # autocast's attention, casting nothing
            with step_count.MetaAutocast(None):
                return func(*args, **kwargs)
        made_on_cuda = "device" in kwargs and _is_cuda(kwargs["device"])
        if made_on_cuda:
            kwargs["device"] = META
        if func is torch.Tensor.to:
            if args and _on_meta(args[0]) and _to_cpu(args[1:], kwargs):
                return self.values.host_copy(args[0]).to(*args[1:], **kwargs)
            args = tuple(META if i and _is_cuda(a) else a for i, a in enumerate(args))
            kwargs.pop("non_blocking", None)
        try:
            out = func(*args, **kwargs)
        except NotImplementedError as error:
            not_followed.no_meta_kernel(error)   # refused at the call, where it is one
            raise
        self.values.after(func, args, kwargs, out, made_on_cuda)
        return out


def _to_cpu(args, kwargs) -> bool:
    device = kwargs.get("device", args[0] if args else None)
    return (isinstance(device, torch.device) and device.type == "cpu") or device == "cpu"


def _read(name: str, host: torch.Tensor, rest):
    """A value read of a meta tensor, from its host copy."""
    if name == "__format__":
        return format(host.item() if host.dim() == 0 else host, *rest)
    return getattr(host, name)(*rest)


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


class _HostState(torch.Tensor):
    """A generator's state as read from the GPU: kept on the host, as it is put "on the
    GPU" by callers the device map does not see (DTensor's tracker, inside an operation)."""

    def to(self, *args, **kwargs):
        device = kwargs.get("device", args[0] if args else None)
        if _is_cuda(device):
            return self
        return torch.Tensor.to(self, *args, **kwargs)


def _rng_state() -> dict:
    """The CUDA generator's state as torch keeps it (Philox: a seed and an offset, 16
    bytes), kept and given back: what DTensor's random tracker, fork_rng and a checkpoint
    of the RNG states read and write. Meta tensors draw nothing from it."""
    state = [torch.zeros(16, dtype=torch.uint8)]

    def get_rng_state(device="cuda"):
        return state[0].clone().as_subclass(_HostState)

    def set_rng_state(new_state, device="cuda"):
        state[0] = new_state.detach().to("cpu", torch.uint8).clone()

    return {"get_rng_state": get_rng_state, "set_rng_state": set_rng_state,
            "get_rng_state_all": lambda: [get_rng_state()],
            "set_rng_state_all": lambda states: set_rng_state(states[0]) if states else None,
            "initial_seed": lambda: 0}


@functools.lru_cache(maxsize=1)
def _meta_library():
    """The emulation's own meta kernels of torch's operators, kept for the process."""
    return torch.library.Library("aten", "IMPL")


def _nothing():
    """A function that does nothing: one each, as torch._dynamo's rules map each torch
    function by identity."""
    def nothing(*args, **kwargs):
        return None
    return nothing


class Emulation:
    """What the script was told and did that the step model needs: whether it compiled,
    the autocast dtype its steps ran under, FSDP's units and mixed precision, whether
    it used nn.DataParallel."""

    def __init__(self, card: Card) -> None:
        self.card = card
        self.compiled = False
        self.autocast: str | None = None   # "bf16" or "fp16": CUDA autocast (or FSDP2's param_dtype)
        self.fsdp_units = 0
        self.fsdp = None                    # "FSDP" or "FSDP2" where the model was sharded
        self.fsdp_param_dtype: str | None = None    # FSDP2's MixedPrecisionPolicy: "bf16", "fp16", "fp32"
        self.fsdp_reduce_dtype: str | None = None   # ... the dtype its gradients are reduced in
        self.data_parallel = False          # nn.DataParallel wrapped a model (one GPU's worth here)
        self.meshes: list[dict] = []        # each device mesh made: {"shape": [..], "names": [..]}
        self.mode = CudaOnMeta()
        self.autocasts: list = []           # the CUDA autocast regions entered, innermost last
        self.values = meta_values.VALUES    # twins of meta tensors, shapes assumed

    @property
    def assumed(self) -> list[str]:
        """The data-dependent shapes taken at their bound, each at the script's line."""
        return list(self.values.assumed.values())

    @property
    def not_loaded(self) -> list[str]:
        """The CUDA extension modules the script imported and went on without."""
        return list(not_followed.loaded_not)

    # -- install
    def install(self, script: str | None = None, on_refused=None) -> None:
        """For the whole process; `script` is the one whose lines are named, `on_refused`
        hears a call not followed first (a calibration reports it and ends)."""
        not_followed.set_handler(on_refused, script)
        meta_values.install()
        not_followed.install()
        self._cuda()
        self._accelerator()
        self._optimizers()
        self._autocast()
        self._checkpointing()
        self._serialization()
        self._distributed()
        self._compile()
        self._module_to()
        torch.Generator = _generator_class()
        # DataParallel scatters each batch over the process's GPUs; at one GPU it is the module
        _stand_in(torch.nn.DataParallel, "module", on_wrap=self._data_parallel)
        torch.Tensor.pin_memory = lambda self, device=None: self   # DataLoader's pinning thread
        torch.Tensor.is_pinned = lambda self, device=None: False
        self.mode.__enter__()   # for the whole process: the script runs inside it

    def _data_parallel(self) -> None:
        self.data_parallel = True

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
            # torch.cuda.device (and device_of, _DeviceGuard) stay torch's classes: `with
            # torch.cuda.device(0)`, isinstance(x, torch.cuda.device), torch.load's device
            # check; the device they exchange is always the one there is
            "_exchange_device": lambda device: -1 if device < 0 else 0,
            "_maybe_exchange_device": lambda device: -1 if device < 0 else 0,
        }
        for name in ("set_device", "synchronize", "empty_cache", "init", "manual_seed", "manual_seed_all",
                     "seed", "seed_all", "reset_peak_memory_stats", "reset_max_memory_allocated",
                     "reset_accumulated_memory_stats", "ipc_collect", "set_per_process_memory_fraction"):
            answers[name] = _nothing()
        answers.update(_rng_state())
        for name, answer in answers.items():
            setattr(cuda, name, answer)
        import torch.cuda.random as cuda_random

        for name in ("get_rng_state", "set_rng_state", "get_rng_state_all", "set_rng_state_all", "initial_seed"):
            setattr(cuda_random, name, answers[name])
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
        """foreach and fused kernels for meta tensors, as for CUDA's (fused SGD and Adagrad
        have no meta kernel: they write their arguments in place, which the step's counter
        reads; here they change nothing)."""
        for name in ("_fused_sgd_", "_fused_adagrad_"):
            op = getattr(torch.ops.aten, name, None)
            for overload in (op.overloads() if op is not None else ()):
                qualified = name if overload == "default" else f"{name}.{overload}"
                if not torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{qualified}", "Meta"):
                    _meta_library().impl(qualified, _nothing(), "Meta")
        import torch.optim.optimizer as optimizer
        import torch.utils._foreach_utils as foreach

        for module in (foreach, optimizer):
            for name in ("_get_foreach_kernels_supported_devices", "_get_fused_kernels_supported_devices"):
                original = getattr(foreach, name, None)
                if original is not None and hasattr(module, name):
                    setattr(module, name, functools.partial(_with_meta, original))

    def _autocast(self) -> None:
        """CUDA autocast on meta tensors: its policy as a function mode while it is on
        (off inside a nested autocast(enabled=False)), and torch's autocast queries for
        "cuda" answering the innermost region's state, as they answer on a GPU."""
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
            # a disabled region is entered too: inside it, the regions around it cast nothing
            self._gpubench_mode = step_count.MetaAutocast(self.fast_dtype if self._enabled else None,
                                                          grad_only=False)
            self._gpubench_mode.__enter__()
            emulation.autocasts.append(self)
            return self

        @functools.wraps(leave)
        def probed_exit(self, *exc):
            if not getattr(self, "_gpubench_cuda", False):
                return leave(self, *exc)
            mode, self._gpubench_mode = self._gpubench_mode, None
            for i in range(len(emulation.autocasts) - 1, -1, -1):   # its own, innermost first
                if emulation.autocasts[i] is self:
                    del emulation.autocasts[i]
                    break
            if mode is not None:
                mode.__exit__(*exc)
            return False

        cls.__init__, cls.__enter__, cls.__exit__ = probed_init, probed_enter, probed_exit
        self._autocast_queries()

    def _autocast_queries(self) -> None:
        """torch.is_autocast_enabled("cuda") and the like: the innermost emulated region's
        state (torch's C state knows nothing of it). What torch.utils.checkpoint saves and
        re-enters for its recomputation, custom_fwd for its backward."""
        emulation = self
        enabled, dtype_of = torch.is_autocast_enabled, torch.get_autocast_dtype
        cache_enabled = torch.is_autocast_cache_enabled

        def innermost():
            return emulation.autocasts[-1] if emulation.autocasts else None

        @functools.wraps(enabled)
        def is_autocast_enabled(*args, **kwargs):
            device = args[0] if args else kwargs.get("device_type", "cuda")
            if _is_cuda_type(device):
                region = innermost()
                return bool(region is not None and region._enabled)
            return enabled(*args, **kwargs)

        @functools.wraps(dtype_of)
        def get_autocast_dtype(*args, **kwargs):
            device = args[0] if args else kwargs.get("device_type")
            if _is_cuda_type(device):
                region = innermost()
                return region.fast_dtype if region is not None else torch.float16
            return dtype_of(*args, **kwargs)

        @functools.wraps(cache_enabled)
        def is_autocast_cache_enabled():
            region = innermost()
            if region is not None and region._cache_enabled is not None:
                return bool(region._cache_enabled)
            return cache_enabled()

        torch.is_autocast_enabled, torch.get_autocast_dtype = is_autocast_enabled, get_autocast_dtype
        torch.is_autocast_cache_enabled = is_autocast_cache_enabled
        if hasattr(torch, "get_autocast_gpu_dtype"):   # the older names, where this torch has them
            torch.get_autocast_gpu_dtype = lambda: get_autocast_dtype("cuda")
        if hasattr(torch, "is_autocast_gpu_enabled"):
            torch.is_autocast_gpu_enabled = lambda: is_autocast_enabled("cuda")

    def _checkpointing(self) -> None:
        """torch.utils.checkpoint keeps the RNG state of each GPU its inputs are on, to
        replay dropout in the recomputation: a meta tensor has none (its dropout draws
        nothing), so it keeps the CPU's alone."""
        try:
            import torch.utils.checkpoint as checkpoint
        except ImportError:
            return
        original = getattr(checkpoint, "get_device_states", None)
        if original is None:
            return

        @functools.wraps(original)
        def get_device_states(*args):
            kept = [a for a in tree_flatten(args)[0] if not _on_meta(a)]
            return original(*kept)

        checkpoint.get_device_states = get_device_states

    def _serialization(self) -> None:
        """torch.load: a storage mapped to CUDA (map_location "cuda", "cuda:0",
        torch.device("cuda"), or saved on a GPU and loaded as it was) goes to the meta
        device, as every tensor put on cuda does. torch.save writes a meta tensor as torch
        writes one (shape and dtype, no bytes). (The probe's hooks are left out of a pickled
        module by the probe itself, as in a measured run: script_probe._patch_getstate.)"""
        import torch.serialization as serialization

        def to_meta(storage, location):
            if isinstance(location, str) and location.split(":")[0] == "cuda":
                return torch.UntypedStorage(storage.nbytes(), device=META)
            return None

        # before torch's own CUDA deserializer (20), after the CPU's (10)
        if not any(entry[2] is to_meta for entry in serialization._package_registry):
            serialization.register_package(19, lambda obj: None, to_meta)

        reduce = torch.Tensor._reduce_ex_internal

        @functools.wraps(reduce)
        def reduce_ex_internal(tensor, proto):
            """A meta tensor pickled as torch pickles one (its shape and dtype), not as
            the CUDA tensor it says it is (whose bytes would be copied out)."""
            if _on_meta(tensor):
                with torch._C.DisableTorchFunction():
                    return reduce(tensor, proto)
            return reduce(tensor, proto)

        torch.Tensor._reduce_ex_internal = reduce_ex_internal

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
        # those that took the names at their import (device_mesh's init_device_mesh forms
        # the default group through its own)
        for name, module in list(sys.modules.items()):
            if name.startswith("torch.distributed.") and module is not None:
                if getattr(module, "init_process_group", None) is init:
                    module.init_process_group = probed_init
                if getattr(module, "new_group", None) is new_group:
                    module.new_group = probed_new_group
        _stand_in(DistributedDataParallel, "module")
        self._device_mesh()
        try:
            from torch.distributed.fsdp import FullyShardedDataParallel
            import torch.distributed.fsdp as fsdp
        except ImportError:
            return
        # FSDP's .module is a property over the module it holds
        _stand_in(FullyShardedDataParallel, "_fsdp_wrapped_module", on_wrap=self._sharded("FSDP"))
        if getattr(fsdp, "fully_shard", None) is not None and getattr(fsdp, "FSDPModule", None) is not None:
            self._fsdp2(fsdp)

    def _device_mesh(self) -> None:
        """init_device_mesh over the fake group as torch makes it (a DTensor's local shard is
        this rank's); each mesh's shape noted."""
        try:
            import torch.distributed.device_mesh as device_mesh
        except ImportError:
            return
        init, meshes = getattr(device_mesh, "init_device_mesh", None), self.meshes
        if init is None:
            return

        @functools.wraps(init)
        def noted(device_type, mesh_shape, *args, **kwargs):
            mesh = init(device_type, mesh_shape, *args, **kwargs)
            meshes.append({"shape": [int(n) for n in mesh_shape],
                           "names": [str(n) for n in kwargs.get("mesh_dim_names") or ()]})
            return mesh
        import torch.distributed as dist

        for module in (device_mesh, dist):
            if getattr(module, "init_device_mesh", None) is init:
                module.init_device_mesh = noted

    def _fsdp2(self, fsdp) -> None:
        """fully_shard as real FSDP2 applies it, less the sharding: the module's class
        becomes FSDP<Class>(FSDPModule, Class), whose methods change nothing but the
        parameters' dtype (_fsdp2_unit); its MixedPrecisionPolicy is kept on the module."""
        emulation = self
        classes: dict[type, type] = {}
        methods = _fsdp2_unit()

        def unit_class(cls: type) -> type:
            if issubclass(cls, fsdp.FSDPModule):
                return cls
            if cls not in classes:
                classes[cls] = type(f"FSDP{cls.__name__}", (fsdp.FSDPModule, cls), dict(methods))
            return classes[cls]

        def fully_shard(module, *args, mp_policy=None, **kwargs):
            modules = list(module) if isinstance(module, (list, tuple)) else [module]
            for one in modules:
                one.__class__ = unit_class(type(one))
                object.__setattr__(one, "_gpubench_mp", mp_policy)
                _as_sharded(one, kwargs.get("mesh"))
            emulation._sharded("FSDP2")()
            emulation._mixed_precision(mp_policy)
            return module

        def register_fsdp_forward_method(module, method_name):
            """Another method run as forward is: under the unit's param_dtype."""
            if not isinstance(module, fsdp.FSDPModule):
                return
            method = getattr(module, method_name)

            @functools.wraps(method)
            def wrapped(*args, **kwargs):
                return _unit_call(module, method, args, kwargs)
            setattr(module, method_name, wrapped)

        modules = [fsdp]
        for name in ("torch.distributed._composable.fsdp", "torch.distributed._composable.fsdp.fully_shard",
                     "torch.distributed.fsdp._fully_shard", "torch.distributed.fsdp._fully_shard._fully_shard"):
            try:
                modules.append(importlib.import_module(name))
            except ImportError:
                pass
        for module in modules:
            if hasattr(module, "fully_shard"):
                module.fully_shard = fully_shard
            if hasattr(module, "register_fsdp_forward_method"):
                module.register_fsdp_forward_method = register_fsdp_forward_method

    def _mixed_precision(self, policy) -> None:
        param = getattr(policy, "param_dtype", None)
        if param is None:
            return
        reduce = getattr(policy, "reduce_dtype", None) or param
        self.fsdp_param_dtype = step_count.MATH.get(param, str(param))
        self.fsdp_reduce_dtype = step_count.MATH.get(reduce, str(reduce))
        if param in (torch.bfloat16, torch.float16):
            self.autocast = "bf16" if param == torch.bfloat16 else "fp16"

    def _sharded(self, kind: str):
        def note() -> None:
            self.fsdp = self.fsdp or kind
            self.fsdp_units += 1
        return note

    def _module_to(self) -> None:
        """model.to(local_rank): a device index is a CUDA device (torch's parser asks a
        CPU-only build for an accelerator it has not)."""
        to = torch.nn.Module.to

        @functools.wraps(to)
        def module_to(module, *args, **kwargs):
            if args and _is_index(args[0]):
                args = ("cuda", *args[1:])
            if _is_index(kwargs.get("device")):
                kwargs["device"] = "cuda"
            return to(module, *args, **kwargs)
        torch.nn.Module.to = module_to

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
        """One line: the call that failed under the emulation (a call none of it covers, or
        the script's own error), at the deepest line of the user's project in the
        traceback (a file under the script's directory that is not an installed package,
        the standard library or torch; the script's own line where there is none deeper),
        and why. A call refused as not followed (not_followed.NotFollowed) says so itself."""
        if isinstance(error, not_followed.NotFollowed):
            return str(error)
        at = user_frames.Project(script).in_traceback(error)
        words = not_followed.reworded(error)
        if at is None:
            return f"stopped under CUDA's emulation on this machine's CPU: {words}"
        return f"stopped under CUDA's emulation on this machine's CPU at {at.said()}: {words}"


# -- FSDP2's unit (FSDP<Class>'s own methods): no sharding, its mixed precision
def _unit_params(unit) -> list:
    """(module, name) of each parameter the unit manages: those of its modules that are
    not under a nested unit (FSDP2's managed modules)."""
    from torch.distributed.fsdp import FSDPModule

    found, seen, stack = [], set(), [unit]
    while stack:
        module = stack.pop()
        if id(module) in seen:
            continue
        seen.add(id(module))
        for name, p in module._parameters.items():
            if p is not None:
                found.append((module, name))
        stack.extend(c for c in module.children() if c is not None and not isinstance(c, FSDPModule))
    return found


def _as_sharded(unit, mesh) -> None:
    """The unit's parameters as FSDP2 shows them to a script that inspects them (placements
    (Shard(0),) over its mesh, to_local, full_tensor), their data unsharded."""
    sharded = _sharded_parameter()
    if sharded is None:
        return
    for module, name in _unit_params(unit):
        p = module._parameters[name]
        if type(p) is torch.nn.Parameter:
            p.__class__ = sharded
            p._gpubench_mesh = mesh


@functools.lru_cache(maxsize=1)
def _sharded_parameter():
    try:
        from torch.distributed.tensor import Shard
    except ImportError:
        return None

    class FSDPParameter(torch.nn.Parameter):
        """A parameter of a fully_shard unit as FSDP2's DTensor shows itself; its data is the
        whole parameter (the emulation does not shard)."""

        placements = (Shard(0),)

        @property
        def device_mesh(self):
            return getattr(self, "_gpubench_mesh", None)

        def to_local(self):
            return self.detach()

        def full_tensor(self):
            return self.detach()

    return FSDPParameter


def _param_dtype(unit):
    return getattr(unit.__dict__.get("_gpubench_mp"), "param_dtype", None)


def _unit_unshard(self, async_op: bool = False):
    """The unit's parameters in its param_dtype, registered on its modules (what FSDP2's
    all-gather makes: no sharding here, the cast alone); a handle whose wait() does
    nothing where async_op."""
    dtype = _param_dtype(self)
    if dtype is not None and "_gpubench_unsharded" not in self.__dict__:
        cast, swapped = {}, []
        for module, name in _unit_params(self):
            p = module._parameters[name]
            if not p.is_floating_point() or p.dtype == dtype:
                continue
            if id(p) not in cast:
                cast[id(p)] = p.to(dtype)
            module._parameters[name] = cast[id(p)]
            swapped.append((module, name, p))
        object.__setattr__(self, "_gpubench_unsharded", swapped)
    if async_op:
        from torch.distributed.fsdp import UnshardHandle
        return UnshardHandle()
    return None


def _unit_reshard(self) -> None:
    """The unit's own parameters registered again (FSDP2's sharded ones)."""
    swapped = self.__dict__.pop("_gpubench_unsharded", None)
    for module, name, p in reversed(swapped or ()):
        module._parameters[name] = p


def _unit_call(unit, function, args, kwargs):
    """A forward of the unit as FSDP2 runs it: its floating inputs cast to param_dtype
    (cast_forward_inputs), its parameters unsharded in param_dtype, resharded after, its
    floating outputs cast to output_dtype."""
    policy = unit.__dict__.get("_gpubench_mp")
    dtype = getattr(policy, "param_dtype", None)
    if dtype is None:
        return function(*args, **kwargs)
    if getattr(policy, "cast_forward_inputs", True):
        args, kwargs = tree_map(functools.partial(_cast_floating, dtype), (args, kwargs))
    swapped = unit.__dict__.get("_gpubench_unsharded")
    if swapped and torch.is_grad_enabled() and any(
            p.requires_grad and not module._parameters[name].requires_grad for module, name, p in swapped):
        _unit_reshard(unit)   # unsharded without gradients (under no_grad): again, with them
    _unit_unshard(unit)
    try:
        out = function(*args, **kwargs)
    finally:
        _unit_reshard(unit)
    output = getattr(policy, "output_dtype", None)
    return tree_map(functools.partial(_cast_floating, output), out) if output is not None else out


def _cast_floating(dtype, value):
    if isinstance(value, torch.Tensor) and value.is_floating_point() and value.dtype != dtype:
        return value.to(dtype)
    return value


def _unit_forward(self, *args, **kwargs):
    from torch.distributed.fsdp import FSDPModule

    return _unit_call(self, super(FSDPModule, self).forward, args, kwargs)


def _unit_apply(self, *args, **kwargs):
    """to(), to_empty(), cuda(): on the registered (sharded) parameters, as FSDP2's."""
    from torch.distributed.fsdp import FSDPModule

    _unit_reshard(self)
    return super(FSDPModule, self)._apply(*args, **kwargs)


def _unit_deepcopy(self, memo=None):
    raise AssertionError("FSDP does not support deepcopy. Please use state dict for serialization.")


def _fsdp2_unit() -> dict:
    """FSDP<Class>'s own methods: every FSDPModule method that would reach FSDP's state
    does nothing (the prefetch, gradient-sync, reshard and reduce settings), save
    unshard and reshard (the param_dtype's cast), forward and _apply."""
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:
        return {}
    methods = {name: _nothing() for name, value in vars(FSDPModule).items()
               if callable(value) and not name.startswith("__") and name not in ("_get_fsdp_state",)}
    methods.update(unshard=_unit_unshard, reshard=_unit_reshard, forward=_unit_forward, _apply=_unit_apply,
                   __deepcopy__=_unit_deepcopy)
    return methods


def _generator_class():
    """torch.Generator, with a generator asked for on CUDA made on the CPU (the meta
    device's random functions take it; there are no numbers to draw). Every generator is
    still an instance of it, the CPU's default one included."""
    base = torch._C.Generator

    class _Any(type(base)):
        def __instancecheck__(cls, obj) -> bool:
            return isinstance(obj, base)

    class Generator(base, metaclass=_Any):
        def __new__(cls, device="cpu"):
            return base.__new__(cls, "cpu" if _is_cuda(device) else device)

        def __init__(self, device="cpu") -> None:
            pass

    return Generator


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

    def getstate(self):   # DDP's own drops the reducer it never made here
        state = torch.nn.Module.__getstate__(self)
        state.pop("process_group", None)
        return state

    def setstate(self, state):
        torch.nn.Module.__setstate__(self, state)
        self.__dict__.setdefault("process_group", None)

    cls.__init__, cls.forward = init, forward
    cls.__getstate__, cls.__setstate__ = getstate, setstate


def install(card: Card, script: str | None = None, on_refused=None) -> Emulation:
    emulation = Emulation(card)
    emulation.install(script, on_refused)
    return emulation
