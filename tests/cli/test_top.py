"""`gpubench top NAME`: a machine's GPUs and what holds them, ghosts marked, `--kill`
asking before it ends one.

The on-host script (gpubench/onhost/gpu_top.py) is read on recorded nvidia-smi
answers and a /proc built in tmp_path (a container's: a host pid it cannot see); the
command runs in-process against this machine through a stand-in connection, with the
mock's nvidia-smi and real `sleep` processes as ghosts; and (slow) end to end on a
mock cloud machine over SSH."""

from __future__ import annotations

import fcntl
import getpass
import io
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpubench.cli import top_cmd
from gpubench.mock import sshhost
from gpubench.onhost import gpu_top, stop_tagged
from gpubench.launch.base import RECORD_ENV
from tests.helpers import mock_cloud, run_gpubench

# What a machine with two H100s answered (nvidia-smi 550), one of its GPUs busy.
GPUS_CSV = """\
0, GPU-5a0b7c1e-2f4d-4e3a-9b8c-1d2e3f4a5b6c, NVIDIA H100 80GB HBM3, 97, 61234, 81559, 612.45
1, GPU-8c9d0e1f-3a4b-4c5d-8e6f-7a8b9c0d1e2f, NVIDIA H100 80GB HBM3, 0, 18432, 81559, [N/A]
"""
APPS_CSV = """\
GPU-5a0b7c1e-2f4d-4e3a-9b8c-1d2e3f4a5b6c, 4242, 60210
GPU-8c9d0e1f-3a4b-4c5d-8e6f-7a8b9c0d1e2f, 4343, 17408
GPU-8c9d0e1f-3a4b-4c5d-8e6f-7a8b9c0d1e2f, 987654, 512
"""


