"""Node scaling beside GPU scaling for a cluster's records: each row against the
1-node record of the same machine type with the same processes per node, while the
GPU speedup stays against the 1-GPU record; records that carry the cluster's own
fields (addresses, network, settings in force) read like any other."""

from __future__ import annotations

import pytest

from gpubench.report.compute import build_report
from gpubench.workloads import record_schema

from .helpers import rec

CLUSTER_FIELDS = {"node_addresses": ["10.0.0.1", "10.0.0.2"], "node_network": "private",
                  "rendezvous": {"backend": "c10d", "endpoint": "10.0.0.1:29500"},
                  "collective_timeout_s": 300.0, "rank0_node": 0, "lost_nodes": [],
                  "comm_settings": [{"node": 0, "env": {"NCCL_SOCKET_IFNAME": "ens5"}}],
                  "interconnect": [{"node": 0, "nvidia_smi_topo": "absent", "ibstat": "absent"}]}


def cluster_records() -> list[dict]:
    return [rec(1, 100.0, 1.0), rec(2, 190.0, 2.0),
            rec(2, 170.0, 2.0, nodes=2, **CLUSTER_FIELDS),   # 2 nodes x 1
            rec(4, 300.0, 4.0, nodes=2, **CLUSTER_FIELDS)]   # 2 nodes x 2


def test_node_speedup_is_against_one_node_of_the_same_width():
    rows = build_report(cluster_records()).rows
    got = {(r.nodes, r.gpu_count): (round(r.speedup, 3), round(r.node_speedup, 3),
                                    round(r.node_efficiency, 3)) for r in rows.itertuples()}
    assert got == {(1, 1): (1.0, 1.0, 1.0), (1, 2): (1.9, 1.0, 1.0),
                   (2, 2): (1.7, 1.7, 0.85),      # against 1 node x 1 (100)
                   (2, 4): (3.0, pytest.approx(1.579, abs=1e-3), pytest.approx(0.789, abs=1e-3))}


def test_the_cluster_fields_are_declared_for_the_launcher_with_their_types():
    for record in cluster_records():
        assert record_schema.type_problems(record) == []
    for name in CLUSTER_FIELDS:
        assert record_schema.field(name).filled_by == record_schema.LAUNCHER
