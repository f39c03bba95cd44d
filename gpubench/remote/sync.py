"""Copy the workloads to the machine with the real rsync over the real ssh,
checking the host key against the same pinned file as paramiko does.

One rsync call carries the suite directory and, for `gpubench run ./x.py`, the
user's script beside it; `--delete` keeps the remote copy an exact mirror, and
rsync's quick check sends only files that changed since the last sweep.

A user's project (--workdir) goes less what its ignore files name: the rules of
a `.gpubenchignore` at its top (gitignore's syntax, `!pattern` sends what
.gitignore would keep here) come before those of every `.gitignore` (rsync's
first matching rule decides), and gpubench's own files (.gpubench-left-behind/,
the results directory, the file gpubench's output goes to) stay here whatever
they say. What the ignore files keep here is named (ignored_here), so that a
data file the script opens is not left behind unsaid.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from gpubench.onhost.workdir_guard import KEEP_DIR
from gpubench.errors import GpubenchError
from gpubench.remote.errors import SyncError
from gpubench.remote.target import SshTarget

EXCLUDES = ("__pycache__/", "*.pyc", ".pytest_cache/")
IGNORE_FILE = ".gpubenchignore"
# A user's project: what git would not commit stays home, and so do the usual
# heavy directories that are never code (rsync reads each .gitignore it meets);
# .gpubenchignore's rules come first (project_filters).
PROJECT_FILTERS = ("--filter=:- .gitignore", "--exclude=.git/", "--exclude=.venv/",
                   "--exclude=venv/", "--exclude=.mypy_cache/")
# Left out of the files named as ignored: what stays here without any ignore file.
NOT_NAMED = {".git", ".venv", "venv", ".mypy_cache", "__pycache__", ".pytest_cache", KEEP_DIR}
MAX_NAMED_FILES = 100000  # ignored files counted, at most


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
              timeout: float = 1800.0, keep_out: tuple[Path, ...] = ()) -> SyncResult:
    """Mirror a user's project directory into `remote_dir`, leaving out what its
    ignore files name, the usual non-code directories and gpubench's own files
    (`keep_out`: paths that never travel, the results directory among them);
    project_filters."""
    cmd = rsync_command(target, known_hosts, project_dir, remote_dir,
                        filters=project_filters(project_dir, keep_out))
    return _rsync(target, cmd, timeout)


def project_filters(project_dir: Path, keep_out: tuple[Path, ...] = ()) -> tuple[str, ...]:
    """rsync's filter rules for a user's project, in the order rsync tries them (the
    first that matches decides): what never travels (.gpubench-left-behind/, and the
    paths of `keep_out` inside the project), then the rules of its .gpubenchignore,
    then those of each .gitignore, then the usual non-code directories."""
    never = [f"--exclude={KEEP_DIR}/"]
    root = os.path.realpath(project_dir)
    for path in keep_out:
        rel = os.path.relpath(os.path.realpath(path), root)
        if rel not in (".", "..") and not rel.startswith(".." + os.sep):
            never.append(f"--filter=- /{_literal(Path(rel).as_posix())}")
    try:
        text = (Path(project_dir) / IGNORE_FILE).read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    return (*never, *ignore_rules(text), *PROJECT_FILTERS)


def ignore_rules(text: str) -> list[str]:
    """A .gpubenchignore (gitignore's syntax) as rsync filter rules: `pattern` leaves
    out, `!pattern` sends; a pattern with a slash before its end is relative to the
    project's top, one without matches at any depth. The last line that matches
    decides, as in git: the rules come out last line first, for rsync's first match."""
    rules = []
    for raw in text.splitlines():
        line = raw.rstrip()
        if not line or line.startswith("#"):
            continue
        include = line.startswith("!")
        if include:
            line = line[1:]
        if line.startswith("\\"):  # \#file, \!file: the character itself
            line = line[1:]
        body = line.rstrip("/")
        if not body:
            continue
        if line.startswith("**/") and "/" not in body[3:]:
            line = line[3:]  # at any depth: what a pattern without a slash means to rsync
        elif "/" in body and not line.startswith("/"):
            line = "/" + line
        rules.append(f"--filter={'+' if include else '-'} {line}")
    return rules[::-1]


def _literal(path: str) -> str:
    """A path as an rsync pattern that matches only itself."""
    if not any(c in path for c in "*?["):
        return path
    return "".join("\\" + c if c in "*?[\\" else c for c in path)


@dataclass(frozen=True)
class Ignored:
    """What the ignore files keep here: how many files, and the top-most paths
    (a directory left out whole ends in /)."""

    files: int
    paths: tuple[str, ...]
    more: bool = False  # counting stopped at MAX_NAMED_FILES


def ignored_here(project_dir: Path, keep_out: tuple[Path, ...] = (),
                 timeout: float = 120.0) -> Ignored | None:
    """The files of the project that its ignore files keep from travelling (not the
    usual non-code directories, nor gpubench's own files): what rsync would send,
    from a dry run to an empty directory with the same rules, against the files
    there are. None when rsync cannot say."""
    filters = project_filters(project_dir, keep_out)
    with tempfile.TemporaryDirectory(prefix="gpubench-dry-") as empty:
        cmd = ["rsync", "-rln8", "--out-format=%n", *filters,
               *[f"--exclude={pattern}" for pattern in EXCLUDES], f"{project_dir}/", f"{empty}/"]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, errors="replace",
                                  timeout=timeout, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.SubprocessError):
            return None
    if done.returncode not in (0, 23, 24):  # 23, 24: some files unreadable, or gone meanwhile
        return None
    sent = set(done.stdout.splitlines())
    skipped = {os.path.realpath(p) for p in keep_out}
    count, paths, more = 0, [], False
    stack = [""]
    while stack and not more:
        rel_dir = stack.pop()
        try:
            entries = sorted(os.scandir(os.path.join(project_dir, rel_dir)), key=lambda e: e.name)
        except OSError:
            continue
        below = []
        for entry in entries:
            if entry.name in NOT_NAMED or entry.name.endswith(".pyc") \
                    or os.path.realpath(entry.path) in skipped:
                continue
            rel = f"{rel_dir}{entry.name}"
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if is_dir and rel + "/" in sent:
                below.append(rel + "/")
            elif is_dir:
                inside = _count_files(entry.path, MAX_NAMED_FILES - count)
                if inside:
                    count += inside
                    paths.append(rel + "/")
            elif rel not in sent:
                count += 1
                paths.append(rel)
            if count >= MAX_NAMED_FILES:
                more = True
                break
        stack.extend(reversed(below))
    return Ignored(count, tuple(paths), more)


