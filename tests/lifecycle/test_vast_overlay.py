"""Vast.ai clusters over an overlay network, through the real command line: machines of
one physical cluster are preferred and joined by an overlay; where none has the machines,
the public internet only with the user's agreement (--public-network), else a one-line
refusal under --yes; outside the mock's namespace mode the overlay is refused in one
line. End to end in namespace mode: provision, a short run over the overlay's private
addresses, down, and the overlay gone after the members."""

from __future__ import annotations

import ipaddress
import json
import subprocess

import pytest

from gpubench.store.ledger import Ledger
from gpubench.store.results import ResultsStore
from tests.helpers import mock_cloud, one_line
from tests.lifecycle.cluster_mock import TINY, cloud as netns_cloud, run_args  # noqa: F401
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


def _bridges() -> set[str]:
    out = subprocess.run(["ip", "-j", "link", "show", "type", "bridge"], capture_output=True, text=True).stdout
    return {link["ifname"] for link in json.loads(out or "[]")}


@pytest.mark.slow
def test_a_two_node_cluster_over_an_overlay_end_to_end(netns_cloud, cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = cli("provision", "vast", "--gpus", "4", "--nodes", "2", "--name", "c", "--yes",
                         "--ssh-timeout", "60")
    assert code == 0, out + err
    assert "physical cluster 7001" in out and "network: vast overlay network gpubench-c (10.233." in out, out
    with Ledger() as ledger:
        members = ledger.cluster_members("c")
    overlay_id = members[0].overlay_id
    assert overlay_id and {m.overlay_id for m in members} == {overlay_id}
    listed = netns_cloud.engine.store.meta("vast_overlays")
    subnet = ipaddress.ip_network(json.loads(listed)[overlay_id]["internal_subnet"])
    assert all(ipaddress.ip_address(m.private_ip) in subnet for m in members)
    assert len({m.private_ip for m in members}) == 2 and all(not m.port_map for m in members)
    assert "over the private network" in out          # the link was measured over the overlay
    bridge = netns_cloud.engine.network.overlay_bridge(json.loads(listed)[overlay_id]["net"])
    assert bridge in _bridges()

    code, out, err = cli("run", "mnist-ddp", *run_args(tmp_path, "--nodes", "2", "--gpus", "1"),
                         "--", *TINY["mnist-ddp"])
    assert code == 0, out + err
    records = ResultsStore(tmp_path / "results").load().records
    assert [(r["nodes"], r["world_size"], r["status"]) for r in records] == [(2, 2, "ok")], out[-3000:]
    assert records[0]["node_network"] == "private"
    assert records[0]["node_addresses"] == [m.private_ip for m in members]

    code, out, err = cli("down", "c", "--yes")
    assert code == 0, out + err
    assert "overlay " + overlay_id + " deleted and confirmed gone" in err
    assert netns_cloud.engine.store.instances() == []
    assert json.loads(netns_cloud.engine.store.meta("vast_overlays")) == {}
    assert bridge not in _bridges()
    with Ledger() as ledger:
        rows = ledger.cluster_members("c", include_done=True)
        assert rows and all(r.termination_confirmed and r.overlay_gone_at for r in rows)
        assert ledger.overlays_left() == []
