"""The workloads' progress line: paced, from rank 0 only, outside each step's timing.

A real two-process run printing it from rank 0 only is one of the checks of the MNIST
workload's two-process run in tests/workloads/test_mnist_data.py (one run serves those
checks and this one)."""

from __future__ import annotations

import argparse
import time

import pytest


# harness imports torch: imported by the tests that use it, not at collection (importing
# torch costs every test worker seconds, in the fast lane too)
def ctx(rank: int, world: int = 2):
    import harness
    import torch

    return harness.Dist(rank, rank, world, torch.device("cpu"), "gloo")


def args(**given) -> argparse.Namespace:
    return argparse.Namespace(**{"warmup": 2, "profile": None, "batch_size": 64, **given})


def test_the_printer_paces_its_lines_and_says_the_rate():
    import harness
    import metrics

    lines: list[str] = []
    printer = harness.ProgressPrinter(128, write=lines.append, every_s=3600)
    printer.begin("measure", 10)
    for i in range(10):
        printer.after_step(i + 1)
    assert lines == []  # not yet due
    printer.every_s = 0.0
    time.sleep(0.01)
    printer.after_step(11)
    fields = metrics.parse_progress(lines[0])
    assert (fields["phase"], fields["step"], fields["total"]) == ("measure", 11, 10)
    assert fields["rate"] > 0 and fields["unit"] == "samples/s" and fields["elapsed"] > 0


def test_only_rank_0_has_a_printer_and_its_rate_is_global():
    import harness

    assert harness.progress_for(ctx(1), args()) is None
    printer = harness.progress_for(ctx(0), args())
    assert printer.samples_per_step == 128  # 64 per rank, 2 ranks


@pytest.mark.parametrize("rank,expected", [(0, True), (1, False)])
def test_measure_prints_progress_from_rank_0_only(rank, expected, capsys, monkeypatch):
    import harness
    import metrics

    monkeypatch.setattr(harness.ProgressPrinter, "EVERY_S", 0.0)
    harness.measure(ctx(rank), args(), lambda step: time.sleep(0.002), steps=5)
    progress = [l for l in capsys.readouterr().out.splitlines() if metrics.parse_progress(l)]
    assert bool(progress) is expected
    if expected:  # warm-up steps, then the measured ones, each phase counted from 1
        phases = [(f["phase"], f["step"], f["total"]) for f in map(metrics.parse_progress, progress)]
        assert phases[:2] == [("warmup", 1, 2), ("warmup", 2, 2)]
        assert phases[-1] == ("measure", 5, 5)
