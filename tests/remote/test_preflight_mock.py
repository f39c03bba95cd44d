"""The preflight gate against the mock cloud: its machines' stand-in nvidia-smi, the
bad-host fault failing one check each, bench replacing a bad host and completing on
the next, and run --on --preflight asking before it uses a machine that fails.

Each bad host costs a provision (a few seconds of sshd and torch), so each fault is
shown once: throttle by the bench that replaces its host, small-shm by the machine
that run --preflight warns about, every other one by provision --preflight; the
bench's replacement host is the good one that passes (and its summary, printed as
JSON, is the one tests/cli/test_json_output.py counts on), and the run's machine
answers `gpubench ssh`."""

from __future__ import annotations

import getpass
import json

import pytest

import gpubench.mock as mock
from gpubench.store.ledger import Ledger
from gpubench.mock.faults import BAD_HOST_CHECKS, FaultSpecError, parse
from gpubench.store.results import ResultsStore
from tests.helpers import mock_cloud, run_gpubench
from tests.remote.helpers import tiny_script

# bad-host=CHECK -> the preflight check it fails
FAILS = {"throttle": "throttle", "pcie-x4": "pcie", "ecc": "ecc", "small-shm": "shm",
         "old-driver": "driver", "slow-matmul": "matmul"}
# the faults whose failed check a test below shows on a bench or a run instead
SHOWN_BY_BENCH, SHOWN_BY_RUN = "throttle", "small-shm"


def test_bad_host_names_a_check_and_holds_for_one_instance_unless_counted():
    assert set(FAILS) == set(BAD_HOST_CHECKS)
    [fault] = parse("lambda:bad-host=pcie-x4")
    assert (fault.provider, fault.name, fault.value, fault.remaining) == ("lambda", "bad-host", "pcie-x4", 1)
    assert parse("vast:bad-host=ecc@3")[0].remaining == 3
    board = mock.faults.FaultBoard("runpod:bad-host=throttle")
    assert board.take_instance_fault("runpod", "bad-host").value == "throttle"
    assert board.take_instance_fault("runpod", "bad-host") is None
    with pytest.raises(FaultSpecError, match="bad-host takes one of throttle, pcie-x4"):
        parse("bad-host=melted")
    with pytest.raises(FaultSpecError, match="bad-host takes one of"):
        parse("bad-host")


@pytest.fixture
def cloud(tmp_path, monkeypatch):
    yield from mock_cloud(tmp_path, monkeypatch,
                          GPUBENCH_LAMBDA_SSH_USER=getpass.getuser())  # sshd logs in real users only


def _one_check_failed(said: str, check: str) -> None:
    """`said` is a preflight failure naming `check` and its floor, and no other check."""
    assert said.startswith(f"{check}: ") and " (floor: " in said, (check, said)
    assert ": " not in said.split("; ")[-1].split(" ", 1)[0]   # one check failed, no other


@pytest.mark.slow
def test_each_bad_host_fails_its_own_check(cloud, cli):
    provisioned = {f: c for f, c in FAILS.items() if f not in (SHOWN_BY_BENCH, SHOWN_BY_RUN)}
    assert set(provisioned) | {SHOWN_BY_BENCH, SHOWN_BY_RUN} == set(BAD_HOST_CHECKS)
    for fault, check in provisioned.items():
        cloud.set_faults(f"lambda:bad-host={fault}")
        name = f"pf-{fault}"
        code, out, err = cli("provision", "lambda", "--gpus", "2", "--yes", "--preflight",
                                    "--attempts", "1", "--name", name)
        assert code == 1, (fault, out, err)
        failed_line = next(ln for ln in err.splitlines() if ln.startswith("error:"))
        _one_check_failed(failed_line.split("preflight failed: ", 1)[1], check)
        [row] = [r for r in Ledger().entries(include_done=True) if r.name == name]
        assert row.status == "terminated" and row.note.startswith(f"preflight failed: {check}:")


