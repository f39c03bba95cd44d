"""A paid machine is never written off while it still bills: every ledger row records
its account, a list speaks only for its own account, absence from a list is never
proof, and `down` asks the row's account before saying anything."""

from __future__ import annotations

import hashlib
import sqlite3
import time
from dataclasses import replace

import pytest

from gpubench.lifecycle import fleet, terminate
from gpubench.lifecycle.accounts import Relation, relation
from gpubench.lifecycle.down import DownRequest, plan_down, take_down
from gpubench.store.ledger import LAUNCH_IN_FLIGHT_S, Ledger
from gpubench.store.status import TRANSITIONS, LedgerStatus
from gpubench.providers import registry
from gpubench.providers.common import Account, TransportError, key_fingerprint
from tests.lifecycle.helpers import MEM_ACCOUNT, Cloud

S = LedgerStatus
OTHER_KEY = replace(MEM_ACCOUNT, key_fingerprint="fedcba987654")


class Hiding(Cloud):
    """A cloud whose list leaves out everything for `hidden` calls, and whose lookup by
    id fails (no answer) while `get_fails` is set."""

    def __init__(self, hidden: int = 0, get_fails: bool = False, **kw):
        super().__init__(**kw)
        self.hidden = hidden
        self.get_fails = get_fails
        self.get_calls = 0

    def list(self):
        if self.hidden:
            self.hidden -= 1
            self.list_calls += 1
            return []
        return super().list()

    def get(self, iid):
        self.get_calls += 1
        if self.get_fails:
            raise TransportError("mem", f"GET /i/{iid}", "no answer")
        return super().get(iid)


@pytest.fixture
def clouds(monkeypatch):
    """registry.get answers from this dict: provider name -> in-memory cloud."""
    connected: dict[str, Cloud] = {}
    monkeypatch.setattr(registry, "get", lambda name: connected[name])
    monkeypatch.setattr(registry, "names", lambda: list(connected))
    return connected


def _ready(ledger: Ledger, cloud: Cloud, name: str, account: Account | None = MEM_ACCOUNT, port=2200):
    inst = cloud.add(name)
    row = ledger.begin(name, "mem", f"gpubench-{name}", account, price_per_hour=1.0, key_path="/k")
    return ledger.mark(row.row_id, S.READY, "created_at", instance_id=inst.instance_id,
                       ssh_host="127.0.0.1", ssh_port=port, ssh_user="root",
                       running_at=time.time(), ssh_ready_at=time.time())


def _ls(ledger: Ledger, cloud: Cloud) -> dict[str, fleet.FleetRow]:
    return {r.name: r for r in fleet.reconcile(ledger, {"mem": cloud})}


# -- the account on every row ----------------------------------------------------

def test_the_fingerprint_names_the_key_without_it():
    fp = key_fingerprint("secret-key")
    assert fp == hashlib.sha256(b"secret-key").hexdigest()[:12] and "secret" not in fp
    assert key_fingerprint("other-key") != fp


def test_registry_gives_each_adapter_its_account(monkeypatch):
    monkeypatch.setenv("VAST_API_KEY", "vast-secret")
    monkeypatch.setenv("GPUBENCH_VAST_URL", "http://127.0.0.1:9/api/v0/")
    vast = registry.get("vast")
    assert vast.account == Account("vast", "http://127.0.0.1:9", key_fingerprint("vast-secret"))
    monkeypatch.setenv("GPUBENCH_VAST_URL", "http://127.0.0.1:9")
    assert registry.get("vast").account == vast.account       # with or without the API path
    monkeypatch.setenv("LAMBDA_API_KEY", "lambda-secret")
    lam = registry.get("lambda")
    assert lam.account.endpoint == "https://cloud.lambda.ai" and lam.lookup_account_id() is None


def test_same_account_is_one_key_at_one_endpoint_or_one_account_id():
    assert MEM_ACCOUNT.same_as(MEM_ACCOUNT)
    assert not MEM_ACCOUNT.same_as(OTHER_KEY)
    assert not MEM_ACCOUNT.same_as(replace(MEM_ACCOUNT, endpoint="mem://elsewhere"))
    rotated_old = replace(MEM_ACCOUNT, account_id="42")
    assert rotated_old.same_as(replace(OTHER_KEY, account_id="42"))
    assert not rotated_old.same_as(replace(OTHER_KEY, account_id="43"))


