"""Shared pieces of the remote tests: a tiny torchrun script, a session on the test sshd."""

from __future__ import annotations

from pathlib import Path

from gpubench import paths
from gpubench.launch.ssh import SshLauncher, connect
from gpubench.remote.connection import ConnectOptions
from gpubench.remote.session import RemoteLayout, SessionOptions
from gpubench.remote.targets import RemoteHost, resolve
from tests.helpers import JOIN, LEAVE

# Starts in a second instead of mnist's several; fails on request like an OOM would. Its
# processes form one gloo group, as a training script's do (JOIN, LEAVE).
TINY = JOIN + '''\
import argparse, json, os, time
p = argparse.ArgumentParser()
p.add_argument("--fail-at", type=int, default=0)
p.add_argument("--sleep", type=float, default=0.0)
p.add_argument("--sleep-at", type=int, default=0, help="sleep only at this world size")
a = p.parse_args()
world, rank = int(os.environ["WORLD_SIZE"]), int(os.environ["RANK"])
print(f"rank {rank} of {world} started", flush=True)
if a.sleep_at in (0, world):
    time.sleep(a.sleep)
if world == a.fail_at:
    raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
if rank == 0:
    with open(os.environ["GPUBENCH_RECORD_FILE"], "w") as f:
        json.dump({"status": "ok", "world_size": world, "wall_seconds": 0.5,
                   "throughput": 100.0 * world, "throughput_unit": "samples/s"}, f)
''' + LEAVE


def tiny_script(directory: Path, name: str = "tiny_bench.py", header: str = "") -> Path:
    path = directory / name
    path.write_text(header + TINY)
    return path


def cli_args(sshd, remote_python: str, tmp_path: Path, *extra: str) -> list[str]:
    """`gpubench run` on the test sshd: one run per count (a CPU machine's default is 3)."""
    return ["--on", sshd.spec, "--key", str(sshd.key_file), "--remote-python", remote_python,
            "--remote-dir", str(tmp_path / "remote"), "--connect-wait", "10", "--repeat", "1", *extra]


def open_session(sshd, remote_python: str, tmp_path: Path, reconnects: int = 2,
                 echo=lambda _: None) -> SshLauncher:
    host: RemoteHost = resolve(sshd.spec, sshd.key_file)
    options = SessionOptions(remote_python, RemoteLayout(str(tmp_path / "remote")),
                             ConnectOptions(connect_timeout=5, wait=10, retry_pause=0.5), reconnects)
    return connect(host, paths.known_hosts_path(), options, echo)
