"""A count that ran out of memory: one line naming what was held of the card's memory, and
the sweep goes on only with the counts that can still fit."""

from __future__ import annotations

from pathlib import Path

from gpubench import suite
from gpubench.launch.base import RunOutcome, SweepPoint
from gpubench.launch.failures import Failure, RunFacts, explain
from gpubench.store.results import ResultsStore
from gpubench.sweep.run import SweepPlan, sweep
from tests.helpers import one_node
from tests.sweep.test_quiet_and_timeout import Fake

CUDA_OOM = ("[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
            "total capacity of 79.19 GiB of which 1.06 GiB is free. Including non-PyTorch memory, this "
            "process has 78.12 GiB memory in use. Of the allocated memory 76.50 GiB is allocated by PyTorch")


def test_a_cuda_out_of_memory_error_is_one_line_with_what_was_held_of_the_card():
    failure = explain(["Traceback (most recent call last):", '  File "/w/train.py", line 9, in <module>',
                       "    loss.backward()", CUDA_OOM], RunFacts(returncode=1))
    assert failure.kind == "out of gpu memory"
    assert failure.error == ("out of GPU memory on GPU 0: the process held 78.12 GiB of the card's 79.19 GiB "
                             "(1.06 GiB free) and asked for 2.00 GiB more; a smaller --batch-size, "
                             "activation checkpointing or FSDP (gpt-fsdp) needs less")


class OutOfMemory(Fake):
    def __init__(self, at: int, kind: str, sharding: str | None = None) -> None:
        super().__init__()
        self.at, self.failure, self.sharding = at, Failure("out of memory", kind), sharding

    def run(self, workload, point, workload_args, on_line, timeout) -> RunOutcome:
        self.ran.append(point.procs_per_node)
        if point.procs_per_node == self.at:
            return RunOutcome(1, {"sharding": self.sharding}, ["torchrun"], 1.0, self.failure.error,
                              failure=self.failure)
        return RunOutcome(0, {"status": "ok", "wall_seconds": 1.0, "throughput": 1.0}, ["torchrun"], 0.1)


def _sweep(tmp_path, fake, name="gpt-ddp", repeat=1):
    lines: list[str] = []
    plan = SweepPlan(suite.WorkloadRef(name, Path("w.py"), True), one_node([1, 2, 4, 8]), [], "r", 60.0,
                     repeat=repeat)
    return sweep(fake, plan, ResultsStore(tmp_path), lines.append), lines


def test_under_ddp_a_gpu_that_ran_out_skips_the_larger_counts_and_smaller_repeats_go_on(tmp_path):
    fake = OutOfMemory(2, "out of gpu memory")
    result, lines = _sweep(tmp_path, fake, repeat=2)
    assert fake.ran == [1, 2, 1]
    assert result.dropped[SweepPoint(1, 4)] == ("skipping 4 gpus: 2 gpus ran out of memory and each GPU "
                                                "holds the whole model under DDP at any count")
    assert ("2 gpus ran out of memory; 4 gpus and 8 gpus not run (they would hold as much or more): a "
            "smaller --batch-size, activation checkpointing or FSDP (gpt-fsdp) needs less") in lines


def test_under_fsdp_the_larger_counts_shard_more_and_still_run(tmp_path):
    fake = OutOfMemory(2, "out of gpu memory", sharding="FSDP2 full shard per block + root")
    result, _ = _sweep(tmp_path, fake, name="gpt-fsdp")
    assert fake.ran == [1, 2, 4, 8] and not result.dropped


def test_the_kernels_killer_skips_the_larger_counts_even_under_fsdp(tmp_path):
    fake = OutOfMemory(2, "out of memory", sharding="FSDP2 full shard per block + root")
    result, _ = _sweep(tmp_path, fake, name="gpt-fsdp")
    assert fake.ran == [1, 2] and "machine's memory is shared" in result.dropped[SweepPoint(1, 8)]
