"""The mock cloud in namespace mode for the cluster tests: each instance a host of its
own, the cluster launcher's timeouts short, and the steps every cluster test takes
(provision a two-node cluster, see it in `ls` and reach its members with `ssh NAME:i`,
run on it, take it down)."""

from __future__ import annotations

import json

import pytest

from gpubench.launch import cluster as cluster_launcher
from gpubench.launch.cluster import ClusterOptions
from gpubench.launch.cluster_torchrun import Rendezvous
from gpubench.store.ledger import Ledger
from tests.helpers import run_gpubench
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


def check_listed_and_reachable(cli, provider: str, out: str, members, name: str = "c") -> None:
    """What `provision --nodes 2` said of the cluster, the cluster as `ls` shows it (head
    first) and `ssh NAME:i` / `ssh NAME` (the head) reaching its members."""
    assert f"cluster {name} ready in" in out and f"node 0 (head): {name}-0" in out \
        and f"node 1: {name}-1" in out, out
    if NETWORK[provider] == "private":        # RunPod: its own cluster's private network
        assert f"network: {provider}'s private network" in out, out
    else:
        assert "the link between nodes is the public internet" in out, out
    assert [(m.name, m.node_index) for m in members] == [(f"{name}-0", 0), (f"{name}-1", 1)]
    assert len({(m.region, m.instance_type) for m in members}) == 1

    code, out, err = cli("ls")
    lines = [ln for ln in out.splitlines() if f"{name}-0" in ln or f"{name}-1" in ln]
    assert f"{name}:0 (head)" in lines[0] and f"{name}-0" in lines[0], out
    assert f"{name}:1" in lines[1] and f"{name}-1" in lines[1], out
    code, out, err = cli("ls", "--format", "json")
    rows = json.loads(out)
    assert [(r["name"], r["cluster"], r["node_index"]) for r in rows] == [
        (f"{name}-0", name, 0), (f"{name}-1", name, 1)]

    r = run_gpubench("ssh", f"{name}:1", "--", "echo", "member-one", timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "member-one", r.stderr
    alias = run_gpubench("ssh", name, "--", "echo", "head", timeout=60)
    assert alias.returncode == 0 and alias.stdout.strip() == "head", alias.stderr


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
    code, out, err = cli("ls")
    assert out.strip() == "no instances", out + err
    code, out, err = cli("down", name, "--yes")
    assert code == 0 and f"cluster {name} is already terminated" in out, out + err


# torchrun's c10d rendezvous and a gloo all-reduce across two instances, each node's
# --local_addr its own address (the instances resolve their own hostnames, not their peers')
# A check of the collectives, not a training script: it reports a figure of its own
# (a script that trains nothing and says nothing is refused as a measurement).
ALLREDUCE = """import os, time, torch, torch.distributed as dist
dist.init_process_group("gloo")
t0 = time.perf_counter()
t = torch.ones(2) * (dist.get_rank() + 1)
dist.all_reduce(t)
print("allreduce", dist.get_rank(), dist.get_world_size(), int(t[0].item()), flush=True)
if dist.get_rank() == 0:
    open(os.environ["GPUBENCH_RECORD_FILE"], "w").write(
        '{"throughput": %f, "throughput_unit": "all-reduces/s"}' % (1 / (time.perf_counter() - t0)))
dist.destroy_process_group()
"""
