"""`bench --nodes`: refused beside --hosts in one line; the plan names N machines and
the estimate for N; every member taken down and confirmed gone when the sweep fails or
is interrupted (the mock cloud in loopback mode, each member an sshd of its own)."""

from __future__ import annotations

import pytest

from gpubench.bench import cluster as bench_cluster
from gpubench.bench.plan import plan_cluster_bench
from gpubench.bench.request import BenchRequest
from gpubench.store.ledger import Ledger
from gpubench.store.results import ResultsStore
from gpubench.suite import resolve_list
from tests.helpers import mock_cloud, one_line


@pytest.fixture
def cloud(tmp_path, monkeypatch):
    yield from mock_cloud(tmp_path, monkeypatch)


def test_nodes_beside_hosts_is_one_line_and_nothing_is_rented(cli, cloud):
    code, out, err = cli("bench", "lambda", "--gpus", "1", "--nodes", "1,2", "--hosts", "2",
                         "--workload", "allreduce", "--yes")
    assert code != 0
    assert one_line(err) == ("error: --nodes and --hosts do not go together: --nodes rents one "
                             "cluster, --hosts separate machines")
    assert cloud.engine.store.instances() == []


@pytest.mark.parametrize("value, said", [("1,x", "'x' is not a whole number"),
                                         ("0,2", "0 is not a valid node count")])
def test_bad_node_counts_are_one_line(cli, cloud, value, said):
    code, out, err = cli("bench", "lambda", "--gpus", "1", "--nodes", value, "--workload",
                         "allreduce", "--yes")
    assert code != 0 and said in one_line(err) and "--nodes" in err


def request(**kw) -> BenchRequest:
    return BenchRequest("lambda", 1, resolve_list("allreduce", None), ["--steps", "1"],
                        name="bc", preflight=False, **kw)


def test_the_plan_is_for_every_machine(cloud):
    plan = plan_cluster_bench(request(), [1, 2, 3])
    assert plan.size == 3 and plan.nodes == [1, 2, 3]
    assert plan.total_dollars == pytest.approx(3 * plan.estimate.dollars)
    said = plan.describe()
    assert said.startswith("3 machines of 1x ") and " for all 3; each at " in said
    assert plan.request.nodes == 3 and plan.request.machine.name == "bc"
    assert plan.request.machine.max_hours == plan.max_hours
    assert cloud.engine.store.instances() == []


def assert_all_gone(cloud, name="bc"):
    assert cloud.engine.store.instances() == []
    with Ledger() as ledger:
        rows = ledger.cluster_members(name, include_done=True)
        assert len(rows) == 2 and all(r.status == "terminated" and r.terminated_confirmed_at
                                      for r in rows)


@pytest.mark.slow
@pytest.mark.parametrize("raised", [KeyboardInterrupt, RuntimeError])
def test_every_member_goes_when_the_sweep_fails_or_is_interrupted(cloud, tmp_path, monkeypatch,
                                                                    raised):
    def sweeps(*args, **kw):
        assert len(cloud.engine.store.instances()) == 2       # the whole cluster was rented
        raise raised("stopped")

    monkeypatch.setattr(bench_cluster, "_sweeps", sweeps)
    said: list[str] = []
    plan = plan_cluster_bench(request(), [1, 2])
    with pytest.raises(raised):
        bench_cluster.bench_cluster(request(), plan, ResultsStore(tmp_path / "r"), said.append)
    assert_all_gone(cloud)
    assert "cluster bc: all 2 members terminated and confirmed gone; the whole bench cost $" in \
        "\n".join(said)
