"""Terminate-and-confirm is one function, used by provisioning (an instance that never
became ready) and by taking an instance down (down, bench teardown): the same ledger
marks and the same host-key forgetting on both paths."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from gpubench import paths
from gpubench.lifecycle import terminate
from gpubench.store.ledger import Ledger
from gpubench.lifecycle.provision import Deadlines, ProvisionError, ProvisionRequest, provision
from gpubench.store.status import LedgerStatus
from gpubench.providers.common import AuthError, Instance, InstanceState, provider_name
from tests.lifecycle.helpers import Cloud

REPO = Path(__file__).resolve().parents[2]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class BootsMute(Cloud):
    """Its instances run at once with an SSH address where nothing answers."""

    def __init__(self, port: int, **kw):
        super().__init__(**kw)
        self.port = port

    def add(self, name: str) -> Instance:
        inst = Instance("mem", f"i{len(self.instances) + 1}", provider_name(name), InstanceState.RUNNING,
                        ssh_host="127.0.0.1", ssh_port=self.port, raw_status="running")
        self.instances[inst.instance_id] = inst
        return inst


def _pin(port: int) -> None:
    path = paths.known_hosts_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"[127.0.0.1]:{port} ssh-ed25519 AAAAkey\nother.host ssh-ed25519 AAAAother\n")


def _pinned() -> list[str]:
    return [line.split()[0] for line in paths.known_hosts_path().read_text().splitlines()]


def _assert_taken_down(row, port):
    assert row.status is LedgerStatus.TERMINATED
    assert row.terminate_requested_at and row.terminated_confirmed_at
    assert row.terminate_requested_at <= row.terminated_confirmed_at
    assert _pinned() == ["other.host"]


def test_provision_discards_an_instance_that_never_answers_ssh():
    port = _closed_port()
    _pin(port)
    cloud = BootsMute(port)
    req = ProvisionRequest("mem", gpus=1, name="t", attempts=1, deadlines=Deadlines(5, 0.2, 5))
    with Ledger() as ledger:
        with pytest.raises(ProvisionError, match="1 launched"):
            provision(cloud, req, cloud.offers(), ledger)
        (row,) = ledger.entries(include_done=True)
    _assert_taken_down(row, port)
    assert "SSH not answering" in row.note and cloud.instances == {}


def test_down_takes_a_ready_instance_down_the_same_way():
    port = _closed_port()
    _pin(port)
    cloud = BootsMute(port)
    inst = cloud.add("t")
    with Ledger() as ledger:
        row = ledger.begin("t", "mem", "gpubench-t", price_per_hour=2.0)
        row = ledger.mark(row.row_id, LedgerStatus.READY, "created_at", instance_id=inst.instance_id,
                          ssh_host="127.0.0.1", ssh_port=port, ssh_user="root", note="old news")
        result = terminate.take_down_entry(ledger, row, cloud, deadline_s=5)
        row = ledger.get(row.row_id)
    _assert_taken_down(row, port)
    assert result.gone and result.message == "terminated" and result.cost is not None
    assert row.note is None and cloud.instances == {}


def test_a_terminate_that_never_takes_leaves_the_row_unconfirmed_and_the_pin():
    class Sticky(BootsMute):
        def terminate(self, iid):
            self.terminate_calls += 1        # answers, does nothing

    port = _closed_port()
    _pin(port)
    cloud = Sticky(port)
    inst = cloud.add("t")
    with Ledger() as ledger:
        row = ledger.begin("t", "mem", "gpubench-t")
        row = ledger.mark(row.row_id, LedgerStatus.RUNNING, instance_id=inst.instance_id,
                          ssh_host="127.0.0.1", ssh_port=port)
        result = terminate.terminate_and_confirm(ledger, row, cloud, deadline_s=0.3)
        row = ledger.get(row.row_id)
    assert not result.gone and row.status is LedgerStatus.UNCONFIRMED and "still running" in row.note
    assert row.terminated_confirmed_at is None and len(_pinned()) == 2


def test_a_final_error_while_terminating_is_raised_with_the_row_unconfirmed():
    cloud = Cloud(terminate_errors=[AuthError("mem", "DELETE", "revoked", status=401)])
    inst = cloud.add("t")
    with Ledger() as ledger:
        row = ledger.begin("t", "mem", "gpubench-t")
        row = ledger.mark(row.row_id, LedgerStatus.LAUNCHED, instance_id=inst.instance_id)
        with pytest.raises(AuthError):
            terminate.terminate_and_confirm(ledger, row, cloud, deadline_s=1)
        row = ledger.get(row.row_id)
    assert row.status is LedgerStatus.UNCONFIRMED and "revoked" in row.note


def _uses(text: str) -> list[str]:
    return sorted(str(p.relative_to(REPO)) for p in (REPO / "gpubench").rglob("*.py")
                  if text in p.read_text())


def test_each_lifecycle_mechanism_is_written_once():
    assert _uses("terminate_confirmed(") == ["gpubench/lifecycle/terminate.py"]
    assert _uses("forget_host(") == ["gpubench/lifecycle/keys.py", "gpubench/lifecycle/terminate.py"]
    assert _uses("def sync_ssh_config") == ["gpubench/lifecycle/sshconfig.py"]
    assert _uses("GPUBENCH_POLL_INTERVAL") == ["gpubench/lifecycle/waiting.py"]
    assert _uses("deadline - time.monotonic(), 0.01") == ["gpubench/lifecycle/waiting.py"]
