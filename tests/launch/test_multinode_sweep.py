"""A launcher that spans nodes plugs in with one module and one registry entry:
the sweep plans, skips and records (nodes, processes per node) points, and the
report and `gpubench run` take them, with nothing of theirs changed."""

from __future__ import annotations

import pytest

from gpubench.launch import factory
from gpubench.launch.schemes import Scheme
from gpubench.launch.base import SweepPoint as P
from gpubench.launch.factory import LaunchOptions, open_launcher
from gpubench.store.results import ResultsStore
from gpubench.suite import resolve
from gpubench.launch.points import sweep_points
from gpubench.sweep.run import SweepPlan, sweep
from tests.launch.two_node_fake import TwoNodeLauncher

FOUR = [P(1, 1), P(1, 2), P(2, 1), P(2, 2)]


@pytest.fixture
def fake2(monkeypatch):
    monkeypatch.setitem(factory.SCHEMES, "fake2", Scheme("fake2", "tests.launch.two_node_fake"))


def _plan(points, run_id: str = "r1") -> SweepPlan:
    return SweepPlan(resolve("mnist-ddp"), points, ["--steps", "3"], run_id, 60)


def test_the_factory_opens_a_registered_launcher_and_the_sweep_spans_its_nodes(fake2, tmp_path):
    store = ResultsStore(tmp_path)
    lines: list[str] = []
    with open_launcher("fake2:pair", LaunchOptions(echo=lines.append)) as launcher:
        assert isinstance(launcher, TwoNodeLauncher) and launcher.name == "pair"
        points = sweep_points(launcher.machine())
        assert points == FOUR
        result = sweep(launcher, _plan([*points, P(4, 1), P(1, 4)]), store, lines.append)
    assert launcher.closed and launcher.prepared == ["mnist-ddp"]
    assert launcher.ran == FOUR
    assert lines[0] == "pair: two nodes"  # from the launcher's own module
    assert "skipping 4 nodes x 1 gpu: pair: 2x A10 spans at most 2 nodes" in lines
    assert "skipping 4 GPUs: pair: 2x A10 has 2" in lines
    assert "[2 nodes x 1 gpu] world 2" in lines and "[1 gpu] world 1" in lines

    records = store.load().records
    assert records == result.records
    assert [(r["nodes"], r["gpu_count"], r["world_size"]) for r in records] == [
        (1, 1, 1), (1, 2, 2), (2, 2, 2), (2, 4, 4)]
    # each node is a 2-GPU machine at $4/h: a run pays its share of every node it uses
    assert [r["price_per_hour"] for r in records] == [2.0, 4.0, 4.0, 8.0]
    assert {r["instance_price_per_hour"] for r in records} == {4.0}
    assert [r["cost"] for r in records] == [pytest.approx(p * 10.0 / 3600) for p in (2, 4, 4, 8)]
    assert all(r["status"] == "ok" and r["provider"] == "fake" for r in records)
    assert "--nnodes=2 --nproc_per_node=1" in records[2]["launch_command"]


def test_recorded_points_are_skipped_by_point_not_by_gpu_count(tmp_path):
    store = ResultsStore(tmp_path)
    first = TwoNodeLauncher("pair", fail=P(2, 1))
    sweep(first, _plan(FOUR), store, lambda _: None)
    assert first.ran == FOUR

    # (1,2) and (2,1) both use 2 GPUs: only the failed one, across nodes, runs again
    again = TwoNodeLauncher("pair")
    lines: list[str] = []
    result = sweep(again, _plan(FOUR, "r2"), store, lines.append)
    assert again.ran == [P(2, 1)]
    assert sorted(result.skipped) == [P(1, 1), P(1, 2), P(2, 2)]
    assert [(r["nodes"], r["gpu_count"], r["status"]) for r in result.records] == [(2, 2, "ok")]
    assert any(line.startswith("[2 nodes x 2 gpus] already recorded") for line in lines)

    # another machine's records are not this one's
    elsewhere = TwoNodeLauncher("other")
    sweep(elsewhere, _plan(FOUR, "r3"), store, lambda _: None)
    assert elsewhere.ran == FOUR


def test_the_report_shows_node_scaling_from_the_records(tmp_path):
    from gpubench.report.compute import build_report

    store = ResultsStore(tmp_path)
    sweep(TwoNodeLauncher("pair"), _plan(FOUR), store, lambda _: None)
    rows = build_report(store.load().records).rows
    got = [(r.gpu_count, r.nodes, round(r.speedup, 6)) for r in rows.itertuples()]
    # against the 1-GPU record: the fake loses 10% across nodes
    assert got == [(1, 1, 1.0), (2, 1, 2.0), (2, 2, 1.8), (4, 2, 3.6)]


def test_gpubench_run_on_a_registered_launcher(fake2, tmp_path, cli):
    results = tmp_path / "results"
    results.mkdir()
    code, out, _ = cli("run", "mnist-ddp", "--on", "fake2:pair", "--results", str(results))
    assert code == 0, out
    assert "pair: two nodes" in out and "[2 nodes x 2 gpus] world 4" in out
    records = ResultsStore(results).load().records
    assert [(r["nodes"], r["gpu_count"]) for r in records] == [(1, 1), (1, 2), (2, 2), (2, 4)]
    assert "speedup" in out