def _fake_process(proc: Path, pid: int, argv: list[str], env: dict, device: str | None) -> None:
    d = proc / str(pid)
    (d / "fd").mkdir(parents=True)
    (d / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
    (d / "environ").write_bytes(b"".join(f"{k}={v}".encode() + b"\0" for k, v in env.items()))
    (d / "stat").write_text(f"{pid} ({Path(argv[0]).name}) S 1 {pid} {pid} 0 -1 4194560 "
                            + " ".join(["0"] * 14) + " 123456 0 0\n")
    if device:
        (d / "fd" / "3").symlink_to(device)


@pytest.fixture
def container_proc(tmp_path):
    """A /proc as a container sees it: a live gpubench run (its marker and its lease held),
    a ghost, and no entry for pid 987654 (the host's)."""
    base = tmp_path / "gpubench"
    (base / "runs").mkdir(parents=True)
    (base / "leases").mkdir()
    (base / "runs" / "r-live.running").write_text("ctl.1")
    proc = tmp_path / "proc"
    _fake_process(proc, 4242, ["python3", "-m", "torch.distributed.run", "train.py"],
                  {stop_tagged.TAG_VAR: "r-live", RECORD_ENV: str(base / "runs" / "r-live.json")},
                  "/dev/nvidia0")
    _fake_process(proc, 4343, ["python", "old_experiment.py", "--epochs", "90"], {"HOME": "/root"},
                  "/dev/nvidia1")
    with open(base / "leases" / "ctl.1.lock", "a") as lease:
        fcntl.flock(lease, fcntl.LOCK_EX)      # the run's controller, still connected
        yield proc, base / "runs"


def test_a_sample_read_from_recorded_answers_finds_the_ghost_and_the_hosts_pid(container_proc):
    proc, runs = container_proc
    sample = gpu_top.build_sample(GPUS_CSV, APPS_CSV, str(runs), str(proc), host_ns=False, now=0.0)
    assert [(g["index"], g["util"], g["mem_used"], g["mem_total"], g["power"])
            for g in sample["gpus"]] == [(0, 97.0, 61234.0, 81559.0, 612.45),
                                         (1, 0.0, 18432.0, 81559.0, None)]
    by_pid = {p["pid"]: p for p in sample["procs"]}
    assert {pid: (p["gpu"], p["visible"], p["state"], p["ghost"]) for pid, p in by_pid.items()} == {
        4242: (0, True, "live", False), 4343: (1, True, "untagged", True),
        987654: (1, False, "unknown", None)}     # a run is live here: the host's pid is not judged
    assert by_pid[4242]["run"] == "r-live" and by_pid[4242]["used_mib"] == 60210.0
    assert by_pid[4343]["command"] == "python old_experiment.py --epochs 90"
    assert by_pid[987654]["command"] == \
        "not visible here: holds GPU 1 (NVIDIA H100 80GB HBM3, /dev/nvidia1)"

    history = top_cmd.History()
    history.add(sample)
    lines = top_cmd.plain_lines("h1", sample, history)
    me = getpass.getuser()
    assert lines[1:] == [
        "GPU 0  NVIDIA H100 80GB HBM3  util 97%  memory 59.8/79.6 GiB  power 612 W",
        f"  pid 4242  58.8 GiB  gpubench run r-live  {me}: python3 -m torch.distributed.run train.py",
        "GPU 1  NVIDIA H100 80GB HBM3  util 0%  memory 18.0/79.6 GiB  power n/a",
        f"  pid 4343  17.0 GiB  GHOST (not a gpubench run)  {me}: python old_experiment.py --epochs 90",
        "  host pid 987654  0.5 GiB  ? (a gpubench run is live here)  "
        "not visible here: holds GPU 1 (NVIDIA H100 80GB HBM3, /dev/nvidia1)",
    ]
    assert lines[0].startswith("h1: 2 GPUs, 3 processes, 1 ghost (sampled ")


def test_with_no_live_run_every_process_is_a_ghost_and_a_run_whose_marker_is_gone_too(
        container_proc):
    proc, runs = container_proc
    (runs / "r-live.running").unlink()        # the run is over; its worker still holds GPU 0
    sample = gpu_top.build_sample(GPUS_CSV, APPS_CSV, str(runs), str(proc), host_ns=False)
    assert [(p["pid"], p["state"], p["ghost"]) for p in sample["procs"]] == [
        (4242, "ended", True), (4343, "untagged", True), (987654, "unknown", True)]
    assert top_cmd.run_text(sample["procs"][0]) == "GHOST (gpubench run r-live has ended)"
    assert top_cmd.run_text(sample["procs"][2]) == "GHOST (no gpubench run is live here)"


def test_a_run_whose_controller_let_go_of_its_lease_is_orphaned(tmp_path, container_proc):
    proc, runs = container_proc
    (runs / "r-live.running").write_text("gone.7")     # a lease nobody holds
    [first, *_] = gpu_top.build_sample(GPUS_CSV, APPS_CSV, str(runs), str(proc), False)["procs"]
    assert (first["state"], first["ghost"]) == ("orphaned", True)


def test_in_the_hosts_pid_namespace_a_pid_without_a_device_is_still_the_one(container_proc):
    proc, runs = container_proc
    for fd in (proc / "4343" / "fd").iterdir():
        fd.unlink()
    procs = gpu_top.build_sample(GPUS_CSV, APPS_CSV, str(runs), str(proc), host_ns=True)["procs"]
    assert [p["visible"] for p in procs] == [True, True, False]     # 987654: exited since
    assert procs[2]["command"] == \
        "exited since nvidia-smi listed it on GPU 1 (NVIDIA H100 80GB HBM3, /dev/nvidia1)"
    procs = gpu_top.build_sample(GPUS_CSV, APPS_CSV, str(runs), str(proc), host_ns=False)["procs"]
    assert [p["visible"] for p in procs] == [True, False, False]    # a container's own pid 4343


def test_the_parsers_leave_out_what_is_not_a_row():
    assert gpu_top.parse_apps("No running processes found\n") == []
    assert gpu_top.parse_apps("") == []
    assert gpu_top.number("[Insufficient Permissions]") is None
    assert gpu_top.number(" 71.20 ") == 71.2
    assert gpu_top.TAG_VAR == stop_tagged.TAG_VAR and gpu_top.RECORD_VAR == RECORD_ENV


def test_the_history_is_a_sparkline_and_the_tables_draw_it(container_proc):
    from rich.console import Console

    from gpubench.cli.gpu_history import sparkline

    assert sparkline([0, 50, 100], 100) == "▁▅█"
    assert sparkline([None, 10, 20]) == "·▅█"
    assert sparkline([None]) == "·"
    proc, runs = container_proc
    history = top_cmd.History(length=3)
    for util in (10, 40, 70, 100):
        sample = gpu_top.build_sample(GPUS_CSV.replace(", 97, ", f", {util}, "), APPS_CSV,
                                      str(runs), str(proc), host_ns=False)
        history.add(sample)
    assert history.series(0, "util") == [40.0, 70.0, 100.0]
    console = Console(file=io.StringIO(), width=200, color_system=None)
    console.print(top_cmd.rich_view("h1", sample, history, interval=2))
    drawn = console.file.getvalue()
    assert "▄▆█ 100%" in drawn and "GHOST (not a gpubench run)" in drawn
    assert "host pid 987654" in drawn and "every 2 s; Ctrl-C ends" in drawn
    assert "│ 2 (1 ghost) │" in drawn       # GPU 1: the ghost, and the host pid not judged
    lines = top_cmd.plain_lines("h1", sample, history)
    assert lines[1].startswith("GPU 0  NVIDIA H100 80GB HBM3  util ▄▆█ 100%  "
                               "memory ▆▆▆ 59.8/79.6 GiB")


# -- the command, on this machine through a stand-in connection --------------------------

SEED = "top-test-instance"


class LocalConnection:
    """SshConnection's capture, run here by sh as a mock machine's session would."""

    def __init__(self, env: dict) -> None:
        self.env = env
        self.commands: list[str] = []

    def capture(self, command: str, timeout: float = 60.0):
        self.commands.append(command)
        done = subprocess.run(["sh", "-c", command], env=self.env, cwd=self.env["HOME"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=timeout)
        return done.returncode, done.stdout

    def open(self) -> None:
        pass

    def close(self) -> None:
        pass


@pytest.fixture
def machine(tmp_path, monkeypatch):
    """A stand-in machine here: the mock's nvidia-smi (2 GPUs) first on PATH, this
    process's home; `start(gpu, **env)` starts a sleep that holds that GPU."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    config = tmp_path / "nvidia-smi.json"
    config.write_text(json.dumps({"name": "NVIDIA A100-SXM4-80GB", "count": 2,
                                  "memory_mib": 81559, "seed": SEED, "bad": ""}))
    tool = bin_dir / "nvidia-smi"
    tool.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} "
                    f"{shlex.quote(str(sshhost.NVIDIA_SMI))} {shlex.quote(str(config))} \"$@\"\n")
    tool.chmod(0o755)
    env = {"HOME": os.environ["HOME"], "PATH": f"{bin_dir}:{os.environ['PATH']}",
           "GPUBENCH_MOCK_INSTANCE": SEED}
    conn = LocalConnection(env)
    monkeypatch.setattr(top_cmd.Machine, "connect",
                        classmethod(lambda cls, name: cls(conn, name, sys.executable)))
    started: list[subprocess.Popen] = []

    def start(gpu: int, **more: str) -> int:
        p = subprocess.Popen(["sleep", "120"], env={**env, "GPUBENCH_MOCK_GPU": str(gpu), **more})
        started.append(p)
        return p.pid

    conn.start = start
    yield conn
    for p in started:
        p.kill()
        p.wait()


def test_top_once_marks_the_ghost_and_kill_ends_it_after_asking(machine, cli):
    home = Path(os.environ["HOME"])
    (home / "gpubench" / "runs").mkdir(parents=True)
    (home / "gpubench" / "leases").mkdir()
    (home / "gpubench" / "runs" / "r7.running").write_text("ctl.1")
    ghost = machine.start(0)
    run = machine.start(1, GPUBENCH_RUN="r7")
    with open(home / "gpubench" / "leases" / "ctl.1.lock", "a") as lease:
        fcntl.flock(lease, fcntl.LOCK_EX)
        code, out, err = cli("top", "m1", "--once")
        assert (code, err) == (0, "")
        lines = out.splitlines()
        assert lines[0].startswith("m1: 2 GPUs, 2 processes, 1 ghost (sampled ")
        assert lines[1:] == [
            "GPU 0  NVIDIA A100-SXM4-80GB  util n/a  memory n/a of 79.6 GiB  power n/a",
            f"  pid {ghost}  GHOST (not a gpubench run)  {getpass.getuser()}: sleep 120",
            "GPU 1  NVIDIA A100-SXM4-80GB  util n/a  memory n/a of 79.6 GiB  power n/a",
            f"  pid {run}  gpubench run r7  {getpass.getuser()}: sleep 120"]
        assert "base64" in machine.commands[0]            # the script travels with the call
        code, out, err = cli("top", "m1", "--once", "--format", "json")
        sample = json.loads(out)
        assert code == 0 and sample["name"] == "m1" and len(out.splitlines()) == 1
        assert {p["pid"]: p["ghost"] for p in sample["procs"]} == {ghost: True, run: False}

        code, out, err = cli("top", "m1", "--kill", str(ghost))       # no terminal to ask on
        assert (code, out) == (2, "") and err == \
            f"error: --kill asks before it ends a process: pass --yes to end pid {ghost} on m1\n"
        assert os.path.exists(f"/proc/{ghost}")
        code, out, err = cli("top", "m1", "--kill", str(ghost), "--yes")
        assert (code, err) == (0, "")
        assert out == f"pid {ghost} on m1 ended by SIGTERM; GPU 0 is free of it\n"
        code, out, err = cli("top", "m1", "--once")
        assert "ghost" not in out.splitlines()[0].replace("0 ghosts", "")
        assert f"pid {ghost}" not in out and f"pid {run}" in out


def test_kill_refuses_a_pid_that_holds_no_gpu(machine, cli):
    code, out, err = cli("top", "m1", "--kill", str(os.getpid()), "--yes")
    assert (code, out) == (2, "")
    assert err == f"error: pid {os.getpid()} holds no GPU on m1 (see 'gpubench top m1 --once')\n"


def test_kill_sends_sigkill_to_what_ignores_sigterm(tmp_path):
    stubborn = subprocess.Popen([sys.executable, "-c", "import signal, time; "
                                 "signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', "
                                 "flush=True); time.sleep(60)"], stdout=subprocess.PIPE, text=True)
    try:
        assert stubborn.stdout.readline().strip() == "ready"
        _, started = gpu_top.state_and_start("/proc", stubborn.pid)
        assert gpu_top.kill(stubborn.pid, 0.3, started + 1) == \
            {"pid": stubborn.pid, "signal": None, "found": False, "gone": True}   # another process
        began = time.monotonic()
        assert gpu_top.kill(stubborn.pid, 0.3, started) == \
            {"pid": stubborn.pid, "signal": "SIGKILL", "found": True, "gone": True}
        assert time.monotonic() - began < 3
    finally:
        stubborn.kill()
        stubborn.wait()
    assert stubborn.returncode == -signal.SIGKILL


def test_a_machine_without_nvidia_smi_is_one_line(machine, cli):
    machine.env["PATH"] = "/usr/bin:/bin"
    if shutil.which("nvidia-smi", path=machine.env["PATH"]):
        pytest.skip("this machine has an nvidia-smi of its own")
    code, out, err = cli("top", "m1", "--once")
    assert (code, out, err) == (1, "", "error: no NVIDIA GPU on m1 (nvidia-smi not found)\n")


def test_an_unknown_machine_is_one_line(cli):
    code, out, err = cli("top", "nowhere", "--once")
    assert (code, out) == (1, "")
    assert err == "error: no instance named 'nowhere' in the ledger (see 'gpubench ls')\n"


def test_the_live_loop_is_bounded_by_ctrl_c():
    class Answers:
        name = "m1"
        calls = 0

        def sample(self):
            self.calls += 1
            if self.calls == 3:
                raise KeyboardInterrupt
            return {"t": 0.0, "gpus": [], "procs": []}

    machine, slept = Answers(), []
    top_cmd.watch(machine, 2.0, False, True, sleep=slept.append, clock=lambda: 0.0)
    assert machine.calls == 3 and slept == [2.0, 2.0]


def test_on_a_terminal_the_view_is_live_until_ctrl_c(container_proc):
    from rich.console import Console

    proc, runs = container_proc

    class Answers:
        name = "h1"
        calls = 0

        def sample(self):
            self.calls += 1
            if self.calls == 4:
                raise KeyboardInterrupt
            util = GPUS_CSV.replace(", 97, ", f", {self.calls * 30}, ")
            return gpu_top.build_sample(util, APPS_CSV, str(runs), str(proc), host_ns=False)

    console = Console(file=io.StringIO(), width=160, force_terminal=True, color_system=None)
    machine, slept = Answers(), []
    top_cmd.watch(machine, 0.5, False, False, console=console, sleep=slept.append,
                  clock=lambda: 0.0)
    assert machine.calls == 4 and slept == [0.5] * 3
    drawn = console.file.getvalue()
    assert "▃▅▇ 90%" in drawn and "every 0.5 s; Ctrl-C ends" in drawn


# -- end to end: a mock cloud's machine over SSH ---------------------------------------------

@pytest.fixture
def cloud(tmp_path, monkeypatch):
    yield from mock_cloud(tmp_path, monkeypatch,
                          GPUBENCH_LAMBDA_SSH_USER=getpass.getuser())  # sshd logs in real users only


@pytest.mark.slow
def test_a_ghost_on_a_mock_machine_is_found_and_ended(cloud, cli):
    code, out, err = cli("provision", "lambda", "--gpus", "2", "--yes", "--name", "t1")
    assert code == 0, err
    ghost = run_gpubench("ssh", "t1", "--", "GPUBENCH_MOCK_GPU=1 nohup sleep 300 "
                         "</dev/null >/dev/null 2>&1 & echo $!", timeout=60)
    assert ghost.returncode == 0, ghost.stderr
    pid = int(ghost.stdout.split()[-1])

    code, out, err = cli("top", "t1", "--once")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("t1: 2 GPUs, 1 process, 1 ghost (sampled ")
    assert lines[3] == f"  pid {pid}  GHOST (not a gpubench run)  {getpass.getuser()}: sleep 300"

    code, out, err = cli("top", "t1", "--kill", str(pid), "--yes")
    assert (code, out, err) == (0, f"pid {pid} on t1 ended by SIGTERM; GPU 1 is free of it\n", "")
    code, out, err = cli("top", "t1", "--once", "--format", "json")
    assert code == 0 and json.loads(out)["procs"] == []

    [inst] = cloud.engine.store.instances("lambda")
    (cloud.engine.host.instance_dir(inst) / "bin" / "nvidia-smi").unlink()
    if shutil.which("nvidia-smi"):
        return                       # the machine's PATH goes on to this one's own
    code, out, err = cli("top", "t1", "--once")
    assert (code, out, err) == (1, "", "error: no NVIDIA GPU on t1 (nvidia-smi not found)\n")
    assert cli("down", "t1", "--yes")[0] == 0
