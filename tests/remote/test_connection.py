"""Host keys pinned on first contact, a changed key refused, and bounded waits."""

import socket
import time
from pathlib import Path

import pytest

from gpubench.remote import sync
from gpubench.remote.connection import ConnectOptions, SshConnection
from gpubench.remote.errors import HostKeyChangedError, HostUnreachableError, SyncError
from gpubench.remote.targets import resolve
from tests.remote.conftest import free_port

pytestmark = pytest.mark.slow


def _connect(sshd, known_hosts: Path) -> SshConnection:
    conn = SshConnection(resolve(sshd.spec, sshd.key_file).target, known_hosts,
                         ConnectOptions(connect_timeout=5, wait=5))
    conn.open()
    return conn


def test_host_key_pinned_then_changed_key_refused(sshd, tmp_path: Path):
    known = tmp_path / "known_hosts"
    with _connect(sshd, known) as conn:
        assert conn.capture("echo hi")[1].strip() == "hi"
    pinned = known.read_text()
    assert pinned.startswith(f"[127.0.0.1]:{sshd.port} ssh-ed25519 ")
    with _connect(sshd, known):  # same key: accepted, nothing added
        pass
    assert known.read_text() == pinned

    sshd.stop()
    sshd.new_host_key()
    sshd.start()
    with pytest.raises(HostKeyChangedError, match="has changed"):
        _connect(sshd, known)
    assert known.read_text() == pinned  # never silently replaced
    # rsync's ssh reads the same pin and refuses too
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "a.py").write_text("")
    with pytest.raises(SyncError, match="host key"):
        sync.sync(resolve(sshd.spec, sshd.key_file).target, known, suite, str(tmp_path / "dst"))


def test_changed_key_via_cli_is_one_line(sshd, tmp_path: Path, isolated, cli, remote_python):
    known = isolated.config / "known_hosts"
    known.parent.mkdir()
    known.write_text(f"[127.0.0.1]:{sshd.port} ssh-ed25519 "
                     "AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n")
    code, _, err = cli("run", "mnist-ddp", "--on", sshd.spec, "--key", str(sshd.key_file),
                       "--remote-python", remote_python, "--results", str(tmp_path))
    assert code == 1
    err = err.strip().splitlines()
    assert len(err) == 1 and "host key" in err[0] and "changed" in err[0]


def test_unreachable_host_fails_within_the_wait(sshd, tmp_path: Path):
    closed = free_port()  # nothing listens there
    target = resolve(f"root@127.0.0.1:{closed}", sshd.key_file).target
    start = time.monotonic()
    with pytest.raises(HostUnreachableError, match="cannot reach .* connection refused"):
        SshConnection(target, tmp_path / "kh", ConnectOptions(connect_timeout=1, wait=2,
                                                              retry_pause=0.5)).open()
    assert time.monotonic() - start < 5


def test_silent_server_fails_within_the_wait(sshd, tmp_path: Path):
    with socket.socket() as silent:  # accepts TCP, never says SSH-2.0
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        target = resolve(f"root@127.0.0.1:{silent.getsockname()[1]}", sshd.key_file).target
        start = time.monotonic()
        with pytest.raises(HostUnreachableError):
            SshConnection(target, tmp_path / "kh", ConnectOptions(connect_timeout=1, wait=2,
                                                                  retry_pause=0.5)).open()
        assert time.monotonic() - start < 6


def test_unreachable_via_cli_is_one_line(sshd, tmp_path: Path, cli):
    code, _, err = cli("run", "mnist-ddp", "--on", f"root@127.0.0.1:{free_port()}", "--key",
                       str(sshd.key_file), "--connect-wait", "1", "--results", str(tmp_path))
    assert code == 1
    err = err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: cannot reach root@127.0.0.1:")


def test_second_rsync_sends_nothing(sshd, tmp_path: Path):
    known = tmp_path / "known_hosts"
    _connect(sshd, known).close()  # pins the key rsync's ssh will demand
    target = resolve(sshd.spec, sshd.key_file).target
    suite = tmp_path / "suite"
    suite.mkdir()
    for name in ("a.py", "b.py", "c.py"):
        (suite / name).write_text(f"# {name}\n")
    extra = tmp_path / "mine.py"
    extra.write_text("print(1)\n")
    dst = str(tmp_path / "remote" / "workloads")
    assert sync.sync(target, known, suite, dst, [extra]).files_transferred == 4
    assert sync.sync(target, known, suite, dst, [extra]).files_transferred == 0
    (suite / "b.py").write_text("# changed\n")
    (suite / "c.py").unlink()
    assert sync.sync(target, known, suite, dst, [extra]).files_transferred == 1
    assert sorted(p.name for p in Path(dst).iterdir()) == ["a.py", "b.py", "mine.py"]
