"""The step in parts, measured (issue 58): a user's script whose DataLoader is slow waits
for its data most, at one process and at two; one whose gradients are large and cheap to
compute waits most for the all-reduce DDP could not hide behind its backward, at two; a
suite workload's record carries every rank's parts; the parts add up to the step; and the
report names the points of efficiency each count lost, and where. Each run goes through
gpubench's sweep (the probe's line or the harness's record, then the record, then the
report) on gloo processes of one thread."""

from __future__ import annotations

import textwrap

import pytest

from gpubench.report import compute
from gpubench.workloads.step_parts import PARTS

pytestmark = pytest.mark.slow

SLOW_LOADER = """
    import time
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import DataLoader, Dataset, DistributedSampler

    class Slow(Dataset):
        def __len__(self):
            return 4096

        def __getitem__(self, i):
            time.sleep(0.002)  # a decoder, a disk: 16 ms a batch of 8
            return torch.randn(32), i % 4

    dist.init_process_group("gloo")
    data = Slow()
    loader = DataLoader(data, batch_size=8, sampler=DistributedSampler(data))
    model = DDP(nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step, (x, y) in enumerate(loader):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step == 24:
            break
    dist.destroy_process_group()
"""

BIG_GRADIENTS = """
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("gloo")
    model = DDP(nn.Linear(2048, 2048, bias=False))  # 16 MB of gradient, one row of input
    x = torch.randn(1, 2048)
    for step in range(25):      # no optimizer: each backward ends a step, as the probe counts it
        model.module.weight.grad = None
        model(x).sum().backward()
    dist.destroy_process_group()
"""


def script(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def largest(record: dict) -> str:
    shares = record["step_shares"]
    return max(shares, key=shares.get)


def check_parts(record: dict) -> None:
    """The parts add up to the record's median step, their shares to 1, a rank's each."""
    parts = record["step_parts"]
    assert list(sorted(parts)) == sorted(PARTS) and min(parts.values()) >= 0
    assert sum(parts.values()) == pytest.approx(record["median_step_s"], abs=1e-5)
    assert sum(record["step_shares"].values()) == pytest.approx(1.0, abs=1e-5)
    ranks = record["step_parts_by_rank"]
    assert [r["rank"] for r in ranks] == list(range(record["world_size"]))
    assert record["step_parts_note"]


def lost_lines(records: list[dict]) -> list[str]:
    return [n for n in compute.build_report(records).notes if "points against" in n]


def test_a_slow_dataloader_is_the_largest_part_at_one_and_two_processes(sweep, tmp_path):
    records = sweep(script(tmp_path, "slow_loader.py", SLOW_LOADER), [])
    for record in records:
        check_parts(record)
        assert largest(record) == "data", record["step_shares"]
        assert record["step_shares"]["data"] > 0.6
    assert "DataLoader's __next__" in records[0]["step_parts_note"]
    assert len(lost_lines(records)) == 1  # the count above one


def test_large_cheap_gradients_make_the_exposed_all_reduce_the_largest_part_at_two(sweep, tmp_path):
    one, two = sweep(script(tmp_path, "big_gradients.py", BIG_GRADIENTS), [])
    for record in (one, two):
        check_parts(record)
    assert largest(two) == "exposed_comm", two["step_shares"]
    assert two["step_shares"]["exposed_comm"] > one["step_shares"]["exposed_comm"]
    assert "DDP's own timing" in two["step_parts_note"]
    [line] = lost_lines([one, two])
    assert " at 2 processes on " in line and "points against 1 process: exposed all-reduce " in line


def test_a_suite_workload_records_every_ranks_parts(sweep):
    one, two = sweep("mnist-ddp", ["--data", "synthetic", "--steps", "12", "--batch-size", "32"])
    for record in (one, two):
        check_parts(record)
        assert largest(record) == "compute"
    assert one["step_parts"]["exposed_comm"] == 0.0 and "one process" in one["step_parts_note"]
    assert two["step_parts"]["exposed_comm"] > 0.0
    assert "exposed all-reduce from DDP's own timing at 12 of the 12 timed steps" in two["step_parts_note"]
    [line] = lost_lines([one, two])
    assert line.startswith("mnist-ddp at 2 processes on ")
