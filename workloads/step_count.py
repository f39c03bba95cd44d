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


# Operations that read only the rows an index picks, not the whole of an input: the
# negative log-likelihood reads one score a row (its backward writes the whole gradient
# but reads no scores), an embedding one table row a token.
GATHERS = {"aten.nll_loss_forward", "aten.nll_loss2d_forward", "aten.nll_loss_backward",
           "aten.nll_loss2d_backward", "aten.embedding"}


def moved_bytes(name: str, args: tuple, inputs: list[torch.Tensor], outputs: list[torch.Tensor]) -> int:
    """The bytes an operation's kernel reads and writes: every tensor it takes and returns,
    but where it gathers (GATHERS), only the rows it picks of the input it indexes."""
    if name in GATHERS and args and isinstance(args[0], torch.Tensor):
        if name == "aten.embedding":        # (weight, indices): a row a token
            rest = inputs[1:]
            picked = outputs[0].numel() * args[0].element_size()
        elif name.endswith("_forward"):     # (self, target, ...): a score a row
            scores, rest = args[0], inputs[1:]
            classes = scores.shape[1] if scores.dim() > 1 else 1
            picked = scores.numel() // max(classes, 1) * scores.element_size()
        else:                               # (grad_output, self, target, ...): no score read
            rest = [t for t in inputs if t is not args[1]]
            picked = 0
        return picked + sum(nbytes(t) for t in rest + outputs)
    return sum(nbytes(t) for t in inputs + outputs)


def _channels_last(t) -> bool:
    """Laid out channels_last and not also NCHW (a 1x1 kernel or a 1x1 image is both)."""
    return (isinstance(t, torch.Tensor) and t.dim() == 4 and t.is_contiguous(memory_format=torch.channels_last)
            and not t.is_contiguous())


def _conv_parts(name: str, args: tuple, out) -> tuple[list, list] | None:
    """A convolution's activations and its input and weight, forward or backward."""
    if name == "aten.convolution":
        return [args[0], out], [args[0], args[1]]
    if name == "aten.convolution_backward":
        return [args[0], args[1], out[0] if isinstance(out, (tuple, list)) else None], [args[1], args[2]]
    return None


# cuDNN's own kernels that turn an NCHW convolution's tensors to NHWC and back: launched
# from inside cuDNN (no dispatch of their own on the host)
TRANSPOSE = "cudnn.nchw_nhwc_transpose"


def transposed_bytes(name: str, args: tuple, out) -> int:
    """What cuDNN adds to a 16-bit convolution whose activations are NCHW: its tensor-core
    kernels take NHWC, so each activation is transposed in (read and written once more)
    and the result transposed back. Where the input or the weight is channels_last, cuDNN
    runs channels_last throughout (torch's cudnn_conv_suggest_memory_format): none."""
    parts = _conv_parts(name, args, out)
    if parts is None:
        return 0
    acts, (first, weight) = parts
    if (not isinstance(first, torch.Tensor) or first.dim() != 4 or first.dtype not in (torch.bfloat16, torch.float16)
            or first.shape[2] * first.shape[3] <= 1 or _channels_last(first) or _channels_last(weight)):
        return 0
    return 2 * sum(nbytes(t) for t in acts if isinstance(t, torch.Tensor))


def as_gpu_lays_out(name: str, args: tuple, out):
    """A convolution's result laid out as on a GPU: channels_last where its input or weight
    is (the meta device's kernel returns NCHW whatever it is given, and the layers after it
    would then count transposes a GPU does not make)."""
    parts = _conv_parts(name, args, out)
    if parts is None or not any(_channels_last(t) for t in parts[1]):
        return out
    if name == "aten.convolution" and isinstance(out, torch.Tensor) and out.dim() == 4:
        return out.contiguous(memory_format=torch.channels_last)
    if isinstance(out, tuple) and out and isinstance(out[0], torch.Tensor) and out[0].dim() == 4:
        return (out[0].contiguous(memory_format=torch.channels_last), *out[1:])
    return out


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
        self.gathered: list[int] | None = None   # [FLOPs, ops] while a fused kernel's parts are summed
        self.quiet = False                       # while bookkeeping of our own runs
        self._rnn: FusedRNN | None = None
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

    def __enter__(self):
        self._rnn = FusedRNN(self)
        self._rnn.install()
        return super().__enter__()

    def __exit__(self, *exc):
        try:
            return super().__exit__(*exc)
        finally:
            if self._rnn is not None:
                self._rnn.remove()
                self._rnn = None

    def record(self, name: str, flops: int, moved: int, math: str, outputs: tuple = ()) -> None:
        """One kernel the dispatcher did not see as such (a fused recurrent layer)."""
        self.ops.append((self.phase, name, flops, moved, "kernel", math if flops else ""))
        for t in outputs:
            self._keep(t)
        self.peak_bytes = max(self.peak_bytes, self._alive())

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = str(func.overloadpacket)
        out = as_gpu_lays_out(name, args, func(*args, **kwargs))
        if name.startswith("profiler.") or self.quiet:
            return out
        if self.gathered is not None:
            if func.overloadpacket in flop_registry:
                self.gathered[0] += int(flop_registry[func.overloadpacket](*args, **kwargs, out_val=out))
            self.gathered[1] += 1
            return out
        packet = func.overloadpacket
        inputs, outputs = _tensors((args, kwargs)), _tensors(out)
        on_device = not self.device_only or any(t.is_meta for t in inputs + outputs)
        flops = 0
        if packet in flop_registry and on_device:
            flops = int(flop_registry[packet](*args, **kwargs, out_val=out))
        view = _is_view(func)
        kernel = on_device and not view and name not in NO_KERNEL
        moved = transposed = 0
        if kernel:
            moved = moved_bytes(name, args, inputs, outputs)
            transposed = transposed_bytes(name, args, out)
            if not outputs and self.device_only:
                moved += sum(nbytes(t) for t in _written(func, args))
        self.ops.append((self.phase, name, flops, moved, "kernel" if kernel else "host",
                         math_of(name, inputs) if flops else ""))
        if transposed:
            self.ops.append((self.phase, TRANSPOSE, 0, transposed, "kernel", ""))
        for t in outputs:
            self._keep(t)
        if self.device_only:   # a script's buffers and batches, first seen as inputs
            for t in inputs:
                self._keep(t)
        self.peak_bytes = max(self.peak_bytes, self._alive())
        return out


