"""Machines that stop themselves: the watchdog gpubench starts on a machine rented
with --max-hours, and what the ledger says of it.

The watchdog itself is gpubench/onhost/watchdog.py (standard library only),
copied to ~/.gpubench-watchdog/ on the machine and started detached right after SSH
answers. Once the deadline passes and no gpubench sweep holds a lease there, it
removes the machine through the provider's documented call with the machine's own
id and key (RunPod, Vast.ai: the registry entry's self_removal, handed to the script
in its arguments, since it cannot import gpubench), or halts it (shutdown -h: Lambda,
or when that call fails). A halted machine may still bill, and a watchdog may never
have started, so the deadline is also in the ledger: fleet.settle_deadlines has every
later command terminate a machine past it, unless a run is active on it (run_active).
"""

from __future__ import annotations

import os
import shlex
import time
from dataclasses import dataclass
from pathlib import Path

from gpubench import onhost
from gpubench.errors import GpubenchError, UsageError
from gpubench.providers import registry
from gpubench.store.ledger import LedgerEntry

SCRIPT = onhost.script_path("watchdog")
REMOTE_DIR = "~/.gpubench-watchdog"
REMOTE_PYTHON = "python3"      # the watchdog needs only the standard library
DEFAULT_POLL_S = 30.0          # how often the watchdog looks (GPUBENCH_WATCHDOG_POLL)
CONNECT_WAIT_S = 30.0          # to install it: SSH has just answered
ASK_WAIT_S = 10.0              # to ask a machine past its deadline whether a run is active


class WatchdogError(GpubenchError):
    """The watchdog could not be started on the machine."""


def self_removal(provider: str) -> registry.SelfRemoval | None:
    """How a machine of `provider` removes itself with its own id and key (its registry
    entry's self_removal); None where it cannot (it halts), or the provider is unknown."""
    known = registry.find(provider)
    return known.self_removal if known is not None else None


def how_it_stops(provider: str) -> str:
    """What the ledger records of a watchdog on a machine of `provider`."""
    return "self-removal" if self_removal(provider) is not None else "shutdown -h"


def poll_s() -> float:
    try:
        return max(float(os.environ.get("GPUBENCH_WATCHDOG_POLL", DEFAULT_POLL_S)), 0.05)
    except ValueError:
        return DEFAULT_POLL_S


def check_max_hours(hours: float | None) -> float | None:
    if hours is not None and not hours > 0:
        raise UsageError(f"--max-hours must be positive (got {hours:g})")
    return hours


def deadline_after(hours: float | None, start: float | None = None) -> float | None:
    """The ledger's deadline for a machine rented at `start` (now) for `hours`."""
    if hours is None:
        return None
    return (time.time() if start is None else start) + hours * 3600.0


# -- on the machine ----------------------------------------------------------------

def _connect(entry: LedgerEntry, wait: float, retry: bool = True):
    """An SSH connection to the row's machine, with gpubench's pinned host keys; tried
    again for up to `wait` seconds, or (retry=False) once, within `wait`."""
    from gpubench import paths
    from gpubench.remote.connection import ConnectOptions, SshConnection
    from gpubench.remote.target import SshTarget

    if not entry.ssh_host or not entry.key_path:
        raise WatchdogError(f"{entry.name} has no SSH address or key in the ledger")
    target = SshTarget(entry.ssh_host, int(entry.ssh_port or 22), entry.ssh_user or "root",
                       Path(entry.key_path))
    options = ConnectOptions(connect_timeout=min(10.0, wait), wait=wait,
                             retry_pause=1.0 if retry else wait)
    conn = SshConnection(target, paths.known_hosts_path(), options)
    conn.open()
    return conn


def removal_arguments(removal: registry.SelfRemoval | None) -> list[str]:
    """The watchdog's arguments that hand it the self-removal (the variables on the
    machine, the call to make); none where the machine halts instead."""
    if removal is None:
        return []
    args = ["--id-var", removal.id_var, "--key-var", removal.key_var,
            "--method", removal.method, "--path", removal.path]
    return args + (["--body", removal.body] if removal.body is not None else [])


def install_command(seconds: float, provider: str, endpoint: str, poll: float) -> str:
    """The one shell line that writes the watchdog to the machine and starts it, with
    the provider's self-removal (registry) in its arguments. The script travels
    base64-encoded (no stdin on this channel); no secret is in it: the machine's own
    key stays on the machine, named by its variable."""
    from gpubench.remote.ship import ship_and_run

    q = shlex.quote
    removal = " ".join(q(a) for a in removal_arguments(self_removal(provider)))
    return ship_and_run(REMOTE_PYTHON, SCRIPT, f"{REMOTE_DIR}/watchdog.py",
                        f"start --seconds {max(seconds, 0.0):.1f} --provider {q(provider)} "
                        f"--endpoint {q(endpoint)} --poll {poll:g}" + (f" {removal}" if removal else ""))


def install(entry: LedgerEntry, deadline_at: float, endpoint: str,
            wait: float = CONNECT_WAIT_S) -> str:
    """Start the watchdog on the row's machine, to stop it at `deadline_at` (this
    machine's clock; the machine is given the seconds left, so clocks need not agree).
    Returns what the ledger records of it; raises WatchdogError."""
    from gpubench.remote.errors import SshError

    seconds = deadline_at - time.time()
    try:
        conn = _connect(entry, wait)
    except SshError as e:
        raise WatchdogError(f"cannot reach {entry.name}: {e}") from None
    try:
        code, text = conn.capture(install_command(seconds, entry.provider, endpoint, poll_s()), 60)
    except SshError as e:
        raise WatchdogError(f"on {entry.name}: {e}") from None
    finally:
        conn.close()
    # "started" is the watchdog's word; the exit status may be lost when the machine
    # stops at once (a deadline that passed while it booted), and that is no failure.
    if "started" not in text.split():
        last = (text.strip().splitlines() or [f"exit code {code}"])[-1]
        raise WatchdogError(f"on {entry.name}: {last[:200]}")
    return how_it_stops(entry.provider)


def run_active(entry: LedgerEntry, wait: float = ASK_WAIT_S) -> bool | None:
    """Whether a gpubench sweep is connected to the row's machine now (it holds a
    lease there); None when the machine cannot be asked (halted, gone, unreachable)."""
    from gpubench.remote.errors import SshError

    if not entry.may_answer_ssh or not entry.key_path:
        return None
    command = f"{REMOTE_PYTHON} -c {shlex.quote(SCRIPT.read_text())} status"
    try:
        conn = _connect(entry, wait, retry=False)     # a halted machine refuses at once
    except (SshError, WatchdogError, OSError):
        return None
    try:
        code, text = conn.capture(command, 30)
    except (SshError, OSError):
        return None
    finally:
        conn.close()
    words = text.split()
    if code != 0 or not words:
        return None
    return words[0] == "active"


# -- what the ledger says ----------------------------------------------------------

@dataclass(frozen=True)
class Deadline:
    """A row's deadline as `ls` shows it."""

    at: float | None
    watchdog: str | None

    def describe(self, now: float | None = None) -> str | None:
        """'in 1h05m, self-removal', 'past (14:02), shutdown -h', None without one."""
        if self.at is None:
            return None
        now = time.time() if now is None else now
        left = self.at - now
        when = f"in {_duration(left)}" if left > 0 else \
            f"past ({time.strftime('%H:%M', time.localtime(self.at))})"
        return f"{when}, {self.watchdog or 'ledger only'}"


def deadline_of(entry: LedgerEntry) -> Deadline:
    return Deadline(entry.deadline_at, entry.watchdog)


def _duration(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"
