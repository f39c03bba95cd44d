"""A cluster of two hosts of their own for the cluster launcher's tests: each an
sshd in a network namespace (tests.remote.netns.TestHost, reached from here over
its veth), the two joined by a private link of their own (a veth pair between the
namespaces, as a provider's private network), and written to the ledger as one
cluster, head first, as provisioning writes it.

A node is cut by taking both of its links down: packets vanish, nobody is told."""

from __future__ import annotations

import os
import random
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from gpubench.store.ledger import Ledger
from gpubench.store.status import LedgerStatus
from tests.remote.conftest import Sshd, make_sshd
from tests.remote.netns import TestHost

INSTANCE_TYPE = "mock.cpu-2x"
PRICE = 1.5  # $/h of one node


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=20)


@dataclass
class ClusterNodeHost:
    host: TestHost
    sshd: Sshd
    private_ip: str
    private_link: str  # its end of the private link, inside its namespace

    def cut(self) -> None:
        """The machine is gone: its public link (SSH) and its private one go down."""
        self.host.cut()
        _ip("-n", self.host.name, "link", "set", self.private_link, "down")


@dataclass
class TestCluster:
    name: str
    nodes: list[ClusterNodeHost] = field(default_factory=list)

    def write_ledger(self, gpus: list[tuple[str, int]] | None = None, private: bool = True) -> None:
        """One ledger row per member (cluster, node_index, addresses), ready to SSH to.
        `gpus` gives each member's (gpu name, count) to make members that differ."""
        with Ledger() as ledger:
            for i, node in enumerate(self.nodes):
                name, count = (gpus or [])[i] if gpus else ("cpu-as-gpu", 2)
                row = ledger.begin(f"{self.name}-{i}", "mock", f"gpubench-{self.name}-{i}",
                                   instance_type=INSTANCE_TYPE, gpu_name=name, gpu_count=count,
                                   price_per_hour=PRICE, cluster=self.name, node_index=i)
                ledger.update(row.row_id, status=LedgerStatus.LAUNCHED, instance_id=f"i-{i}")
                ledger.update(row.row_id, status=LedgerStatus.READY, ssh_host=node.sshd.host,
                              ssh_port=node.sshd.port, ssh_user=node.sshd.user,
                              key_path=str(node.sshd.key_file),
                              private_ip=node.private_ip if private else None)

    def destroy(self) -> None:
        for node in self.nodes:
            node.sshd.stop()
            node.host.destroy()


def two_node_cluster(tmp_path: Path, name: str = "pair") -> TestCluster:
    """Two namespace hosts with sshd and a private link between them (not yet in the
    ledger: write_ledger). The caller destroys it."""
    cluster = TestCluster(name)
    tag = f"{os.getpid() % 10000}{random.randrange(100)}"
    block = random.randrange(16384) * 4  # a /30 of 10.233.0.0/16 for the private link
    private = [f"10.233.{block // 256}.{block % 256 + k}" for k in (1, 2)]
    links = [f"gbp{tag}a", f"gbp{tag}b"]
    try:
        for i in range(2):
            host = TestHost.create()
            node_dir = tmp_path / f"node{i}"
            node_dir.mkdir()
            sshd = make_sshd(node_dir, listen=host.address, prefix=host.exec_prefix)
            cluster.nodes.append(ClusterNodeHost(host, sshd, private[i], links[i]))
            sshd.start()
        a, b = cluster.nodes
        _ip("link", "add", links[0], "netns", a.host.name, "type", "veth", "peer", "name",
            links[1], "netns", b.host.name)
        for node in cluster.nodes:
            _ip("-n", node.host.name, "addr", "add", f"{node.private_ip}/30", "dev", node.private_link)
            _ip("-n", node.host.name, "link", "set", node.private_link, "up")
    except BaseException:
        cluster.destroy()
        raise
    return cluster
