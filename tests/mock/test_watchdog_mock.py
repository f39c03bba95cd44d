"""The watchdog on the mock cloud, end to end with the real CLI and real sshd: an
idle machine past its deadline removes itself (Vast.ai, RunPod) or halts and is
terminated by the next `ls` (Lambda); a machine with a gpubench sweep connected is
left until the sweep ends. Deadlines of a few seconds and a fast watchdog poll keep
each test short; Vast.ai's and RunPod's machines wait out their deadlines together."""

from __future__ import annotations

import json
import shlex

import pytest

import gpubench.mock as mock
from tests.helpers import mock_cloud
from gpubench import paths
from gpubench.onhost import leases
from gpubench.launch.ssh import LEASES
from gpubench.store.ledger import Ledger
from gpubench.store.status import LedgerStatus
from gpubench.providers import registry
from gpubench.providers.common import NAME_PREFIX
from tests.mock.helpers import wait_for

pytestmark = pytest.mark.slow

SECONDS_PER_HOUR = 3600.0


@pytest.fixture
def cloud(tmp_path, monkeypatch):
    yield from mock_cloud(tmp_path, monkeypatch, GPUBENCH_WATCHDOG_POLL="0.2")




def _listed(provider: str) -> list[tuple[str, str]]:
    return [(i.name, i.raw_status) for i in registry.get(provider).list() if i.name.startswith(NAME_PREFIX)]


def _provision(cli, provider: str, seconds: float, name: str = "w") -> None:
    code, out, err = cli("provision", provider, "--gpus", "1", "--name", name, "--yes",
                        "--max-hours", f"{seconds / SECONDS_PER_HOUR:.6f}")
    assert code == 0, err
    assert "stops itself" in err and "stops:" in out


def test_an_idle_machine_past_its_deadline_removes_itself_on_vast_and_runpod(cloud, cli):
    """One wait serves both providers: a machine on each, their deadlines running at once."""
    said = ""                 # what every `ls` said on stderr: a machine gone is said once
    for provider, name in (("vast", "wv"), ("runpod", "wr")):
        # 8 s, not 3: on a loaded machine provisioning alone can take 3 s, and the listing
        # below must see the machine before its deadline
        _provision(cli, provider, 8.0, name)
        assert Ledger().find(name).watchdog == "self-removal"
        code, out, err = cli("ls", "--format", "json")
        said += err
        (row,) = [r for r in json.loads(out) if r["name"] == name]
        assert row["stops"].startswith("in ") and row["stops"].endswith("self-removal") and row["deadline_at"]
    for provider in ("vast", "runpod"):
        wait_for(lambda: _listed(provider) == [], timeout=20)
    code, out, err = cli("ls")
    said += err
    assert code == 0 and out.strip() == "no instances"
    for name in ("wv", "wr"):
        assert f"{name} stopped itself at its deadline" in said, said
        entry = Ledger().find(name)
        assert entry.termination_confirmed and entry.note.startswith("stopped itself")


def test_a_lambda_machine_halts_and_the_next_command_terminates_it(cloud, cli):
    _provision(cli, "lambda", 3.0)
    assert Ledger().find("w").watchdog == "shutdown -h"
    wait_for(lambda: _listed("lambda") == [("gpubench-w", "unhealthy")], timeout=20)   # halted, still billed
    code, out, err = cli("ls", "--all", "--format", "json")
    assert code == 0, err
    assert "w passed its deadline" in err and "w: terminated (confirmed by lambda)" in err
    (row,) = json.loads(out)
    assert row["status"] == "terminated" and row["note"].startswith("past its deadline")
    assert _listed("lambda") == [] and Ledger().find("w").termination_confirmed


def test_a_machine_is_left_while_a_sweep_holds_it(cloud, cli):
    from gpubench.remote.connection import SshConnection
    from gpubench.remote.targets import host_from_entry

    _provision(cli, "vast", 4.0)
    entry = Ledger().find("w")
    conn = SshConnection(host_from_entry(entry).target, paths.known_hosts_path())
    conn.open()
    try:   # what a sweep does while it is connected (launch/ssh.py: SshLauncher.begin)
        conn.hold(f"python3 -c {shlex.quote(LEASES)} hold gpubench/leases sweep.1 gpubench/runs",
                  leases.HELD)
        wait_for(lambda: Ledger().find("w").past_deadline(), timeout=10)
        code, out, err = cli("ls", "--format", "json")
        assert "a gpubench run is active on it: left running" in err
        row = json.loads(out)[0]   # the ledger's word; the provider's beside it
        assert (row["status"], row["provider_status"]) == ("ready", "running")
        assert Ledger().find("w").status is LedgerStatus.READY
        assert _listed("vast") == [("gpubench-w", "running")]
    finally:
        conn.close()          # the sweep ends: its lease goes with the connection
    wait_for(lambda: _listed("vast") == [], timeout=20)
