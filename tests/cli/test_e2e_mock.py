"""End to end against the mock cloud: the real CLI, the real adapters, real sshd
(in the tests marked slow: those whose instances boot)."""

from __future__ import annotations

import json
import signal
import subprocess
import time

import pytest

import gpubench.mock as mock
from gpubench.store.ledger import Ledger
from tests.helpers import run_gpubench, start_gpubench

PROVIDERS = ["lambda", "vast", "runpod"]


@pytest.fixture
def cloud(tmp_path, monkeypatch):
    c = mock.MockCloud.start(state_dir=tmp_path / "mock", boot_delay=0.0)
    for k, v in c.env().items():
        monkeypatch.setenv(k, v)
    yield c
    c.stop()


@pytest.mark.slow
@pytest.mark.parametrize("provider", PROVIDERS)
def test_offers_provision_ssh_ls_down(cloud, cli, provider):
    code, out, err = cli("offers", provider, "--gpus", "1", "--format", "json")
    assert code == 0, err
    offers = json.loads(out)
    assert offers and all(o["provider"] == provider and o["count"] == 1 for o in offers)
    assert [o["price_per_hour"] for o in offers] == sorted(o["price_per_hour"] for o in offers)

    code, out, err = cli("provision", provider, "--gpus", "1", "--name", "t1", "--yes",
                        "--disk", "50")
    assert code == 0, err
    assert "ready in" in out
    entry = Ledger().find("t1")
    assert entry.status == "ready" and entry.instance_id and entry.ssh_port
    assert all(getattr(entry, p) for p in ("requested_at", "created_at", "running_at", "ssh_ready_at"))
    assert entry.requested_at <= entry.created_at <= entry.running_at <= entry.ssh_ready_at

    r = run_gpubench("ssh", "t1", "--", "echo", "hello-from-mock", timeout=60)
    assert r.returncode == 0 and "hello-from-mock" in r.stdout, r.stderr

    code, out, err = cli("ls", "--format", "json")
    rows = json.loads(out)
    assert [(r["name"], r["provider"], r["ssh"]) for r in rows] == [("t1", provider, "gpubench-t1")]

    code, out, err = cli("down", "t1", "--yes")
    assert code == 0, err
    assert "terminated" in out and "cost $" in out
    secret = cloud.env()[f"{provider.upper()}_API_KEY"]
    from gpubench import paths

    for f in (paths.ledger_path(), paths.ssh_config_path(), paths.known_hosts_path()):
        assert secret.encode() not in f.read_bytes()
    entry = Ledger().find("t1")
    assert entry.status == "terminated" and entry.terminated_confirmed_at and entry.terminate_requested_at
    code, out, err = cli("ls")
    assert out.strip() == "no instances"


@pytest.mark.parametrize("provider,words", [
    ("lambda", "API key was invalid, expired, or deleted."),
    ("vast", "Invalid user key"),
    ("runpod", "bearer token"),
])
def test_bad_key_is_one_line_in_the_providers_words(cloud, cli, provider, words):
    cloud.set_faults(f"{provider}:bad-key")
    code, out, err = cli("provision", provider, "--gpus", "1", "--yes")
    assert code != 0
    assert len(err.strip().splitlines()) == 1 and provider in err and "401" in err
    assert words.lower() in err.lower()
    # offers across providers: one warning line, the others still print
    code, out, err = cli("offers", "--gpus", "1", "--format", "json")
    assert code == 0
    assert [ln for ln in err.splitlines() if ln.startswith("warning")] == err.strip().splitlines()
    assert len(err.strip().splitlines()) == 1
    assert {o["provider"] for o in json.loads(out)} == set(PROVIDERS) - {provider}


@pytest.mark.slow
def test_429s_are_retried_and_succeed(cloud, cli, monkeypatch):
    cloud.set_faults("vast:429=0@2,runpod:429=0@2,lambda:429=0@2")
    code, out, err = cli("offers", "--gpus", "1", "--format", "json")
    assert code == 0 and not err, err
    assert {o["provider"] for o in json.loads(out)} == set(PROVIDERS)
    cloud.set_faults("runpod:429=0@1")
    code, out, err = cli("provision", "runpod", "--gpus", "1", "--name", "r", "--yes")
    assert code == 0, err
    assert cli("down", "r", "--yes")[0] == 0