def test_an_old_ledger_file_opens_and_gains_the_account_columns(tmp_path):
    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE instances (row_id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL,
            provider TEXT NOT NULL, instance_id TEXT, provider_name TEXT NOT NULL, status TEXT NOT NULL,
            offer_id TEXT, instance_type TEXT, region TEXT, gpu_name TEXT, gpu_count INTEGER,
            price_per_hour REAL, disk_gb INTEGER, image TEXT, ssh_host TEXT, ssh_port INTEGER,
            ssh_user TEXT, key_path TEXT, requested_at REAL, created_at REAL, running_at REAL,
            ssh_ready_at REAL, terminate_requested_at REAL, terminated_confirmed_at REAL, note TEXT);
        INSERT INTO instances (name, provider, provider_name, status, instance_id)
            VALUES ('old', 'vast', 'gpubench-old', 'ready', '7');
    """)
    db.commit()
    db.close()
    with Ledger(path) as ledger:
        old = ledger.find("old")
        assert old.status is S.READY and old.account is None and old.key_fingerprint is None
        new = ledger.begin("new", "mem", "gpubench-new", MEM_ACCOUNT)
        assert ledger.get(new.row_id).account == MEM_ACCOUNT
    with Ledger(path) as ledger:          # opened again: nothing left to add
        assert ledger.find("new").account == MEM_ACCOUNT
    columns = {r[1] for r in sqlite3.connect(path).execute("PRAGMA table_info(instances)")}
    assert {"account_endpoint", "key_fingerprint", "account_id", "launch_ended_at"} <= columns


def test_missing_has_its_transitions():
    for status in (S.LAUNCHED, S.RUNNING, S.READY):
        assert S.MISSING in TRANSITIONS[status] and status in TRANSITIONS[S.MISSING]
    assert S.MISSING not in TRANSITIONS[S.REQUESTED] and S.MISSING not in TRANSITIONS[S.TERMINATED]
    assert {S.TERMINATING, S.TERMINATED, S.MISSING} <= TRANSITIONS[S.MISSING]
    assert S.MISSING.active and not S.MISSING.reachable


# -- reconciling only with the row's own account -----------------------------------

def test_rows_of_another_account_are_left_as_they_are():
    cloud = Cloud()
    with Ledger() as ledger:
        _ready(ledger, cloud, "w", account=OTHER_KEY)
        stranger = Cloud()                    # the same provider, under another key: lists nothing
        rows = _ls(ledger, stranger)
        assert ledger.find("w").status is S.READY and stranger.terminate_calls == 0
    assert rows["w"].status == "ready" and rows["w"].ssh == "gpubench-w"
    assert rows["w"].note.startswith("launched with another API key (fingerprint fedcba987654)")


def test_another_endpoint_is_another_account_and_says_where():
    cloud = Cloud()
    with Ledger() as ledger:
        _ready(ledger, cloud, "w", account=replace(MEM_ACCOUNT, endpoint="mem://first"))
        note = _ls(ledger, Cloud())["w"].note
        assert ledger.find("w").status is S.READY
    assert "another API key (fingerprint 0123456789ab at mem://first)" in note


def test_a_rotated_key_is_the_same_account_once_its_list_shows_the_row():
    cloud = Cloud()
    with Ledger() as ledger:
        row = _ready(ledger, cloud, "w", account=OTHER_KEY)    # launched with an older key
        assert relation(row, cloud) is Relation.OTHER
        _ls(ledger, cloud)                                     # the current key lists its id
        row = ledger.find("w")
    assert row.status is S.READY and row.account == MEM_ACCOUNT


def test_a_rotated_key_of_an_account_the_provider_names_is_the_same_account():
    class Named(Cloud):
        def lookup_account_id(self):
            self.lookups = getattr(self, "lookups", 0) + 1
            return "42"

    cloud = Named()
    with Ledger() as ledger:
        row = _ready(ledger, cloud, "w", account=replace(OTHER_KEY, account_id="42"))
        assert relation(row, cloud) is Relation.SAME and cloud.lookups == 1
        cloud.instances.clear()
        _ls(ledger, cloud)                   # its own account: a lookup by id settles it
        assert ledger.find("w").termination_confirmed
        row = _ready(ledger, cloud, "v", account=replace(OTHER_KEY, account_id="43"))
        assert relation(row, cloud) is Relation.OTHER


def test_a_row_left_out_of_one_list_is_looked_up_and_stays():
    cloud = Hiding(hidden=1)
    with Ledger() as ledger:
        _ready(ledger, cloud, "w")
        first = _ls(ledger, cloud)["w"]
        assert ledger.find("w").status is S.READY and cloud.get_calls == 1
        second = _ls(ledger, cloud)["w"]
    assert "found by id" in first.note and second.status == "pending"   # the cloud's own word
    assert cloud.get_calls == 1            # listed again: no lookup


def test_missing_until_listed_again_then_back_where_it_was():
    cloud = Hiding(hidden=1, get_fails=True)
    with Ledger() as ledger:
        _ready(ledger, cloud, "w")
        row = _ls(ledger, cloud)["w"]
        assert row.status == "missing" and "not confirmed gone" in row.note
        assert ledger.find("w").status is S.MISSING and cloud.get_calls == 1
        cloud.get_fails = False
        _ls(ledger, cloud)
        back = ledger.find("w")
    assert back.status is S.READY and back.note == "seen again by its provider"


def test_a_row_its_own_account_cannot_find_is_confirmed_gone():
    cloud = Cloud()
    with Ledger() as ledger:
        _ready(ledger, cloud, "w")
        cloud.instances.clear()               # gone at the provider
        _ls(ledger, cloud)
        row = ledger.find("w")
    assert row.status is S.TERMINATED and row.termination_confirmed and row.terminated_confirmed_at
    assert "lookup by id finds nothing" in row.note


def test_a_row_without_an_account_is_never_written_off_on_absence():
    cloud = Cloud()
    with Ledger() as ledger:
        _ready(ledger, cloud, "old", account=None)
        cloud.instances.clear()
        note = _ls(ledger, Cloud())["old"].note
        row = ledger.find("old")
    assert row.status is S.MISSING and "key it was launched with is unknown" in note


def test_a_row_without_an_account_takes_the_account_that_lists_it():
    cloud = Cloud()
    with Ledger() as ledger:
        _ready(ledger, cloud, "old", account=None)
        _ls(ledger, cloud)
        assert ledger.find("old").account == MEM_ACCOUNT


# -- a launch whose answer was lost -------------------------------------------------

def _requested(ledger: Ledger, account=MEM_ACCOUNT, age_s: float = 0.0, ended: bool = False):
    row = ledger.begin("t", "mem", "gpubench-t", account)
    values = {}
    if age_s:
        values["requested_at"] = time.time() - age_s
    if ended:
        values.update(launch_ended_at=time.time(), note="launch answer unclear: bad gateway")
    return ledger.update(row.row_id, **values) if values else row


def test_an_unclear_launch_is_settled_by_one_full_list_at_once():
    cloud = Cloud()
    with Ledger() as ledger:
        _requested(ledger, ended=True)
        rows = fleet.reconcile(ledger, {"mem": cloud})
        row = ledger.find("t")
    assert rows == [] and row.status is S.TERMINATED and row.termination_confirmed
    assert row.note.startswith("never created: its launch call ended without an answer")
    assert "gpubench-t" in row.note and MEM_ACCOUNT.key_fingerprint in row.note


def test_down_settles_an_unclear_launch_at_once():
    cloud = Cloud()
    with Ledger() as ledger:
        row = _requested(ledger, ended=True)
        started = time.monotonic()
        result = terminate.take_down_entry(ledger, row, cloud, deadline_s=5)
        assert time.monotonic() - started < 1 and cloud.list_calls == 1
        assert ledger.find("t").status is S.TERMINATED
    assert result.gone and result.message.startswith("nothing to terminate: never created")


def test_a_launch_that_may_still_be_going_on_is_given_time():
    cloud = Cloud()
    with Ledger() as ledger:
        _requested(ledger)
        (row,) = fleet.reconcile(ledger, {"mem": cloud})
        assert ledger.find("t").status is S.REQUESTED and "may still be going on" in row.note
        ledger.update(row.entry.row_id, requested_at=time.time() - LAUNCH_IN_FLIGHT_S - 1)
        fleet.reconcile(ledger, {"mem": cloud})
        assert ledger.find("t").status is S.TERMINATED


def test_a_lost_launch_of_another_account_is_not_settled_by_this_one():
    cloud = Cloud()
    with Ledger() as ledger:
        _requested(ledger, account=OTHER_KEY, ended=True)
        (row,) = fleet.reconcile(ledger, {"mem": cloud})
        assert ledger.find("t").status is S.REQUESTED and "another API key" in row.note


def test_waiting_for_a_launch_to_be_listed_says_so(monkeypatch):
    monkeypatch.setattr("gpubench.lifecycle.waiting.REMIND_AFTER_S", 0.0)
    cloud = Cloud()
    said = []
    with Ledger() as ledger:
        row = _requested(ledger)
        result = terminate.take_down_entry(ledger, row, cloud, deadline_s=5, say=said.append, find_s=0.3)
    assert not result.gone and said and "waiting for mem to list gpubench-t" in said[0]


# -- down asks before it says -------------------------------------------------------

def test_down_leaves_another_accounts_machine_alone_and_says_why(clouds):
    cloud = clouds["mem"] = Cloud()
    with Ledger() as ledger:
        _ready(ledger, cloud, "w", account=OTHER_KEY)
        cloud.account = replace(MEM_ACCOUNT, endpoint="mem://elsewhere")  # nothing ties them
        report = take_down(ledger, plan_down(ledger, DownRequest(name="w", deadline_s=5)))
        assert ledger.find("w").status is S.READY
    (result,) = report.results
    assert not result.gone and not result.reached and not report.all_gone
    assert "launched with another API key (fingerprint fedcba987654" in result.message
    assert cloud.terminate_calls == 0 and len(cloud.instances) == 1


def test_down_of_a_missing_row_terminates_it(clouds):
    cloud = clouds["mem"] = Hiding(hidden=1, get_fails=True)
    with Ledger() as ledger:
        _ready(ledger, cloud, "w")
        _ls(ledger, cloud)
        assert ledger.find("w").status is S.MISSING
        cloud.get_fails = False
        report = take_down(ledger, plan_down(ledger, DownRequest(name="w", deadline_s=5)))
        row = ledger.find("w")
    assert report.all_gone and cloud.instances == {} and cloud.terminate_calls == 1
    assert row.status is S.TERMINATED and row.termination_confirmed


def test_down_of_a_row_written_off_by_an_older_gpubench_terminates_it(clouds):
    cloud = clouds["mem"] = Cloud()
    with Ledger() as ledger:
        row = _ready(ledger, cloud, "w", account=None)
        # What an older gpubench did when a list left it out: terminated, on absence alone.
        ledger.mark(row.row_id, S.TERMINATED, "terminated_confirmed_at", note="no longer listed by the provider")
        assert not ledger.find("w").termination_confirmed
        plan = plan_down(ledger, DownRequest(name="w", deadline_s=5))
        assert [t.name for t in plan.targets] == ["w"] and "ledger's word only" in plan.describe()
        said = []
        report = take_down(ledger, plan, say=said.append)
        row = ledger.find("w")
        again = plan_down(ledger, DownRequest(name="w"))
    assert report.all_gone and report.results[0].message == "terminated" and cloud.instances == {}
    assert "still has i1" in said[0]
    assert row.termination_confirmed and row.account == MEM_ACCOUNT
    assert again.targets == [] and again.note == "w is already terminated"


def test_down_of_a_row_written_off_that_is_really_gone_says_so_after_asking(clouds):
    cloud = clouds["mem"] = Cloud()
    with Ledger() as ledger:
        row = _ready(ledger, cloud, "w", account=None)
        ledger.mark(row.row_id, S.TERMINATED, "terminated_confirmed_at")
        cloud.instances.clear()
        report = take_down(ledger, plan_down(ledger, DownRequest(name="w", deadline_s=5)))
        assert ledger.find("w").termination_confirmed
    assert report.all_gone and "confirms it is gone" in report.results[0].message


# -- terminate until the deadline, not a fixed count -----------------------------------

class HonoursLate:
    """Terminate answers success; only the `honoured_at`-th call takes."""

    name = "late"
    account = MEM_ACCOUNT

    def __init__(self, honoured_at: int) -> None:
        self.honoured_at = honoured_at
        self.calls = 0

    def terminate(self, iid):
        self.calls += 1

    def get(self, iid):
        from gpubench.providers.common import Instance, InstanceState, NotFoundError

        if self.calls >= self.honoured_at:
            raise NotFoundError("late", "GET", "gone")
        return Instance("late", "i1", "gpubench-x", InstanceState.RUNNING, raw_status="running")

    def list(self):
        return []


def test_terminate_honoured_only_at_the_fifth_call_is_confirmed_within_the_deadline():
    late = HonoursLate(honoured_at=5)
    said = []
    gone, why = terminate.terminate_confirmed(late, "i1", deadline_s=10, say=said.append, poll_s=0.01)
    assert gone and late.calls == 5, why
    resends = [line for line in said if "sending terminate again" in line]
    assert len(resends) == 4 and resends[-1].endswith("(call 5)")


def test_provisions_replace_path_says_what_the_terminate_waits_for(monkeypatch):
    from gpubench.lifecycle.provision import Deadlines, ProvisionError, ProvisionRequest, provision
    from gpubench.providers.common import InstanceState

    monkeypatch.setattr("gpubench.lifecycle.waiting.REMIND_AFTER_S", 0.0)

    class NeverRunsSlowToGo(Cloud):
        def launch(self, offer, spec):
            inst = super().launch(offer, spec)
            inst.status, inst.raw_status = InstanceState.FAILED, "error"
            return inst

        def terminate(self, iid):
            self.terminate_calls += 1
            if self.terminate_calls >= 2:
                self.instances.pop(iid, None)

    cloud = NeverRunsSlowToGo()
    heard = []
    req = ProvisionRequest("mem", gpus=1, name="t", attempts=1, deadlines=Deadlines(5, 5, 5))
    with Ledger() as ledger, pytest.raises(ProvisionError):
        provision(cloud, req, cloud.offers(), ledger, lambda phase, detail: heard.append((phase, detail)))
    lines = [detail for phase, detail in heard if phase == "terminate"]
    assert any("waiting for mem to confirm i1 is gone" in line for line in lines)
    assert any("sending terminate again" in line for line in lines)


def test_provision_records_the_account_on_every_row():
    from gpubench.lifecycle.provision import Deadlines, ProvisionRequest, provision

    class Boots(Cloud):
        account = replace(MEM_ACCOUNT, account_id=None)

        def lookup_account_id(self):
            return "acct-7"

    cloud = Boots(launch_error=TransportError("mem", "POST /launch", "no answer"))
    req = ProvisionRequest("mem", gpus=1, name="t", deadlines=Deadlines(5, 5, 5))
    with Ledger() as ledger:
        with pytest.raises(Exception):
            provision(cloud, req, cloud.offers(), ledger)
        row = ledger.find("t")
    assert row.account == replace(MEM_ACCOUNT, account_id="acct-7")
    assert row.launch_ended_at and row.launch_in_flight_s() == 0


# -- ssh and --on try whatever is not confirmed gone ------------------------------------

def test_ssh_and_on_refuse_only_a_confirmed_terminated_machine(tmp_path):
    from gpubench.lifecycle.sshconfig import NotReachableError, login_command
    from gpubench.remote.errors import BadTargetError
    from gpubench.remote.targets import host_from_entry

    key = tmp_path / "k"
    key.write_text("key")
    key.chmod(0o600)
    cloud = Cloud()
    warned = []
    with Ledger() as ledger:
        row = _ready(ledger, cloud, "w")
        for status in (S.MISSING, S.TERMINATING):
            row = ledger.mark(row.row_id, status)
            argv = login_command(ledger, "w", ["true"], warn=warned.append)
            assert argv[-2:] == ["gpubench-w", "true"] and f"'w' is {status.value}" in warned[-1]
            host = host_from_entry(row, key, warn=warned.append)
            assert host.target.host == "127.0.0.1" and "not confirmed gone" in warned[-1]
        row = ledger.mark(row.row_id, S.TERMINATED, **{"key_fingerprint": "0123456789ab",
                                                       "account_endpoint": "mem://cloud"})
        assert row.termination_confirmed
        with pytest.raises(NotReachableError, match="'w' is terminated"):
            login_command(ledger, "w", warn=warned.append)
        with pytest.raises(BadTargetError, match="is terminated"):
            host_from_entry(row, key, warn=warned.append)
