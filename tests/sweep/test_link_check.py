"""The network check before a multi-node sweep: the measured link through the performance
model, its arithmetic against the model's formulas by hand, its wording, and what it
does with --yes, a question, and no one to ask."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpubench.launch.base import Machine, SweepPoint
from gpubench.predict.links import NETWORK_LATENCY_S
from gpubench.predict.model import BACKWARD_SHARE, DDP_BUCKET_BYTES
from gpubench.predict.workload_profiles import profile_for
from gpubench.remote.cluster import ClusterHosts, ClusterNode
from gpubench.remote.targets import RemoteHost, SshTarget
from gpubench.sweep import link_check
from gpubench.sweep.link_check import LinkCheck, LinkRefused, NodeForecast

GPU = "H100 SXM"
MACHINE = Machine("runpod", f"1x {GPU}", GPU, 1, 3.0, "cuda", max_nodes=3)
ONE, TWO, THREE = SweepPoint(1, 1), SweepPoint(2, 1), SweepPoint(3, 1)
RATE = 1000.0      # images/s measured on one GPU: the model's seconds per image is 1/RATE


def _measured(rate: float = RATE) -> list[dict]:
    """One ok 1-GPU record of resnet-ddp on the GPU: the measured basis."""
    return [{"workload": "resnet-ddp", "workload_args": [], "status": "ok", "nodes": 1, "gpu_count": 1,
             "throughput": rate, "device": "cuda", "gpu_name": GPU, "batch_per_gpu": 256}]


def _cluster(*gbps: float | None, error: str = "refused") -> ClusterHosts:
    nodes = [ClusterNode(RemoteHost(SshTarget("10.0.0.1", 22, "root", Path("k")), "runpod", "c-0"), 0, "10.65.0.1")]
    for i, rate in enumerate(gbps, start=1):
        link = {"node": i, "network": "private", "address": f"10.65.0.{i + 1}", "gbps": rate,
                "seconds": 3.0, "error": None if rate else error}
        nodes.append(ClusterNode(RemoteHost(SshTarget(f"10.0.0.{i + 1}", 22, "root", Path("k")), "runpod", f"c-{i}"), i,
                                 f"10.65.0.{i + 1}", link=link))
    return ClusterHosts("c", tuple(nodes))


def _by_hand(mbit_s: float, nodes: int) -> float:
    """The model's formulas for K nodes of one GPU against one GPU, written out: the ring
    all-reduce over the measured link, all of it hidden behind the backward pass but the
    last 25 MiB bucket, or what sticks out past the backward pass."""
    profile = profile_for("resnet-ddp")
    grads, batch = profile.grad_bytes, profile.batch_per_gpu
    compute = batch / RATE
    allreduce = 2 * (nodes - 1) / nodes * grads / (mbit_s / 8000 * 1e9) + 2 * (nodes - 1) * NETWORK_LATENCY_S
    exposed = max(allreduce - BACKWARD_SHARE * compute, allreduce * min(1.0, DDP_BUCKET_BYTES / grads))
    return (batch * nodes / (compute + exposed)) / (batch / compute)


@pytest.mark.parametrize("mbit_s", [20.0, 95.0, 10_000.0, 100_000.0])
@pytest.mark.parametrize("nodes", [2, 3])
def test_the_node_scaling_is_the_models_arithmetic(mbit_s, nodes):
    f = link_check.forecast("resnet-ddp", [], MACHINE, SweepPoint(nodes, 1), mbit_s, _measured())
    assert f.ratio == pytest.approx(_by_hand(mbit_s, nodes), rel=1e-9)
    assert f.slower == (f.ratio < 1)


def test_a_slow_link_is_slower_than_one_node_and_a_fast_one_is_not():
    slow = link_check.forecast("resnet-ddp", [], MACHINE, TWO, 20.0, _measured())
    fast = link_check.forecast("resnet-ddp", [], MACHINE, TWO, 100_000.0, _measured())
    assert slow.ratio < 0.05 and slow.slower
    assert 1.5 < fast.ratio <= 2.0 and not fast.slower


def test_the_slowest_measured_link_among_the_points_nodes_counts():
    cluster = _cluster(10.0, 0.095)
    assert link_check.measured_mbit_s(cluster, 2) == pytest.approx(10_000.0)
    assert link_check.measured_mbit_s(cluster, 3) == pytest.approx(95.0)
    assert link_check.measured_mbit_s(_cluster(10.0, None), 3) is None


def test_the_wording():
    f = NodeForecast("resnet-ddp", TWO, 95.0, 0.3)
    assert f.line() == "link 95 Mb/s measured: 2 nodes would run resnet-ddp at 0.3x of one node (predicted)"
    wide = NodeForecast("gpt-ddp", SweepPoint(2, 4), 9400.0, 1.84)
    assert wide.line() == ("link 9.4 Gb/s measured: 2 nodes x 4 gpus would run gpt-ddp at 1.8x of one "
                           "node (predicted)")
    assert NodeForecast("mnist-ddp", TWO, 20.0, 0.0052).line().endswith("at 0.0052x of one node (predicted)")
    checked = LinkCheck((f, wide))
    assert checked.going_on() == ("going on (--yes): over the 95 Mb/s link measured, 2 nodes are "
                                  "predicted to run resnet-ddp at 0.3x of one node")
    assert checked.question().startswith("Over the 95 Mb/s link measured, 2 nodes would run resnet-ddp "
                                          "at 0.3x of one node (predicted).")
    assert checked.refusal().endswith("pass --yes to run anyway, or --nodes 1")


def test_no_basis_is_said_and_never_called_slower():
    cpu = Machine("mock", "cpu", "cpu", 0, None, "cpu", max_nodes=2)
    f = link_check.forecast("resnet-ddp", [], cpu, TWO, 20.0, [])
    assert f.ratio is None and not f.slower
    assert f.line() == ("link 20 Mb/s measured: 2 nodes of resnet-ddp: no prediction (processes on a "
                        "CPU: the model predicts GPUs)")
    script = link_check.forecast("train.py", [], MACHINE, TWO, 20.0, [])
    assert script.ratio is None and "nothing is known" in script.why_not


def test_check_spans_every_multi_node_point_and_says_an_unmeasured_link():
    assert link_check.check(_cluster(1.0), MACHINE, [ONE], [("resnet-ddp", [])], []) is None
    checked = link_check.check(_cluster(0.02, 0.02), MACHINE, [ONE, TWO, THREE],
                               [("resnet-ddp", []), ("mnist-ddp", [])], _measured())
    assert [(f.workload, f.point.nodes) for f in checked.forecasts] == [
        ("resnet-ddp", 2), ("mnist-ddp", 2), ("resnet-ddp", 3), ("mnist-ddp", 3)]
    unmeasured = link_check.check(_cluster(None, error="cannot reach the head"), MACHINE, [TWO],
                                  [("resnet-ddp", [])], [])
    assert unmeasured.lines() == ["node scaling not predicted: the link between the nodes was not "
                                  "measured (cannot reach the head)"]
    assert not unmeasured.slower


SLOW = LinkCheck((NodeForecast("resnet-ddp", TWO, 20.0, 0.007),))
FAST = LinkCheck((NodeForecast("resnet-ddp", TWO, 100_000.0, 1.9),))


def test_settle_yes_goes_on_in_one_line():
    said = []
    assert link_check.settle(SLOW, [ONE, TWO], True, None, said.append) == [ONE, TWO]
    assert said == [SLOW.forecasts[0].line(), SLOW.going_on()]


def test_settle_asks_and_no_keeps_one_node():
    said, asked = [], []
    kept = link_check.settle(SLOW, [ONE, TWO], False, lambda q: asked.append(q) or False, said.append)
    assert kept == [ONE] and asked == [SLOW.question()]
    assert said[-1] == "multi-node points left out: running 1 gpu only"
    assert link_check.settle(SLOW, [ONE, TWO], False, lambda q: True, said.append) == [ONE, TWO]
    with pytest.raises(LinkRefused, match="declined"):
        link_check.settle(SLOW, [TWO], False, lambda q: False, said.append)


def test_settle_with_no_one_to_ask_refuses_and_a_fast_link_asks_nothing():
    with pytest.raises(LinkRefused) as e:
        link_check.settle(SLOW, [ONE, TWO], False, None, lambda line: None)
    assert str(e.value) == SLOW.refusal() and "\n" not in str(e.value)
    assert link_check.settle(FAST, [ONE, TWO], False, None, lambda line: None) == [ONE, TWO]
    assert link_check.settle(None, [ONE], False, None, lambda line: None) == [ONE]
