"""Every operation of a training step as a GPU would run it, counted on the meta device:
the counter that workloads/op_profile.py runs over the suite's steps and the probe's
calibration (workloads/script_probe.py) over a user's script's.

Each aten operation dispatched is kept with its FLOPs (torch's own formulas,
torch.utils.flop_counter), the bytes it reads and writes (every tensor it takes and
returns, at its dtype), whether it is a view (no kernel: host time only), and the math
its FLOPs run at (bf16, fp16, tf32 or fp32, from its inputs' dtype and torch's TF32
switches). The tensors alive between operations are tracked, so the step's peak of
allocated bytes is counted too: what torch.cuda.max_memory_allocated reports on a GPU.

MetaAutocast applies CUDA autocast's policy to meta tensors (torch.autocast does
nothing for them), nested regions as torch nests them, and picks the attention kernel
a GPU of compute capability 8.0 or newer would.

Standard library and torch only, like the rest of the suite.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.multiprocessing.reductions import StorageWeakRef
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import flop_registry

LOW = {"bf16": torch.bfloat16, "fp16": torch.float16}
# The operations of no device work: bookkeeping the dispatcher sees but no kernel runs.
NO_KERNEL = {"profiler._record_function_enter_new", "profiler._record_function_exit", "aten.lift_fresh",
             "aten._local_scalar_dense", "aten.detach", "aten.empty", "aten.empty_like",
             "aten.empty_strided", "aten.new_empty", "aten.new_empty_strided",
             # metadata only, though their schemas do not say they alias
             "aten._unsafe_view", "aten.alias", "aten._reshape_alias"}
CONVOLUTIONS = {"aten.convolution", "aten.convolution_backward"}
MATH = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32", torch.float64: "fp64"}


def _autocast_policy():
    """CUDA autocast's lists (torch/csrc/autograd/autocast_mode.cpp), as torch functions."""
    lower = {F.linear, F.conv1d, F.conv2d, F.conv3d, torch.matmul, torch.mm, torch.bmm, torch.addmm,
             torch.baddbmm, torch.Tensor.matmul, torch.Tensor.__matmul__, F.scaled_dot_product_attention}
    fp32 = {F.layer_norm, F.group_norm, F.cross_entropy, F.nll_loss, F.mse_loss, F.log_softmax,
            F.softmax, torch.Tensor.softmax, torch.Tensor.log_softmax, F.l1_loss, F.smooth_l1_loss,
            F.binary_cross_entropy_with_logits, F.kl_div, torch.exp, torch.log, torch.pow}
    return lower, fp32


class MetaAutocast(TorchFunctionMode):
    """CUDA autocast's policy for meta tensors, and the attention kernel a GPU picks.
    Regions nest as torch's do: the innermost entered rules (one of dtype None, a
    region entered with autocast(enabled=False), casts nothing, whatever is around it)."""

    entered: list["MetaAutocast"] = []   # the regions entered, innermost last

    def __init__(self, dtype: torch.dtype | None, grad_only: bool = True) -> None:
        super().__init__()
        self.dtype = dtype
        # casts only where gradients are on (a training step's forward, as the suite's
        # steps count it); torch's autocast casts under no_grad too (grad_only=False)
        self.grad_only = grad_only
        self.lower, self.fp32 = _autocast_policy()
        self.cache: dict[int, torch.Tensor] = {}

    def __enter__(self):
        MetaAutocast.entered.append(self)
        return super().__enter__()

    def __exit__(self, *exc):
        entered = MetaAutocast.entered
        for i in range(len(entered) - 1, -1, -1):
            if entered[i] is self:
                del entered[i]
                break
        return super().__exit__(*exc)

    def _ruling(self) -> "MetaAutocast":
        """The innermost region entered: its dtype and cache are the ones in force (each
        region is a mode of its own, and every one of them sees each call)."""
        return MetaAutocast.entered[-1] if MetaAutocast.entered else self

    def _cast(self, value, dtype):
        if not (isinstance(value, torch.Tensor) and value.is_floating_point() and value.dtype != dtype):
            return value
        if value.is_leaf and value.requires_grad:  # autocast's cache: one cast a forward
            cache, key = self._ruling().cache, id(value)
            if key not in cache:
                cache[key] = value.to(dtype)
            return cache[key]
        return value.to(dtype)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        ruling = self._ruling()
        dtype = ruling.dtype
        if func is F.scaled_dot_product_attention:
            return self._attention(dtype, *args, **kwargs)
        if dtype is not None and (not ruling.grad_only or torch.is_grad_enabled()):
            if func in self.lower:
                args = tuple(self._cast(a, dtype) for a in args)
                kwargs = {k: self._cast(v, dtype) for k, v in kwargs.items()}
            elif func in self.fp32:
                args = tuple(self._cast(a, torch.float32) for a in args)
        return func(*args, **kwargs)

    def _attention(self, dtype, q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, **_):
        if dtype is not None:
            q, k, v = (self._cast(t, dtype) for t in (q, k, v))
        if not q.is_meta:  # a CPU tensor here: the step runs where it was put
            return F.scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal, scale=scale)
        if attn_mask is None and q.dtype in (torch.bfloat16, torch.float16) and q.shape[-1] <= 256:
            return torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, dropout_p, is_causal,
                                                                      scale=scale)[0]
        return torch.ops.aten._scaled_dot_product_efficient_attention(
            q, k, v, attn_mask, True, dropout_p, is_causal, scale=scale)[0]


