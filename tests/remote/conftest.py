"""A real OpenSSH server on a free loopback port, configured from scratch in
tmp_path (host key, authorized_keys, pid file), started for one test and
killed at teardown. The "remote" python is this test run's own, which has torch.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

SSHD = "/usr/sbin/sshd"
START_DEADLINE_S = 15.0


@dataclass
class Sshd:
    host: str
    port: int
    user: str
    key_file: Path
    dir: Path
    proc: subprocess.Popen | None = None
    prefix: list[str] = field(default_factory=list)  # e.g. ip netns exec NAME

    @property
    def spec(self) -> str:
        return f"{self.user}@{self.host}:{self.port}"

    @property
    def config(self) -> Path:
        return self.dir / "sshd_config"

    def start(self) -> None:
        self.proc = subprocess.Popen([*self.prefix, SSHD, "-D", "-e", "-f", str(self.config)],
                                     stdout=subprocess.DEVNULL, stderr=open(self.dir / "sshd.log", "ab"))
        deadline = time.monotonic() + START_DEADLINE_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sshd exited: {(self.dir / 'sshd.log').read_text()[-2000:]}")
            try:
                with socket.create_connection((self.host, self.port), timeout=1) as s:
                    s.settimeout(2)
                    if s.recv(64).startswith(b"SSH-"):
                        return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("sshd did not answer in time")

    def sessions(self) -> list[int]:
        """The per-connection sshd processes: children of the listener."""
        assert self.proc is not None
        path = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children")
        try:
            return [int(p) for p in path.read_text().split()]
        except OSError:
            return []

    def cut_connections(self) -> int:
        """Drop every open SSH connection, as a flaky network would; the listener stays."""
        pids = self.sessions()
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return len(pids)

    def stop(self) -> None:
        if self.proc is None:
            return
        self.cut_connections()
        self.proc.kill()
        self.proc.wait(timeout=10)
        self.proc = None

    def new_host_key(self) -> None:
        """Replace the host key, as a rebuilt machine at the same address would have."""
        key = self.dir / "host_ed25519"
        key.unlink()
        key.with_suffix(".pub").unlink()
        _keygen(key)


def _keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)],
                   check=True, timeout=30, stdin=subprocess.DEVNULL)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_sshd(tmp_path: Path, listen: str = "127.0.0.1", prefix: list[str] | None = None,
              extra_config: str = "") -> Sshd:
    """An sshd configured from scratch in tmp_path, listening on `listen` (not started)."""
    if not os.path.exists(SSHD):
        pytest.skip("openssh-server is not installed")
    d = tmp_path / "sshd"
    d.mkdir()
    _keygen(d / "host_ed25519")
    client_key = d / "client_ed25519"
    _keygen(client_key)
    (d / "authorized_keys").write_text(client_key.with_suffix(".pub").read_text())
    os.makedirs("/run/sshd", exist_ok=True)  # sshd's privilege separation directory
    port = free_port()
    (d / "sshd_config").write_text(f"""\
Port {port}
ListenAddress {listen}
HostKey {d / 'host_ed25519'}
PidFile {d / 'sshd.pid'}
AuthorizedKeysFile {d / 'authorized_keys'}
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
MaxStartups 50
{extra_config}""")
    server = Sshd(listen, port, os.environ.get("USER") or "root", client_key, d,
                  prefix=list(prefix or []))
    if os.geteuid() != 0:
        server.user = subprocess.run(["id", "-un"], capture_output=True, text=True).stdout.strip()
    return server


@pytest.fixture
def sshd(tmp_path: Path):
    server = make_sshd(tmp_path)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def netns_sshd(tmp_path: Path):
    """An sshd on a host of its own: a network namespace this test creates, joined to
    this one by a veth pair, so that the link can be cut silently (no reset sent)."""
    from tests.remote.netns import TestHost

    host = TestHost.create()
    try:
        server = make_sshd(tmp_path, listen=host.address, prefix=host.exec_prefix)
        server.start()
        try:
            yield server, host
        finally:
            server.stop()
    finally:
        host.destroy()


@pytest.fixture
def remote_python() -> str:
    return sys.executable
