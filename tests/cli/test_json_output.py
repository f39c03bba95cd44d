"""`--format json` on the commands that print data: stdout is one JSON document that
parses back, and the words said on the way go to stderr. On the mock cloud where a
machine is rented; the runs (torchrun) and boots (sshd) are in the slow lane. The
summary of `bench --format json` is checked on the bench that
tests/remote/test_preflight_mock.py runs anyway (a rented machine, a sweep at two
counts), rather than on a second one here."""

from __future__ import annotations

import getpass
import json

import pytest

from gpubench.store.ledger import Ledger
from gpubench.suite import SUITE
from tests.helpers import mock_cloud
from tests.remote.helpers import tiny_script


@pytest.fixture
def cloud(tmp_path, monkeypatch):
    yield from mock_cloud(tmp_path, monkeypatch, GPUBENCH_LAMBDA_SSH_USER=getpass.getuser())


def test_workloads_as_json_and_csv(cli):
    code, out, err = cli("workloads", "--format", "json")
    assert code == 0, err
    rows = json.loads(out)
    assert [r["name"] for r in rows] == [e.name for e in SUITE]
    assert all(r["summary"] and r["measures"] and r["script"].endswith(".py") for r in rows)
    code, out, _ = cli("workloads", "--format", "csv")
    assert code == 0 and out.splitlines()[0] == "name,summary,measures,defaults,script"


@pytest.mark.parametrize("command", [["provision", "lambda", "--gpus", "1"], ["down", "x"],
                                     ["run", "mnist-ddp"], ["workloads"]])
def test_an_unknown_format_is_one_line(cli, command):
    code, out, err = cli(*command, "--format", "xml")
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "--format: 'xml' is not one of" in err


def test_provision_dry_run_as_json(cloud, cli):
    code, out, err = cli("provision", "vast", "--gpus", "1", "--dry-run", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["dry_run"] is True and doc["offers"]
    prices = [o["price_per_hour"] for o in doc["offers"]]
    assert prices == sorted(prices) and all(o["gpu_count"] == 1 and o["provider"] == "vast"
                                            for o in doc["offers"])
    assert "cheapest match" in err and "dry run: nothing rented" in err


def test_down_with_nothing_to_do_as_json(cloud, cli):
    code, out, err = cli("down", "--all", "--yes", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["instances"] == [] and doc["note"]


@pytest.mark.slow
def test_run_summary_as_json(tmp_path, cli):
    script = tiny_script(tmp_path)
    results = tmp_path / "new" / "results"  # not there yet: created
    code, out, err = cli("run", str(script), "--gpus", "1,2", "--repeat", "1",
                         "--results", str(results), "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert results.is_dir() and doc["results_dir"] == str(results)
    assert [(r["gpu_count"], r["status"]) for r in doc["records"]] == [(1, "ok"), (2, "ok")]
    assert doc["all_ok"] is True and len(doc["run_ids"]) == 1
    (report,) = doc["report"].values()
    assert sorted(r["gpu_count"] for r in report) == [1, 2]
    assert "[1 gpu]" in err  # progress on stderr


@pytest.mark.slow
def test_provision_ls_and_down_as_json_ls_in_one_vocabulary_with_each_providers_word(cloud, cli):
    # the two machines rented serve both: provision and down as JSON, and ls beside them
    code, out, err = cli("provision", "runpod", "--gpus", "1", "--name", "j1", "--yes", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    inst = doc["instance"]
    assert (inst["name"], inst["provider"], inst["status"], inst["ssh_alias"]) == \
        ("j1", "runpod", "ready", "gpubench-j1")
    assert inst["instance_id"] == Ledger().find("j1").instance_id and inst["ssh_port"]
    assert doc["seconds_to_ready"] >= 0 and doc["offer"]["provider"] == "runpod"
    assert "ready in" in err  # the words still said, on stderr
    code, out, err = cli("provision", "lambda", "--gpus", "1", "--name", "v-lambda", "--yes")
    assert code == 0, err
    code, out, err = cli("ls", "--format", "json")
    assert code == 0, err
    rows = {r["name"]: (r["status"], r["provider_status"]) for r in json.loads(out)}
    assert rows == {"v-lambda": ("ready", "active"), "j1": ("ready", "RUNNING")}
    code, out, err = cli("ls")
    assert "provider says" in out and "active" in out and "RUNNING" in out
    code, out, err = cli("down", "j1", "--yes", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["all_gone"] is True
    assert [(i["name"], i["gone"]) for i in doc["instances"]] == [("j1", True)]
    assert doc["total_cost"] >= 0 and "terminated" in err
    code, out, err = cli("down", "--all", "--yes")
    assert code == 0, err
