"""Sweeps over SSH against a real sshd: end to end, skip and --force, a failing
run, Ctrl-C, a connection cut mid-sweep, packages installed once."""

import os
from pathlib import Path

import pytest

from gpubench import suite
from gpubench.launch.base import SweepPoint
from gpubench.remote.errors import ConnectionLostError
from gpubench.store.results import ResultsStore
from gpubench.sweep.run import SweepPlan, sweep
from tests.remote.helpers import cli_args, open_session, tiny_script
from tests.helpers import one_node

pytestmark = pytest.mark.slow


def _records(results: Path) -> list[dict]:
    return ResultsStore(results).load().records


def test_mnist_sweep_end_to_end_then_skipped(sshd, tmp_path, cli, remote_python):
    results = tmp_path / "results"
    results.mkdir()
    argv = ["run", "mnist-ddp", "--gpus", "1,2", "--results", str(results),
            *cli_args(sshd, remote_python, tmp_path), "--", "--steps", "2", "--warmup", "1"]
    code, out, err = cli(*argv)
    assert code == 0, err
    assert "[1 gpu] mnist-ddp: world 1 " in out and "[2 gpus] mnist-ddp: world 2 " in out
    records = _records(results)
    assert [(r["gpu_count"], r["status"], r["provider"]) for r in records] == [
        (1, "ok", "ssh"), (2, "ok", "ssh")]
    assert records[0]["instance_type"].startswith("127.0.0.1: ")
    assert records[0]["price_per_hour"] is None  # a machine of the user's own: price unknown
    assert "torch.distributed.run --standalone --nproc_per_node=2" in records[1]["launch_command"]
    assert records[1]["workload_args"] == ["--steps", "2", "--warmup", "1"]
    assert not list((tmp_path / "remote" / "runs").iterdir())  # record files fetched and removed

    # the same sweep again: nothing re-run (test_second_rsync_sends_nothing checks the
    # transfer on a suite that cannot change under it)
    code, out, err = cli(*argv)
    assert code == 0, err
    assert "file(s) sent" in out and "(checked before)" in out
    assert out.count("] already recorded") == 2
    assert len(_records(results)) == 2


def test_failed_run_is_recorded_and_the_sweep_goes_on(sshd, tmp_path, cli, remote_python):
    results = tmp_path / "results"
    results.mkdir()
    script = tiny_script(tmp_path)
    code, out, _ = cli("run", str(script), "--gpus", "1,2", "--results", str(results),
                       *cli_args(sshd, remote_python, tmp_path), "--", "--fail-at", "1")
    assert code == 1
    failed, ok = _records(results)
    assert failed["status"] == "failed" and "CUDA out of memory" in failed["error"]
    assert ok["status"] == "ok" and ok["gpu_count"] == 2
    assert "[1 gpu] failed: RuntimeError: CUDA out of memory" in out


def _plan(script: Path, counts, args=()) -> SweepPlan:
    return SweepPlan(suite.resolve(str(script)), one_node(counts), list(args), "run-test", 120)


def _cut_when(sshd, marker: str, lines: list[str]):
    """An echo that cuts every SSH connection the first time `marker` is printed
    (two ranks may print on one line: any line containing it counts)."""
    def echo(line: str) -> None:
        lines.append(line)
        if marker in line and not any("cut" == x for x in lines):
            lines.append("cut")
            assert sshd.cut_connections() > 0
    return echo


def test_connection_cut_mid_run_reconnects_and_reruns_that_count(sshd, tmp_path,
                                                                 remote_python):
    results = ResultsStore(tmp_path)
    script = tiny_script(tmp_path)
    lines: list[str] = []
    echo = _cut_when(sshd, "rank 0 of 2 started", lines)
    launcher = open_session(sshd, remote_python, tmp_path, reconnects=2, echo=echo)
    with launcher:  # the sweep gets the script there first
        result = sweep(launcher, _plan(script, [2], ["--sleep", "2", "--sleep-at", "2"]),
                       results, echo)
    assert [(r["gpu_count"], r["status"]) for r in result.records] == [(2, "ok")]
    assert any("reconnecting (attempt 1 of 2)" in line for line in lines), "\n".join(lines)
    assert any("running this count again" in line for line in lines)


