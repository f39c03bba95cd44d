"""The mock cloud in namespace mode for the cluster tests: each instance a host of its
own, the cluster launcher's timeouts short, and the steps every cluster test takes
(provision a two-node cluster, run on it, take it down)."""

from __future__ import annotations

import pytest

from gpubench.launch import cluster as cluster_launcher
from gpubench.launch.cluster import ClusterOptions
from gpubench.launch.cluster_torchrun import Rendezvous
from gpubench.store.ledger import Ledger
from tests.lifecycle.test_cluster_provision import second_vast_machine
from tests.mock.helpers import netns_mock_cloud

TINY = {"mnist-ddp": ["--steps", "3", "--warmup", "1", "--batch-size", "16"],
        "allreduce": ["--steps", "2", "--warmup", "1", "--max-bytes", "65536"]}
NETWORK = {"lambda": "private", "vast": "public", "runpod": "private"}   # runpod: its own cluster
# short enough for a test, long enough for two torch start-ups on a loaded 2-core machine
QUICK = ClusterOptions(Rendezvous(join_timeout=90, read_timeout=30, collective_timeout=30),
                       keepalive_s=1, dead_link_s=5, rejoin_wait_s=2)


@pytest.fixture
def cloud(tmp_path, monkeypatch):
    monkeypatch.setattr(cluster_launcher, "DEFAULTS", QUICK)
    with netns_mock_cloud(tmp_path / "mock", monkeypatch) as c:
        yield c


def provision(cli, cloud, provider: str, name: str = "c", *extra: str):
    second_vast_machine(cloud, 2)
    code, out, err = cli("provision", provider, "--gpus", "2", "--nodes", "2", "--name", name,
                         "--yes", "--ssh-timeout", "60", "--public-network", *extra)
    assert code == 0, out + err
    with Ledger() as ledger:
        members = ledger.cluster_members(name)
    assert [(m.node_index, m.status) for m in members] == [(0, "ready"), (1, "ready")]
    return out, err, members


def run_args(tmp_path, *extra: str) -> list[str]:
    return ["--on", "c", "--connect-wait", "20", "--repeat", "1",
            "--results", str(tmp_path / "results"), *extra]


def assert_down(cli, cloud, name: str = "c") -> None:
    code, out, err = cli("down", name, "--yes")
    assert code == 0, out + err
    assert f"{name}-0: terminated" in out and f"{name}-1: terminated" in out, out
    assert cloud.engine.store.instances() == []
    with Ledger() as ledger:
        rows = ledger.cluster_members(name, include_done=True)
        assert rows and all(r.status == "terminated" and r.terminated_confirmed_at for r in rows)
        assert ledger.cluster_members(name) == []
