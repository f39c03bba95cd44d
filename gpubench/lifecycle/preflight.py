"""The preflight gate: is a rented host what was paid for, and fit to benchmark on?

Run over SSH once SSH answers and before any benchmark time: preflight_probe.py
beside this file gathers the facts on the machine (nvidia-smi, /dev/shm, disk, a
short torch load test) and preflight_checks.py judges them, every floor in one place
(gpus, ecc, throttle, pcie, driver, shm, disk, matmul, h2d, allreduce). This module
runs the probe, reads its answer and keeps the verdict: the gate's report, the
record fields and ledger findings it gives, and the gate provision runs.
"""

from __future__ import annotations

import json
import shlex
import time
from dataclasses import dataclass
from pathlib import Path

from gpubench import onhost
from gpubench.errors import GpubenchError
from gpubench.lifecycle.preflight_checks import Check, Expectation, fact_rows, judge
from gpubench.lifecycle.preflight_checks import parse_csv  # noqa: F401  (for the tests' facts)

PROBE = onhost.script_path("preflight_probe")
REMOTE_DIR = "~/.gpubench-preflight"
MARK = "@gpubench-preflight "
CONNECT_WAIT_S = 30.0
PROBE_TIMEOUT_S = 150.0


class PreflightError(GpubenchError):
    """The gate could not run on the machine (SSH, a garbled answer): the host is
    not kept."""


class PreflightPythonError(GpubenchError):
    """The python asked for is not on the machine: the user's to fix (--remote-python),
    not the host's, so no other host is tried."""


@dataclass
class GateReport:
    checks: list[Check]
    facts: dict
    expect: Expectation
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]

    @property
    def stand_in(self) -> bool:
        return bool(self.facts.get("stand_in"))

    def failure_line(self) -> str:
        """'preflight failed: throttle: GPU 0 HW thermal slowdown (0x40) ...; pcie: ...'."""
        return "preflight failed: " + "; ".join(c.line() for c in self.failed)

    def summary(self) -> str:
        if not self.passed:
            return self.failure_line()
        where = " (a CPU stands in for the GPUs)" if self.stand_in else ""
        return f"preflight passed {len(self.checks)} checks in {self.seconds:.1f} s{where}"

    def record_fields(self) -> dict:
        """What every record of a bench on this host carries (record_schema: HOST_CHECK)."""
        rows = fact_rows(self.facts, "basic")
        load = self.facts.get("load") or {}
        return {
            "host_id": self.expect.host_id,
            "instance_id": self.expect.instance_id,
            "gpu_names": [r.get("name", "") for r in rows],
            "gpu_uuids": [r.get("uuid", "") for r in rows],
            "gpu_topology": self.facts.get("topology"),
            "driver_cuda_version": self.facts.get("driver_cuda"),
            "nccl_version": load.get("nccl"),
            "preflight": self.summary(),
            "preflight_checks": {c.name: ("ok: " if c.ok else "failed: ") + c.detail
                                 for c in self.checks},
            # the workload writes these for its own runs; a failed run keeps the host's
            "driver_version": rows[0].get("driver_version") if rows else None,
            "torch_version": load.get("torch"),
            "cuda_version": load.get("torch_cuda"),
        }

    def ledger_findings(self) -> dict:
        """What the ledger's `gate` column keeps of this report (see gate_findings)."""
        return gate_findings(self.expect, self.passed, self.checks, self.seconds, self.stand_in)


def gate_findings(expect: Expectation, passed: bool, checks: list[Check], seconds: float,
                  stand_in: bool = False, at: float | None = None) -> dict:
    """The gate's verdict as the ledger keeps it (JSON in its `gate` column): passed or
    not, each failed check with its measured value and floor, every check's line, the
    host id and the seconds it took. Provider statistics read it (lifecycle/stats.py)."""
    return {
        "passed": passed,
        "failed": [{"check": c.name, **measured_and_floor(c.detail)} for c in checks if not c.ok],
        "checks": {c.name: ("ok: " if c.ok else "failed: ") + c.detail for c in checks},
        "host_id": expect.host_id,
        "instance_id": expect.instance_id,
        "seconds": round(seconds, 2),
        "stand_in": stand_in,
        "at": time.time() if at is None else at,
    }


def measured_and_floor(detail: str) -> dict:
    """A check's detail split into what was measured and its floor: every check writes
    '<measured> (floor: <floor>)' where it has a floor."""
    measured, sep, rest = detail.partition(" (floor: ")
    if not sep:
        return {"measured": detail, "floor": None}
    floor = rest[:-1] if rest.endswith(")") else rest
    return {"measured": measured, "floor": floor}


# -- on the machine -----------------------------------------------------------------

