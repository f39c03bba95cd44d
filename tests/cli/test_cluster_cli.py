"""`provision --nodes` and `ssh NAME:i` given what they cannot do, and a cluster's dry
run, through the real command line against the mock cloud in loopback mode. A cluster
rented and then seen in `ls`, `down` and `ssh NAME:i` is checked on each
provider's cluster in tests/lifecycle/test_cluster_e2e_mock.py (Vast.ai, RunPod) and
test_cluster_faults_mock.py (Lambda)."""

from __future__ import annotations

import pytest

from gpubench.store.ledger import Ledger
from tests.helpers import mock_cloud, one_line
from tests.lifecycle.test_cluster_provision import second_vast_machine


@pytest.fixture
def cloud(tmp_path, monkeypatch):
    yield from mock_cloud(tmp_path, monkeypatch)


# A cluster provisioned, in `ls`, reached with `ssh NAME:i` and `ssh NAME`, then `down`
# (and `down` again): on each provider's cluster in namespace mode, which the cluster
# tests rent anyway (Vast.ai and RunPod: tests/lifecycle/test_cluster_e2e_mock.py, with
# a member not confirmed gone keeping the cluster listed; Lambda:
# tests/lifecycle/test_cluster_faults_mock.py).


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


def test_no_physical_cluster_without_a_terminal_is_said_once(cloud, cli):
    code, out, err = cli("provision", "vast", "--gpus", "2", "--nodes", "2", "--dry-run")
    assert code != 0 and out == ""
    line = one_line(err)
    assert line.startswith("error: vast has no physical cluster with 2 machines of 2x one GPU type")
    assert line.endswith("; pass --public-network to join separate machines over the public internet")
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