def test_sweep_resumes_at_first_count_without_a_record(sshd, tmp_path, remote_python):
    results = ResultsStore(tmp_path)
    script = tiny_script(tmp_path, name="tiny_resume.py")
    lines: list[str] = []
    echo = _cut_when(sshd, "rank 0 of 2 started", lines)
    launcher = open_session(sshd, remote_python, tmp_path, reconnects=0, echo=echo)
    plan = _plan(script, [1, 2], ["--sleep", "30", "--sleep-at", "2"])
    with launcher, pytest.raises(ConnectionLostError, match="could not reconnect"):
        sweep(launcher, plan, results, echo)
    assert [r["gpu_count"] for r in _records(tmp_path)] == [1]
    assert _running(script.name)  # orphaned on the machine by the lost connection

    # the same sweep again: count 1 is kept, count 2 runs (and is cut short by its timeout)
    lines.clear()
    launcher = open_session(sshd, remote_python, tmp_path, echo=lines.append)
    plan.timeout = 1
    with launcher:
        result = sweep(launcher, plan, results, lines.append)
    assert any("left over from a lost connection" in line for line in lines)
    assert list(result.skipped) == [SweepPoint(1, 1)]
    assert [(r["gpu_count"], r["error"]) for r in result.records] == [(2, "timed out after 1s")]
    assert _running(script.name) == []


def test_ctrl_c_stops_the_remote_run(sshd, tmp_path, remote_python):
    script = tiny_script(tmp_path, name="tiny_ctrl_c.py")
    launcher = open_session(sshd, remote_python, tmp_path)
    workload = suite.resolve(str(script))
    launcher.prepare(workload)

    def interrupt(line: str) -> None:
        if "started" in line:
            raise KeyboardInterrupt

    with launcher, pytest.raises(KeyboardInterrupt):
        launcher.run(workload, SweepPoint(1, 2), ["--sleep", "60"], interrupt, 120)
    assert _running(script.name) == []
    assert list((tmp_path / "remote" / "runs").iterdir()) == []


def _running(name: str) -> list[str]:
    return [p for p in os.listdir("/proc") if p.isdigit() and _cmdline_has(p, name)]


def _cmdline_has(pid: str, text: str) -> bool:
    try:
        return text in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False


def test_required_package_installed_once_per_machine(sshd, tmp_path, remote_python):
    # typer is installed already, so pip answers without the network
    script = tiny_script(tmp_path, header="# requires: typer\n")
    lines: list[str] = []
    launcher = open_session(sshd, remote_python, tmp_path, echo=lines.append)
    with launcher:
        launcher.prepare(suite.resolve(str(script)))
        launcher.prepare(suite.resolve(str(script)))
    assert sum("installing typer" in line for line in lines) == 1
    assert (tmp_path / "remote" / "state" / "installed" / "typer").exists()


def test_on_a_ledger_instance_by_name(sshd, tmp_path, cli, remote_python):
    from gpubench.store.ledger import Ledger

    with Ledger() as ledger:
        row = ledger.begin("box1", "lambda", "gpubench-box1", instance_type="gpu_2x_a10",
                           gpu_name="A10", gpu_count=2, price_per_hour=1.5, key_path=str(sshd.key_file))
        ledger.mark(row.row_id, "ready", "ssh_ready_at", instance_id="i-1", ssh_host=sshd.host,
                    ssh_port=sshd.port, ssh_user=sshd.user)
    results = tmp_path / "results"
    results.mkdir()
    script = tiny_script(tmp_path)
    argv = ["run", str(script), "--on", "box1", "--gpus", "1,4", "--results", str(results),
            "--remote-python", remote_python, "--remote-dir", str(tmp_path / "remote")]
    code, out, err = cli(*argv)
    assert code == 0, err
    (record,) = _records(results)
    assert (record["provider"], record["instance_type"], record["gpu_name"]) == (
        "lambda", "gpu_2x_a10", "A10")
    assert record["price_per_hour"] == 0.75 and record["instance_price_per_hour"] == 1.5
    assert "skipping 4 GPUs: gpu_2x_a10 has 2" in out
    # recorded already: skipped; with --force: run again
    code, out, _ = cli(*argv)
    assert code == 0 and len(_records(results)) == 1
    assert "[1 gpu] already recorded" in out
    assert cli(*argv, "--force").code == 0 and len(_records(results)) == 2
