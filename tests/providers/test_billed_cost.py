"""Billed cost beside the estimate: after teardown the ledger row keeps what the provider
billed, where it reports it (RunPod, Vast.ai), and nothing where it does not (Lambda);
an old ledger file gains the column when opened."""

from __future__ import annotations

import sqlite3
import subprocess

import pytest

from gpubench.store.ledger import Ledger
from gpubench.store.status import LedgerStatus
from gpubench.lifecycle.terminate import fetch_billed, take_down_entry
from gpubench.mock import MockCloud
from gpubench.providers import registry
from gpubench.providers.common import LaunchSpec, ProviderError
from tests.mock.helpers import wait_for


@pytest.fixture
def mock_env(tmp_path, monkeypatch):
    with MockCloud.start(state_dir=tmp_path / "mock") as cloud:
        for k, v in cloud.env().items():
            monkeypatch.setenv(k, v)
        yield cloud


@pytest.fixture
def public_key(tmp_path) -> str:
    key = tmp_path / "k"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True, timeout=30)
    return key.with_suffix(".pub").read_text().strip()


@pytest.mark.parametrize("name", ["runpod", "vast", "lambda"])
def test_teardown_keeps_the_billed_amount(mock_env, public_key, tmp_path, name):
    prov = registry.get(name)
    offer = next(o for o in prov.offers(gpus=1) if o.available)
    ref = prov.ensure_ssh_key(public_key, "gpubench")
    with Ledger(tmp_path / "ledger.sqlite") as ledger:
        row = ledger.begin("b", name, "gpubench-b", prov.account, price_per_hour=offer.price_per_hour)
        inst = prov.launch(offer, LaunchSpec(gpus=1, name="b", ssh_key=ref))
        ledger.mark(row.row_id, LedgerStatus.LAUNCHED, "created_at", instance_id=inst.instance_id)
        wait_for(lambda: prov.get(inst.instance_id).ssh_host)
        result = take_down_entry(ledger, ledger.get(row.row_id), prov, 30)
        entry = ledger.get(row.row_id)
    assert result.gone and entry.status is LedgerStatus.TERMINATED and entry.cost() is not None
    if name == "lambda":
        assert result.billed is None and entry.billed_cost is None
    else:
        assert result.billed is not None and entry.billed_cost == result.billed
        assert 0 <= result.billed <= entry.cost() + 0.01


def test_a_failing_billing_call_leaves_the_estimate():
    class Refuses:
        def billed_cost(self, instance_id, since=None):
            raise ProviderError("x", "GET /bill", "down")

    assert fetch_billed(Refuses(), "i", None) is None and fetch_billed(object(), "i", None) is None


def test_old_ledger_gains_the_column(tmp_path):
    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE instances (row_id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL, "
               "provider TEXT NOT NULL, instance_id TEXT, provider_name TEXT NOT NULL, status TEXT NOT NULL)")
    db.execute("INSERT INTO instances (name, provider, provider_name, status) VALUES ('a', 'x', 'gpubench-a', "
               "'terminated')")
    db.commit()
    db.close()
    with Ledger(path) as ledger:
        [entry] = ledger.entries(include_done=True)
        assert entry.billed_cost is None
        assert ledger.update(entry.row_id, billed_cost=1.25).billed_cost == 1.25
