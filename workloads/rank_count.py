"""A training step counted as one rank runs it, where the script shards its model over a
device mesh (tensor parallelism: parallelize_module, DTensor): the calibration's counter
(step_count.StepCounter) over the rank's local operations.

An operation on DTensors is not counted as itself (its shapes are the whole model's):
the counter defers it to DTensor (NotImplemented), whose local operations on this rank's
shards come back to the counter and are counted. DTensor's sharding propagation, which
runs each operation on fake tensors of the global shapes on the host, is left out. The
collectives DTensor issues (torch's functional collectives over the fake process group:
all-reduces of partial sums, all-gathers, reduce-scatters) are kept apart, with their
bytes as an all-reduce would move them, for the answer's communication, not among the
step's kernels.

Standard library and torch only.
"""

from __future__ import annotations

import sys

from torch.utils._pytree import tree_flatten

import step_count

COLLECTIVE_PREFIXES = ("_c10d_functional.", "c10d_functional.", "_dtensor.")
# the bytes each moves, as a share of an all-reduce of the same tensor (a ring all-reduce
# is a reduce-scatter then an all-gather)
ALL_REDUCE_SHARE = {"all_reduce": 1.0, "all_reduce_": 1.0, "all_reduce_coalesced": 1.0,
                    "all_gather_into_tensor": 0.5, "all_gather_into_tensor_coalesced": 0.5,
                    "reduce_scatter_tensor": 0.5, "reduce_scatter_tensor_coalesced": 0.5,
                    "all_to_all_single": 0.5, "broadcast": 0.5, "broadcast_": 0.5}


class RankCounter(step_count.StepCounter):
    """StepCounter, per rank where DTensors are about; `collectives`: the name of each
    collective DTensor issued -> [calls, bytes as an all-reduce would move them]."""

    def __init__(self, alive, device_only: bool = False) -> None:
        super().__init__(alive, device_only)
        self.collectives: dict[str, list] = {}
        tensor = sys.modules.get("torch.distributed.tensor")
        fake = sys.modules.get("torch._subclasses.fake_tensor")
        self.dtensor = getattr(tensor, "DTensor", None)
        self.fake = getattr(fake, "FakeTensor", None)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.dtensor is not None:
            found = tree_flatten((args, kwargs))[0]
            if any(isinstance(t, self.dtensor) for t in found):
                return NotImplemented   # DTensor runs it on the local shards, which come back here
            if self.fake is not None and any(isinstance(t, self.fake) for t in found):
                return func(*args, **kwargs)   # sharding propagation: host work of its own
        name = str(func.overloadpacket)
        if name.startswith(COLLECTIVE_PREFIXES):
            out = func(*args, **kwargs)
            kind = name.split(".", 1)[1]
            if kind in ALL_REDUCE_SHARE:
                moved = sum(step_count.nbytes(t) for t in step_count._tensors(out))
                tally = self.collectives.setdefault(kind, [0, 0])
                tally[0] += 1
                tally[1] += int(moved * ALL_REDUCE_SHARE[kind])
            return out
        return super().__torch_dispatch__(func, types, args, kwargs)

    @property
    def collective_bytes(self) -> int:
        return sum(moved for _, moved in self.collectives.values())
