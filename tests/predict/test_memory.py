"""The memory model against cases worked by hand."""

from __future__ import annotations

import pytest

from gpubench.predict.memory import GB, ModelShape, gpt_activation_bytes, need, why_not
from gpubench.predict.model import ASSUMED, Figure


def test_ddp_holds_16_bytes_a_parameter_with_adamw():
    m = need(ModelShape(1_300_000_000), "DDP", 8)
    assert m.static_bytes == pytest.approx(1.3e9 * 16)          # 20.8 GB on every GPU, whatever N
    assert m.parts == {"parameters": 5.2e9, "gradients": 5.2e9, "optimizer": 10.4e9}


def test_fsdp_shards_them_and_gathers_two_blocks_and_one_blocks_gradients():
    shape = ModelShape(1_300_000_000, block_params=50_000_000)
    m = need(shape, "FSDP", 4)
    # 1.3e9 x 16 / 4 = 5.2 GB, plus 3 x 50M x 2 bytes (bf16) = 0.3 GB
    assert m.static_bytes == pytest.approx(5.2e9 + 0.3e9)
    assert need(shape, "FSDP", 8).static_bytes < m.static_bytes


def test_the_issues_example_batch_on_a_24_gb_card():
    per_sequence = Figure(1.5e9, ASSUMED, "test")
    m = need(ModelShape(1_300_000_000), "DDP", 1, per_sequence)
    # 24 GB x 0.9 = 21.6 GB; 21.6 - 20.8 = 0.8 GB left: no whole sequence of 1.5 GB
    assert m.max_batch(24 * GB) == 0
    small = need(ModelShape(1_000_000_000), "DDP", 1, per_sequence)   # 16 GB static
    assert small.max_batch(24 * GB) == 3                               # (21.6 - 16) / 1.5
    reason = why_not(ModelShape(1_000_000_000), small, 24 * GB, 8)
    assert reason == ("1.0B with AdamW under DDP needs about 16 GB a GPU plus activations; "
                      "this card has 24 GB: batch 3 at most (asked 8)")
    assert why_not(ModelShape(1_000_000_000), small, 80 * GB, 8) is None
    assert "not even the model fits" in why_not(ModelShape(1_300_000_000), m, 24 * GB, 1)


def test_unknown_activations_judge_only_the_static_part():
    m = need(ModelShape(100_000_000), "DDP", 1)
    assert m.max_batch(24 * GB) is None and why_not(ModelShape(100_000_000), m, 24 * GB, 64) is None
    big = need(ModelShape(7_000_000_000), "DDP", 1)
    assert big.max_batch(80 * GB) == 0                                   # 112 GB of state


def test_gpt_activations_per_sequence_and_with_checkpointing():
    # GPT-2 small: 12 layers, s=1024, h=768, a=12: 1024*768*(34 + 5*12*1024/768) = 89.1 MB a layer
    full = gpt_activation_bytes(12, 768, 12, 1024)
    assert full.value == pytest.approx(12 * 1024 * 768 * (34 + 80))
    checkpointed = gpt_activation_bytes(12, 768, 12, 1024, checkpointed=True)
    assert checkpointed.value == pytest.approx(12 * 2 * 1024 * 768 + 1024 * 768 * 114)
    assert checkpointed.value < full.value / 5
    assert gpt_activation_bytes(12, 768, 12, 1024, act_bytes=4).value == pytest.approx(2 * full.value)
