"""Sweep points and machines (launch/base.py): a point in words and as a world size,
and what a run at a point costs on a machine."""

from __future__ import annotations

from gpubench.launch.base import Machine, SweepPoint

P = SweepPoint
H100x4 = Machine("lambda", "gpu_4x_h100", "H100", 4, 8.0)


def test_point_words_and_world():
    assert (P(1, 1).describe(), P(1, 4).describe(), P(2, 1).describe(), P(3, 8).describe()) == (
        "1 gpu", "4 gpus", "2 nodes x 1 gpu", "3 nodes x 8 gpus")
    assert P(3, 8).world_size == 24


def test_price_is_the_share_of_each_node_times_the_nodes():
    # one node: the numbers records have always had
    assert [H100x4.price_for(P(1, n)) for n in (1, 2, 4)] == [2.0, 4.0, 8.0]
    assert Machine("x", "cpu", "cpu", 0, 3.0, "cpu").price_for(P(1, 2)) == 3.0
    assert Machine("x", "t", "H100", 4, None).price_for(P(1, 1)) is None
    pair = Machine("x", "pair", "H100", 4, 8.0, max_nodes=2)
    assert (pair.price_for(P(2, 1)), pair.price_for(P(2, 4))) == (4.0, 16.0)
    assert Machine("x", "cpu", "cpu", 0, 3.0, "cpu", max_nodes=2).price_for(P(2, 2)) == 6.0
