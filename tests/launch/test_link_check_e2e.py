"""`gpubench run W --on CLUSTER --nodes 1,2` over a link too slow for the gradients: two
hosts of their own (sshd in network namespaces), their private link shaped to 20 Mbit/s
with tc's token bucket, the link measured as provisioning measures it and kept in the
ledger; the sweep asks before its first run, and with no one to ask and no --yes runs
nothing, saying why in one line."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from gpubench import paths
from gpubench.remote import cluster_link
from gpubench.remote.cluster import find_cluster
from gpubench.store.ledger import Ledger
from gpubench.store.results import ResultsStore
from tests.launch.cluster_netns import two_node_cluster

pytestmark = pytest.mark.slow


def test_a_slow_link_is_asked_about_before_the_sweep(tmp_path, cli):
    cluster = two_node_cluster(tmp_path, name="slowlink")
    try:
        cluster.write_ledger(gpus=[("H100 SXM", 1), ("H100 SXM", 1)])
        head = cluster.nodes[0]
        subprocess.run(["ip", "netns", "exec", head.host.name, "tc", "qdisc", "add", "dev", head.private_link,
                        "root", "tbf", "rate", "20mbit", "burst", "32kbit", "latency", "400ms"],
                       check=True, capture_output=True, timeout=20)
        hosts = find_cluster("slowlink")
        [link] = cluster_link.measure_links(hosts, paths.known_hosts_path(), sys.executable, seconds=1.0)
        assert link.gbps is not None and link.gbps < 0.025, link
        with Ledger() as ledger:
            member = next(m for m in ledger.cluster_members("slowlink") if m.node_index == 1)
            cluster_link.keep(ledger, member, link)

        (tmp_path / "results").mkdir()
        code, out, err = cli("run", "resnet-ddp", "--on", "slowlink", "--nodes", "1,2", "--gpus", "1",
                             "--remote-python", sys.executable, "--remote-dir", str(tmp_path / "remote"),
                             "--connect-wait", "10", "--results", str(tmp_path / "results"))
    finally:
        cluster.destroy()
    said = re.search(r"link (\d+) Mb/s measured: 2 nodes would run resnet-ddp at (0\.0\d+)x of one node "
                     r"\(predicted\)", out + err)
    assert said and 10 <= int(said.group(1)) <= 21, out + err
    assert code == 2 and err.strip().splitlines()[-1].startswith(
        f"error: not run: over the {said.group(1)} Mb/s link measured, 2 nodes would run resnet-ddp at "
        f"{said.group(2)}x of one node (predicted); pass --yes"), err
    assert "Traceback" not in err
    assert ResultsStore(tmp_path / "results").load().records == []
