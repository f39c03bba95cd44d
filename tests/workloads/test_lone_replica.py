"""In a world of one, mnist-ddp's DDP starts no all-reduce (the mean of one
replica's gradients is those gradients): it trains exactly as the model alone
does, and the hook is DDP's only at world size 1."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

# torch, and the workloads that import it, are imported by the tests that use them


@pytest.fixture
def world_of_one(monkeypatch):
    import harness

    for var in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(var, raising=False)
    ctx = harness.setup_distributed()
    try:
        yield ctx
    finally:
        harness.teardown_distributed()


@pytest.mark.slow
def test_a_world_of_one_trains_as_the_model_alone_without_an_allreduce(world_of_one):
    import harness
    import torch
    import torch.nn.functional as F
    from mnist_ddp import Net
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)
    alone = Net()
    wrapped = harness.skip_lone_allreduce(world_of_one, DDP(Net()))
    wrapped.module.load_state_dict(alone.state_dict())
    assert wrapped._get_ddp_logging_data()["comm_hook"] == "lone_replica"
    x, y = torch.randn(8, 1, 28, 28), torch.randint(0, 10, (8,))
    for model in (alone, wrapped):
        model.eval()  # no dropout: the same forward on both sides
        F.nll_loss(model(x), y).backward()
    for a, b in zip(alone.parameters(), wrapped.module.parameters()):
        assert torch.equal(a.grad, b.grad)


@pytest.mark.slow  # harness imports torch
def test_the_hook_is_only_for_a_world_of_one():
    import harness

    registered = []
    model = SimpleNamespace(register_comm_hook=lambda state, hook: registered.append(hook))
    assert harness.skip_lone_allreduce(SimpleNamespace(world_size=2), model) is model
    assert registered == []
    harness.skip_lone_allreduce(SimpleNamespace(world_size=1), model)
    assert registered == [harness.lone_replica]
