"""Where the login node is: `[user@]LOGIN[:port]`, where LOGIN may be a Host of
the user's ~/.ssh/config (its HostName, User, Port and IdentityFile are then
used; ProxyJump is not). The key is --key, else the config's, else gpubench's
own, else the user's usual ~/.ssh/id_ed25519, id_ecdsa or id_rsa."""

from __future__ import annotations

import getpass
import re
from pathlib import Path

from gpubench import paths
from gpubench.remote.errors import BadTargetError
from gpubench.remote.target import SshTarget, check_key_file

_SPEC = re.compile(r"^(?:(?P<user>[A-Za-z0-9._][A-Za-z0-9._-]*)@)?"
                   r"(?:\[(?P<ip6>[0-9A-Fa-f:.]+)\]|(?P<host>[A-Za-z0-9._-]+))"
                   r"(?::(?P<port>[0-9]{1,5}))?$")
USUAL_KEYS = ("id_ed25519", "id_ecdsa", "id_rsa")


def login_target(spec: str, key: Path | None, ssh_config: Path | None = None) -> SshTarget:
    """The SSH target of `--on slurm:SPEC`; a malformed spec or no key is a usage error."""
    m = _SPEC.match(spec.strip())
    if not m:
        raise BadTargetError(f"--on slurm:{spec}: not [user@]LOGIN[:port] "
                             "(example: slurm:alice@login.hpc.example.org)")
    name = m.group("ip6") or m.group("host")
    config = _ssh_config(name, ssh_config or Path.home() / ".ssh" / "config")
    port = int(m.group("port") or config.get("port") or 22)
    if not 1 <= port <= 65535:
        raise BadTargetError(f"--on slurm:{spec}: port {port} is out of range")
    user = m.group("user") or config.get("user") or getpass.getuser()
    chosen = key or _first_key([Path(p) for p in config.get("identityfile", [])])
    if chosen is None:
        raise BadTargetError(f"--on slurm:{spec}: no SSH key found; give one with --key FILE")
    return SshTarget(config.get("hostname", name), port, user, check_key_file(chosen))


def _ssh_config(name: str, path: Path) -> dict:
    """What the user's ssh_config says of host `name` ({} without a file)."""
    if not path.is_file():
        return {}
    import paramiko

    try:
        return dict(paramiko.SSHConfig.from_path(str(path)).lookup(name))
    except (OSError, ValueError, paramiko.SSHException) as e:
        raise BadTargetError(f"cannot read {path}: {e}") from None


def _first_key(configured: list[Path]) -> Path | None:
    candidates = [p.expanduser() for p in configured] + [paths.ssh_key_path()]
    candidates += [Path.home() / ".ssh" / name for name in USUAL_KEYS]
    return next((p for p in candidates if p.is_file()), None)
