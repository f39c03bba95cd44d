"""A remote run whose every process was killed, its shell included (what two mock
clouds side by side once did to each other's instances: the same process tag,
so taking down one mock's instance killed the other's runs), sent no exit status
and printed nothing: the record says what gpubench knows instead of `exit code -1`.
A run that ends normally keeps its load figures and exit status from the machine,
and the checkpoint it left is moved aside before the next run."""

from __future__ import annotations

import pytest

from gpubench import suite
from gpubench.launch.base import SweepPoint
from tests.remote.helpers import open_session

pytestmark = pytest.mark.slow

# Rank 0 kills the shell that started the run, then torchrun, then itself: nothing
# of the run is left to report, as when every process of an instance is stopped.
KILL_EVERYTHING = """\
import os, signal

def ancestors():
    pid = os.getppid()
    while pid > 1:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            yield pid, f.read().replace(b"\\0", b" ")
        with open(f"/proc/{pid}/stat") as f:
            pid = int(f.read().rsplit(")", 1)[1].split()[1])

chain = list(ancestors())
for pid, cmd in chain:
    if b"setsid -w" in cmd:  # the run's remote shell
        os.kill(pid, signal.SIGKILL)
for pid, cmd in chain:
    if b"torch.distributed.run" in cmd:
        os.kill(pid, signal.SIGKILL)
os.kill(os.getpid(), signal.SIGKILL)
"""

RESUMING = """\
import json, os
resumed = os.path.exists("snapshot.pt")
if os.environ["RANK"] == "0":
    open("snapshot.pt", "w").write("1")
    with open(os.environ["GPUBENCH_RECORD_FILE"], "w") as f:
        json.dump({"throughput": 99.0 if resumed else 10.0, "throughput_unit": "samples/s"}, f)
"""


def test_a_run_killed_with_its_shell_says_no_exit_status_came_back(sshd, tmp_path, remote_python):
    script = tmp_path / "killed_all.py"
    script.write_text(KILL_EVERYTHING)
    workload = suite.resolve(str(script))
    with open_session(sshd, remote_python, tmp_path) as launcher:
        launcher.prepare(workload)
        outcome = launcher.run(workload, SweepPoint(1, 1), [], lambda _: None, 120)
        assert outcome.returncode == -1 and outcome.failure.kind == "no exit status"
        assert outcome.error.startswith("no exit status came back from the machine over a live SSH "
                                        "link: the run's remote shell was killed along with the run")
        # the same connection still works: it was the run that died, not the link
        ok = suite.resolve(str(_write(tmp_path, "resuming.py", RESUMING)))
        launcher.prepare(ok)
        runs = [launcher.run(ok, SweepPoint(1, 1), [], lambda _: None, 120) for _ in range(2)]
    for fine in runs:  # the second run, as the first: never resumed
        assert fine.returncode == 0 and fine.record["throughput"] == 10.0
        assert fine.files.watched and fine.files.left_behind == ["snapshot.pt"]
        assert fine.files.kept_in.startswith(str(tmp_path / "remote" / ".gpubench-left-behind"))
    fine = runs[0]
    assert fine.measured["cpu_cores"] >= 1 and fine.measured["device"] == "cpu"
    assert fine.measured["run_cpu_seconds"] > 0 and 0 <= fine.measured["other_cpu_share"] <= 1
    assert fine.measured["mock_instance"] is False and fine.measured["peak_rss_bytes"] > 0
    assert list((tmp_path / "remote" / "runs").iterdir()) == []  # every file of the runs removed


def _write(directory, name: str, source: str):
    path = directory / name
    path.write_text(source)
    return path
