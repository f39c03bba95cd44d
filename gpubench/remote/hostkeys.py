"""Host keys pinned on first contact, in an OpenSSH known_hosts file that both
paramiko and the rsync `ssh` read, so one pin protects every connection.

A host seen for the first time gets its key written down; from then on a
different key is refused. paramiko raises BadHostKeyException for a changed
key of the pinned type; a key of another type reaches the policy below, which
refuses it too rather than pinning a second key behind the user's back.
"""

from __future__ import annotations

import os
from pathlib import Path

import paramiko

from gpubench.remote.errors import HostKeyChangedError


def changed_key_message(host: str, path: Path) -> str:
    return (f"the SSH host key of {host} has changed since it was pinned in {path}; "
            f"refusing to connect (if the machine was rebuilt, remove its line from {path})")


def load_pinned(client: paramiko.SSHClient, path: Path) -> None:
    """Give the client the pinned keys without making paramiko rewrite the file."""
    if path.is_file():
        client.get_host_keys().load(str(path))


def pin(path: Path, hostname: str, key: paramiko.PKey) -> None:
    """Accept `key` for `hostname` on first contact; refuse a different one later."""
    known = paramiko.HostKeys()
    if path.is_file():
        known.load(str(path))
    pinned = known.lookup(hostname)
    if pinned is None:
        append_pin(path, hostname, key)
        return
    same = pinned.get(key.get_name())
    if same is None or same.asbytes() != key.asbytes():
        raise HostKeyChangedError(changed_key_message(hostname, path))


def append_pin(path: Path, hostname: str, key: paramiko.PKey) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, f"{hostname} {key.get_name()} {key.get_base64()}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)


class PinOnFirstContact(paramiko.MissingHostKeyPolicy):
    def __init__(self, path: Path) -> None:
        self.path = path

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        if client.get_host_keys().lookup(hostname):
            raise HostKeyChangedError(changed_key_message(hostname, self.path))
        append_pin(self.path, hostname, key)
        client.get_host_keys().add(hostname, key.get_name(), key)
