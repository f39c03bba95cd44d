"""workloads/step_count.py counts a step's kernels as a GPU runs them, where the meta
device's own would differ: a recurrent layer as cuDNN's one call, an NCHW 16-bit
convolution with cuDNN's transposes, a loss that reads one score a row.

torch is imported inside the tests, never at collection."""

from __future__ import annotations

import collections

import pytest


def test_an_lstm_is_one_kernel_forward_and_one_backward_as_cudnn_runs_it():
    import torch

    from step_count import StepCounter

    lstm = torch.nn.LSTM(64, 64, num_layers=2, device="meta")
    x = torch.randn(6, 20, 64, device="meta", requires_grad=True)
    with StepCounter([]) as counter:
        out, _ = lstm(x)
        counter.phase = "backward"
        out.sum().backward()
    kernels = collections.Counter(op[1] for op in counter.ops if op[4] == "kernel")
    assert kernels["aten._cudnn_rnn"] == kernels["aten._cudnn_rnn_backward"] == 1
    assert "aten.sigmoid" not in kernels and sum(kernels.values()) < 12     # not a dozen a time step
    forward, backward = (next(op for op in counter.ops if op[1] == name)
                         for name in ("aten._cudnn_rnn", "aten._cudnn_rnn_backward"))
    # 4 gates, (input + hidden) x hidden multiply-adds a token, two layers
    assert forward[2] == pytest.approx(2 * 4 * (64 + 64) * 64 * 6 * 20 * 2, rel=0.05)
    assert backward[2] == 2 * forward[2] and backward[0] == "backward"
    assert x.grad is not None and all(p.grad is not None for p in lstm.parameters())
    assert getattr(torch._VF, "lstm").__name__ == "lstm"      # put back once counted


@pytest.mark.parametrize("layout", ["nchw", "channels_last"])
def test_a_16_bit_nchw_convolution_pays_cudnns_transposes_and_a_channels_last_one_does_not(layout):
    import torch

    from step_count import MetaAutocast, StepCounter

    fmt = torch.channels_last if layout == "channels_last" else torch.contiguous_format
    model = torch.nn.Sequential(torch.nn.Conv2d(16, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
                                torch.nn.Conv2d(16, 16, 1)).to("meta").to(memory_format=fmt)
    x = torch.randn(4, 16, 32, 32, device="meta").to(memory_format=fmt)
    with MetaAutocast(torch.bfloat16), StepCounter([]) as counter:
        model(x).float().sum().backward()
    conv = [op[3] for op in counter.ops if op[1] == "aten.convolution"]
    transposes = [op[3] for op in counter.ops if op[1] == "cudnn.nchw_nhwc_transpose"]
    activation = 4 * 16 * 32 * 32 * 2                 # one bf16 activation
    assert all(moved < 2.5 * activation for moved in conv)     # the convolution's own bytes either way
    if layout == "nchw":        # in and out, each transposed (read and written) once more, forward and back
        assert len(transposes) == 4 and all(moved >= 4 * activation for moved in transposes)
    else:                       # the 1x1 convolution too: channels_last propagates, as on a GPU
        assert transposes == []


def test_a_loss_reads_one_score_a_row_and_an_embedding_one_row_a_token():
    import torch
    import torch.nn.functional as F

    from step_count import StepCounter

    scores = torch.randn(64, 1000, device="meta", requires_grad=True)
    target = torch.zeros(64, dtype=torch.long, device="meta")
    table = torch.nn.Embedding(5000, 32, device="meta")
    with StepCounter([]) as counter:
        (F.nll_loss(scores, target) + table(target).sum()).backward()
    moved = {op[1]: op[3] for op in counter.ops}
    assert moved["aten.nll_loss_forward"] < 64 * 1000 * 4 / 10          # not the whole of the scores
    assert moved["aten.nll_loss_backward"] < 2 * 64 * 1000 * 4         # writes the gradient, reads no score
    assert moved["aten.embedding"] < 5000 * 32 * 4 / 10                 # not the whole table
