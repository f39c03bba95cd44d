"""From launched to usable: waiting for a machine to run with an SSH address, for
SSH to answer, and the preflight gate's verdict on it, for one machine
(provision.py) and for each member of a cluster (cluster_provision.py)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Callable

from gpubench.lifecycle.keys import HostKeyChangedError, SshNotReady, probe
from gpubench.lifecycle.waiting import Reminder, pause
from gpubench.providers.common import Instance, InstanceState, NotFoundError, Offer, Provider, ProviderError
from gpubench.store.ledger import LedgerEntry

if TYPE_CHECKING:
    from gpubench.lifecycle.preflight import GateReport

Progress = Callable[[str, str], None]    # (phase, detail)
# The preflight gate: run on a machine once SSH answers; a failed report replaces it.
Gate = Callable[[LedgerEntry, Offer], "GateReport"]


class NotReady(Exception):
    """The machine did not become usable in time (the caller discards it)."""


def run_gate(gate: Gate, entry: LedgerEntry, offer: Offer,
               progress: Progress) -> tuple["GateReport | None", str | None]:
    """(the report, why the machine is not kept or None). A gate that cannot run at
    all fails the machine too: a host that cannot be checked is not benchmarked."""
    from gpubench.lifecycle.preflight import PreflightError

    progress("preflight", f"checking {entry.name} (nvidia-smi, a short load test)")
    try:
        report = gate(entry, offer)
    except PreflightError as e:
        return None, f"preflight could not run: {e}"
    for check in report.checks:
        progress("preflight", ("ok      " if check.ok else "FAILED  ") + check.line())
    if not report.passed:
        return report, report.failure_line()
    progress("preflight", report.summary())
    return report, None


def wait_running(provider: Provider, instance_id: str, deadline_s: float, progress: Progress) -> Instance:
    """The instance once the provider says it runs and has an SSH address; NotReady
    when it fails, goes away, or the deadline passes."""
    deadline = time.monotonic() + deadline_s
    remind = Reminder(lambda line: progress("booting", line))
    last = ""
    while True:
        try:
            inst = provider.get(instance_id)
        except NotFoundError:
            raise NotReady("the provider lost the instance while it booted") from None
        except ProviderError as e:
            if e.final:
                raise     # no later poll will do better
            inst = None
            last = str(e)
        if inst is not None:
            if inst.status is InstanceState.RUNNING and inst.ssh_host:
                return inst
            if inst.status in (InstanceState.FAILED, InstanceState.TERMINATED, InstanceState.TERMINATING,
                               InstanceState.STOPPED):
                raise NotReady(f"instance went to {inst.raw_status or inst.status.value} while booting")
            if inst.raw_status != last:
                last = inst.raw_status
                progress("booting", f"status {inst.raw_status or inst.status.value}")
        if time.monotonic() >= deadline:
            raise NotReady(f"not running after {deadline_s:g} s (last status: {last or 'unknown'})")
        remind(f"waiting for {instance_id} to run with an SSH address (status {last or 'unknown'}, "
               f"{remind.elapsed:.0f} s of {deadline_s:g} s)")
        pause(deadline)


def wait_ssh(inst: Instance, key_path, deadline_s: float, progress: Progress) -> None:
    """Until an SSH login with `key_path` succeeds; NotReady when the deadline passes or
    the host key differs from the one pinned."""
    deadline = time.monotonic() + deadline_s
    remind = Reminder(lambda line: progress("ssh", line))
    last = ""
    while True:
        try:
            probe(inst.ssh_host, inst.ssh_port, inst.ssh_user, key_path,
                  timeout=min(10.0, max(deadline_s, 1.0)))
            return
        except HostKeyChangedError as e:
            raise NotReady(str(e)) from None
        except SshNotReady as e:
            if str(e) != last:
                last = str(e)
                progress("ssh", f"waiting: {e}")
        if time.monotonic() >= deadline:
            raise NotReady(f"SSH not answering after {deadline_s:g} s ({last})")
        remind(f"waiting for SSH on {inst.ssh_host}:{inst.ssh_port} ({remind.elapsed:.0f} s of "
               f"{deadline_s:g} s)")
        pause(deadline)