def _tensors(value) -> list[torch.Tensor]:
    return [t for t in tree_flatten(value)[0] if isinstance(t, torch.Tensor)]


def nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def _is_view(func) -> bool:
    return any(r.alias_info is not None and not r.alias_info.is_write for r in func._schema.returns)


def _written(func, args) -> list[torch.Tensor]:
    """The arguments an operation writes in place where it returns nothing (a fused
    optimizer's parameters and moments): their bytes go back out as well as in."""
    out = []
    for argument, value in zip(func._schema.arguments, args):
        if argument.alias_info is not None and argument.alias_info.is_write:
            out += _tensors(value)
    return out


def math_of(name: str, inputs: list[torch.Tensor]) -> str:
    """The arithmetic an operation's FLOPs run at on a GPU: its first floating input's
    dtype; fp32 runs on TF32 tensor cores where torch allows it (cuDNN's convolutions by
    default, matrix products once a script allows them)."""
    dtype = next((t.dtype for t in inputs if t.is_floating_point()), torch.float32)
    kind = MATH.get(dtype, "fp32")
    if kind != "fp32":
        return kind
    if name in CONVOLUTIONS:
        return "tf32" if torch.backends.cudnn.allow_tf32 else "fp32"
    matmul_tf32 = torch.backends.cuda.matmul.allow_tf32 or torch.get_float32_matmul_precision() != "highest"
    return "tf32" if matmul_tf32 else "fp32"


class StepCounter(TorchDispatchMode):
    """Each operation's phase, name, FLOPs, bytes, kind ("kernel" or "host") and math,
    and the peak of the bytes alive. `alive`: the tensors held as the step starts.
    `device_only`: only operations on meta tensors run kernels (a script's CPU work,
    its data loading from numpy, is the host's); else every operation is the device's
    (the suite's steps run wholly on the meta device)."""

    def __init__(self, alive: list[torch.Tensor], device_only: bool = False) -> None:
        super().__init__()
        self.ops: list[tuple] = []
        self.phase = "forward"
        self.device_only = device_only
        self.live: dict[int, tuple[StorageWeakRef, int]] = {}
        for t in alive:
            self._keep(t)
        self.start_bytes = self.peak_bytes = self._alive()

    def _keep(self, t: torch.Tensor) -> None:
        if self.device_only and not t.is_meta:
            return
        storage = t.untyped_storage()
        ref = StorageWeakRef(storage)
        self.live.setdefault(ref.cdata, (ref, storage.nbytes()))

    def _alive(self) -> int:
        gone = [key for key, (ref, _) in self.live.items() if ref.expired()]
        for key in gone:
            del self.live[key]
        return sum(n for _, n in self.live.values())

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = str(func.overloadpacket)
        if name.startswith("profiler."):
            return out
        packet = func.overloadpacket
        inputs, outputs = _tensors((args, kwargs)), _tensors(out)
        on_device = not self.device_only or any(t.is_meta for t in inputs + outputs)
        flops = 0
        if packet in flop_registry and on_device:
            flops = int(flop_registry[packet](*args, **kwargs, out_val=out))
        view = _is_view(func)
        kernel = on_device and not view and name not in NO_KERNEL
        moved = 0
        if kernel:
            moved = sum(nbytes(t) for t in inputs + outputs)
            if not outputs and self.device_only:
                moved += sum(nbytes(t) for t in _written(func, args))
        self.ops.append((self.phase, name, flops, moved, "kernel" if kernel else "host",
                         math_of(name, inputs) if flops else ""))
        for t in outputs:
            self._keep(t)
        if self.device_only:   # a script's buffers and batches, first seen as inputs
            for t in inputs:
                self._keep(t)
        self.peak_bytes = max(self.peak_bytes, self._alive())
        return out
