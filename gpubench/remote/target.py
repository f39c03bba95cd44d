"""Where to SSH: host, port, user and key file, and the `user@host[:port]` spelling."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from gpubench.remote.errors import BadTargetError

# user@host, user@host:port, user@[::1]:port; a host is a name or an IPv4/IPv6 address.
_SPEC = re.compile(r"^(?P<user>[A-Za-z0-9._][A-Za-z0-9._-]*)@"
                   r"(?:\[(?P<ip6>[0-9A-Fa-f:.]+)\]|(?P<host>[A-Za-z0-9._-]+))"
                   r"(?::(?P<port>[0-9]{1,5}))?$")


@dataclass(frozen=True)
class SshTarget:
    host: str
    port: int
    user: str
    key_file: Path

    @property
    def known_hosts_name(self) -> str:
        """The host as OpenSSH's known_hosts spells it: bare on port 22, else [host]:port."""
        return self.host if self.port == 22 else f"[{self.host}]:{self.port}"

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.user}@{host}" + ("" if self.port == 22 else f":{self.port}")


def looks_like_spec(text: str) -> bool:
    """An --on value with an @ is a user@host spec; without one it names an instance."""
    return "@" in text


def parse_spec(text: str, key_file: Path | None) -> SshTarget:
    """'user@host[:port]' plus a key file -> SshTarget; anything else is a usage error."""
    m = _SPEC.match(text.strip())
    if not m:
        raise BadTargetError(f"--on: '{text}' is not user@host[:port] (example: root@203.0.113.7:2222)")
    port = int(m.group("port") or 22)
    if not 1 <= port <= 65535:
        raise BadTargetError(f"--on: port {port} is out of range")
    if key_file is None:
        raise BadTargetError(f"--on {text}: give the SSH private key with --key FILE")
    return SshTarget(m.group("ip6") or m.group("host"), port, m.group("user"), check_key_file(key_file))


def check_key_file(path: Path) -> Path:
    path = Path(path).expanduser()
    if not path.is_file():
        raise BadTargetError(f"SSH key file {path} does not exist")
    if path.suffix == ".pub":
        raise BadTargetError(f"SSH key file {path} is a public key; give the private key")
    return path.resolve()
