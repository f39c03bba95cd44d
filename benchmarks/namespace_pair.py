"""Two namespace hosts for a benchmark, with gpubench's config, state (the ledger) and
known hosts in a folder of their own: tests/launch/cluster_netns.py's pair, written into
the ledger, destroyed however the benchmark ends. Root only (ip netns)."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


@contextlib.contextmanager
def namespace_pair(tmp: Path):
    # set before gpubench loads: it reads them at import
    os.environ.update(GPUBENCH_CONFIG_DIR=str(tmp / "config"), GPUBENCH_STATE_DIR=str(tmp / "state"))
    sys.path.insert(0, str(REPO))
    from tests.launch.cluster_netns import two_node_cluster

    cluster = two_node_cluster(tmp)
    try:
        cluster.write_ledger()
        yield cluster
    finally:
        cluster.destroy()