@pytest.mark.slow
@pytest.mark.parametrize("provider,ghost", [("vast", "999999"), ("runpod", "NVIDIA B999")])
def test_no_capacity_on_the_cheapest_falls_through_to_the_next(cloud, cli, provider, ghost):
    """The cheapest offer is gone by launch time (Vast: no_such_ask; RunPod: a 400 on
    create, and no server-side fallback): the next offer is launched."""
    from gpubench.lifecycle.provision import ProvisionRequest, plan, provision
    from gpubench.providers import registry
    from gpubench.providers.common import Offer

    prov = registry.get(provider)
    req = ProvisionRequest(provider, gpus=1, name="fall")
    offers = plan(prov, req)
    cheapest = Offer(provider, ghost, offers[0].gpu_name, 1, offers[0].price_per_hour / 2)
    with Ledger() as ledger:
        outcome = provision(prov, req, [cheapest] + offers, ledger)
        assert outcome.offer == offers[0]
        assert ghost in outcome.attempts[0]
        assert [e.name for e in ledger.entries(include_done=True)] == ["fall"]   # no row for the refusal
    assert cli("down", "fall", "--yes")[0] == 0


@pytest.mark.parametrize("provider", PROVIDERS)
def test_no_capacity_anywhere(cloud, cli, provider):
    cloud.set_faults(f"{provider}:no-capacity")
    code, out, err = cli("provision", provider, "--gpus", "1", "--yes")
    assert code == 1 and len(err.strip().splitlines()) == 1
    assert "sold out" in err or "available to rent" in err
    assert Ledger().entries(include_done=True) == []
    cloud.set_faults("")
    code, out, err = cli("ls", "--format", "json")
    assert json.loads(out) == []


def test_launch_refused_leaves_no_ledger_row(cloud, cli):
    """Catalog said yes, the launch said no capacity: nothing left behind."""
    from gpubench.lifecycle.provision import ProvisionError, ProvisionRequest, plan, provision
    from gpubench.providers import registry

    prov = registry.get("lambda")
    req = ProvisionRequest("lambda", gpus=1, name="nocap", attempts=2)
    offers = plan(prov, req)
    cloud.set_faults("lambda:no-capacity")
    with Ledger() as ledger, pytest.raises(ProvisionError, match="capacity"):
        provision(prov, req, offers, ledger)
    assert Ledger().entries(include_done=True) == []


@pytest.mark.slow
def test_never_booting_instance_is_terminated_and_replaced(cloud, cli):
    cloud.set_faults("runpod:never-boots")
    from gpubench.lifecycle.provision import Deadlines, ProvisionRequest, plan, provision
    from gpubench.providers import registry

    prov = registry.get("runpod")
    req = ProvisionRequest("runpod", gpus=1, name="nb", deadlines=Deadlines(running_s=0.6, ssh_s=10))
    offers = plan(prov, req)
    phases = []

    def progress(phase, detail):
        phases.append(phase)
        if phase == "replace":
            cloud.set_faults("")       # the next machine boots

    with Ledger() as ledger:
        outcome = provision(prov, req, offers, ledger, progress)
        rows = ledger.entries(include_done=True)
    assert "replace" in phases and len(outcome.attempts) == 1
    assert [r.status for r in rows] == ["terminated", "ready"]
    first = rows[0].instance_id
    assert first not in {i.instance_id for i in prov.list()}
    assert cli("down", "nb", "--yes")[0] == 0


@pytest.mark.slow
def test_lying_terminate_is_caught(cloud, cli):
    assert cli("provision", "vast", "--gpus", "1", "--name", "liar", "--yes")[0] == 0
    cloud.set_faults("vast:terminate-lies")
    code, out, err = cli("down", "liar", "--yes", "--timeout", "1.5")
    assert code != 0
    assert "NOT confirmed gone" in err and "sending terminate again" in err
    assert Ledger().find("liar").status == "unconfirmed"
    code, out, err = cli("ls", "--format", "json")
    assert [r["name"] for r in json.loads(out)] == ["liar"]
    cloud.set_faults("")
    code, out, err = cli("down", "liar", "--yes")
    assert code == 0, err
    assert Ledger().find("liar").status == "terminated"


