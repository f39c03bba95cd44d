"""<config>/ssh_config: one `Host gpubench-NAME` block per live instance in the ledger,
so that `ssh -F <config>/ssh_config gpubench-NAME` (or an Include in ~/.ssh/config)
works. Rewritten whole from the ledger after every provision and down, and before
`gpubench ssh`, so it never names a machine confirmed gone. A machine that may still
run (missing from its provider's list, or being terminated) keeps its block: it may
still answer, and `gpubench ssh` tries it with a warning."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from gpubench import paths
from gpubench.errors import GpubenchError
from gpubench.store.ledger import Ledger, LedgerEntry


class NotReachableError(GpubenchError):
    """The instance has no SSH address to log in to (not booted, or gone)."""


@dataclass(frozen=True)
class HostBlock:
    """One `Host` block of ssh_config."""

    alias: str
    host: str
    port: int
    user: str
    key_path: str


def write_ssh_config(blocks: list[HostBlock]) -> Path:
    """Rewrite <config>/ssh_config from scratch: one block per live instance."""
    path = paths.ssh_config_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    known = paths.known_hosts_path()
    text = ["# Written by gpubench; rewritten on every provision and down.\n"
            f"# Use it from ~/.ssh/config with:  Include {path}\n"]
    for b in blocks:
        text.append(
            f"Host {b.alias}\n"
            f"    HostName {b.host}\n"
            f"    Port {b.port}\n"
            f"    User {b.user}\n"
            f"    IdentityFile {b.key_path}\n"
            f"    IdentitiesOnly yes\n"
            f"    UserKnownHostsFile {known}\n"
            f"    StrictHostKeyChecking accept-new\n"
            f"    ServerAliveInterval 30\n")
    tmp = path.with_suffix(".tmp")
    tmp.write_text("\n".join(text))
    os.chmod(tmp, 0o600)
    tmp.replace(path)
    return path


def _block(e: LedgerEntry) -> HostBlock:
    return HostBlock(e.ssh_alias, e.ssh_host, e.ssh_port or 22, e.ssh_user or "root", e.key_path or "")


def sync_ssh_config(ledger: Ledger, also: LedgerEntry | None = None) -> Path:
    """Rewrite ssh_config from the ledger's live instances that may answer SSH (and
    `also`, a row the ledger no longer counts as live that is being tried)."""
    entries = [e for e in ledger.entries() if e.may_answer_ssh]
    if also is not None and all(e.row_id != also.row_id for e in entries):
        entries.append(also)
    return write_ssh_config([_block(e) for e in entries])


def include_hint() -> str:
    return f"Include {paths.ssh_config_path()}"


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr)


def login_command(ledger: Ledger, name: str, command: list[str] | None = None,
                  warn: Callable[[str], None] = _to_stderr) -> list[str]:
    """The `ssh` argv that logs in to (or runs `command` on) the instance called `name`,
    through a freshly written ssh_config. Only a machine confirmed gone (or one never
    seen running) is refused; one that may still run is tried, with a warning."""
    entry = ledger.find(name)
    if not entry.may_answer_ssh:
        raise NotReachableError(f"'{name}' is {entry.status}, not reachable over SSH")
    if not entry.reachable:
        warn(f"warning: '{name}' is {entry.status} in the ledger{_why(entry)}; trying SSH anyway "
             f"(see 'gpubench ls')")
    sync_ssh_config(ledger, also=entry)
    return ["ssh", "-F", str(paths.ssh_config_path()), entry.ssh_alias, *(command or [])]


def _why(entry: LedgerEntry) -> str:
    if entry.status.active:
        return f" ({entry.note})" if entry.note else ""
    return " without its provider's confirmation"
