"""Sweeps over SSH against a real sshd: end to end, skip and --force, a failing
run, Ctrl-C, a connection cut mid-sweep, packages installed once. A session costs
seconds (its environment check starts torch), so where behaviours can share a
session or a sweep, one test shows them all."""

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
    argv = ["run", "mnist-ddp", "--gpus", "1,2", "--results", str(results), "--trace-steps", "1",
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
    for r in records:  # --trace: each rank's trace pulled back (and removed there)
        names = sorted(p.name for p in (results / r["trace_dir"]).iterdir())
        assert len(names) == r["trace_files"] == r["gpu_count"] and names[0].startswith("rank0-")
    assert "traced steps per rank" in out and "ui.perfetto.dev" in out

    # the same sweep again: nothing re-run (test_second_rsync_sends_nothing checks the
    # transfer on a suite that cannot change under it)
    code, out, err = cli(*argv)
    assert code == 0, err
    assert "file(s) sent" in out and "(checked before)" in out
    assert out.count("] already recorded") == 2
    assert len(_records(results)) == 2


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


def test_a_lost_sweep_resumes_a_cut_run_reruns_packages_install_once_ctrl_c_stops_a_run(
        sshd, tmp_path, remote_python):
    """One sshd, two sessions: a sweep that cannot reconnect is resumed by the next one
    (count 1 kept, the orphaned run stopped); on that next sweep's session, a connection
    cut mid-run reconnects and runs that count again; a script's package is installed
    by its first prepare only; Ctrl-C during a run stops it on the machine."""
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
    session_echo = [lines.append]   # where the session's lines go: swapped for the cut below
    launcher = open_session(sshd, remote_python, tmp_path, reconnects=2,
                            echo=lambda line: session_echo[0](line))
    plan.timeout = 1
    with launcher:
        result = sweep(launcher, plan, results, lines.append)
        assert any("left over from a lost connection" in line for line in lines)
        assert list(result.skipped) == [SweepPoint(1, 1)]
        assert [(r["gpu_count"], r["error"]) for r in result.records] == [(2, "timed out after 1s")]
        assert _running(script.name) == []

        # a connection cut mid-run: reconnected, that count is run again from the start
        cut_lines: list[str] = []
        session_echo[0] = _cut_when(sshd, "rank 0 of 2 started", cut_lines)
        (tmp_path / "cut").mkdir()
        cut = sweep(launcher, _plan(tiny_script(tmp_path), [2], ["--sleep", "2", "--sleep-at", "2"]),
                    ResultsStore(tmp_path / "cut"), session_echo[0])
        assert [(r["gpu_count"], r["status"]) for r in cut.records] == [(2, "ok")]
        assert any("reconnecting (attempt 1 of 2)" in line for line in cut_lines), "\n".join(cut_lines)
        assert any("running this count again" in line for line in cut_lines)

        # a required package, prepared twice: installed once (typer is installed already,
        # so pip answers without the network)
        installs: list[str] = []
        session_echo[0] = installs.append
        packaged = tiny_script(tmp_path, name="tiny_ctrl_c.py", header="# requires: typer\n")
        workload = suite.resolve(str(packaged))
        launcher.prepare(workload)
        launcher.prepare(suite.resolve(str(packaged)))
        assert sum("installing 1 requirement of the '# requires:' lines of tiny_ctrl_c.py" in line
                   for line in installs) == 1, installs
        assert len(list((tmp_path / "remote" / "state" / "deps").glob("*.done"))) == 1

        # Ctrl-C while that script runs
        def interrupt(line: str) -> None:
            if "started" in line:
                raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            launcher.run(workload, SweepPoint(1, 2), ["--sleep", "60"], interrupt, 120)
    assert _running(packaged.name) == []
    assert list((tmp_path / "remote" / "runs").iterdir()) == []


def _running(name: str) -> list[str]:
    return [p for p in os.listdir("/proc") if p.isdigit() and _cmdline_has(p, name)]


def _cmdline_has(pid: str, text: str) -> bool:
    try:
        return text in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False


def test_on_a_ledger_instance_a_failed_count_is_recorded_and_the_sweep_goes_on(
        sshd, tmp_path, cli, remote_python):
    """One sweep serves both: a machine of the ledger's, named by --on, lends its records
    the ledger's type, GPU and price; a count that fails (an OOM) gets a failed record
    and the next count still runs; a recorded count is skipped, and run again with --force."""
    from gpubench.store.ledger import Ledger

    with Ledger() as ledger:
        row = ledger.begin("box1", "lambda", "gpubench-box1", instance_type="gpu_2x_a10",
                           gpu_name="A10", gpu_count=2, price_per_hour=1.5, key_path=str(sshd.key_file))
        ledger.mark(row.row_id, "ready", "ssh_ready_at", instance_id="i-1", ssh_host=sshd.host,
                    ssh_port=sshd.port, ssh_user=sshd.user)
    results = tmp_path / "results"
    results.mkdir()
    script = tiny_script(tmp_path)
    on_box1 = ["--on", "box1", "--results", str(results), "--remote-python", remote_python,
               "--remote-dir", str(tmp_path / "remote")]
    code, out, err = cli("run", str(script), "--gpus", "1,2,4", *on_box1, "--", "--fail-at", "1")
    assert code == 1, err
    failed, ok = _records(results)
    assert failed["status"] == "failed" and "CUDA out of memory" in failed["error"]
    assert ok["status"] == "ok" and ok["gpu_count"] == 2
    assert "[1 gpu] failed: RuntimeError: CUDA out of memory" in out
    for record in (failed, ok):
        assert (record["provider"], record["instance_type"], record["gpu_name"]) == (
            "lambda", "gpu_2x_a10", "A10")
        assert record["instance_price_per_hour"] == 1.5
    assert failed["price_per_hour"] == 0.75 and ok["price_per_hour"] == 1.5  # a share of the machine
    assert "skipping 4 GPUs: gpu_2x_a10 has 2" in out
    # recorded already: skipped; with --force: run again
    argv = ["run", str(script), "--gpus", "2", *on_box1]
    code, out, _ = cli(*argv, "--", "--fail-at", "1")
    assert code == 0 and len(_records(results)) == 2
    assert "[2 gpus] already recorded" in out
    assert cli(*argv, "--force", "--", "--fail-at", "1").code == 0 and len(_records(results)) == 3
