"""What a run made, brought back with the real rsync: the files its project declares
as outputs (`--outputs checkpoints/,runs/*.pt`), or everything a run left behind.

A pattern is a path relative to the run's working directory, as gitignore writes
it: `checkpoints/` is that directory whole, `runs/*.pt` the matching files, a name
without a slash matches at that path only. A pull never deletes here; rsync's quick
check sends only what changed since the last pull, so pulling every few minutes
while a run goes on costs little. After a pull, a dry run with --checksum must find
nothing left to send: the files here are byte for byte those on the machine.
"""

from __future__ import annotations

import fnmatch
import re
import shlex
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from gpubench.errors import GpubenchError
from gpubench.remote.sync import failure_reason, files_transferred, run_rsync, ssh_command
from gpubench.remote.target import SshTarget

PULL_TIMEOUT_S = 3600.0


class PullError(GpubenchError):
    """rsync could not bring a run's files back."""


@dataclass(frozen=True)
class RunFiles:
    """Where runs leave their files: a working directory on a machine (relative to the
    remote home, or absolute), or on this one (target None)."""

    root: str
    target: SshTarget | None = None
    known_hosts: Path | None = None
    machine: str | None = None   # its name in the ledger, where gpubench rented it

    def source(self, rel: str = "") -> str:
        """rsync's name for `rel` (relative to the root, or an absolute path there)."""
        if rel.startswith("/"):
            path = rel.rstrip("/")
        else:
            path = self.root.rstrip("/") + (f"/{rel.strip('/')}" if rel.strip("/") not in ("", ".") else "")
        if self.target is None:
            return path + "/"
        host = f"[{self.target.host}]" if ":" in self.target.host else self.target.host
        return f"{self.target.user}@{host}:{path}/"

    def ssh(self) -> list[str]:
        if self.target is None:
            return []
        return ["-e", shlex.join(ssh_command(self.target, self.known_hosts or Path("/dev/null")))]

    def describe(self) -> str:
        return f"{self.target}:{self.root}" if self.target is not None else self.root


@dataclass(frozen=True)
class Pulled:
    files: int        # regular files sent by this pull
    seconds: float
    dest: Path


def filters(patterns: tuple[str, ...]) -> list[str]:
    """rsync's include rules for `patterns` (None of them: everything), then every
    directory (to look inside), then nothing else; --prune-empty-dirs drops the
    directories that held no match."""
    if not patterns:
        return []
    rules = []
    for pattern in patterns:
        body = pattern.strip("/")
        rules.append(f"--include=/{body}/***" if pattern.endswith("/") else f"--include=/{body}")
        if not pattern.endswith("/") and not any(c in body for c in "*?["):
            rules.append(f"--include=/{body}/***")  # a directory named without its slash
    return [*rules, "--include=*/", "--exclude=*", "--prune-empty-dirs"]


def matches(path: str, patterns: tuple[str, ...]) -> bool:
    """Whether `path` (relative, POSIX) falls under one of `patterns`, as filters() reads them."""
    for pattern in patterns:
        body = pattern.strip("/")
        if path == body or path.startswith(body + "/"):
            return True
        if not pattern.endswith("/") and fnmatch.fnmatchcase(path, body):
            return True
    return False


def pull(files: RunFiles, rel: str, patterns: tuple[str, ...], dest: Path,
         timeout: float = PULL_TIMEOUT_S, check: bool = True) -> Pulled:
    """Bring `patterns` (all when empty) under `rel` of the run's directory into `dest`,
    then (with `check`) make sure nothing differs. PullError in one line when not."""
    dest.mkdir(parents=True, exist_ok=True)
    base = ["rsync", "-a", "--stats", *files.ssh(), *filters(patterns)]
    start = time.perf_counter()
    done = _rsync([*base, files.source(rel), f"{dest}/"], files, timeout)
    sent = files_transferred(done.stdout, unknown=0)
    if check:
        again = _rsync([*base, "--dry-run", "--checksum", "--itemize-changes",
                        files.source(rel), f"{dest}/"], files, timeout)
        differ = [ln for ln in again.stdout.splitlines() if ln[:2] in (">f", "cf")]
        if differ:
            raise PullError(f"pulled {files.describe()} into {dest}, but {len(differ)} file(s) differ "
                            f"afterwards ({differ[0][12:].strip()}): still changing on the machine?")
    return Pulled(sent, time.perf_counter() - start, dest)


def listing(files: RunFiles, rel: str, patterns: tuple[str, ...] = (),
            timeout: float = 120.0) -> list[tuple[str, int]]:
    """(path, size) of each file under `rel` of the run's directory (matching
    `patterns`, when given); [] when there is no such directory."""
    cmd = ["rsync", "-r", "--list-only", *files.ssh(), *filters(patterns), files.source(rel)]
    done = _rsync(cmd, files, timeout, missing_ok=True)
    found = []
    for line in done.stdout.splitlines():
        m = _LIST.match(line)
        if m and m.group("kind") == "-":
            found.append((m.group("path"), int(m.group("size").replace(",", "").replace(".", ""))))
    return found


_LIST = re.compile(r"^(?P<kind>[-dlcbps])\S+\s+(?P<size>[\d,.]+)\s+\S+\s+\S+\s+(?P<path>.+)$")


def size_text(size: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} B"


def _rsync(cmd: list[str], files: RunFiles, timeout: float,
           missing_ok: bool = False) -> subprocess.CompletedProcess:
    """sync.run_rsync, a file that vanished meanwhile (24: a run still writing) no
    failure; with `missing_ok`, a source directory that is not there (23) is nothing."""
    doing = f"pulling from {files.describe()}"
    done = run_rsync(cmd, timeout, doing, PullError, accept=(0, 23, 24) if missing_ok else (0, 24))
    if done.returncode == 23:
        if "No such file or directory" in done.stderr:
            return subprocess.CompletedProcess(cmd, 0, "", "")
        raise PullError(f"{doing} failed: {failure_reason(done.stderr, done.returncode)}")
    return done
