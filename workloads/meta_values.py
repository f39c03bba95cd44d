"""Shapes that depend on values, under CUDA's emulation: boolean-mask indexing, nonzero,
masked_select, unique, torch.where(cond) with one argument, bincount, repeat_interleave.

A meta tensor has no values, so torch cannot size what these return. Many of their
inputs, though, were made from values the script has: its labels and token ids moved to
the GPU, a mask compared from them (labels != -100), torch.arange or torch.randint made
there. For those a small real CPU copy (a twin) is kept beside the meta tensor, made as
the GPU's tensor was made (the CPU tensor moved; the factory run again on the CPU; the
same operation on the twins of its inputs), and the data-dependent operation is run on
it: its output's shape is the one the GPU's would have (a fresh draw where the script
drew random numbers). Where an input was computed on the GPU (a mask from the model's
scores), the shape is taken at its bound, the mask's full size (every element selected,
every value distinct), and noted as an assumption at the script's own line; where there
is no bound (bincount's length, repeat_interleave's total), the call is refused
(not_followed). A value read back from a tensor with a twin (item, tolist) reads the twin.

Twins are kept only of small tensors (LIMIT elements; FLOAT_LIMIT for floating ones),
made only where all of an operation's meta inputs have one, and forgotten where an
in-place write cannot be mirrored. Standard library and torch only.
"""

from __future__ import annotations

import math

import torch
from torch.multiprocessing.reductions import StorageWeakRef
import torch.utils._python_dispatch as python_dispatch
from torch.utils.weak import WeakIdKeyDictionary

import not_followed
import user_frames

LIMIT = 1 << 20          # elements: token ids of a batch, labels, masks
FLOAT_LIMIT = 1 << 16    # a floating twin: torch.rand(...) < p, a mask's float()
META = torch.device("meta")
CPU = torch.device("cpu")
# made on "cuda" with values known on the host (torch.empty's are not)
FACTORIES = {torch.tensor, torch.as_tensor, torch.arange, torch.zeros, torch.ones, torch.full, torch.randint,
             torch.randperm, torch.rand, torch.randn, torch.eye, torch.linspace, torch.ones_like,
             torch.zeros_like, torch.full_like}
NOTES = 6                # assumptions kept to say


