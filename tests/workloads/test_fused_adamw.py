"""gpt-ddp and gpt-fsdp step AdamW with its fused kernel wherever torch has one for the
device (harness.adamw), and fall back to the default where it has none."""

from __future__ import annotations

import pytest

# torch, and the workloads that import it, are imported by the tests that use them


@pytest.mark.slow  # harness imports torch
def test_fused_on_a_cpu_and_the_same_update_as_the_default():
    import harness
    import torch

    torch.manual_seed(0)
    weights = [torch.randn(8, 8, requires_grad=True), torch.randn(8, requires_grad=True)]
    twins = [w.detach().clone().requires_grad_() for w in weights]
    groups = [{"params": weights[:1], "weight_decay": 0.1}, {"params": weights[1:], "weight_decay": 0.0}]
    fused = harness.adamw(groups, lr=1e-2, betas=(0.9, 0.95))
    plain = torch.optim.AdamW([{"params": twins[:1], "weight_decay": 0.1},
                               {"params": twins[1:], "weight_decay": 0.0}], lr=1e-2, betas=(0.9, 0.95))
    assert harness.optimizer_name(fused) == "AdamW (fused)" and harness.optimizer_name(plain) == "AdamW"
    for _ in range(3):
        for opt, params in ((fused, weights), (plain, twins)):
            opt.zero_grad()
            sum((p ** 2).sum() for p in params).backward()
            opt.step()
    for a, b in zip(weights, twins):
        assert torch.allclose(a, b, atol=1e-6)


@pytest.mark.slow
def test_where_torch_has_no_fused_kernel_the_default_steps(monkeypatch):
    import harness
    import torch

    made = []

    class NoFusedHere(torch.optim.AdamW):
        def __init__(self, groups, **settings):
            if settings.get("fused"):
                for g in groups:
                    g["fused"] = True  # as torch's own check leaves a group it refuses
                raise RuntimeError("`fused=True` requires all the params to be floating point "
                                   "Tensors of supported devices")
            super().__init__(groups, **settings)
            made.append(self)

    monkeypatch.setattr(torch.optim, "AdamW", NoFusedHere)
    groups = [{"params": [torch.zeros(2, requires_grad=True)], "weight_decay": 0.1}]
    opt = harness.adamw(groups, lr=1e-3)
    assert made == [opt] and harness.optimizer_name(opt) == "NoFusedHere"
    assert "fused" not in groups[0]  # the caller's groups are not touched
