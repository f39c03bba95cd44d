"""Shared pieces of the remote tests: a tiny torchrun script, a session on the test sshd,
a stand-in nvidia-smi and what tells that a GPU sampler ran and ended."""

from __future__ import annotations

import os
from pathlib import Path

from gpubench import paths
from gpubench.launch import gpu_sampling
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


# nvidia-smi's query loop: one CSV line per GPU named by -i, every -lms milliseconds
# (a twentieth of that: the tests wait less), until it is stopped (or two minutes
# pass); the name query (the environment check) gets one GPU name.
FAKE_NVIDIA_SMI = """\
#!/bin/bash
ids=0
ms=1000
while [ $# -gt 0 ]; do
    case "$1" in
        -i) ids="$2"; shift ;;
        -lms) ms="$2"; shift ;;
        --query-gpu=name) echo "NVIDIA Stand-in 80GB"; exit 0 ;;
        --query-gpu=name,memory.total) echo "NVIDIA Stand-in 80GB, 81559"; exit 0 ;;
    esac
    shift
done
n=0
end=$((SECONDS + 120))
while [ $SECONDS -lt $end ]; do
    for i in ${ids//,/ }; do
        if [ $((n % 2)) = 0 ]; then echo "$i, 80, 1024, 200.00"; else echo "$i, 100, 2048, [N/A]"; fi
    done
    n=$((n + 1))
    sleep "$(printf '0.%03d' $((ms / 20)))"
done
"""


def write_fake_nvidia_smi(directory: Path) -> Path:
    """The stand-in nvidia-smi in `directory` (made), which goes first on a PATH."""
    directory.mkdir(parents=True, exist_ok=True)
    tool = directory / "nvidia-smi"
    tool.write_text(FAKE_NVIDIA_SMI)
    tool.chmod(0o755)
    return directory


def samplers_left(directory: Path) -> list[str]:
    """The command lines of GPU samplers (gpu_sampling's feed, by its source or its file,
    and nvidia-smi) still running in `directory` or from it."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
            line = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").replace("\0", " ")
        except OSError:
            continue
        mine = cwd.startswith(str(directory)) or str(directory) in line
        if mine and any(word in line for word in ("nvidia-smi", "gpu_sampling", gpu_sampling.LIVE_TAG)):
            found.append(line)
    return found


def watch_gpu_samples(monkeypatch) -> list:
    """Every GPU sample a sweep of this process reads (sweep/events.GpuSample), as it
    reads them: a live display draws them and prints none."""
    from gpubench.sweep import events

    seen: list = []
    read = events.gpu_from_line

    def reading(line: str):
        sample = read(line)
        if sample is not None:
            seen.append(sample)
        return sample

    monkeypatch.setattr(events, "gpu_from_line", reading)
    return seen