class Values:
    """The twins of meta tensors, and the shapes assumed where there was none."""

    def __init__(self) -> None:
        self.twins = WeakIdKeyDictionary()    # meta tensor -> (CPU twin, its storage's key)
        self.assumed: dict[str, str] = {}     # "train.py line 12" -> what was assumed there

    # -- lookups
    def of(self, t) -> torch.Tensor | None:
        if not self.twins or not isinstance(t, torch.Tensor):
            return None
        kept = self.twins.get(t)
        return kept[0] if kept is not None else None

    def _keep(self, t: torch.Tensor, twin: torch.Tensor) -> None:
        if not (isinstance(twin, torch.Tensor) and tuple(twin.shape) == tuple(t.shape) and _small(t)):
            return
        self.twins[t] = (twin, _storage(t))

    def _forget(self, t: torch.Tensor) -> None:
        """t was written in a way its twin cannot follow: every twin of its storage goes."""
        key = _storage(t)
        for tensor, (_, kept) in list(self.twins.items()):
            if kept == key:
                del self.twins[tensor]

    # -- as the device map sees each call (cuda_emulation.CudaOnMeta)
    def after(self, func, args, kwargs, out, made_on_cuda: bool) -> None:
        """What a call made or changed: twins kept, made or forgotten. Never raises."""
        try:
            if made_on_cuda:
                self._made(func, args, kwargs, out)
            elif func in (torch.Tensor.to, torch.Tensor.cuda) and args and _on_cpu(args[0]):
                self._moved(args[0], out)
            elif func is torch.Tensor.copy_ and len(args) > 1 and _on_meta(args[0]) and _on_cpu(args[1]):
                self._forget(args[0])
                self._moved(args[1].expand(args[0].shape), args[0])   # a pinned buffer's copy to the GPU
            elif self.twins:
                self._derived(func, args, kwargs, out)
        except Exception:   # a twin is a help, never what fails the script
            pass

    def _made(self, func, args, kwargs, out) -> None:
        if func in FACTORIES and _on_meta(out) and _small(out) and not kwargs.get("requires_grad"):
            with _alone():
                self._keep(out, func(*_on_host(args), **_on_host({**kwargs, "device": CPU})))

    def _moved(self, source: torch.Tensor, out) -> None:
        """A CPU tensor put on the GPU: labels, token ids, masks (not a float batch: its
        values shape nothing, and a model's parameters are floats)."""
        if _on_meta(out) and not out.is_floating_point() and _small(out):
            with _alone():
                self._keep(out, source.detach().to(dtype=out.dtype, copy=True))

    def _derived(self, func, args, kwargs, out) -> None:
        inputs = [t for t in _meta_tensors((args, kwargs))]
        if not inputs:
            return
        written = _written(func, args, kwargs)
        twins_all = all(self.of(t) is not None for t in inputs)
        if not twins_all:
            for t in written:   # written from values the host has not: its twins (and views') go
                self._forget(t)
            return
        with _alone():
            result = func(*self._twinned(args), **self._twinned(kwargs))
        if written:
            return   # the twins were written in place alike
        for t, twin in zip(_flat(out), _flat(result)):
            if _on_meta(t) and isinstance(twin, torch.Tensor):
                self._keep(t, twin)

    def _twinned(self, value):
        if isinstance(value, torch.Tensor) and value.is_meta:
            return self.of(value)
        if isinstance(value, torch.device) and value.type == "meta":
            return CPU
        if isinstance(value, (list, tuple)):
            return type(value)(self._twinned(v) for v in value) if not hasattr(value, "_fields") \
                else type(value)(*(self._twinned(v) for v in value))
        if isinstance(value, dict):
            return {k: self._twinned(v) for k, v in value.items()}
        return value

    def host_copy(self, t: torch.Tensor) -> torch.Tensor:
        """What a value read of meta tensor t reads: its twin, else zeros."""
        twin = self.of(t)
        if twin is not None:
            return twin.clone()
        return torch.zeros(t.shape, dtype=t.dtype)

    # -- the shapes
    def assume(self, op: str, what: str) -> None:
        project = user_frames.of_script(not_followed.script())
        at = project.on_stack() if project is not None else None
        where = f"{at.file} line {at.lineno}" if at is not None else "the script"
        if where not in self.assumed and len(self.assumed) < NOTES:
            self.assumed[where] = f"{op} at {where}: {what}"

    def count_nonzero(self, t: torch.Tensor, op: str, shape=None) -> int:
        """Elements of t (broadcast to `shape`) that are not zero: its twin's, else all of them."""
        twin = self.of(t)
        if twin is not None:
            with _alone():
                return int((twin.expand(shape) if shape is not None else twin).count_nonzero())
        self.assume(op, "its mask's values were computed on the GPU; taken at its full size, every element "
                        "selected (an upper bound)")
        return math.prod(shape) if shape is not None else t.numel()

    def stand_in(self, t: torch.Tensor, op: str) -> torch.Tensor:
        """A CPU tensor to run a unique on: t's twin, else distinct values (its bound)."""
        twin = self.of(t)
        if twin is not None:
            return twin
        self.assume(op, "its input's values were computed on the GPU; taken as all distinct (an upper bound)")
        return torch.arange(t.numel()).reshape(t.shape).to(t.dtype)


VALUES = Values()


def _small(t: torch.Tensor) -> bool:
    return t.numel() <= (FLOAT_LIMIT if t.is_floating_point() else LIMIT)


def _on_meta(t) -> bool:
    return isinstance(t, torch.Tensor) and t.is_meta


def _on_cpu(t) -> bool:
    return isinstance(t, torch.Tensor) and t.device.type == "cpu"


def _storage(t: torch.Tensor) -> int:
    return StorageWeakRef(t.untyped_storage()).cdata


def _flat(value) -> list:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _meta_tensors(value):
    """The meta tensors among a call's arguments (one level into lists, tuples and dicts)."""
    for v in (value if isinstance(value, (list, tuple)) else [value]):
        if isinstance(v, dict):
            v = list(v.values())
        if isinstance(v, (list, tuple)):
            for w in v:
                if isinstance(w, (list, tuple)):
                    yield from (x for x in w if _on_meta(x))
                elif _on_meta(w):
                    yield w
        elif _on_meta(v):
            yield v


