import sqlite3
import time

import pytest

from gpubench.store.ledger import Ledger, LedgerError, UnknownInstanceError


def test_row_before_launch_then_completed(tmp_path):
    with Ledger(tmp_path / "l.sqlite") as led:
        e = led.begin("demo", "vast", "gpubench-demo", price_per_hour=2.0, gpu_count=1)
        assert (e.status, e.instance_id, e.requested_at is not None) == ("requested", None, True)
        # a second process sees the row at once (nothing is buffered)
        other = sqlite3.connect(tmp_path / "l.sqlite").execute("SELECT status FROM instances").fetchall()
        assert other == [("requested",)]
        e = led.mark(e.row_id, "launched", "created_at", instance_id="42")
        e = led.mark(e.row_id, "running", "running_at", ssh_host="127.0.0.1", ssh_port=2222, ssh_user="root")
        e = led.mark(e.row_id, "ready", "ssh_ready_at")
        found = led.find("demo")
        assert found == e and led.find("gpubench-demo") == e
        assert (found.provider, found.instance_id, found.ssh_port, found.price_per_hour) == ("vast", "42", 2222, 2.0)


def test_names_unique_while_live_and_cost(tmp_path):
    with Ledger(tmp_path / "l.sqlite") as led:
        e = led.begin("a", "lambda", "gpubench-a", price_per_hour=3.6)
        with pytest.raises(LedgerError, match="already"):
            led.begin("a", "lambda", "gpubench-a")
        e = led.update(e.row_id, instance_id="x", created_at=time.time() - 3600)
        assert e.cost() == pytest.approx(3.6, rel=0.01)
        led.mark(e.row_id, "terminated", "terminated_confirmed_at")
        assert led.entries() == [] and len(led.entries(include_done=True)) == 1
        led.begin("a", "lambda", "gpubench-a")      # the name is free again
        with pytest.raises(UnknownInstanceError, match="no instance named 'b'"):
            led.find("b")


def test_discard_only_rows_without_instance(tmp_path):
    with Ledger(tmp_path / "l.sqlite") as led:
        a = led.begin("a", "vast", "gpubench-a")
        led.discard(a.row_id)
        b = led.begin("b", "vast", "gpubench-b")
        led.update(b.row_id, instance_id="9")
        led.discard(b.row_id)                       # has an instance: kept
        assert [e.name for e in led.entries()] == ["b"]


def test_default_path_is_the_state_dir(isolated):
    with Ledger() as led:
        assert led.path == isolated.state / "ledger.sqlite"
