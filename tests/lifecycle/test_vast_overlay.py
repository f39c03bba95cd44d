"""Vast.ai clusters over an overlay network, through the real command line: machines of
one physical cluster are preferred and joined by an overlay; where none has the machines,
the public internet only with the user's agreement (--public-network), else a one-line
refusal under --yes; outside the mock's namespace mode the overlay is refused in one
line. End to end in namespace mode: bench rents the cluster, sweeps node counts over the
overlay's private addresses and gives it all back, the overlay last."""

from __future__ import annotations

import ipaddress
import json
import subprocess

import pytest

from gpubench.mock import netns
from gpubench.store.ledger import Ledger
from gpubench.store.results import ResultsStore
from tests.helpers import mock_cloud, one_line
from tests.lifecycle.cluster_mock import TINY, cloud as netns_cloud  # noqa: F401
from tests.lifecycle.test_cluster_provision import second_vast_machine


@pytest.fixture
def loopback(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    yield from mock_cloud(tmp_path, monkeypatch)


def test_no_physical_cluster_under_yes_is_refused_in_one_line(loopback, cli):
    code, out, err = cli("provision", "vast", "--gpus", "1", "--nodes", "2", "--name", "c", "--yes")
    assert code != 0
    line = one_line(err)
    assert line.startswith("error: vast has no physical cluster with 2 machines of 1x one GPU type") and \
        "pass --public-network" in line
    assert loopback.engine.store.instances() == []
    with Ledger() as ledger:
        assert ledger.entries(include_done=True) == []


def test_bench_without_a_physical_cluster_is_refused_too(loopback, cli, tmp_path):
    code, out, err = cli("bench", "vast", "--gpus", "1", "--nodes", "1,2", "--workload", "mnist-ddp",
                         "--yes", "--results", str(tmp_path / "results"))
    assert code != 0
    assert "no physical cluster with 2 machines" in one_line(err) and "pass --public-network" in err
    assert loopback.engine.store.instances() == []


def test_public_network_agrees_to_the_public_internet(loopback, cli):
    second_vast_machine(loopback, 1)
    code, out, err = cli("provision", "vast", "--gpus", "1", "--nodes", "2", "--name", "c", "--yes",
                         "--dry-run", "--public-network")
    assert code == 0, err
    assert "--public-network: joining separate machines over the public internet" in err
    assert "cheapest placement: 2 x 1x" in out and "physical cluster" not in out


def test_an_overlay_refused_outside_namespace_mode_is_one_line_and_nothing_rented(loopback, cli):
    code, out, err = cli("provision", "vast", "--gpus", "4", "--nodes", "2", "--name", "c", "--yes")
    assert code != 0
    said = err.strip().splitlines()
    assert len(said) == 2 and "making overlay network gpubench-c" in said[0]
    line = said[1]
    assert line.startswith("error: cluster c on vast not rented: vast would not make an overlay network "
                           "on physical cluster 7001:") and "namespace mode" in line, line
    assert loopback.engine.store.instances() == []


def test_a_members_row_names_its_overlay_from_its_first_write(loopback):
    """The overlay is made before any member; each member's row carries it from the row
    written before the launch call, so a launch whose answer is lost (a member that may
    exist) keeps the overlay named in the ledger for `down`, whatever happens next."""
    from gpubench.lifecycle.provision import ProvisionError, ProvisionRequest, connect_and_plan, provision
    from gpubench.providers.common import TransportError

    req = ProvisionRequest("vast", 1, name="c-0", cluster="c", node_index=0, overlay_id="ov-7")
    prov, offers = connect_and_plan(req)

    class AnswerLost:
        def __getattr__(self, name):
            return getattr(prov, name)

        def launch(self, offer, spec):
            raise TransportError("vast", "PUT /asks/", "502 Bad Gateway")

    with Ledger() as ledger, pytest.raises(ProvisionError, match="the launch may have happened"):
        provision(AnswerLost(), req, offers, ledger)
    with Ledger() as ledger:
        [row] = ledger.overlay_rows("vast", "ov-7")
        assert (row.name, row.cluster, row.node_index) == ("c-0", "c", 0)
        assert ledger.overlays_left("c") == [("vast", "ov-7")]


def _overlay_bridges(cloud) -> set[str]:
    """The overlay bridges of this mock: other tests' mocks make and remove their own
    bridges on this machine meanwhile."""
    prefix = netns.OVERLAY_PREFIX + cloud.engine.network.mock_id
    out = subprocess.run(["ip", "-j", "link", "show", "type", "bridge"], capture_output=True, text=True).stdout
    return {link["ifname"] for link in json.loads(out or "[]") if link["ifname"].startswith(prefix)}


@pytest.mark.slow
def test_bench_on_a_two_node_cluster_over_an_overlay_end_to_end(netns_cloud, cli, tmp_path, monkeypatch):
    """bench vast --nodes 1,2: machines of one physical cluster joined by an overlay, a
    sweep of node counts over the members' private addresses, then every member down
    and the overlay after them (bench's teardown is `gpubench down`'s), confirmed gone."""
    monkeypatch.chdir(tmp_path)
    code, out, err = cli("bench", "vast", "--gpus", "4", "--nodes", "1,2", "--workload", "mnist-ddp",
                         "--counts", "1", "--name", "bc", "--yes", "--no-preflight", "--repeat", "1",
                         "--ssh-timeout", "60", "--results", str(tmp_path / "results"),
                         "--", *TINY["mnist-ddp"])
    said = out + err
    assert code == 0, said
    assert "physical cluster 7001" in said and "network: vast overlay network gpubench-bc (10.233." in said, said
    records = ResultsStore(tmp_path / "results").load().records
    assert [(r["nodes"], r["world_size"], r["status"], r["cluster"]) for r in records] == [
        (1, 1, "ok", "bc"), (2, 2, "ok", "bc")], said[-3000:]
    two = records[1]
    assert two["node_network"] == "private" and two["links"][0]["gbps"] > 0
    assert "links" not in records[0]                  # one node: no link in the run
    assert all(ipaddress.ip_address(a) in ipaddress.ip_network("10.233.0.0/16") for a in two["node_addresses"])
    assert "over the private network" in said          # the link was measured over the overlay
    assert "node speedup" in said                      # the report's node scaling beside the GPU scaling
    assert "cluster bc: all 2 members terminated and confirmed gone" in said
    assert "deleted and confirmed gone" in said        # the overlay, after the members
    assert netns_cloud.engine.store.instances() == []
    assert json.loads(netns_cloud.engine.store.meta("vast_overlays") or "{}") == {}
    assert _overlay_bridges(netns_cloud) == set()      # its bridge went with it
    with Ledger() as ledger:
        rows = ledger.cluster_members("bc", include_done=True)
        assert rows and all(r.termination_confirmed and r.overlay_id and r.overlay_gone_at for r in rows)
        assert ledger.cluster_members("bc") == [] and ledger.overlays_left() == []
