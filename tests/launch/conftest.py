"""The real Slurm cluster of the Slurm tests: started once per test session when a
test asks for it, stopped at the end with no daemon left running."""

from __future__ import annotations

import pytest

from tests.launch.slurm_cluster import SlurmCluster, slurm_installed


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory):
    why = slurm_installed()
    if why:
        pytest.skip(why)
    cluster = SlurmCluster.start(tmp_path_factory.mktemp("slurm-cluster"))
    try:
        yield cluster
    finally:
        cluster.stop()
    left = cluster.leftovers()
    assert left == [], f"Slurm daemons still running after the tests: {left}"


@pytest.fixture
def slurm(slurm_cluster, monkeypatch):
    """The cluster, with SLURM_CONF set for this test's Slurm commands; whatever the
    test left queued is cancelled after it."""
    for name, value in slurm_cluster.env.items():
        monkeypatch.setenv(name, value)
    yield slurm_cluster
    slurm_cluster.clear_queue()
