"""Clusters on the mock cloud's own instances in namespace mode when things go wrong:
a member that dies mid-run, a member that never boots (all or nothing). Lambda's
clusters end to end are these: the one a member dies in is first seen in `ls` and
reached with `ssh NAME:i` (the cluster commands of tests/cli/test_cluster_cli.py, on
Lambda), and `down` ends it (Vast.ai's and RunPod's: test_cluster_e2e_mock.py; bench
sweeping node counts on a cluster it rents: test_vast_overlay.py)."""

from __future__ import annotations

import threading
import time

import pytest

from gpubench.lifecycle.cluster_placement import ClusterRequest, connect_and_place
from gpubench.lifecycle.cluster_provision import ClusterError, provision_cluster
from gpubench.store.ledger import Ledger
from gpubench.lifecycle.provision import Deadlines, ProvisionRequest
from gpubench.mock import netns
from gpubench.store.results import ResultsStore
from tests.helpers import LOOPING
from tests.lifecycle.cluster_mock import (assert_down, check_listed_and_reachable, cloud,  # noqa: F401
                                          provision, run_args)
from tests.lifecycle.test_cluster_e2e_mock import check_provisioned

pytestmark = pytest.mark.slow

def kill_once_marked(cloud, provider: str, iid: str, marker, died_at: list[float],
                     limit_s: float = 240) -> threading.Thread:
    """The mock's node-dies on one instance once the two-node run has started."""
    def watch() -> None:
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline and not marker.exists():
            time.sleep(0.2)
        if marker.exists():
            cloud.node_dies(provider, iid, after=0)
            died_at.append(time.monotonic())

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def test_a_member_that_dies_mid_run_fails_that_run_and_down_takes_it(cloud, cli, tmp_path):
    out, err, members = provision(cli, cloud, "lambda")
    check_provisioned("lambda", out, err, members)
    check_listed_and_reachable(cli, "lambda", out, members)     # while both members live
    script = tmp_path / "looping_allreduce.py"
    script.write_text(LOOPING)
    marker = tmp_path / "two-nodes-running"   # the instances share this machine's files
    died_at: list[float] = []
    watcher = kill_once_marked(cloud, "lambda", members[1].instance_id, marker, died_at)
    started = time.monotonic()
    # (2,1) loses node 1; (2,2) then no longer fits; (1,1) and (1,2) run on the head
    code, out, err = cli("run", str(script), *run_args(tmp_path, "--nodes", "2,1", "--gpus", "1,2",
                                                      "--timeout", "600"), "--", "--marker", str(marker))
    watcher.join(1)
    assert died_at, out[-3000:]
    assert code == 1, out + err
    records = ResultsStore(tmp_path / "results").load().records
    assert [(r["nodes"], r["gpu_count"], r["status"]) for r in records] == [
        (2, 2, "failed"), (1, 1, "ok"), (1, 2, "ok")], out[-3000:]
    node1 = f"node 1 ({members[1].ssh_host})"
    failed = records[0]
    assert node1 in failed["error"] and failed["lost_nodes"] == [node1], failed["error"]
    ended = started + failed["process_seconds"]
    assert ended - died_at[0] < 60, (ended - died_at[0], out[-3000:])   # not the 600 s timeout
    assert "skipping 2 nodes x 2 gpus: " in out
    # the dead one is still listed by the provider: down terminates it and confirms it gone
    assert len(cloud.engine.store.instances()) == 2
    assert_down(cli, cloud)


def test_a_member_that_never_boots_leaves_nothing_rented(cloud, cli):
    """All or nothing in namespace mode: member 1 never boots, nor does its replacement."""
    launches = {"n": 0}
    original = cloud.engine.store.instances

    def progress_fault(phase: str, detail: str) -> None:
        if phase == "launch" and detail.startswith("c:1 "):
            launches["n"] += 1
            cloud.set_faults("lambda:never-boots")

    req = ClusterRequest(ProvisionRequest("lambda", 2, name="c", attempts=2,
                                          deadlines=Deadlines(running_s=2.0, ssh_s=30.0,
                                                              terminate_s=20.0)), 2)
    prov, place = connect_and_place(req)
    with Ledger() as ledger, pytest.raises(ClusterError) as e:
        provision_cluster(prov, req, place, ledger, progress_fault)
    assert launches["n"] == 2 and original() == []
    assert "every member was terminated and confirmed gone" in str(e.value)
    with Ledger() as ledger:
        rows = ledger.cluster_members("c", include_done=True)
        assert len(rows) == 3 and all(r.status == "terminated" and r.terminated_confirmed_at
                                      for r in rows)
        assert ledger.cluster_members("c") == []
    assert not [ns for ns in netns.namespaces() if ns.startswith(cloud.engine.network.bridge + "-")]
