"""workloads/model_profile.py counts one training step of each suite workload from the
model itself (FlopCounterMode on the meta device): the counts agree with hand-worked
ones and with nanoGPT's estimate, and workloads/profiles.json is what it counts today.

torch is imported inside the tests (through model_profile), never at collection."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROFILES = ROOT / "workloads" / "profiles.json"


@pytest.mark.slow
def test_flop_counter_convention_on_linear_layers():
    """2 FLOPs per multiply-add; the backward computes each weight's gradient (as many FLOPs
    as the forward) and the input's gradient except for the first layer, whose input needs
    none: a stack of Linears costs 3x its forward less the first layer's input gradient.
    Bias additions are not counted."""
    import torch
    import torch.nn as nn

    import model_profile

    batch = 4
    with torch.device("meta"):
        model = nn.Sequential(nn.Linear(5, 3), nn.ReLU(), nn.Linear(3, 2))
    flops = model_profile.count_flops(
        model, lambda: model(torch.empty(batch, 5, device="meta")).sum())
    forward = 2 * batch * (5 * 3 + 3 * 2)
    backward = 2 * batch * 5 * 3 + 2 * 2 * batch * 3 * 2  # layer 1: weight only; layer 2: both
    assert flops == forward + backward == 384


@pytest.mark.slow
def test_mnist_flops_worked_by_hand():
    import model_profile

    conv1 = 2 * 26 * 26 * 32 * (1 * 3 * 3)  # 1 -> 32 channels, 3x3, 28x28 -> 26x26
    conv2 = 2 * 24 * 24 * 64 * (32 * 3 * 3)  # 32 -> 64 channels, 3x3, 26x26 -> 24x24
    fc1, fc2 = 2 * 9216 * 128, 2 * 128 * 10
    forward = conv1 + conv2 + fc1 + fc2
    backward = conv1 + 2 * (conv2 + fc1 + fc2)  # the image needs no gradient: conv1's weight only
    p = model_profile.profile("mnist-ddp", [])
    assert p["flops_per_sample"] == forward + backward == 71_565_312
    assert p["params"] == 32 * 9 + 32 + 64 * 32 * 9 + 64 + 9216 * 128 + 128 + 128 * 10 + 10
    assert p["grad_bytes"] == 4 * p["params"]
    assert (p["unit"], p["batch_per_gpu"], p["epoch_samples"], p["counted_on"]) == (
        "images", 64, 60_000, "meta")


@pytest.mark.slow
def test_recsys_counts_its_linear_layer_and_all_reduces_both_tables():
    """FlopCounterMode counts no FLOPs in an embedding lookup or its backward: per rating,
    only the Linear(64, 1) forward and its weight and input gradients. The gradients of
    both embedding tables are dense: DDP all-reduces them whole every step."""
    import model_profile

    p = model_profile.profile("recsys-ddp", [])
    assert p["flops_per_sample"] == 3 * 2 * 64
    users, movies, dim = 6_040, 3_706, 32  # ml-1m, the default --shape
    assert p["params"] == (users + movies) * dim + 2 * dim + 1
    assert p["grad_bytes"] == 4 * p["params"]
    assert (p["unit"], p["epoch_samples"]) == ("ratings", 1_000_209)


@pytest.mark.slow
def test_gpt_flops_per_token_match_nanogpt_estimate_at_the_gpu_size():
    import metrics
    import model_profile

    p = model_profile.profile("gpt-ddp", [])
    L, H, C, T, V = 12, 12, 768, 1024, 50304  # GPT-2 small at the GPU defaults, not the CPU's 256
    wpe = T * C
    n = p["params"] - wpe  # nanoGPT's N: without the position embedding
    assert n == V * C + L * (12 * C * C + 2 * C) + C
    estimate = metrics.gpt_flops_per_token(n, L, H, C // H, T)
    assert p["flops_per_sample"] == pytest.approx(estimate, rel=0.10)
    # the only difference: 6N counts the LayerNorm weights, which do no matmul
    assert estimate - p["flops_per_sample"] == 6 * (2 * L + 1) * C
    assert (p["unit"], p["batch_per_gpu"], p["work_per_gpu_step"]) == ("tokens", 8, 8 * T)
    assert p["grad_bytes"] == 4 * p["params"]  # the tied wte/lm_head weight once


@pytest.mark.slow
def test_resnet50_at_the_gpu_size():
    import model_profile

    p = model_profile.profile("resnet-ddp", [])
    assert p["params"] == 25_557_032  # torchvision's resnet50
    assert p["batch_per_gpu"] == 256 and p["counted_on"] == "meta"  # not the CPU's 8
    # about 4.1 G multiply-adds forward at 224x224, times 3, less the stem's input gradient
    assert 23e9 < p["flops_per_sample"] < 3 * 2 * 4.15e9


@pytest.mark.slow
def test_falls_back_to_the_cpu_where_meta_fails(monkeypatch, capsys):
    import model_profile

    on_meta = model_profile.profile("mnist-ddp", [])
    real_build = model_profile.build

    def no_meta(workload, args, device, batch):
        if device == "meta":
            raise NotImplementedError("no meta kernel")
        return real_build(workload, args, device, batch)

    monkeypatch.setattr(model_profile, "build", no_meta)
    on_cpu = model_profile.profile("mnist-ddp", [])
    assert on_cpu["counted_on"] == "cpu"
    assert {**on_cpu, "counted_on": "meta"} == on_meta
    assert "meta device failed" in capsys.readouterr().err


@pytest.mark.slow
def test_cpu_attention_is_counted_as_on_meta():
    """On a CPU, scaled_dot_product_attention's fused kernel has no FLOP formula (it would
    count 0): the CPU count forces the math form and agrees with the meta count."""
    import model_profile

    argv = ["--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--block-size", "32",
            "--vocab-size", "64", "--batch-size", "2"]
    args = model_profile.gpu_args("gpt-ddp", argv)
    (_, meta), (_, cpu) = (model_profile._count("gpt-ddp", args, d, 2) for d in ("meta", "cpu"))
    attention = 3 * 2 * (2 * 2 * 32 * 32 * 16)  # QK^T and AV, forward + backward, 2 sequences
    assert meta == cpu > attention


@pytest.mark.slow
def test_profiles_json_is_up_to_date():
    """Regenerate with `python workloads/model_profile.py --write` when a model changes."""
    import model_profile
    import torch

    document = json.loads(PROFILES.read_text())
    assert document["generated_by"] == model_profile.COMMAND == "python workloads/model_profile.py --write"
    assert document["torch"] and document["date"]
    assert sorted(document["profiles"]) == sorted(model_profile.SUITE)
    for workload, shipped in document["profiles"].items():
        counted = model_profile.profile(workload, [])
        if shipped["torch"] != torch.__version__:  # another torch may count another way
            shipped, counted = {**shipped, "torch": None}, {**counted, "torch": None}
        assert counted == shipped, f"{workload}: profiles.json is out of date"


@pytest.mark.slow
def test_the_shipped_step_profiles_are_what_op_profile_counts_now():
    """workloads/step_profiles.json is `python workloads/op_profile.py --write`'s: a changed
    workload model without a new count fails here (two configurations, counted again)."""
    import op_profile

    shipped = json.loads(op_profile.STEP_PROFILES_FILE.read_text())["profiles"]
    for workload, args in (("mnist-ddp", []), ("gpt-ddp", ["--params", "125M", "--precision", "bf16"])):
        again = op_profile.profile(workload, args)
        kept = shipped[op_profile.key(workload, args)]
        assert again["ops"] == kept["ops"] and again["peak_bytes"] == kept["peak_bytes"]
        assert again["held_bytes"] == kept["held_bytes"] and again["data_bytes"] == kept["data_bytes"]
