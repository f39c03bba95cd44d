"""What a bench plans before renting: the points each machine will sweep."""

from __future__ import annotations

import pytest

from gpubench.bench.plan import planned_points
from gpubench.bench.request import BenchRequest
from gpubench.launch.base import SweepPoint as P
from gpubench.launch.points import PointsError
from tests.helpers import one_node


def test_the_points_a_bench_sweeps_on_one_machine():
    assert planned_points(8, BenchRequest("lambda", 8, [])) == one_node([1, 2, 4, 8])
    assert planned_points(1, BenchRequest("lambda", 1, [])) == one_node([1])
    assert planned_points(2, BenchRequest("lambda", 2, [], counts=[1, 4])) == one_node([1])   # 4 does not fit
    assert planned_points(2, BenchRequest("lambda", 2, [], counts=[4])) == one_node([4])      # the first, at least


def test_the_points_a_bench_sweeps_on_a_cluster():
    assert planned_points(8, BenchRequest("lambda", 8, []), [1, 2]) == [P(1, 8), P(2, 8)]
    assert planned_points(8, BenchRequest("lambda", 8, [], counts=[1, 8]), [2]) == [P(2, 1), P(2, 8)]
    with pytest.raises(PointsError, match="^--counts 16: the cluster planned has 8 GPUs per node$"):
        planned_points(8, BenchRequest("lambda", 8, [], counts=[16]), [1, 2])
