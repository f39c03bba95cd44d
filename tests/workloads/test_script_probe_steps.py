"""The probe's steady state of a script's steps (workloads/script_probe.py): the first
max(2, a tenth) of the steps left out, the median step time with its spread, and the
samples and tokens of a step as the model's forward calls give them."""

from __future__ import annotations

import pytest

from gpubench.workloads.script_probe import _percentile, step_figures


def test_the_warm_up_is_left_out_and_the_median_is_of_the_rest():
    # 12 steps: the first two slow (compilation, caches), then 10 ms each with one of 30 ms
    ends, t = [], 0.0
    for gap in [5.0, 0.5] + [0.01] * 9 + [0.03]:
        t += gap
        ends.append(t)
    figures = step_figures(ends, [64] * 12, [0] * 12)
    assert (figures["count"], figures["warmup"], figures["timed"]) == (12, 2, 10)
    assert figures["median_s"] == pytest.approx(0.01)
    assert figures["p90_s"] == pytest.approx(0.012)  # linear, as numpy's percentile
    assert figures["samples_per_step"] == 64 and figures["tokens_per_step"] == 0


def test_a_tenth_of_a_long_run_is_its_warm_up():
    figures = step_figures([0.1 * i for i in range(1, 201)], [8] * 200, [8 * 128] * 200)
    assert (figures["warmup"], figures["timed"]) == (20, 180)
    assert figures["tokens_per_step"] == 1024


def test_too_few_steps_time_nothing():
    for ends in ([], [1.0], [1.0, 2.0]):
        figures = step_figures(ends, [1] * len(ends), [0] * len(ends))
        assert figures["timed"] == 0 and figures["median_s"] is None
    assert step_figures([1.0, 2.0, 2.5], [4, 4, 6], [0] * 3)["samples_per_step"] == 6


def test_percentiles_are_numpys_linear_ones():
    assert _percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert _percentile([1.0, 2.0, 3.0, 4.0, 5.0], 10) == pytest.approx(1.4)
    assert _percentile([7.0], 90) == 7.0


@pytest.mark.slow  # imports torch
def test_the_samples_of_a_forward_call_and_its_tokens():
    torch = pytest.importorskip("torch")
    from gpubench.workloads.script_probe import _inputs_of

    assert _inputs_of(torch, (torch.randn(16, 3, 8, 8),), {}) == (16, 0)
    assert _inputs_of(torch, (torch.randint(0, 50, (4, 128)), torch.randint(0, 50, (4, 128))), {}) == (4, 512)
    batch = {"input_ids": torch.ones(2, 10, dtype=torch.long), "labels": torch.ones(2, 10, dtype=torch.long)}
    assert _inputs_of(torch, (), batch) == (2, 20)                       # model(**batch)
    assert _inputs_of(torch, ([torch.randn(5, 8), torch.randn(5, 1)], 0), {}) == (5, 0)  # Lightning
    assert _inputs_of(torch, (3,), {}) == (0, 0)
