"""The head -> member link: how it is said, kept in the member's ledger row beside the
preflight's findings, read back with the cluster, and carried by a run's records."""

from __future__ import annotations

import json

from gpubench.remote import cluster_link
from gpubench.remote.cluster_link import LinkMeasure
from gpubench.store.ledger import Ledger
from gpubench.lifecycle.stats import gate_of
from gpubench.remote.cluster import ClusterHosts, node_from_entry


def test_the_line_names_the_network_plainly():
    assert LinkMeasure(1, "private", "10.0.0.2", 9.43).line() == \
        "link head->node1: 9.4 Gb/s over the private network"
    assert LinkMeasure(2, "public", "203.0.113.9", 0.8).line() == \
        "link head->node2: 0.8 Gb/s over the public internet"
    assert LinkMeasure(1, "public", "x", error="the sender on the head failed: refused").line() == \
        "link head->node1: not measured (the sender on the head failed: refused)"


def _member(ledger, index, gate=None):
    key = ledger.path.parent / "key"
    key.touch()
    row = ledger.begin(f"c-{index}", "lambda", f"gpubench-c-{index}", gpu_name="A100", gpu_count=8,
                       cluster="c", node_index=index)
    ledger.update(row.row_id, ssh_host=f"192.0.2.{index + 1}", ssh_port=22, ssh_user="ubuntu",
                  key_path=str(key), private_ip=f"10.0.0.{index + 1}", gate=gate)
    return ledger.get(row.row_id)


def test_kept_beside_the_preflight_and_carried_by_records(tmp_path):
    preflight = json.dumps({"passed": True, "host_id": "h1"})
    with Ledger(tmp_path / "l.db") as ledger:
        head, member = _member(ledger, 0), _member(ledger, 1, gate=preflight)
        cluster_link.keep(ledger, member, LinkMeasure(1, "private", "10.0.0.2", 9.4, 3.0))
        member = ledger.get(member.row_id)
    assert gate_of(member)["host_id"] == "h1"           # the preflight's findings are kept
    hosts = ClusterHosts("c", (node_from_entry(head), node_from_entry(member)))
    assert hosts.nodes[1].link["gbps"] == 9.4 and hosts.nodes[0].link is None
    assert cluster_link.record_fields(hosts) == {"links": [
        {"node": 1, "network": "private", "address": "10.0.0.2", "gbps": 9.4, "seconds": 3.0,
         "error": None}]}
    alone = ClusterHosts("c", (node_from_entry(head),))
    assert cluster_link.record_fields(alone) == {}
    # a run whose head is another member: the measure is not of its links
    assert cluster_link.record_fields(ClusterHosts("c", (hosts.nodes[1],))) == {}


def test_no_link_to_measure_on_the_loopback(tmp_path):
    with Ledger(tmp_path / "l.db") as ledger:
        rows = [_member(ledger, i) for i in range(2)]
    for i, row in enumerate(rows):
        with Ledger(tmp_path / "l.db") as ledger:
            rows[i] = ledger.update(row.row_id, ssh_host="127.0.0.1", private_ip=None)
    hosts = ClusterHosts("c", tuple(node_from_entry(r) for r in rows))
    [link] = cluster_link.measure_links(hosts, tmp_path / "known_hosts")
    assert link.gbps is None and "loopback" in link.error
