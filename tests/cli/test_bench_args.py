"""`bench --args NAME="ARGS"`: arguments for one workload of a bench, checked before
anything is rented, reaching that workload only; those after -- reach every one."""

from __future__ import annotations

import getpass
import json

import pytest

from gpubench import suite
from gpubench.errors import UsageError
from tests.helpers import mock_cloud
from tests.remote.helpers import tiny_script


def test_parse_per_workload_args_and_what_each_workload_gets(tmp_path):
    script = tiny_script(tmp_path)
    refs = suite.resolve_list(f"mnist-ddp,gpt-ddp,{script}")
    chosen = suite.parse_per_workload_args(
        ['gpt-ddp=--n-layer 2 --n-head "2"', "gpt-ddp=--n-embd 64", f"{script}=--sleep 0.1"], refs)
    assert chosen == {"gpt-ddp": ["--n-layer", "2", "--n-head", "2", "--n-embd", "64"],
                      suite.script_name(script): ["--sleep", "0.1"]}
    mnist, gpt, own = refs
    assert suite.args_for(mnist, ["--seed", "1"], chosen) == ["--seed", "1"]
    assert suite.args_for(gpt, ["--seed", "1"], chosen) == ["--seed", "1", "--n-layer", "2", "--n-head", "2",
                                                           "--n-embd", "64"]
    assert suite.args_for(own, [], chosen) == ["--sleep", "0.1"]


@pytest.mark.parametrize("spec, fragment", [
    ("resnet-ddp=--depth 18", "'resnet-ddp' is not a workload of this run (--workload names mnist-ddp, gpt-ddp)"),
    ("--n-layer 2", "is not NAME=ARGS"),
    ("=--n-layer 2", "is not NAME=ARGS"),
    ('gpt-ddp=--n-layer "2', "cannot split"),
])
def test_bad_args_are_one_line_and_exit_2(cli, spec, fragment):
    code, out, err = cli("bench", "lambda", "--gpus", "1", "--workload", "mnist-ddp,gpt-ddp", "--yes",
                         "--args", spec)
    assert code == 2 and fragment in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_a_flag_for_one_workload_no_longer_breaks_another(cli):
    code, _, err = cli("bench", "lambda", "--gpus", "1", "--workload", "mnist-ddp,gpt-ddp", "--yes",
                       "--", "--n-layer", "2")
    assert code == 2 and "mnist-ddp:" in err  # after --: every workload, and mnist has no --n-layer
    code, _, err = cli("bench", "lambda", "--gpus", "1", "--workload", "mnist-ddp,gpt-ddp", "--yes",
                       "--args", "gpt-ddp=--n-layer 2")
    assert "--n-layer" not in err and "lambda" in err  # checked and accepted: on to renting (no key here)
    code, _, err = cli("bench", "lambda", "--gpus", "1", "--workload", "mnist-ddp,gpt-ddp", "--yes",
                       "--args", "gpt-ddp=--n-layr 2")
    assert code == 2 and "gpt-ddp:" in err and "--n-layr" in err


@pytest.fixture
def cloud(tmp_path, monkeypatch):
    yield from mock_cloud(tmp_path, monkeypatch, GPUBENCH_LAMBDA_SSH_USER=getpass.getuser())


@pytest.mark.slow
def test_per_workload_args_reach_only_their_workload(cloud, cli, tmp_path):
    first, second = tiny_script(tmp_path, "first.py"), tiny_script(tmp_path, "second.py")
    code, out, err = cli("bench", "lambda", "--yes", "--gpus", "1", "--workload", f"{first},{second}",
                         "--counts", "1", "--name", "ba", "--no-preflight", "--results", str(tmp_path / "r"),
                         "--args", f"{second}=--sleep 0.01", "--format", "json", "--", "--sleep-at", "1")
    assert code == 0, err
    commands = {r["workload"].rsplit("/", 1)[1]: r["launch_command"] for r in json.loads(out)["records"]}
    assert "--sleep-at 1" in commands["first.py"] and "--sleep 0.01" not in commands["first.py"]
    assert "--sleep-at 1 --sleep 0.01" in commands["second.py"]
