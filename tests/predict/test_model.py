"""The model's arithmetic against cases worked by hand."""

from __future__ import annotations

import pytest

from gpubench.predict.model import (ASSUMED, DATASHEET, MEASURED, PUBLISHED, Figure, Link, StepInputs,
                                    allreduce_seconds, scaling, step_time)


def link(gbs: float, basis: str = MEASURED, latency: float = 0.0) -> Link:
    return Link("pcie", Figure(gbs, basis, "test"), latency)


def inputs(per_sample=0.001, grad_bytes=1e8, batch=32, overlap=1.0, basis=MEASURED,
           input_per_s=None) -> StepInputs:
    return StepInputs(Figure(per_sample, basis, "test"), Figure(grad_bytes, MEASURED, "test"), batch,
                      Figure(overlap, ASSUMED, "test"),
                      Figure(input_per_s, MEASURED, "test") if input_per_s else None)


def test_ring_allreduce_moves_two_n_minus_one_over_n_of_the_bytes():
    # 100 MB through 10 GB/s: 2 GPUs move 1x the bytes (0.01 s), 4 GPUs 1.5x (0.015 s).
    assert allreduce_seconds(1e8, 2, link(10)) == pytest.approx(0.01)
    assert allreduce_seconds(1e8, 4, link(10)) == pytest.approx(0.015)
    assert allreduce_seconds(1e8, 1, link(10)) == 0.0
    # latency: 2(N-1) hops of 50 us at 4 GPUs is 0.3 ms more
    assert allreduce_seconds(1e8, 4, link(10, latency=50e-6)) == pytest.approx(0.0153)


def test_the_all_reduce_the_backward_pass_cannot_hide_is_added_to_the_step():
    # compute 32 x 1 ms = 32 ms; all-reduce of 100 MB over 1 GB/s at 2 GPUs = 100 ms;
    # the backward pass (2/3 of 32 ms = 21.3 ms) hides that much: 78.7 ms exposed.
    t = step_time(inputs(), 2, 1, link(1))
    assert t.compute_s == pytest.approx(0.032)
    assert t.allreduce_s == pytest.approx(0.1)
    assert t.exposed_s == pytest.approx(0.1 - 0.032 * 2 / 3)
    assert t.step_s == pytest.approx(0.032 + 0.1 - 0.032 * 2 / 3)
    assert t.throughput == pytest.approx(64 / t.step_s)
    assert t.bound_by == "communication"


def test_a_fast_link_leaves_only_the_last_bucket_exposed():
    # 100 MB over 100 GB/s at 4 GPUs: 1.5 ms, all of it within the backward pass (21 ms)
    # but the last 25 MiB bucket, ready only when the backward pass ends: 1.5 ms x 26.2/100.
    s = scaling(inputs(), 4, 1, link(100))
    assert s.at.exposed_s == pytest.approx(0.0015 * 25 * 2**20 / 1e8)
    assert s.speedup == pytest.approx(4 * 0.032 / (0.032 + 0.0015 * 25 * 2**20 / 1e8))
    assert 0.98 < s.efficiency < 1.0
    assert s.at.bound_by == "compute"


def test_without_overlap_the_whole_all_reduce_shows():
    t = step_time(inputs(overlap=0.0), 2, 1, link(100))
    assert t.exposed_s == pytest.approx(1e8 / 100e9)


def test_a_slower_link_predicts_less_speedup():
    fast = scaling(inputs(), 2, 2, link(1.0))
    slow = scaling(inputs(), 2, 2, link(0.1))
    assert slow.speedup < fast.speedup < 2.0
    assert slow.speedup < 1.0     # over 0.1 GB/s two machines are slower than one


def test_the_input_pipeline_sets_the_pace_where_it_is_slower():
    t = step_time(inputs(input_per_s=500), 1, 1, None)   # 32 samples at 500/s = 64 ms > 32 ms
    assert t.step_s == pytest.approx(0.064)
    assert t.bound_by == "input"


def test_the_interval_widens_with_the_least_certain_input():
    measured = step_time(inputs(basis=MEASURED), 1, 1, None)
    published = step_time(inputs(basis=PUBLISHED), 1, 1, None)
    datasheet = step_time(inputs(basis=DATASHEET), 1, 1, None)
    assert measured.uncertainty < published.uncertainty < datasheet.uncertainty
    # an exposed all-reduce over an assumed link adds its share of the step
    assumed_link = step_time(inputs(), 2, 1, link(1, ASSUMED))
    measured_link = step_time(inputs(), 2, 1, link(1, MEASURED))
    assert assumed_link.uncertainty > measured_link.uncertainty


def test_impossible_counts_are_refused():
    with pytest.raises(ValueError):
        step_time(inputs(), 1, 2, link(1))


def test_a_tiny_model_is_bound_by_what_a_step_costs_however_little_it_computes():
    tiny = StepInputs(Figure(1e-7, MEASURED, "test"), Figure(1e4, MEASURED, "test"), 32,
                      Figure(1.0, ASSUMED, "test"), step_floor_s=Figure(1e-3, ASSUMED, "test"))
    t = step_time(tiny, 1, 1, None)
    assert t.step_s == pytest.approx(1e-3) and t.bound_by == "overhead"
    assert t.throughput == pytest.approx(32_000)
