"""The one reader of counts and the one builder of sweep points, for every launcher
(launch/points.py): one machine, a Slurm partition, a rented cluster."""

from __future__ import annotations

import pytest

from gpubench.launch.base import Machine, NodeSpan
from gpubench.launch.base import SweepPoint as P
from gpubench.launch.points import CountsAsked, PointsError, check_asked, counts_asked, parse_counts, sweep_points
from tests.helpers import one_node

CPU = Machine("local", "cpu", "cpu", 0, 0.0, "cpu")
SLURM = NodeSpan("login:booster (4x a100 nodes)", default_nodes=(1, 2))
CLUSTER = NodeSpan("cluster c", gpus_per_node=True)


def test_counts_are_whole_numbers_from_one_named_by_their_flag():
    assert parse_counts("1, 2,2,4") == [1, 2, 4]
    with pytest.raises(PointsError, match="^--gpus: 'x' is not a whole number"):
        parse_counts("1,x")
    with pytest.raises(PointsError, match="^--nodes: 0 is not a valid node count"):
        parse_counts("0,2", "--nodes")
    with pytest.raises(PointsError, match="^--counts: -2 is not a valid GPU count"):
        parse_counts("1,-2", "--counts")
    assert counts_asked("1,2", None, "4") == CountsAsked([1, 2], None, [4])


def test_one_machine_defaults_to_one_and_powers_of_two_up_to_its_gpus():
    assert sweep_points(CPU) == [P(1, 1), P(1, 2)]
    assert sweep_points(Machine("x", "t", "H100", 8, 1.0)) == one_node([1, 2, 4, 8])
    assert sweep_points(Machine("x", "t", "H100", 6, 1.0)) == one_node([1, 2, 4])
    two = Machine("x", "t", "H100", 2, 1.0, max_nodes=2)
    assert sweep_points(two) == [P(1, 1), P(1, 2), P(2, 1), P(2, 2)]
    five = Machine("x", "t", "H100", 1, 1.0, max_nodes=5)
    assert [p.nodes for p in sweep_points(five)] == [1, 2, 4]


def test_gpus_on_one_machine_are_its_counts_and_too_many_are_left_to_the_sweep():
    assert sweep_points(Machine("x", "t", "H100", 4, 1.0), CountsAsked(gpus=[1, 2, 8])) == one_node([1, 2, 8])
    assert sweep_points(CPU, CountsAsked(nodes=[1, 2], per_node=[1, 2])) == [P(1, 1), P(1, 2), P(2, 1), P(2, 2)]
    with pytest.raises(PointsError, match="^--gpus is the counts on one machine; with --nodes give --gpus-per-node$"):
        sweep_points(CPU, CountsAsked(gpus=[1], nodes=[2]))


def test_a_slurm_partition_runs_whole_nodes_as_far_as_it_goes():
    four = Machine("slurm", SLURM.called, "a100", 4, None, "cuda", max_nodes=16, span=SLURM)
    assert sweep_points(four) == [P(1, 4), P(2, 4)]
    assert sweep_points(four, CountsAsked(nodes=[1, 2, 4], per_node=[1, 4])) == [
        P(1, 1), P(1, 4), P(2, 1), P(2, 4), P(4, 1), P(4, 4)]
    assert sweep_points(four, CountsAsked(gpus=[1, 2])) == one_node([1, 2])
    one = Machine("slurm", "login:tiny", "gpu", 1, None, "cuda", max_nodes=1, span=NodeSpan("login:tiny", (1, 2)))
    assert sweep_points(one) == [P(1, 1)]
    with pytest.raises(PointsError, match="^--nodes 32: login:booster \\(4x a100 nodes\\) has 16 nodes$"):
        sweep_points(four, CountsAsked(nodes=[1, 32]))
    with pytest.raises(PointsError, match="^--gpus-per-node 8: .* has 4 GPUs per node$"):
        sweep_points(four, CountsAsked(per_node=[8]))
    cpus = Machine("slurm", "login:cpu", "cpu", 0, None, "cpu", max_nodes=4, span=NodeSpan("login:cpu", (1, 2)))
    assert sweep_points(cpus, CountsAsked(nodes=[1], per_node=[16])) == [P(1, 16)]


def test_a_cluster_defaults_to_whole_nodes_at_each_node_count_and_gpus_count_per_node():
    eight = Machine("lambda", "gpu_8x_a100", "A100", 8, 10.0, "cuda", max_nodes=4, span=CLUSTER)
    assert sweep_points(eight) == [P(1, 8), P(2, 8), P(4, 8)]
    three = Machine("m", "t", "A", 2, 1.0, "cuda", max_nodes=3, span=CLUSTER)
    assert sweep_points(three) == [P(1, 2), P(2, 2), P(3, 2)]
    assert sweep_points(eight, CountsAsked(gpus=[1, 8], nodes=[1, 2])) == [P(1, 1), P(1, 8), P(2, 1), P(2, 8)]
    with pytest.raises(PointsError, match="^--nodes 5: cluster c has 4 nodes$"):
        sweep_points(eight, CountsAsked(nodes=[1, 5]))
    with pytest.raises(PointsError, match="^--gpus 16: cluster c has 8 GPUs per node$"):
        sweep_points(eight, CountsAsked(gpus=[16], nodes=[1]))
    with pytest.raises(PointsError, match="^--counts 16: cluster c has 8 GPUs per node$"):
        sweep_points(eight, CountsAsked(nodes=[1], per_node=[16], per_node_flag="--counts"))
    with pytest.raises(PointsError, match="give --gpus-per-node"):
        sweep_points(eight, CountsAsked(gpus=[1], per_node=[2]))


def test_what_can_be_refused_before_connecting_is():
    check_asked(CountsAsked(gpus=[8], nodes=[2]), CLUSTER, 2)
    with pytest.raises(PointsError, match="^--nodes 3: cluster c has 2 nodes$"):
        check_asked(CountsAsked(nodes=[1, 3]), CLUSTER, 2)
    with pytest.raises(PointsError, match="with --nodes give --gpus-per-node"):
        check_asked(CountsAsked(gpus=[1], nodes=[2]), None)
