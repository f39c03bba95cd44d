"""End to end on the mock cloud, the real CLI and real sshd: a list from another
endpoint writes off nothing, a machine left out of one list is looked up and comes
back, a row written off wrongly is taken down for real, and a launch whose answer was
lost is settled at once."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time

import pytest

import gpubench.mock as mock
from gpubench import paths
from gpubench.store.ledger import Ledger
from gpubench.store.status import LedgerStatus
from gpubench.providers import registry
from gpubench.providers.common import NAME_PREFIX, Account, TransportError, key_fingerprint

# Provisioned machines answer SSH: each starts an sshd.
pytestmark = pytest.mark.slow

PROVIDERS = ["lambda", "vast", "runpod"]


def _point_at(cloud, monkeypatch) -> None:
    for k, v in cloud.env().items():
        monkeypatch.setenv(k, v)


@pytest.fixture
def cloud(tmp_path, monkeypatch):
    c = mock.MockCloud.start(state_dir=tmp_path / "mock", boot_delay=0.0)
    _point_at(c, monkeypatch)
    yield c
    c.stop()


@pytest.fixture
def two_clouds(tmp_path):
    first = mock.MockCloud.start(state_dir=tmp_path / "first", boot_delay=0.0)
    second = mock.MockCloud.start(state_dir=tmp_path / "second", boot_delay=0.0)
    yield first, second
    second.stop()
    first.stop()




def gb_ssh(name: str, *command: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpubench", "ssh", name, "--", *command],
                          capture_output=True, text=True, timeout=60, env=dict(os.environ))


def _alive(provider: str) -> list[str]:
    return [i.name for i in registry.get(provider).list() if i.name.startswith(NAME_PREFIX)]


def test_a_list_from_another_endpoint_writes_off_nothing(two_clouds, cli, monkeypatch):
    first, second = two_clouds
    _point_at(first, monkeypatch)
    for provider in PROVIDERS:
        code, out, err = cli("provision", provider, "--gpus", "1", "--name", f"w-{provider}", "--yes")
        assert code == 0, err
        row = Ledger().find(f"w-{provider}")
        assert row.account == Account(provider, first.base_url, key_fingerprint(first.env()[
            registry.entry(provider).key_var]), row.account_id)
        assert row.account_id == ("424242" if provider == "vast" else None)   # only Vast names it

    _point_at(second, monkeypatch)        # the same variables, another endpoint: another account
    code, out, err = cli("ls", "--format", "json")
    assert code == 0, err
    rows = {r["name"]: r for r in json.loads(out)}
    assert sorted(rows) == [f"w-{p}" for p in sorted(PROVIDERS)]
    for row in rows.values():
        assert row["status"] == "ready" and row["note"].startswith("launched with another API key")
        assert first.base_url in row["note"]
    assert [e.status for e in Ledger().entries(include_done=True)] == [LedgerStatus.READY] * 3
    code, out, err = cli("down", "w-vast", "--yes")
    assert code == 1 and "another API key" in err and "NOT" not in out
    assert Ledger().find("w-vast").status is LedgerStatus.READY

    _point_at(first, monkeypatch)         # back on the account that launched them
    for provider in PROVIDERS:
        assert _alive(provider) == [f"gpubench-w-{provider}"]
    code, out, err = cli("ls", "--format", "json")
    assert all("another" not in r["note"] for r in json.loads(out))
    r = gb_ssh("w-vast", "echo", "hello-from-the-right-account")
    assert r.returncode == 0 and "hello-from-the-right-account" in r.stdout, r.stderr
    code, out, err = cli("down", "--all", "--yes")
    assert code == 0, err
    assert all(e.termination_confirmed for e in Ledger().entries(include_done=True))
    for provider in PROVIDERS:
        assert _alive(provider) == []


def test_a_machine_left_out_of_a_list_goes_missing_and_comes_back(cloud, cli, monkeypatch):
    from gpubench.providers import vast

    code, out, err = cli("provision", "vast", "--gpus", "1", "--name", "h", "--yes")
    assert code == 0, err

    cloud.set_faults("vast:hide-from-list@1")           # one list leaves it out; the lookup finds it
    code, out, err = cli("ls", "--format", "json")
    (row,) = json.loads(out)
    assert row["name"] == "h" and "found by id" in row["note"]
    assert Ledger().find("h").status is LedgerStatus.READY

    def no_answer(self, instance_id):
        raise TransportError("vast", f"GET /api/v0/instances/{instance_id}/", "no answer")

    cloud.set_faults("vast:hide-from-list@1")           # left out, and the lookup gets no answer
    with monkeypatch.context() as m:
        m.setattr(vast.Vast, "get", no_answer)
        code, out, err = cli("ls", "--format", "json")
    (row,) = json.loads(out)
    assert row["status"] == "missing" and "not confirmed gone" in row["note"]
    assert Ledger().find("h").status is LedgerStatus.MISSING
    r = gb_ssh("h", "echo", "still-here")               # missing is not gone: ssh tries it
    assert r.returncode == 0 and "still-here" in r.stdout and "'h' is missing" in r.stderr

    code, out, err = cli("ls", "--format", "json")   # listed again
    assert json.loads(out)[0]["note"] == "seen again by its provider"
    assert Ledger().find("h").status is LedgerStatus.READY

    cloud.set_faults("vast:hide-from-list@1")
    with monkeypatch.context() as m:
        m.setattr(vast.Vast, "get", no_answer)
        cli("ls")
    assert Ledger().find("h").status is LedgerStatus.MISSING
    code, out, err = cli("down", "h", "--yes")   # the wrongly marked row is taken down
    assert code == 0, err
    assert "h: terminated" in out and _alive("vast") == []
    assert Ledger().find("h").termination_confirmed


def test_a_row_an_older_gpubench_wrote_off_is_reached_and_taken_down(cloud, cli):
    code, out, err = cli("provision", "lambda", "--gpus", "1", "--name", "old", "--yes")
    assert code == 0, err
    db = sqlite3.connect(paths.ledger_path())           # as an older gpubench left it
    db.execute("UPDATE instances SET status = 'terminated', terminated_confirmed_at = ?, "
               "note = 'no longer listed by the provider', account_endpoint = NULL, "
               "key_fingerprint = NULL, account_id = NULL WHERE name = 'old'", (time.time(),))
    db.commit()
    db.close()

    r = gb_ssh("old", "echo", "not-gone")
    assert r.returncode == 0 and "not-gone" in r.stdout, r.stderr
    assert "without its provider's confirmation" in r.stderr
    code, out, err = cli("down", "old", "--yes")
    assert code == 0, err
    assert "old: terminated" in out and "still has" in err and _alive("lambda") == []
    code, out, err = cli("down", "old", "--yes")
    assert code == 0 and out.strip() == "old is already terminated"


def test_a_launch_whose_answer_was_lost_is_settled_at_once(cloud, cli, tmp_path):
    from gpubench.bench import machine as bench_mod
    from gpubench.bench.request import BenchRequest
    from gpubench.store.results import ResultsStore

    prov = registry.get("runpod")

    class AnswerLost:
        def __getattr__(self, name):
            return getattr(prov, name)

        def launch(self, offer, spec):
            raise TransportError("runpod", "POST /v2/pods", "502 Bad Gateway")

    said = []
    req = BenchRequest("runpod", 1, [], name="lost")
    started = time.monotonic()
    with Ledger() as ledger, pytest.raises(Exception, match="the launch may have happened"):
        bench_mod.bench(req, ResultsStore(tmp_path), said.append, ledger=ledger, provider=AnswerLost())
    assert time.monotonic() - started < 15
    row = Ledger().find("lost")
    assert row.termination_confirmed and row.note.startswith("never created")
    assert any("lost terminated" in line for line in said)
    code, out, err = cli("provision", "runpod", "--gpus", "1", "--name", "lost", "--yes")
    assert code == 0, err                                  # the name is free again at once
    assert cli("down", "lost", "--yes")[0] == 0


def test_bench_takes_provisions_boot_and_ssh_deadlines(cloud, cli, tmp_path):
    cloud.set_faults("runpod:never-boots")
    started = time.monotonic()
    code, out, err = cli("bench", "runpod", "--yes", "--gpus", "1", "--workload", "mnist-ddp",
                        "--name", "nb", "--boot-timeout", "0.5", "--ssh-timeout", "1", "--attempts", "1",
                        "--results", str(tmp_path))
    assert code == 1 and "not running after 0.5 s" in err and "1 launched" in err
    assert time.monotonic() - started < 30
    assert Ledger().find("nb").termination_confirmed and _alive("runpod") == []
