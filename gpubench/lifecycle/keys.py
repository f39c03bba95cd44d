"""gpubench's own SSH identity and host trust.

- one ed25519 key pair in <config>/ssh/ (private key 0600), created on first use;
- host keys pinned on first contact in <config>/known_hosts; a changed key is refused,
  and forgotten once the instance is confirmed gone;
- one SSH login (`probe`) that says whether a new instance answers yet.

The ssh_config written from the ledger is in sshconfig.py.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from gpubench import paths
from gpubench.errors import GpubenchError
from gpubench.remote.errors import HostKeyChangedError  # one error, wherever SSH was made


class SshKeyError(GpubenchError):
    pass


@dataclass(frozen=True)
class KeyPair:
    private: Path
    public_key: str             # "ssh-ed25519 AAAA... gpubench"


def ensure_keypair(path: Path | None = None) -> KeyPair:
    """Reuse gpubench's key pair or create it (ssh-keygen, else paramiko)."""
    path = path or paths.ssh_key_path()
    pub = path.with_suffix(".pub")
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        _generate(path, pub)
    os.chmod(path, 0o600)
    if not pub.exists():
        import paramiko

        key = paramiko.Ed25519Key.from_private_key_file(str(path))
        pub.write_text(f"{key.get_name()} {key.get_base64()} gpubench\n")
    return KeyPair(path, pub.read_text().strip())


def _generate(path: Path, pub: Path) -> None:
    old = os.umask(0o077)
    try:
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "gpubench", "-f", str(path)],
                       check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, timeout=30)
    except (OSError, subprocess.SubprocessError) as e:
        raise SshKeyError(f"cannot create an SSH key at {path}: {e}") from None
    finally:
        os.umask(old)


# -- known hosts -------------------------------------------------------------

def host_entry(host: str, port: int) -> str:
    return host if port == 22 else f"[{host}]:{port}"


def pin_host_key(host: str, port: int, key) -> None:
    """Accept `key` for host:port on first contact; refuse a different one later."""
    from gpubench.remote.hostkeys import pin

    pin(paths.known_hosts_path(), host_entry(host, port), key)


def forget_host(host: str | None, port: int | None) -> None:
    """Drop a terminated instance's pin: its address may come back as another machine."""
    path = paths.known_hosts_path()
    if not host or not path.exists():
        return
    entry = host_entry(host, port or 22)
    lines = [ln for ln in path.read_text().splitlines() if ln.split(" ", 1)[0] != entry]
    path.write_text("".join(ln + "\n" for ln in lines))


# -- waiting for SSH ---------------------------------------------------------

class SshNotReady(Exception):
    pass


def probe(host: str, port: int, user: str, key_path: Path, timeout: float = 10.0) -> None:
    """One SSH login that runs `true`, pinning the host key. Raises SshNotReady (try
    again later) or HostKeyChangedError (never try again)."""
    import paramiko

    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except OSError as e:
        raise SshNotReady(f"{host}:{port}: {e.strerror or e}") from None
    transport = paramiko.Transport(sock)
    try:
        transport.banner_timeout = timeout
        transport.start_client(timeout=timeout)
        pin_host_key(host, port, transport.get_remote_server_key())
        pkey = paramiko.Ed25519Key.from_private_key_file(str(key_path))
        transport.auth_publickey(user, pkey)
        channel = transport.open_session(timeout=timeout)
        channel.settimeout(timeout)
        channel.exec_command("true")
        deadline = time.monotonic() + timeout
        while not channel.exit_status_ready():
            if time.monotonic() > deadline:
                raise SshNotReady(f"{host}:{port}: 'true' did not finish in {timeout:g} s")
            time.sleep(0.05)
        if channel.recv_exit_status() != 0:
            raise SshNotReady(f"{host}:{port}: 'true' failed")
    except HostKeyChangedError:
        raise
    except (paramiko.SSHException, OSError, EOFError) as e:
        raise SshNotReady(f"{host}:{port}: {type(e).__name__}: {e}") from None
    finally:
        transport.close()
