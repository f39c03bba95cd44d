"""A local run past its time is stopped whole: torchrun and the workers it put in
sessions of their own."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from gpubench.onhost.stop_tagged import TAG_VAR
from tests.helpers import run_gpubench, start_gpubench

pytestmark = pytest.mark.slow

SLEEPER = """\
import os, sys, time
print("rank", os.environ.get("RANK"), "pid", os.getpid(), flush=True)
time.sleep(120)
"""


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return False


def bystander(**env: str) -> subprocess.Popen:
    """A process the run has nothing to do with, started beside it by this test."""
    return subprocess.Popen(["sleep", "120"], env={**os.environ, **env})


def test_timeout_stops_torchrun_and_its_workers(tmp_path):
    script = tmp_path / "sleeper.py"
    script.write_text(SLEEPER)
    results = tmp_path / "results"
    results.mkdir()
    # in this test's own process group, and one tagged as another run's
    others = [bystander(), bystander(**{TAG_VAR: "another-run"})]
    signalled: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: signalled.append(signum))
    try:
        start = time.monotonic()
        # long enough for torchrun and both workers to start (each imports torch, under
        # gpubench's probe) and say their pids on a busy machine
        proc = run_gpubench("run", str(script), "--gpus", "2", "--results", str(results),
                            "--timeout", "20", timeout=90)
        elapsed = time.monotonic() - start
        time.sleep(0.5)
        assert [p.poll() for p in others] == [None, None], "a process outside the run was stopped"
        assert signalled == [], "the test process itself was signalled"
    finally:
        signal.signal(signal.SIGTERM, previous)
        for p in others:
            p.kill()
            p.wait(10)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert elapsed < 45, f"the run took {elapsed:.0f}s to stop"
    record = json.loads(next(results.glob("*.jsonl")).read_text())
    assert record["status"] == "failed" and record["error"] == "timed out after 20s"
    pids = [int(line.split()[-1]) for line in proc.stdout.splitlines() if " pid " in line]
    assert len(pids) == 2
    assert not [p for p in pids if alive(p)], "a worker outlived its run"


def test_ctrl_c_stops_the_run_and_its_workers(tmp_path):
    script = tmp_path / "sleeper.py"
    script.write_text(SLEEPER)
    results = tmp_path / "results"
    results.mkdir()
    proc = start_gpubench("run", str(script), "--gpus", "2", "--results", str(results))
    pids: list[int] = []
    deadline = time.monotonic() + 60
    assert proc.stdout is not None
    while len(pids) < 2 and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if " pid " in line:
            pids.append(int(line.split()[-1]))
    assert len(pids) == 2
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert err.strip().splitlines()[-1] == "interrupted" and "Traceback" not in err
    time.sleep(0.5)
    assert not [p for p in pids if alive(p)], "a worker outlived Ctrl-C"
