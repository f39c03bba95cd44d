"""`provision --nodes`, and a cluster in `ls`, `down` and `ssh NAME:i`, through the real
command line against the mock cloud in loopback mode (each member an sshd on its own
loopback port)."""

from __future__ import annotations

import json

import pytest

from gpubench.store.ledger import Ledger
from tests.helpers import mock_cloud, one_line, run_gpubench
from tests.lifecycle.test_cluster_provision import second_vast_machine

PROVIDERS = ["lambda", "vast", "runpod"]


@pytest.fixture
def cloud(tmp_path, monkeypatch):
    yield from mock_cloud(tmp_path, monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize("provider", PROVIDERS)
def test_provision_a_cluster_then_ls_ssh_and_down(cloud, cli, provider):
    second_vast_machine(cloud, 1)
    code, out, err = cli("provision", provider, "--gpus", "1", "--nodes", "2", "--name", "tr", "--yes",
                         "--public-network")
    assert code == 0, err
    assert "cluster tr ready in" in out and "node 0 (head): tr-0" in out and "node 1: tr-1" in out
    if provider in ("lambda", "runpod"):      # RunPod: its own cluster's private network
        assert f"network: {provider}'s private network" in out
    else:
        assert "the link between nodes is the public internet" in out
    with Ledger() as ledger:
        members = ledger.cluster_members("tr")
    assert [(m.name, m.node_index, m.status) for m in members] == [("tr-0", 0, "ready"), ("tr-1", 1, "ready")]
    assert len({(m.region, m.instance_type) for m in members}) == 1

    code, out, err = cli("ls")
    lines = [ln for ln in out.splitlines() if "tr-" in ln]
    assert "tr:0 (head)" in lines[0] and "tr-0" in lines[0] and "tr:1" in lines[1] and "tr-1" in lines[1]
    code, out, err = cli("ls", "--format", "json")
    rows = json.loads(out)
    assert [(r["name"], r["cluster"], r["node_index"]) for r in rows] == [("tr-0", "tr", 0), ("tr-1", "tr", 1)]

    r = run_gpubench("ssh", "tr:1", "--", "echo", "member-one", timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "member-one", r.stderr
    alias = run_gpubench("ssh", "tr", "--", "echo", "head", timeout=60)
    assert alias.returncode == 0 and alias.stdout.strip() == "head", alias.stderr

    code, out, err = cli("down", "tr", "--yes")
    assert code == 0, err
    assert "tr-0: terminated" in out and "tr-1: terminated" in out
    assert cloud.engine.store.instances() == []
    code, out, err = cli("ls")
    assert out.strip() == "no instances"
    code, out, err = cli("down", "tr", "--yes")
    assert code == 0 and "cluster tr is already terminated" in out


@pytest.mark.slow
def test_a_member_not_confirmed_gone_keeps_the_cluster_listed(cloud, cli):
    assert cli("provision", "runpod", "--gpus", "1", "--nodes", "2", "--name", "tr", "--yes")[0] == 0
    cloud.set_faults("runpod:terminate-lies")
    code, out, err = cli("down", "tr", "--yes", "--timeout", "1")
    assert code != 0 and "NOT confirmed gone" in err
    code, out, err = cli("ls", "--format", "json")
    assert {r["cluster"] for r in json.loads(out)} == {"tr"}
    cloud.set_faults("")
    assert cli("down", "tr", "--yes")[0] == 0


# -- bad input: one line on stderr, a non-zero exit, nothing rented ----------------

def test_nodes_below_one(cloud, cli):
    code, out, err = cli("provision", "vast", "--gpus", "1", "--nodes", "0", "--yes")
    assert code != 0 and one_line(err) == "error: --nodes must be at least 1 (got 0)"


def test_a_provider_that_cannot_place_n_machines_in_one_region(cloud, cli):
    code, out, err = cli("provision", "vast", "--gpus", "8", "--gpu-type", "H100 SXM", "--nodes", "4", "--yes",
                         "--public-network")
    assert code != 0
    said = err.strip().splitlines()     # the line on no physical cluster, then the refusal
    assert len(said) == 2 and "no physical cluster" in said[0]
    assert said[1] == "error: vast has 1 machine of 8x H100 SXM in one region, asked for 4"
    assert cloud.engine.store.instances() == []


def test_a_name_already_used(cloud, cli):
    with Ledger() as ledger:
        ledger.begin("busy", "vast", "gpubench-busy")
        ledger.begin("other-1", "vast", "gpubench-other-1", cluster="other", node_index=1)
    code, out, err = cli("provision", "vast", "--gpus", "1", "--nodes", "2", "--name", "busy", "--yes")
    assert code != 0 and "an instance named 'busy' is already in the ledger" in one_line(err)
    code, out, err = cli("provision", "vast", "--gpus", "1", "--nodes", "2", "--name", "other", "--yes")
    assert code != 0 and "a cluster named 'other' is already in the ledger" in one_line(err)
    assert cloud.engine.store.instances() == []


def test_dry_run_says_where_the_cluster_would_go(cloud, cli):
    second_vast_machine(cloud, 1)
    code, out, err = cli("provision", "vast", "--gpus", "1", "--nodes", "2", "--name", "d", "--dry-run",
                         "--public-network")
    assert code == 0, err
    assert "cheapest placement: 2 x 1x" in out and "dry run: nothing rented (cluster d: d-0, d-1)" in out


def test_ssh_to_a_member_that_is_not_there(cloud, cli):
    with Ledger() as ledger:
        ledger.begin("c-0", "vast", "gpubench-c-0", cluster="c", node_index=0)
    code, out, err = cli("ssh", "c:3")
    assert code != 0 and "cluster 'c' has no live member 3 (members: 0; 0 is the head)" in one_line(err)
    code, out, err = cli("ssh", "nope:1")
    assert code != 0 and "no live cluster named 'nope'" in one_line(err)
