"""In a world of one a suite workload trains the model alone (harness.replicate):
DDP's buckets and all-reduce would copy every gradient for nothing, and a user's
single-GPU loop has neither. At any larger size the model is wrapped in DDP."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

# torch, and the workloads that import it, are imported by the tests that use them


@pytest.mark.slow  # harness imports torch
def test_a_world_of_one_trains_the_model_alone_and_says_so():
    import harness
    import torch
    from mnist_ddp import Net

    model = Net()
    ctx = SimpleNamespace(world_size=1, device=torch.device("cpu"), local_rank=0)
    assert harness.replicate(ctx, model) is model
    assert harness.sharding_of(model, 1) == harness.ONE_PROCESS
    assert harness.sharding_of(model, 2) is None  # a workload that shards says how itself
    assert harness.sharding_of(None, 1) is None  # a bandwidth test has no model


@pytest.mark.slow
def test_a_larger_world_wraps_the_model_in_ddp(monkeypatch):
    import harness
    import torch
    from mnist_ddp import Net

    made = []

    class FakeDDP(torch.nn.Module):
        def __init__(self, module, device_ids=None):
            super().__init__()
            made.append((module, device_ids))

    monkeypatch.setattr(harness, "DDP", FakeDDP)
    model = Net()
    wrapped = harness.replicate(SimpleNamespace(world_size=2, device=torch.device("cpu"),
                                                local_rank=1), model)
    assert isinstance(wrapped, FakeDDP) and made == [(model, None)]
    assert harness.sharding_of(wrapped, 2) == "DDP (replicated)"
