"""Turn an --on value into a machine to SSH to and what is known of it.

`user@host[:port]` (with --key) is the `ssh` provider: a machine the user
already has, whose GPUs are found by asking it and whose price is unknown
unless given. Any other value names an instance in the ledger, which knows its
provider, type, GPUs, price and key.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from gpubench import paths
from gpubench.store.ledger import Ledger
from gpubench.remote.errors import BadTargetError
from gpubench.remote.target import SshTarget, check_key_file, looks_like_spec, parse_spec

SSH_PROVIDER = "ssh"


@dataclass(frozen=True)
class RemoteHost:
    target: SshTarget
    provider: str
    name: str                      # what the user called it
    instance_type: str = ""        # "" when the provider did not say
    gpu_name: str = ""             # "" when unknown: taken from nvidia-smi
    gpu_count: int | None = None   # None when unknown: taken from nvidia-smi
    price_per_hour: float | None = None
    volume: str | None = None      # the ledger's volume it was rented with (mounted at VOLUME_MOUNT)


def resolve(name: str, key_file: Path | None = None, price: float | None = None,
            ledger_path: Path | None = None) -> RemoteHost:
    if price is not None and price < 0:
        raise BadTargetError(f"--price: {price} is negative")
    if looks_like_spec(name):
        target = parse_spec(name, key_file or _default_key())
        return RemoteHost(target, SSH_PROVIDER, name, price_per_hour=price)
    return _from_ledger(name, key_file, price, ledger_path)


def _default_key() -> Path | None:
    """gpubench's own key, when the user has one and gave no --key."""
    path = paths.ssh_key_path()
    return path if path.is_file() else None


def _from_ledger(name: str, key_file: Path | None, price: float | None,
                 ledger_path: Path | None) -> RemoteHost:
    with Ledger(ledger_path) as ledger:
        entry = ledger.find(name)  # raises a one-line error for an unknown name
    return host_from_entry(entry, key_file, price)


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr)


def host_from_entry(entry, key_file: Path | None = None, price: float | None = None,
                    warn: Callable[[str], None] = _to_stderr) -> RemoteHost:
    """A ledger entry (gpubench.store.ledger.LedgerEntry) as a machine to SSH to.
    Only a machine confirmed gone is refused: one that is missing from its provider's
    list or being terminated may still answer, and is tried with a warning."""
    name = entry.name
    if entry.termination_confirmed:
        raise BadTargetError(f"--on {name}: the instance is {entry.status} (see 'gpubench ls')")
    if not entry.ssh_host:
        raise BadTargetError(f"--on {name}: the instance has no SSH address yet ({entry.status}); "
                             "wait for it to boot (see 'gpubench ls')")
    if not entry.status.reachable:
        warn(f"warning: --on {name}: the instance is {entry.status} in the ledger, not confirmed "
             f"gone; trying it anyway (see 'gpubench ls')")
    key = key_file or (Path(entry.key_path) if entry.key_path else _default_key())
    if key is None:
        raise BadTargetError(f"--on {name}: the ledger has no SSH key for it; give one with --key FILE")
    target = SshTarget(entry.ssh_host, int(entry.ssh_port or 22), entry.ssh_user or "root",
                       check_key_file(key))
    return RemoteHost(target, entry.provider, name, entry.instance_type or "",
                      entry.gpu_name or "", entry.gpu_count,
                      price if price is not None else entry.price_per_hour, entry.volume)