@pytest.mark.slow
def test_process_dying_right_after_launch_leaves_a_findable_instance(cloud, cli):
    """The launch call went through, the answer never reached the ledger."""
    from gpubench.lifecycle.provision import ProvisionRequest, plan, provision
    from gpubench.providers import registry

    prov = registry.get("lambda")

    class DiesAfterLaunch:
        def __getattr__(self, name):
            return getattr(prov, name)

        def launch(self, offer, spec):
            prov.launch(offer, spec)
            raise SystemExit(137)     # as if killed before the ledger was completed

    req = ProvisionRequest("lambda", gpus=1, name="crash")
    with Ledger() as ledger, pytest.raises(SystemExit):
        provision(DiesAfterLaunch(), req, plan(prov, req), ledger)
    assert Ledger().find("crash").instance_id is None
    code, out, err = cli("ls", "--format", "json")
    rows = json.loads(out)
    assert rows[0]["name"] == "crash" and rows[0]["instance_id"] and rows[0]["note"] == "recovered by name"
    code, out, err = cli("down", "crash", "--yes")
    assert code == 0, err
    assert prov.list() == [] or all(i.name != "gpubench-crash" for i in prov.list())


def test_killed_cli_while_booting_is_listed_and_removable(cloud, cli):
    cloud.set_faults("vast:never-boots")
    proc = start_gpubench("provision", "vast", "--gpus", "1", "--name", "killed", "--yes",
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            rows = Ledger().entries()
            if rows and rows[0].status == "launched":
                break
            time.sleep(0.1)
        else:
            pytest.fail("provision never got past the launch call")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    code, out, err = cli("ls", "--format", "json")
    assert [r["name"] for r in json.loads(out)] == ["killed"]
    code, out, err = cli("down", "killed", "--yes")
    assert code == 0, err


@pytest.mark.slow
def test_orphans_are_listed_and_removed(cloud, cli):
    from gpubench.providers import registry
    from gpubench.providers.common import LaunchSpec

    prov = registry.get("runpod")
    offer = prov.offers(gpus=1)[0]
    prov.launch(offer, LaunchSpec(gpus=1, name="elsewhere"))
    code, out, err = cli("ls", "--format", "json")
    rows = json.loads(out)
    assert rows[0]["name"] == "elsewhere" and "orphan" in rows[0]["note"]
    code, out, err = cli("down", "--orphans", "--yes")
    assert code == 0, err
    assert all(i.name != "gpubench-elsewhere" for i in prov.list())


def test_ssh_that_never_answers_is_replaced(cloud, cli):
    cloud.set_faults("lambda:ssh-refuses")
    code, out, err = cli("provision", "lambda", "--gpus", "1", "--name", "mute", "--yes",
                        "--ssh-timeout", "0.5", "--attempts", "2")
    assert code == 1 and "launched" in err
    assert err.count("replace") == 2 and err.strip().splitlines()[-1].startswith("error:")
    rows = Ledger().entries(include_done=True)
    assert [r.status for r in rows] == ["terminated", "terminated"]
    assert all(r.running_at and not r.ssh_ready_at for r in rows)


def test_dry_run_rents_nothing_and_filters_work(cloud, cli):
    code, out, err = cli("provision", "vast", "--gpus", "1", "--gpu-type", "H100", "--dry-run")
    assert code == 0 and "H100" in out and "nothing rented" in out
    assert Ledger().entries(include_done=True) == []
    code, out, err = cli("offers", "vast", "--interruptible", "--max-price", "0.5", "--format", "json")
    rows = json.loads(out)
    assert rows and all(r["interruptible"] and r["price_per_hour"] <= 0.5 for r in rows)
    code, out, err = cli("provision", "runpod", "--gpus", "1", "--max-price", "0.01", "--yes")
    assert code == 1 and "at or under $0.01/h (cheapest is $" in err
    code, out, err = cli("provision", "lambda", "--gpus", "1")     # no terminal, no --yes
    assert code == 2 and "--yes" in err and Ledger().entries(include_done=True) == []
