"""The step in parts (workloads/step_parts.py): each step split so that its parts add up
to it, a run's parts the medians adding up to its median step, their shares adding up to
1, and DDP's own timing read as the exposed communication. The runs: test_step_parts_runs.py."""

from __future__ import annotations

import pytest

from gpubench.workloads.step_parts import PARTS, ddp_exposed, shares, split_step, summarise


def test_a_step_is_split_into_parts_that_add_up_to_it():
    parts = split_step(0.100, data=0.010, span=0.080, comm=0.020, data_in_span=0.005)
    assert parts == pytest.approx({"data": 0.010, "compute": 0.055, "exposed_comm": 0.020,
                                   "other": 0.015})
    assert list(parts) == list(PARTS) and sum(parts.values()) == pytest.approx(0.100, abs=1e-15)


def test_no_part_takes_more_than_the_step_leaves_it():
    # DDP's figure is another iteration's: it may be longer than this step
    parts = split_step(0.050, data=0.010, span=0.045, comm=0.080)
    assert parts == pytest.approx({"data": 0.010, "compute": 0.0, "exposed_comm": 0.040, "other": 0.0})
    assert split_step(0.02) == {"data": 0.0, "compute": 0.0, "exposed_comm": 0.0, "other": 0.02}
    assert split_step(0.02, span=0.5)["compute"] == pytest.approx(0.02)


def test_a_runs_parts_are_medians_adding_up_to_its_median_step():
    steps = [split_step(0.100 + i * 0.001, data=0.01 * i, span=0.08, comm=0.005) for i in range(5)]
    parts = summarise(steps, median_step=0.102)
    assert parts["data"] == pytest.approx(0.02) and parts["exposed_comm"] == pytest.approx(0.005)
    assert sum(parts.values()) == pytest.approx(0.102)
    assert sum(shares(parts).values()) == pytest.approx(1.0)


def test_medians_adding_up_to_more_than_the_median_step_are_scaled_down_to_it():
    steps = [split_step(0.1, data=0.09, span=0.01), split_step(0.1, data=0.0, span=0.1),
             split_step(0.1, data=0.09, span=0.01)]
    parts = summarise(steps, median_step=0.05)
    assert sum(parts.values()) == pytest.approx(0.05) and parts["other"] == 0.0
    assert summarise([], 0.1) is None and summarise(steps, None) is None and shares(None) is None


def test_ddps_timing_gives_the_communication_that_did_not_overlap():
    # torch 2.13's _get_ddp_logging_data() on a CPU with gloo, after a few iterations (ns)
    logged = {"iteration": 10, "backward_comm_time": 13889705,
              "backward_compute_comm_overlap_time": 2331372, "backward_compute_time": 5646368}
    iteration, exposed = ddp_exposed(logged)
    assert iteration == 10 and exposed == pytest.approx(0.011558333)
    assert ddp_exposed({"iteration": 3, "backward_comm_time": 1000,
                        "backward_compute_comm_overlap_time": 5000}) == (3, 0.0)
    assert ddp_exposed({}) == (None, None)  # before DDP has timed an iteration