# The recurrent layers cuDNN runs whole (torch._VF's functions, which nn.LSTM, nn.GRU and
# nn.RNN call), and the gates each step computes a hidden unit's worth of.
RNN_GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}


class FusedRNN:
    """A recurrent layer as a GPU runs it: cuDNN takes the whole sequence in one call (a
    few kernels a layer, launched from C++), where the meta device decomposes it into a
    dozen operations a time step, each of which the host would pay for. Counted as one
    kernel forward and one backward: the FLOPs of the decomposition (its backward twice
    the forward's, as for any matrix product), the bytes of its inputs, outputs and the
    reserve cuDNN keeps for the backward (every step's gates), read back in the backward.

    torch._VF's functions are swapped while the counter counts (nn.LSTM looks them up at
    each call); not a torch function mode, which a count started inside a torch
    function's handling (a backward's end) could not push and pop in order."""

    def __init__(self, counter: StepCounter) -> None:
        self.counter = counter
        self.originals: dict[str, object] = {}

    def install(self) -> None:
        for name in RNN_GATES:
            original = getattr(torch._VF, name, None)
            if original is not None and name not in vars(torch._VF):
                self.originals[name] = original
                setattr(torch._VF, name, self._fused(name, original))

    def remove(self) -> None:
        for name in self.originals:
            vars(torch._VF).pop(name, None)
        self.originals.clear()

    def _fused(self, name: str, original):
        def counted(*args, **kwargs):
            tensors = _tensors((args, kwargs))
            if not any(t.is_meta for t in tensors) or self.counter.gathered is not None:
                return original(*args, **kwargs)
            return self._count(name, original, tensors, args, kwargs)
        return counted

    def _count(self, name: str, original, tensors: list[torch.Tensor], args: tuple, kwargs: dict):
        counter = self.counter
        counter.gathered = [0, 0]
        try:
            with torch.no_grad():
                out = original(*args, **kwargs)
        finally:
            flops, _ = counter.gathered
            counter.gathered = None
        outputs = _tensors(out)
        layers = next((a for a in args if type(a) is int), 1)
        reserve = RNN_GATES[name] * outputs[0].numel() * layers * outputs[0].element_size()
        moved = sum(nbytes(t) for t in tensors + outputs) + reserve
        math = math_of("aten._cudnn_rnn", tensors)
        counter.record("aten._cudnn_rnn", flops, moved, math, tuple(outputs))
        wanted = [t for t in tensors if t.requires_grad]
        if not wanted or not torch.is_grad_enabled():
            return out
        fresh = iter(_RNNBackward.apply(_Fused(counter, 2 * flops, 2 * moved, math, tuple(outputs)), *wanted))
        return _replace(out, {id(t): next(fresh) for t in outputs})


class _Fused:
    """What the backward of a fused recurrent layer counts, and the outputs it stands for."""

    def __init__(self, counter: StepCounter, flops: int, moved: int, math: str, outputs: tuple) -> None:
        self.counter, self.flops, self.moved, self.math, self.outputs = counter, flops, moved, math, outputs


class _RNNBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, fused: _Fused, *inputs):
        ctx.fused = fused
        ctx.inputs = inputs          # meta tensors: shapes only, nothing held
        fused.counter.quiet = True
        try:
            return tuple(torch.empty_like(t) for t in fused.outputs)
        finally:
            fused.counter.quiet = False

    @staticmethod
    def backward(ctx, *grads):
        fused = ctx.fused
        fused.counter.record("aten._cudnn_rnn_backward", fused.flops, fused.moved, fused.math)
        fused.counter.quiet = True
        try:
            return (None, *(torch.zeros_like(t) for t in ctx.inputs))
        finally:
            fused.counter.quiet = False


def _replace(value, fresh: dict):
    """`value` (a tensor, or tuples and lists of them) with each tensor whose id is in
    `fresh` swapped for its new one."""
    if isinstance(value, torch.Tensor):
        return fresh.get(id(value), value)
    if isinstance(value, (tuple, list)):
        return type(value)(_replace(v, fresh) for v in value)
    return value
