"""Sweep points: what --gpus and the defaults plan, what a machine holds, what a
run there costs."""

from __future__ import annotations

import pytest

from gpubench.errors import UsageError
from gpubench.launch.base import Machine, SweepPoint
from gpubench.suite import resolve
from gpubench.sweep import (SweepPlan, default_points, grid, misfit, on_one_node, parse_counts,
                            point_of)

P = SweepPoint
H100x4 = Machine("lambda", "gpu_4x_h100", "H100", 4, 8.0)


def test_default_points_on_one_machine_are_the_old_counts():
    cpu = Machine("local", "cpu", "cpu", 0, 0.0, "cpu")
    assert default_points(cpu) == [P(1, 1), P(1, 2)]
    assert default_points(Machine("x", "t", "H100", 8, 1.0)) == on_one_node([1, 2, 4, 8])
    assert default_points(Machine("x", "t", "H100", 6, 1.0)) == on_one_node([1, 2, 4])


def test_default_points_across_nodes_cover_every_node_and_per_node_count():
    two = Machine("x", "t", "H100", 2, 1.0, max_nodes=2)
    assert default_points(two) == [P(1, 1), P(1, 2), P(2, 1), P(2, 2)]
    five = Machine("x", "t", "H100", 1, 1.0, max_nodes=5)
    assert [p.nodes for p in default_points(five)] == [1, 2, 4]


def test_gpus_flag_is_counts_on_one_node():
    assert parse_counts("1, 2,2,4") == [1, 2, 4]
    assert on_one_node(parse_counts("1,2,4")) == [P(1, 1), P(1, 2), P(1, 4)]
    assert grid([1, 2], [1, 2]) == [P(1, 1), P(1, 2), P(2, 1), P(2, 2)]
    with pytest.raises(UsageError, match="not a whole number"):
        parse_counts("1,x")


def test_a_plan_holds_points_not_counts():
    with pytest.raises(TypeError, match="on_one_node"):
        SweepPlan(resolve("mnist-ddp"), [1, 2])


def test_point_words_and_world():
    assert (P(1, 1).describe(), P(1, 4).describe(), P(2, 1).describe(), P(3, 8).describe()) == (
        "1 gpu", "4 gpus", "2 nodes x 1 gpu", "3 nodes x 8 gpus")
    assert P(3, 8).world_size == 24


def test_points_that_do_not_fit_say_why():
    assert misfit(P(1, 4), H100x4) is None
    assert misfit(P(1, 8), H100x4) == "skipping 8 GPUs: gpu_4x_h100 has 4"
    assert misfit(P(2, 1), H100x4) == "skipping 2 nodes x 1 gpu: gpu_4x_h100 spans at most 1 node"
    pair = Machine("x", "pair", "H100", 4, 8.0, max_nodes=2)
    assert misfit(P(2, 4), pair) is None
    assert misfit(P(2, 8), pair) == "skipping 2 nodes x 8 gpus: pair has 4 per node"
    assert misfit(P(4, 1), pair) == "skipping 4 nodes x 1 gpu: pair spans at most 2 nodes"
    assert misfit(P(1, 64), Machine("local", "cpu", "cpu", 0, 0.0, "cpu")) is None


def test_price_is_the_share_of_each_node_times_the_nodes():
    # one node: the numbers records have always had
    assert [H100x4.price_for(P(1, n)) for n in (1, 2, 4)] == [2.0, 4.0, 8.0]
    assert Machine("x", "cpu", "cpu", 0, 3.0, "cpu").price_for(P(1, 2)) == 3.0
    assert Machine("x", "t", "H100", 4, None).price_for(P(1, 1)) is None
    pair = Machine("x", "pair", "H100", 4, 8.0, max_nodes=2)
    assert (pair.price_for(P(2, 1)), pair.price_for(P(2, 4))) == (4.0, 16.0)
    assert Machine("x", "cpu", "cpu", 0, 3.0, "cpu", max_nodes=2).price_for(P(2, 2)) == 6.0


def test_the_point_of_a_record():
    assert point_of({"gpu_count": 4}) == P(1, 4)  # from before nodes were recorded
    assert point_of({"gpu_count": 4, "nodes": 2}) == P(2, 2)
    assert point_of({"gpu_count": 3, "nodes": 2}) is None
    assert point_of({"gpu_count": None, "nodes": 1}) is None
