"""Two sweeps on one machine and one remote directory leave each other's runs
alone; a run whose sweep is gone (connection lost, gpubench killed) is stopped
by the next sweep that comes. The lease module is checked here directly, and
through a real sshd (one test: the sweep that stops a killed gpubench's run is the
one a second sweep then leaves alone)."""

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from gpubench import suite
from gpubench.launch.base import SweepPoint
from gpubench.onhost import leases
from tests.helpers import start_gpubench
from tests.remote.helpers import open_session, tiny_script

LEASES_SOURCE = Path(leases.__file__).read_text()


def hold_in_background(leases_dir: Path, lease: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", LEASES_SOURCE, "hold", str(leases_dir), lease,
                             str(leases_dir.parent / "runs")],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == leases.ORPHANS  # none yet
    assert proc.stdout.readline().strip() == leases.HELD
    return proc


def marker(runs: Path, run: str, lease: str) -> None:
    runs.mkdir(exist_ok=True)
    (runs / f"{run}.running").write_text(lease)


def test_a_run_is_orphaned_once_its_lease_is_let_go(tmp_path):
    runs, lease_dir = tmp_path / "runs", tmp_path / "leases"
    holder = hold_in_background(lease_dir, "aaa.1")
    marker(runs, "run1", "aaa.1")
    try:
        assert leases.is_held(leases.lock_path(str(lease_dir), "aaa.1"))
        assert leases.orphans(str(runs), str(lease_dir), "bbb") == []
        # the asking sweep's own earlier connection: its run is a leftover even while held
        assert leases.orphans(str(runs), str(lease_dir), "aaa") == ["run1"]
    finally:
        holder.stdin.close()  # what sshd does when the connection ends
        holder.wait(timeout=10)
    assert leases.orphans(str(runs), str(lease_dir), "bbb") == ["run1"]


def test_markers_without_a_lease_or_with_a_lost_one_are_orphans(tmp_path):
    runs, lease_dir = tmp_path / "runs", tmp_path / "leases"
    marker(runs, "old", "")            # written before leases existed
    marker(runs, "gone", "ccc.2")      # its lock file was never made or was tidied
    assert leases.orphans(str(runs), str(lease_dir), "bbb") == ["gone", "old"]
    assert leases.orphans(str(tmp_path / "none"), str(lease_dir), "bbb") == []


def test_stale_unheld_lock_files_are_tidied(tmp_path):
    runs, lease_dir = tmp_path / "runs", tmp_path / "leases"
    lease_dir.mkdir()
    stale, fresh, used = (lease_dir / f"{n}.lock" for n in ("stale.1", "fresh.1", "used.1"))
    for path in (stale, fresh, used):
        path.touch()
    old = time.time() - 2 * leases.STALE_S
    os.utime(stale, (old, old))
    os.utime(used, (old, old))
    marker(runs, "r", "used.1")
    leases.orphans(str(runs), str(lease_dir), "bbb")
    assert sorted(p.name for p in lease_dir.iterdir()) == ["fresh.1.lock", "used.1.lock"]


def test_usage(capsys):
    assert leases.main(["hold"]) == 2
    assert "usage:" in capsys.readouterr().err


def _running(name: str) -> list[str]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if name in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"):
                found.append(pid)
        except OSError:
            pass
    return found


@pytest.mark.slow
def test_the_next_sweep_stops_a_killed_gpubenchs_run_and_a_second_leaves_a_running_one_alone(
        sshd, tmp_path, remote_python):
    """One sshd, three sweeps: the run of a SIGKILLed gpubench is stopped by the next
    sweep that comes; that sweep's own run is then left alone by a second sweep beside it."""
    from tests.remote.helpers import cli_args

    killed = tiny_script(tmp_path, name="tiny_killed.py")
    (tmp_path / "results").mkdir()
    seen: list[str] = []
    controller = start_gpubench(
        "run", str(killed), "--gpus", "1", "--results", str(tmp_path / "results"),
        *cli_args(sshd, remote_python, tmp_path), "--", "--sleep", "120", stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = controller.stdout.readline()
            seen.append(line)
            if "started" in line or not line:
                break
        assert "started" in line, "".join(seen)
    finally:
        controller.kill()  # no chance to stop anything: SIGKILL
        controller.wait(10)
    assert _running(killed.name)  # the run goes on without its controller

    # the next sweep: its session stops the killed one's run
    echoed: list[str] = []
    deadline = time.monotonic() + 20  # sshd notices the closed socket at once; allow slack
    stopped = 0
    while True:
        first = open_session(sshd, remote_python, tmp_path, echo=echoed.append)
        stopped = sum("left over" in line for line in echoed)
        if stopped or time.monotonic() >= deadline:
            break
        first.close()
        time.sleep(0.5)
    try:
        assert stopped == 1, echoed
        assert _running(killed.name) == []
    except BaseException:
        first.close()
        raise

    # that sweep runs; a second sweep beside it leaves its run alone
    script = tiny_script(tmp_path, name="tiny_shared.py")
    workload = suite.resolve(str(script))
    first.prepare(workload)
    lines: list[str] = []
    started = threading.Event()
    outcome = {}

    def on_line(line: str) -> None:
        lines.append(line)
        if "started" in line:
            started.set()

    def run_first() -> None:
        outcome["first"] = first.run(workload, SweepPoint(1, 1), ["--sleep", "6"], on_line, 60)

    with first:
        thread = threading.Thread(target=run_first)
        thread.start()
        assert started.wait(30), "\n".join(lines)
        echoed = []
        second = open_session(sshd, remote_python, tmp_path, echo=echoed.append)
        with second:
            second.prepare(workload)
            result = second.run(workload, SweepPoint(1, 1), [], echoed.append, 60)
        thread.join(60)
    assert result.returncode == 0 and result.record is not None
    assert not any("left over" in line for line in echoed), echoed
    assert outcome["first"].returncode == 0 and outcome["first"].record is not None, lines
    assert list((tmp_path / "remote" / "runs").iterdir()) == []
