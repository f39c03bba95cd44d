"""The pure formulas, against values worked out by hand."""

import math

import pytest

import metrics


def test_allreduce_bus_factor_is_2_n_minus_1_over_n():
    assert metrics.busbw_factor("all_reduce", 8) == 1.75
    assert metrics.busbw_factor("all_reduce", 2) == 1.0
    assert metrics.busbw_factor("all_reduce", 1) == 0.0
    assert metrics.busbw_factor("all_gather", 4) == 0.75
    assert metrics.busbw_factor("reduce_scatter", 8) == 0.875
    assert metrics.busbw_factor("broadcast", 8) == metrics.busbw_factor("reduce", 8) == 1.0


def test_algbw_and_busbw_use_decimal_gigabytes():
    # 1 GiB in 10 ms: 1.073741824e9 B / 1e9 / 0.01 s = 107.3741824 GB/s
    assert metrics.algbw(2**30, 0.01) == pytest.approx(107.3741824)
    # on 8 ranks the bus carries 1.75x that
    assert metrics.busbw(2**30, 0.01, 8) == pytest.approx(187.9048192)
    # 1 MB (1e6 B) in 100 us = 10 GB/s; 4 ranks: x 1.5
    assert metrics.busbw(1_000_000, 100e-6, 4) == pytest.approx(15.0)


def test_gpt2_small_flops_per_token():
    # GPT-2 small, nanoGPT shape, no biases, vocab 50304, tied embedding:
    # per layer 12*768^2 (attention 4*d^2, MLP 8*d^2) + 2*768 (two LayerNorms) = 7,079,424
    # N = 12 * 7,079,424 + 768 (final LayerNorm) + 50304*768 (wte = lm_head) = 123,587,328
    n = 12 * (12 * 768**2 + 2 * 768) + 768 + 50304 * 768
    assert n == 123_587_328
    # 6N = 741,523,968; attention 12*L*H*Q*T = 12*12*12*64*1024 = 113,246,208
    assert metrics.gpt_flops_per_token(n, 12, 12, 64, 1024) == 854_770_176


def test_mfu_is_achieved_over_peak():
    # 854,770,176 FLOP/token * 100,000 tokens/s = 85.4770176 TFLOP/s; A100 bf16 peak 312
    assert metrics.mfu(854_770_176, 100_000, 312.0) == pytest.approx(85.4770176 / 312)
    assert metrics.mfu(854_770_176, 100_000, None) is None


@pytest.mark.parametrize("name, precision, tf32, peak", [
    ("NVIDIA H100 80GB HBM3", "bf16", False, 989.5),
    ("NVIDIA H100 PCIe", "bf16", False, 756.5),
    ("NVIDIA H100 NVL", "fp16", False, 835.5),
    ("NVIDIA H200", "bf16", False, 989.5),
    ("NVIDIA A100-SXM4-80GB", "bf16", False, 312.0),
    ("NVIDIA A100 80GB PCIe", "fp32", True, 156.0),
    ("NVIDIA A100-SXM4-40GB", "fp32", False, 19.5),
    ("NVIDIA A10", "bf16", False, 125.0),
    ("NVIDIA L4", "fp16", False, 121.0),
    ("NVIDIA L40S", "bf16", False, 362.05),
    ("Tesla T4", "fp16", False, 65.0),
    ("Tesla T4", "bf16", False, None),
    ("NVIDIA GeForce RTX 3090", "bf16", False, 71.0),
    ("NVIDIA GeForce RTX 4090", "fp16", False, 165.2),
    ("cpu", "fp32", False, None),
    ("NVIDIA L40", "bf16", False, None),
])
def test_peak_table(name, precision, tf32, peak):
    assert metrics.peak_tflops(name, precision, tf32=tf32) == peak


def test_peaks_are_dense_not_sparse():
    # every bf16/fp16 figure is at most 2x the next-lower tensor precision: a sparse
    # figure slipping in would double the H100's to 1979
    for _, peaks in metrics.PEAK_TFLOPS:
        assert all(v is None or (0 < v < 1000 and not math.isnan(v)) for v in peaks.values())