def _written(func, args, kwargs) -> list[torch.Tensor]:
    """The meta tensors a call writes in place: its first argument's for add_, __setitem__,
    __iadd__ and the like, and its out=."""
    name = getattr(func, "__name__", "")
    written = []
    inplace = (name.endswith("_") and not name.endswith("__")) or name == "__setitem__" or \
        (name.startswith("__i") and name.endswith("__") and name not in ("__index__", "__int__", "__invert__"))
    if inplace and args:
        written += [t for t in _flat(args[0]) if _on_meta(t)]
    if "out" in kwargs:
        written += [t for t in _flat(kwargs["out"]) if _on_meta(t)]
    return written


def _on_host(value):
    if isinstance(value, torch.device) or (isinstance(value, str) and value.split(":")[0] in ("cuda", "meta")):
        return CPU
    if isinstance(value, tuple):
        return tuple(_on_host(v) for v in value)
    if isinstance(value, dict):
        return {k: _on_host(v) if k == "device" else v for k, v in value.items()}
    return value


class _alone:
    """The twin's arithmetic: on the CPU, seen by no mode (neither the device map nor the
    step's counter), without autograd."""

    def __enter__(self):
        self.modes = python_dispatch._disable_current_modes()
        self.function = torch._C.DisableTorchFunction()
        self.grad = torch.no_grad()
        for part in (self.modes, self.function, self.grad):
            part.__enter__()

    def __exit__(self, *exc):
        for part in (self.grad, self.function, self.modes):
            part.__exit__(*exc)
        return False


# --------------------------------------------------------------------------- the meta kernels
def _empty(shape, dtype) -> torch.Tensor:
    return torch.empty(tuple(shape), dtype=dtype, device=META)


def _nonzero(self):
    return _empty((VALUES.count_nonzero(self, "nonzero (a boolean mask's indexing, torch.where(cond))"),
                   self.dim()), torch.long)


def _masked_select(self, mask):
    shape = torch.broadcast_shapes(self.shape, mask.shape)
    return _empty((VALUES.count_nonzero(mask, "masked_select", shape),), self.dtype)


def _run_on_stand_in(op: str, function):
    """A unique's meta kernel: the real operation run on the input's twin or stand-in, its
    outputs' shapes on the meta device."""
    def kernel(self, *args):
        stand_in = VALUES.stand_in(self, op)
        with _alone():
            outs = function(stand_in, *args)
        return tuple(_empty(o.shape, o.dtype) for o in outs)
    return kernel


def _bincount(self, weights=None, minlength=0):
    twin = VALUES.of(self)
    if twin is None:
        not_followed.refuse("torch.bincount", "its length is its input's largest value, which was computed on "
                                              "the GPU; the meta device has no values to size it by")
    with _alone():
        stand_in = None if weights is None else torch.zeros(weights.shape, dtype=weights.dtype)
        out = torch.bincount(twin, stand_in, minlength)
    return _empty(out.shape, out.dtype)


def _repeat_interleave(repeats, output_size=None):
    if output_size is None:
        twin = VALUES.of(repeats)
        if twin is None:
            not_followed.refuse("torch.repeat_interleave with repeats computed on the GPU and no output_size",
                                "its length is the repeats' sum; the meta device has no values to size it by")
        with _alone():
            output_size = int(twin.sum())
    return _empty((output_size,), repeats.dtype)


KERNELS = {
    "nonzero": _nonzero,
    "masked_select": _masked_select,
    "_unique": _run_on_stand_in("unique", torch.ops.aten._unique),
    "_unique2": _run_on_stand_in("unique", torch.ops.aten._unique2),
    "unique_dim": _run_on_stand_in("unique(dim=)", torch.ops.aten.unique_dim),
    "unique_consecutive": _run_on_stand_in("unique_consecutive", torch.ops.aten.unique_consecutive),
    "unique_dim_consecutive": _run_on_stand_in("unique_consecutive(dim=)", torch.ops.aten.unique_dim_consecutive),
    "bincount": _bincount,
    "repeat_interleave.Tensor": _repeat_interleave,
}
_library: list = []


def install() -> Values:
    """The meta kernels of the data-dependent operations, for the process."""
    if not _library:
        library = torch.library.Library("aten", "IMPL")
        for name, kernel in KERNELS.items():
            library.impl(name, kernel, "Meta")
        _library.append(library)
    return VALUES