def _count_files(top: str, limit: int) -> int:
    """Files under `top` (not its non-code directories), counting stops at `limit`."""
    count = 0
    for _, dirs, files in os.walk(top):
        dirs[:] = [d for d in dirs if d not in NOT_NAMED]
        count += sum(1 for name in files if not name.endswith(".pyc"))
        if count >= limit:
            return limit
    return count


def ignored_line(ignored: Ignored, shown: int = 3) -> str:
    """One line naming what stays here: '2 ignored files stay here: data.csv, ...'."""
    named = ", ".join(ignored.paths[:shown]) + (", ..." if len(ignored.paths) > shown else "")
    count = f"{ignored.files}{'+' if ignored.more else ''}"
    return (f"{count} ignored file{'' if ignored.files == 1 and not ignored.more else 's'} "
            f"stay{'s' if ignored.files == 1 and not ignored.more else ''} here: {named}; "
            f"list them in {IGNORE_FILE} (as !{ignored.paths[0]}) to send them")


def _rsync(target: SshTarget, cmd: list[str], timeout: float) -> SyncResult:
    start = time.perf_counter()
    done = run_rsync(cmd, timeout, f"rsync to {target}")
    return SyncResult(files_transferred(done.stdout), time.perf_counter() - start, cmd)


def run_rsync(cmd: list[str], timeout: float, doing: str, error: type[GpubenchError] = SyncError,
              accept: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess:
    """rsync run to its end within `timeout`; `error` (one line, `doing` naming what it
    did: "rsync to HOST", "pulling from HOST:DIR") when it is missing, too slow, or exits
    with a status `accept` does not hold."""
    if shutil.which("rsync") is None:
        raise error("rsync is not installed on this machine (apt-get install rsync)")
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, errors="replace",
                              timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise error(f"{doing} did not finish in {timeout:.0f}s") from None
    if done.returncode not in accept:
        raise error(f"{doing} failed: {failure_reason(done.stderr, done.returncode)}")
    return done


def files_transferred(stats: str, unknown: int = -1) -> int:
    """The regular files rsync's --stats says it sent; `unknown` where it does not say."""
    m = re.search(r"Number of regular files transferred:\s*([\d,]+)", stats)
    return int(m.group(1).replace(",", "")) if m else unknown


def failure_reason(stderr: str, code: int) -> str:
    """rsync's failure in words: a host key or a missing remote rsync said plainly, else
    its first line."""
    return _rsync_reason([ln for ln in stderr.splitlines() if ln.strip()], code)


def _rsync_reason(lines: list[str], code: int) -> str:
    for line in lines:
        if "REMOTE HOST IDENTIFICATION HAS CHANGED" in line or "Host key verification failed" in line:
            return "the host key does not match the pinned one"
        if "command not found" in line or "rsync: not found" in line:
            return "rsync is not installed on the remote machine"
    return lines[0] if lines else f"exit code {code}"
