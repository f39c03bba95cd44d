"""Machines that stop themselves, without a cloud: the script that runs on the machine
(is a sweep connected, where its own id and key are, which call removes it, halting
when that fails), what the ledger records and `ls` shows of a deadline, and the
ledger's side: a machine past its deadline is terminated by the next command unless
a run is active on it."""

from __future__ import annotations

import fcntl
import importlib.util
import sqlite3
import time

import pytest

from gpubench.errors import UsageError
from gpubench.lifecycle import boot, fleet, provision as provisioning, watchdog
from gpubench.store.ledger import Ledger
from gpubench.lifecycle.provision import ProvisionRequest
from gpubench.store.status import LedgerStatus
from gpubench.providers.common import InstanceState, Offer
from tests.lifecycle.helpers import Cloud


@pytest.fixture
def remote(monkeypatch, tmp_path):
    """The machine's script as its own module (it imports nothing of gpubench), with
    the home it looks in and no environment files of this machine."""
    spec = importlib.util.spec_from_file_location("watchdog_remote_under_test", watchdog.SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setenv("HOME", str(tmp_path / "machine"))
    (tmp_path / "machine").mkdir()
    monkeypatch.setattr(module, "ENV_FILES", ())
    return module


def test_a_held_lease_is_an_active_sweep(remote, tmp_path):
    leases = tmp_path / "machine" / "gpubench" / "leases"
    leases.mkdir(parents=True)
    (leases / "gone.1.lock").write_text("")                 # a sweep that has ended
    assert remote.active_leases(["gpubench"]) == 0
    other = tmp_path / "machine" / "elsewhere" / "leases"  # a --remote-dir the watchdog was not told
    other.mkdir(parents=True)
    with open(other / "sweep.1.lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        assert remote.active_leases(["gpubench"]) == 1
    assert remote.active_leases(["gpubench"]) == 0


def test_the_machine_variables_come_from_the_process_then_the_container(remote, monkeypatch, tmp_path):
    monkeypatch.setenv("RUNPOD_POD_ID", "pod-from-env")
    assert remote.machine_variable("RUNPOD_POD_ID") == "pod-from-env"
    monkeypatch.delenv("RUNPOD_POD_ID")
    env_file = tmp_path / "rp_environment"
    env_file.write_text('export RUNPOD_POD_ID="pod-from-file"\nexport OTHER=1\n')
    monkeypatch.setattr(remote, "ENV_FILES", (str(env_file),))
    monkeypatch.setattr(remote, "_pairs_from_environ_file", lambda path: {})
    assert remote.machine_variable("RUNPOD_POD_ID") == "pod-from-file"
    assert remote.machine_variable("NOT_THERE") is None


def _handed_over(remote, provider: str):
    """The self-removal the machine's script has once gpubench started it for `provider`:
    the registry's, through the script's command line."""
    args = remote.parser().parse_args(["start", "--seconds", "1", "--provider", provider,
                                       *watchdog.removal_arguments(watchdog.self_removal(provider))])
    return remote.removal_of(args)


@pytest.mark.parametrize("provider,url,body,variables", [
    ("runpod", "https://api.runpod.io/v2/pods/abc", None, ("RUNPOD_POD_ID", "RUNPOD_API_KEY")),
    ("vast", "https://console.vast.ai/api/v0/instances/abc/", b"{}", ("CONTAINER_ID", "CONTAINER_API_KEY")),
])
def test_the_documented_self_removal_call(remote, provider, url, body, variables):
    endpoint = {"runpod": "https://api.runpod.io/", "vast": "https://console.vast.ai"}[provider]
    removal = _handed_over(remote, provider)
    assert (removal["id_var"], removal["key_var"]) == variables
    request = remote.self_removal_request(removal, endpoint, "abc", "machine-key")
    assert (request.get_method(), request.full_url, request.data) == ("DELETE", url, body)
    assert request.get_header("Authorization") == "Bearer machine-key"
    assert watchdog.how_it_stops(provider) == "self-removal" == remote.how(removal)


def test_a_lambda_machine_is_handed_no_self_removal(remote):
    assert _handed_over(remote, "lambda") is None and watchdog.self_removal("mem") is None
    assert watchdog.how_it_stops("lambda") == "shutdown -h" == remote.how(None)
    assert "--id-var" not in watchdog.install_command(60, "lambda", "", 1.0)
    assert "--id-var RUNPOD_POD_ID" in watchdog.install_command(60, "runpod", "https://x", 1.0)


def test_without_its_id_and_key_a_machine_halts_after_a_few_tries(remote, monkeypatch):
    halted: list[bool] = []
    monkeypatch.setattr(remote, "halt", lambda: (halted.append(True) or True, "halted"))
    monkeypatch.setattr(remote, "machine_variable", lambda name: None)
    vast = _handed_over(remote, "vast")
    for tries in range(remote.SELF_REMOVAL_TRIES - 1):
        assert remote.stop("vast", "http://x", vast, tries) is False and not halted
    assert remote.stop("vast", "http://x", vast, remote.SELF_REMOVAL_TRIES - 1) is True and halted
    halted.clear()
    assert remote.stop("lambda", "", None, 0) is True and halted      # Lambda: nothing to call


def test_max_hours_must_be_positive():
    assert watchdog.check_max_hours(None) is None and watchdog.check_max_hours(0.5) == 0.5
    for bad in (0, -1.0):
        with pytest.raises(UsageError, match="--max-hours must be positive"):
            watchdog.check_max_hours(bad)
    with pytest.raises(UsageError, match="--max-hours"):
        ProvisionRequest("mem", 1, max_hours=0).validate()


def test_ls_says_when_and_how_a_machine_stops():
    now = 1_000_000.0
    assert watchdog.Deadline(None, None).describe(now) is None
    assert watchdog.Deadline(now + 3900, "self-removal").describe(now) == "in 1h05m, self-removal"
    assert watchdog.Deadline(now + 90, "shutdown -h").describe(now) == "in 1m30s, shutdown -h"
    past = watchdog.Deadline(now - 5, None).describe(now)
    assert past.startswith("past (") and past.endswith("ledger only")


def test_an_old_ledger_gains_the_deadline_columns(tmp_path):
    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE instances (row_id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL, "
               "provider TEXT NOT NULL, instance_id TEXT, provider_name TEXT NOT NULL, status TEXT NOT NULL)")
    db.execute("INSERT INTO instances (name, provider, instance_id, provider_name, status) "
               "VALUES ('x', 'mem', 'i1', 'gpubench-x', 'ready')")
    db.commit()
    db.close()
    with Ledger(path) as ledger:
        (entry,) = ledger.entries()
        assert entry.deadline_at is None and entry.watchdog is None and not entry.past_deadline()


# -- provisioning and the ledger's side ------------------------------------------

def _provision(monkeypatch, cloud: Cloud, ledger: Ledger, max_hours, install):
    monkeypatch.setattr(boot, "probe", lambda *a, **k: None)
    monkeypatch.setattr(provisioning.watchdog, "install", install)
    monkeypatch.setattr(provisioning, "sync_ssh_config", lambda ledger: None)

    def running(provider, iid, deadline_s, progress):
        inst = cloud.get(iid)
        inst.status, inst.ssh_host, inst.ssh_port = InstanceState.RUNNING, "127.0.0.1", 22
        return inst

    monkeypatch.setattr(provisioning, "wait_running", running)
    said: list[str] = []
    req = ProvisionRequest("mem", 1, name="w", max_hours=max_hours).validate()
    outcome = provisioning.provision(cloud, req, [Offer("mem", "o1", "H100", 1, 2.0)], ledger,
                                     lambda phase, detail: said.append(f"{phase}: {detail}"))
    return outcome.entry, said


def test_provision_records_the_deadline_and_the_watchdog(monkeypatch):
    cloud, ledger = Cloud(), Ledger()
    before = time.time()
    entry, said = _provision(monkeypatch, cloud, ledger, 2.0, lambda entry, at, endpoint: "self-removal")
    assert before + 7200 <= entry.deadline_at <= time.time() + 7200
    assert entry.watchdog == "self-removal" and entry.status is LedgerStatus.READY
    assert any(line.startswith("watchdog: w stops itself (self-removal)") for line in said)


def test_a_watchdog_that_cannot_start_leaves_the_ledger_deadline(monkeypatch):
    def refuse(entry, at, endpoint):
        raise watchdog.WatchdogError("on w: python3: not found")

    entry, said = _provision(monkeypatch, Cloud(), Ledger(), 1.0, refuse)
    assert entry.status is LedgerStatus.READY and entry.deadline_at
    assert entry.watchdog == "not started: on w: python3: not found"
    assert any("the ledger's deadline" in line for line in said)


def test_no_max_hours_no_watchdog(monkeypatch):
    def never(*args):
        raise AssertionError("no watchdog was asked for")

    entry, _ = _provision(monkeypatch, Cloud(), Ledger(), None, never)
    assert entry.deadline_at is None and entry.watchdog is None


def _past_deadline_row(ledger: Ledger, cloud: Cloud, name: str = "w"):
    inst = cloud.add(name)
    entry = ledger.begin(name, "mem", inst.name, cloud.account, price_per_hour=2.0,
                         deadline_at=time.time() - 1, ssh_host="127.0.0.1", ssh_port=22,
                         key_path="/nonexistent")
    ledger.mark(entry.row_id, LedgerStatus.LAUNCHED, "created_at", instance_id=inst.instance_id)
    return ledger.mark(entry.row_id, LedgerStatus.READY, "ssh_ready_at")


def test_a_machine_past_its_deadline_is_terminated_by_the_next_command(monkeypatch):
    cloud, ledger = Cloud(), Ledger()
    entry = _past_deadline_row(ledger, cloud)
    monkeypatch.setattr(fleet.watchdog, "run_active", lambda entry: None)   # halted: no answer
    said: list[str] = []
    (result,) = fleet.settle_deadlines(ledger, {"mem": cloud}, said.append)
    assert result.gone and cloud.instances == {}
    row = ledger.get(entry.row_id)
    assert row.termination_confirmed and row.note.startswith("past its deadline")
    assert any("passed its deadline" in line for line in said)
    assert said[-1] == "w: terminated (confirmed by mem)"
    assert fleet.settle_deadlines(ledger, {"mem": cloud}, said.append) == []     # once


def test_a_machine_that_removed_itself_is_confirmed_gone(monkeypatch):
    cloud, ledger = Cloud(), Ledger()
    entry = _past_deadline_row(ledger, cloud)
    cloud.instances.clear()                     # the watchdog removed it
    monkeypatch.setattr(fleet.watchdog, "run_active", lambda entry: pytest.fail("not asked"))
    said: list[str] = []
    (result,) = fleet.settle_deadlines(ledger, {"mem": cloud}, said.append)
    assert result.gone and cloud.terminate_calls == 0
    assert ledger.get(entry.row_id).termination_confirmed
    assert "stopped itself at its deadline" in said[0]


def test_a_machine_with_an_active_run_is_left(monkeypatch):
    cloud, ledger = Cloud(), Ledger()
    entry = _past_deadline_row(ledger, cloud)
    monkeypatch.setattr(fleet.watchdog, "run_active", lambda entry: True)
    said: list[str] = []
    assert fleet.settle_deadlines(ledger, {"mem": cloud}, said.append) == []
    assert ledger.get(entry.row_id).status is LedgerStatus.READY and cloud.terminate_calls == 0
    assert "a gpubench run is active on it: left running" in said[0]


def test_nothing_due_connects_nothing(monkeypatch):
    ledger = Ledger()
    ledger.begin("later", "mem", "gpubench-later", deadline_at=time.time() + 3600)
    monkeypatch.setattr(fleet, "connect_all", lambda *a, **k: pytest.fail("no provider needed"))
    assert fleet.settle_deadlines(ledger) == []