def probe_command(python: str, load: bool = True) -> str:
    """One shell line that writes the probe to the machine and runs it. The script
    travels base64-encoded (no stdin on this channel)."""
    from gpubench.remote.ship import ship_and_run

    args = json.dumps({"load": load})
    return ship_and_run(python, PROBE, f"{REMOTE_DIR}/probe.py", f"gate {shlex.quote(args)}")


def parse_answer(text: str) -> dict:
    line = next((ln for ln in text.splitlines() if ln.startswith(MARK)), None)
    if line is None:
        last = (text.strip().splitlines() or ["no output"])[-1]
        raise PreflightError(f"the preflight probe gave no answer: {last[:200]}")
    try:
        facts = json.loads(line[len(MARK):])
    except ValueError:
        raise PreflightError("the preflight probe's answer is not JSON") from None
    if not isinstance(facts, dict):
        raise PreflightError("the preflight probe's answer is not an object")
    return facts


def run_on(conn, expect: Expectation, python: str = "python3", load: bool = True) -> GateReport:
    """Run the probe over an open SshConnection and judge what it found."""
    from gpubench.remote.errors import SshError

    started = time.monotonic()
    try:
        code, text = conn.capture(probe_command(python, load), PROBE_TIMEOUT_S)
    except SshError as e:
        raise PreflightError(f"preflight on {conn.target}: {e}") from None
    if code == 127 and MARK not in text:
        raise PreflightPythonError(f"remote environment on {conn.target}: missing python "
                                   f"('{python}' not found; choose one with --remote-python)")
    facts = parse_answer(text)
    return GateReport(judge(facts, expect), facts, expect, time.monotonic() - started)


def expectation_for(entry, offer=None) -> Expectation:
    """What a ledger row paid for; the host id from the offer where the provider gives one."""
    extra = getattr(offer, "extra", None) or {}
    host = extra.get("machine_id") or extra.get("host_id")
    return Expectation(entry.gpu_name or "", int(entry.gpu_count or 0), entry.instance_id,
                       str(host) if host is not None else None)


def check_entry(entry, offer=None, python: str = "python3", wait: float = CONNECT_WAIT_S) -> GateReport:
    """Run the gate on a ledger row's machine (gpubench's pinned host keys, its key)."""
    from gpubench import paths
    from gpubench.remote.connection import ConnectOptions, SshConnection
    from gpubench.remote.errors import SshError
    from gpubench.remote.target import SshTarget

    if not entry.ssh_host or not entry.key_path:
        raise PreflightError(f"{entry.name} has no SSH address or key in the ledger")
    target = SshTarget(entry.ssh_host, int(entry.ssh_port or 22), entry.ssh_user or "root",
                       Path(entry.key_path))
    conn = SshConnection(target, paths.known_hosts_path(),
                         ConnectOptions(connect_timeout=min(10.0, wait), wait=wait, retry_pause=1.0))
    try:
        conn.open()
    except SshError as e:
        raise PreflightError(f"preflight: cannot reach {entry.name}: {e}") from None
    try:
        return run_on(conn, expectation_for(entry, offer), python)
    finally:
        conn.close()


def record(ledger, entry, findings: dict) -> None:
    """Keep the gate's findings in the machine's ledger row (its `gate` column), beside
    what else was measured there (a cluster member's link): the findings always carry
    the same keys, so a later gate replaces every one of an earlier one's."""
    facts = {**ledger.get(entry.row_id).gate_facts, **findings}
    ledger.update(entry.row_id, gate=json.dumps(facts, sort_keys=True))


def recorded_gate(ledger, python: str = "python3"):
    """provision's gate (Gate): check_entry, with its findings kept in the ledger row,
    a gate that could not run included (as a failed "run" check)."""

    def gate(entry, offer=None) -> GateReport:
        started = time.monotonic()
        try:
            report = check_entry(entry, offer, python)
        except PreflightError as e:
            record(ledger, entry, gate_findings(expectation_for(entry, offer), False,
                                                [Check("run", False, str(e))],
                                                time.monotonic() - started))
            raise
        record(ledger, entry, report.ledger_findings())
        return report

    return gate


def check_named(name: str, python: str = "python3") -> GateReport:
    """The gate on a machine the ledger knows by `name` (run --on NAME --preflight);
    its findings are kept in the machine's ledger row."""
    from gpubench.store.ledger import Ledger

    with Ledger() as ledger:
        entry = ledger.find(name)      # a one-line error for an unknown name
        if not entry.may_answer_ssh:
            raise PreflightError(f"{name} is {entry.status} (see 'gpubench ls'): nothing to check")
        return recorded_gate(ledger, python)(entry)