@pytest.mark.slow
def test_bench_replaces_a_throttling_host_a_good_one_passes_and_its_summary_is_json(
        cloud, tmp_path, cli):
    # the one bench here also serves tests/cli/test_json_output.py: `--format json` puts
    # one JSON document on stdout and the words said on the way on stderr
    cloud.set_faults(f"lambda:bad-host={SHOWN_BY_BENCH}")
    results = tmp_path / "results"
    results.mkdir()
    script = tiny_script(tmp_path)
    code, out, err = cli("bench", "lambda", "--yes", "--gpus", "2", "--workload", str(script),
                         "--counts", "1,2", "--name", "pb", "--results", str(results),
                         "--format", "json")
    assert code == 0, (out, err)
    doc = json.loads(out)
    assert (doc["instance"], doc["terminated"], doc["all_ok"]) == ("pb", True, True)
    assert [r["gpu_count"] for r in doc["records"]] == [1, 2] and doc["cost"] >= 0
    assert "replace: preflight failed: throttle: GPU 0 under load: HW thermal slowdown (0x40)" in err
    _one_check_failed(err.split("replace: preflight failed: ", 1)[1].splitlines()[0], "throttle")
    assert "preflight passed 8 checks in" in err and "(a CPU stands in for the GPUs)" in err
    rows = [r for r in Ledger().entries(include_done=True) if r.name == "pb"]
    assert [r.status for r in rows] == ["terminated", "terminated"]
    bad, good = sorted(rows, key=lambda r: r.row_id)
    assert bad.note.startswith("preflight failed: throttle") and bad.terminated_confirmed_at
    # the gate's findings in their own ledger column, for the provider statistics
    bad_gate, good_gate = json.loads(bad.gate), json.loads(good.gate)
    assert bad_gate["passed"] is False and [f["check"] for f in bad_gate["failed"]] == ["throttle"]
    assert "0x40" in bad_gate["failed"][0]["measured"] and bad_gate["failed"][0]["floor"]
    assert good_gate["passed"] is True and good_gate["instance_id"] == good.instance_id
    assert good_gate["seconds"] > 0
    assert "pb terminated; the whole bench cost $" in err   # the thrown-away host included
    records = ResultsStore(results).load().records
    assert [r["gpu_count"] for r in records] == [1, 2]
    for record in records:
        assert record["status"] == "ok" and record["instance_id"] == good.instance_id
        assert record["preflight"].startswith("preflight passed")
        assert record["preflight_checks"]["throttle"] == "ok: no slowdown"
        uuids = record["gpu_uuids"]   # the machine's, whatever the count
        assert len(uuids) == 2 and all(u.startswith("GPU-") for u in uuids)
        assert record["driver_cuda_version"] == "12.4" and record["torch_version"]
        assert "GPU0" in record["gpu_topology"]


@pytest.mark.slow
def test_run_on_a_machine_with_small_shm_warns_and_asks(cloud, tmp_path, cli):
    cloud.set_faults(f"lambda:bad-host={SHOWN_BY_RUN}")
    code, out, err = cli("provision", "lambda", "--gpus", "2", "--yes", "--name", "ro")
    assert code in (0, None), err
    # `gpubench ssh` hands the terminal to the ssh program: a real process shows its output
    done = run_gpubench("ssh", "ro", "--", "nvidia-smi", "--query-gpu=index,name,uuid",
                        "--format=csv,noheader")
    lines = done.stdout.splitlines()
    assert done.returncode == 0 and len(lines) == 2 and lines[1].startswith("1, NVIDIA "), done.stderr
    script = tiny_script(tmp_path)
    (tmp_path / "r").mkdir()
    argv = ["run", str(script), "--on", "ro", "--gpus", "1", "--preflight",
            "--results", str(tmp_path / "r")]
    code, out, err = cli(*argv)      # no terminal to ask on: not run
    assert code == 2 and "warning: ro: preflight failed: shm: /dev/shm 64 MB" in err
    warning = next(ln for ln in err.splitlines() if ln.startswith("warning: ro: preflight failed: "))
    _one_check_failed(warning.split("preflight failed: ", 1)[1], FAILS[SHOWN_BY_RUN])
    assert "not run: ro failed the preflight check (pass --yes to run on it anyway)" in err
    assert [f["check"] for f in json.loads(Ledger().find("ro").gate)["failed"]] == ["shm"]
    code, out, err = cli(*argv, "--yes")
    assert code in (0, None), err
    records = ResultsStore(tmp_path / "r").load().records
    assert [r["status"] for r in records] == ["ok"]
    code, out, err = cli("run", str(script), "--preflight", "--gpus", "1")
    assert code == 2 and "--preflight checks a machine gpubench rented" in err
    code, _, _ = cli("down", "ro", "--yes")
    assert code in (0, None)
