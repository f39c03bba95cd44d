"""A working session on one machine: the connection, the remote directory
layout, the environment found there, and reconnecting when the link drops.

Remote layout, under a base directory relative to the remote home by default:
    <base>/workloads/  mirror of the suite (+ the user's script), kept by rsync --delete
    <base>/workdir/    mirror of a user's project directory (--workdir), its runs' cwd
    <base>/runs/       each run's record file, removed once fetched
    <base>/state/      the environment check and install markers, kept across sweeps
    <base>/leases/     one lock per sweep's connection: whose runs are still controlled
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from gpubench.onhost import workdir_guard
from gpubench.remote import envcheck, sync
from gpubench.remote.connection import ConnectOptions, SshConnection
from gpubench.remote.envcheck import RemoteEnv
from gpubench.remote.errors import ConnectionLostError, HostUnreachableError
from gpubench.remote.target import SshTarget

DEFAULT_BASE = "gpubench"
WORKDIR = "workdir"  # under the base: a user's project directory (--workdir)
DEFAULT_RECONNECTS = 3


@dataclass(frozen=True)
class RemoteLayout:
    base: str = DEFAULT_BASE

    @property
    def workloads(self) -> str:
        return f"{self.base}/workloads"

    @property
    def workdir(self) -> str:
        return f"{self.base}/{WORKDIR}"

    @property
    def runs(self) -> str:
        return f"{self.base}/runs"

    @property
    def state(self) -> str:
        return f"{self.base}/state"

    @property
    def leases(self) -> str:
        return f"{self.base}/leases"


@dataclass(frozen=True)
class SessionOptions:
    python: str = "python3"
    layout: RemoteLayout = RemoteLayout()
    connect: ConnectOptions = ConnectOptions()
    reconnects: int = DEFAULT_RECONNECTS  # in all, over the whole session


class RemoteSession:
    def __init__(self, target: SshTarget, known_hosts: Path,
                 options: SessionOptions = SessionOptions(),
                 echo: Callable[[str], None] = lambda _: None) -> None:
        self.target = target
        self.known_hosts = known_hosts
        self.options = options
        self.echo = echo
        self.conn = SshConnection(target, known_hosts, options.connect)
        self.env: RemoteEnv | None = None
        self.reconnects_left = options.reconnects
        self.project_python: str | None = None  # a virtual environment made for a project's
        #   requirements (gpubench.remote.deps), which the runs then use

    @property
    def python(self) -> str:
        return self.project_python or self.options.python

    @property
    def layout(self) -> RemoteLayout:
        return self.options.layout

    def open(self) -> RemoteEnv:
        """Connect (pinning the host key on first contact) and check the environment."""
        self.conn.open()
        self.env = envcheck.check(self.conn, self.python, self.layout.state)
        self.echo(f"{self.target}: {self.env.summary()}")
        for note in self.env.warnings():
            self.echo(f"{self.target}: note: {note}")
        return self.env

    def upload(self, suite_dir: Path, script: Path | None) -> sync.SyncResult:
        """Mirror the suite (and a script outside it) into the remote workloads directory."""
        extra = [script] if script is not None and script.parent != suite_dir else []
        result = sync.sync(self.target, self.known_hosts, suite_dir, self.layout.workloads, extra)
        self.echo(f"{self.target}: synced workloads ({result.files_transferred} file(s) sent, "
                  f"{result.seconds:.1f}s)")
        return result

    def upload_workdir(self, workdir: Path, keep_out: tuple[Path, ...] = ()) -> sync.SyncResult:
        """Mirror a user's project directory: what its .gpubenchignore and .gitignore
        files leave in, less `keep_out` (gpubench's results directory) and the files
        gpubench's own output goes to; then say which ignored files stayed here."""
        own = tuple(Path(p) for p in workdir_guard.own_output().values() if p)
        keep_out = (*keep_out, *own)
        result = sync.sync_tree(self.target, self.known_hosts, workdir, self.layout.workdir,
                                keep_out=keep_out)
        self.echo(f"{self.target}: synced {workdir} ({result.files_transferred} file(s) sent, "
                  f"{result.seconds:.1f}s)")
        ignored = sync.ignored_here(workdir, keep_out)
        if ignored is not None and ignored.files:
            self.echo(f"{self.target}: {sync.ignored_line(ignored)}")
        return result

    def reconnect(self) -> None:
        """Open the connection again; gives up when the session's reconnects are spent."""
        last = "no reconnect attempts left"
        while self.reconnects_left > 0:
            self.reconnects_left -= 1
            used = self.options.reconnects - self.reconnects_left
            self.echo(f"{self.target}: connection lost; reconnecting "
                      f"(attempt {used} of {self.options.reconnects})")
            try:
                self.conn.open()
                return
            except HostUnreachableError as e:
                last = str(e)
                time.sleep(min(2.0, self.options.connect.retry_pause))
        raise ConnectionLostError(f"lost the SSH connection to {self.target} and could not "
                                  f"reconnect: {last}")

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> "RemoteSession":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
