"""Copy the workloads to the machine with the real rsync over the real ssh,
checking the host key against the same pinned file as paramiko does.

One rsync call carries the suite directory and, for `gpubench run ./x.py`, the
user's script beside it; `--delete` keeps the remote copy an exact mirror, and
rsync's quick check sends only files that changed since the last sweep.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from gpubench.remote.errors import SyncError
from gpubench.remote.target import SshTarget

EXCLUDES = ("__pycache__/", "*.pyc", ".pytest_cache/")
# A user's project: what git would not commit stays home, and so do the usual
# heavy directories that are never code (rsync reads each .gitignore it meets).
PROJECT_FILTERS = ("--filter=:- .gitignore", "--exclude=.git/", "--exclude=.venv/",
                   "--exclude=venv/", "--exclude=.mypy_cache/")


@dataclass(frozen=True)
class SyncResult:
    files_transferred: int
    seconds: float
    command: list[str]


def ssh_command(target: SshTarget, known_hosts: Path, connect_timeout: float = 10.0) -> list[str]:
    """The ssh invocation rsync uses: batch mode, pinned host keys only."""
    return ["ssh", "-p", str(target.port), "-i", str(target.key_file),
            "-o", f"UserKnownHostsFile={known_hosts}", "-o", "StrictHostKeyChecking=yes",
            "-o", "GlobalKnownHostsFile=/dev/null", "-o", "BatchMode=yes",
            "-o", "IdentitiesOnly=yes", "-o", f"ConnectTimeout={max(1, round(connect_timeout))}",
            "-o", "ServerAliveInterval=15", "-o", "LogLevel=ERROR"]


def rsync_command(target: SshTarget, known_hosts: Path, suite_dir: Path, remote_dir: str,
                  extra_files: list[Path] = (), filters: tuple[str, ...] = ()) -> list[str]:
    host = f"[{target.host}]" if ":" in target.host else target.host
    dest = remote_dir.rstrip("/")
    return ["rsync", "-az", "--delete", "--stats",
            # an older rsync on the machine has no --mkpath: make the directory first
            f"--rsync-path=mkdir -p {shlex.quote(dest)} && rsync",
            *filters, *[f"--exclude={pattern}" for pattern in EXCLUDES],
            "-e", shlex.join(ssh_command(target, known_hosts)),
            f"{suite_dir}/", *[str(p) for p in extra_files],
            f"{target.user}@{host}:{dest}/"]


def sync(target: SshTarget, known_hosts: Path, suite_dir: Path, remote_dir: str,
         extra_files: list[Path] = (), timeout: float = 600.0) -> SyncResult:
    """Mirror `suite_dir` (and `extra_files`) into `remote_dir` on the machine."""
    names = {p.name for p in suite_dir.iterdir()}
    for path in extra_files:
        if path.name in names:
            raise SyncError(f"{path.name} has the name of a file of the workload suite; rename it")
    return _rsync(target, rsync_command(target, known_hosts, suite_dir, remote_dir, list(extra_files)),
                  timeout)


def sync_tree(target: SshTarget, known_hosts: Path, project_dir: Path, remote_dir: str,
              timeout: float = 1800.0) -> SyncResult:
    """Mirror a user's project directory into `remote_dir`, leaving out what its
    .gitignore files name and the usual non-code directories (PROJECT_FILTERS)."""
    cmd = rsync_command(target, known_hosts, project_dir, remote_dir, filters=PROJECT_FILTERS)
    return _rsync(target, cmd, timeout)


def _rsync(target: SshTarget, cmd: list[str], timeout: float) -> SyncResult:
    if shutil.which("rsync") is None:
        raise SyncError("rsync is not installed on this machine (apt-get install rsync)")
    start = time.perf_counter()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, errors="replace",
                              timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise SyncError(f"rsync to {target} did not finish in {timeout:.0f}s") from None
    if done.returncode != 0:
        lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
        why = _rsync_reason(lines, done.returncode)
        raise SyncError(f"rsync to {target} failed: {why}")
    return SyncResult(_files_transferred(done.stdout), time.perf_counter() - start, cmd)


def _files_transferred(stats: str) -> int:
    m = re.search(r"Number of regular files transferred:\s*([\d,]+)", stats)
    return int(m.group(1).replace(",", "")) if m else -1


def _rsync_reason(lines: list[str], code: int) -> str:
    for line in lines:
        if "REMOTE HOST IDENTIFICATION HAS CHANGED" in line or "Host key verification failed" in line:
            return "the host key does not match the pinned one"
        if "command not found" in line or "rsync: not found" in line:
            return "rsync is not installed on the remote machine"
    return lines[0] if lines else f"exit code {code}"
