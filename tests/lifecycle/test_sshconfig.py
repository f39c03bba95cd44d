"""ssh_config: one Host block per live, reachable ledger row, rewritten whole."""

from __future__ import annotations

import pytest

from gpubench import paths
from gpubench.lifecycle import sshconfig
from gpubench.store.ledger import Ledger
from gpubench.store.status import LedgerStatus


def test_ssh_config_blocks(isolated):
    path = sshconfig.write_ssh_config([sshconfig.HostBlock("gpubench-x", "10.0.0.1", 2200, "root", "/k")])
    text = path.read_text()
    assert "Host gpubench-x\n" in text and "Port 2200" in text and "IdentityFile /k" in text
    assert f"Include {path}" in text


def _row(ledger: Ledger, name: str, status: LedgerStatus, port: int):
    row = ledger.begin(name, "mem", f"gpubench-{name}", key_path="/k")
    return ledger.mark(row.row_id, status, instance_id=f"i-{name}", ssh_host="10.0.0.1", ssh_port=port,
                       ssh_user="root")


def test_sync_writes_only_reachable_rows_and_login_uses_it():
    with Ledger() as ledger:
        _row(ledger, "up", LedgerStatus.READY, 2201)
        _row(ledger, "booting", LedgerStatus.LAUNCHED, 2202)
        gone = _row(ledger, "gone", LedgerStatus.RUNNING, 2203)
        ledger.mark(gone.row_id, LedgerStatus.TERMINATED)
        sshconfig.sync_ssh_config(ledger)
        text = paths.ssh_config_path().read_text()
        assert "Host gpubench-up\n" in text and "gpubench-booting" not in text and "gpubench-gone" not in text
        argv = sshconfig.login_command(ledger, "up", ["echo", "hi"])
        assert argv == ["ssh", "-F", str(paths.ssh_config_path()), "gpubench-up", "echo", "hi"]
        with pytest.raises(sshconfig.NotReachableError, match="'booting' is launched, not reachable"):
            sshconfig.login_command(ledger, "booting")
