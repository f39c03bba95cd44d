"""The preflight gate: is a rented host what was paid for, and fit to benchmark on?

Run over SSH once SSH answers and before any benchmark time: preflight_probe.py
beside this file gathers the facts on the machine (nvidia-smi, /dev/shm, disk, a
short torch load test) and this module judges them, every floor in one place:

    gpus       GPU count and names against what was paid for
    ecc        uncorrected ECC errors; pending or failed row remaps
    throttle   HW slowdown, SW/HW thermal slowdown or power brake active (idle and
               the SW power cap are normal)
    pcie       link generation and width under load against the link's max
    driver     the driver's CUDA against torch's (major version) and 11.8; torch sees the GPUs
    shm        /dev/shm, which NCCL between a machine's GPUs goes through
    disk       free disk
    matmul     a bf16 matrix product against the GPU type's expected rate
    h2d        a pinned host-to-device copy against the link's rate
    allreduce  NCCL bus bandwidth across the GPUs against the interconnect's published rate

On the mock cloud's machines a CPU stands in for the GPUs: the product runs on the
CPU against a floor no CPU misses, and the findings say so.
"""

from __future__ import annotations

import json
import shlex
import time
from dataclasses import dataclass
from pathlib import Path

from gpubench import onhost
from gpubench.errors import GpubenchError
from gpubench.providers.gpus import gpu_matches, normalize_gpu_name

PROBE = onhost.script_path("preflight_probe")
REMOTE_DIR = "~/.gpubench-preflight"
MARK = "@gpubench-preflight "
CONNECT_WAIT_S = 30.0
PROBE_TIMEOUT_S = 150.0

MIN_DRIVER_CUDA = (11, 8)
MIN_SHM_BYTES = 1024 ** 3              # as the environment check's warning
MIN_FREE_DISK_BYTES = 10 * 1024 ** 3
# Clock-event (throttle) reasons, nvidia-smi's bits.
THROTTLE_BITS = {0x1: "idle", 0x2: "applications clocks", 0x4: "SW power cap",
                 0x8: "HW slowdown", 0x10: "sync boost", 0x20: "SW thermal slowdown",
                 0x40: "HW thermal slowdown", 0x80: "HW power brake", 0x100: "display clocks"}
THROTTLE_FAILS = 0x8 | 0x20 | 0x40 | 0x80
# bf16 dense matrix product (8192^3), TFLOP/s a healthy card of the type reaches; the
# floor is MATMUL_FLOOR of it. Types not listed are measured and not judged.
EXPECTED_BF16_TFLOPS = {
    "H100 SXM": 700.0, "H100 PCIe": 480.0, "H100 NVL": 600.0, "H200": 700.0, "GH200": 700.0,
    "B200": 1400.0, "A100 SXM": 270.0, "A100 PCIe": 250.0, "A100": 250.0, "L40S": 250.0,
    "L40": 150.0, "L4": 60.0, "A10": 80.0, "A40": 110.0, "RTX A6000": 110.0,
    "RTX 6000 Ada": 250.0, "RTX 4090": 150.0, "RTX 3090": 60.0,
}
MATMUL_FLOOR = 0.7
# A CPU standing in for GPUs (the mock): any CPU multiplies faster than 10 MFLOP/s, even
# one shared by several busy processes (a loaded 2-core machine measured 0.95 GFLOP/s).
CPU_MATMUL_FLOOR_TFLOPS = 1e-5
# all_reduce bus bandwidth at large sizes, GB/s, where published (nccl-tests on
# 8-GPU SXM machines); the floor is 0.9x.
ALLREDUCE_BUSBW = {("H100 SXM", 8): 460.0, ("H200", 8): 460.0, ("A100 SXM", 8): 228.0}
ALLREDUCE_FLOOR = 0.9
# PCIe GB/s per lane by generation; a pinned copy reaches well over H2D_FLOOR of the link.
LANE_GBPS = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}
H2D_FLOOR = 0.45
H2D_FLOOR_UNKNOWN_LINK_GBPS = 3.0


class PreflightError(GpubenchError):
    """The gate could not run on the machine (SSH, a garbled answer): the host is
    not kept."""


class PreflightPythonError(GpubenchError):
    """The python asked for is not on the machine: the user's to fix (--remote-python),
    not the host's, so no other host is tried."""


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str                 # what was measured, against the floor where there is one
    judged: bool = True         # False: nothing to judge (not reported, no reference)

    def line(self) -> str:
        return f"{self.name}: {self.detail}"


@dataclass(frozen=True)
class Expectation:
    """What was paid for, and who the provider says the host is."""

    gpu_name: str
    gpu_count: int
    instance_id: str | None = None
    host_id: str | None = None       # the provider's id for the physical machine, where it gives one


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
        rows = _rows(self.facts, "basic")
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


# -- reading nvidia-smi's answers ---------------------------------------------------

def parse_csv(text: str, fields: str) -> list[dict]:
    """nvidia-smi --query-gpu=FIELDS --format=csv,noheader,nounits as rows of {field: text}."""
    names = fields.split(",")
    return [dict(zip(names, (v.strip() for v in line.split(","))))
            for line in text.splitlines() if line.strip()]


def _rows(facts: dict, group: str) -> list[dict]:
    got = facts.get(group) or {}
    return list(got.get("rows") or [])


def _int(text) -> int | None:
    """nvidia-smi's number, or None for [N/A], [Not Supported] and the like."""
    try:
        return int(str(text).strip(), 0)
    except (TypeError, ValueError):
        return None


def _version(text) -> tuple[int, ...] | None:
    try:
        return tuple(int(p) for p in str(text).split(".")[:2])
    except (TypeError, ValueError):
        return None


# -- the checks -------------------------------------------------------------------

def check_gpus(facts: dict, expect: Expectation) -> Check:
    if not facts.get("nvidia_smi"):
        return Check("gpus", False, "nvidia-smi not found: no NVIDIA driver on the machine")
    basic = facts.get("basic") or {}
    if "error" in basic:
        return Check("gpus", False, f"nvidia-smi failed: {basic['error']}")
    names = [r.get("name", "") for r in _rows(facts, "basic")]
    if len(names) != expect.gpu_count:
        return Check("gpus", False, f"{len(names)} GPU(s) seen, {expect.gpu_count} paid for")
    wrong = [f"GPU {i} is {n}" for i, n in enumerate(names)
             if expect.gpu_name and not (gpu_matches(expect.gpu_name, n) or gpu_matches(n, expect.gpu_name))]
    if wrong:
        return Check("gpus", False, f"{', '.join(wrong)}; paid for {expect.gpu_name}")
    return Check("gpus", True, f"{len(names)}x {names[0] if names else '-'}")


def check_ecc(facts: dict) -> Check:
    bad, seen = [], False
    for i, row in enumerate(_rows(facts, "ecc")):
        n = _int(row.get("ecc.errors.uncorrected.volatile.total"))
        seen |= n is not None
        if n:
            bad.append(f"GPU {i}: {n} uncorrected ECC error(s)")
    for i, row in enumerate(_rows(facts, "remap")):
        pending = str(row.get("remapped_rows.pending", "")).lower()
        failure = str(row.get("remapped_rows.failure", "")).lower()
        seen |= pending in ("yes", "no")
        if pending == "yes":
            bad.append(f"GPU {i}: a row remap is pending (reset needed)")
        if failure == "yes":
            bad.append(f"GPU {i}: a row remap failed")
    if bad:
        return Check("ecc", False, "; ".join(bad) + " (floor: none)")
    return Check("ecc", True, "no uncorrected errors or remaps" if seen else "not reported by these GPUs",
                 judged=seen)


def throttle_reasons(mask: int) -> list[str]:
    return [name for bit, name in THROTTLE_BITS.items() if mask & bit]


def check_throttle(facts: dict) -> Check:
    readings = [("under load", (facts.get("under_load") or {}).get("throttle") or {}),
                ("idle", facts.get("throttle") or {})]
    bad, seen = [], False
    for when, got in readings:
        field_name = got.get("field", "clocks_event_reasons.active")
        for i, row in enumerate(got.get("rows") or []):
            mask = _int(row.get(field_name))
            if mask is None:
                continue
            seen = True
            if mask & THROTTLE_FAILS:
                names = ", ".join(throttle_reasons(mask & THROTTLE_FAILS))
                bad.append(f"GPU {i} {when}: {names} ({mask:#x})")
    if bad:
        return Check("throttle", False, "; ".join(dict.fromkeys(bad)) +
                     " (floor: no HW slowdown, thermal slowdown or power brake)")
    return Check("throttle", True, "no slowdown" if seen else "not reported", judged=seen)


def check_pcie(facts: dict) -> Check:
    under = (facts.get("under_load") or {}).get("pcie") or {}
    rows, when = (under.get("rows"), "under load") if under.get("rows") else (_rows(facts, "pcie"), "idle")
    bad, seen = [], []
    for i, row in enumerate(rows or []):
        gen, gen_max = _int(row.get("pcie.link.gen.current")), _int(row.get("pcie.link.gen.max"))
        width, width_max = _int(row.get("pcie.link.width.current")), _int(row.get("pcie.link.width.max"))
        if None in (gen, gen_max, width, width_max):
            continue
        seen.append(f"Gen{gen} x{width}")
        if gen < gen_max or width < width_max:
            bad.append(f"GPU {i}: Gen{gen} x{width} {when} (floor: its max, Gen{gen_max} x{width_max})")
    if bad:
        return Check("pcie", False, "; ".join(bad))
    if not seen:
        return Check("pcie", True, "not reported", judged=False)
    return Check("pcie", True, f"{', '.join(sorted(set(seen)))} {when}")


def check_driver(facts: dict) -> Check:
    load = facts.get("load") or {}
    rows = _rows(facts, "basic")
    driver = rows[0].get("driver_version") if rows else None
    driver_cuda = _version(facts.get("driver_cuda"))
    torch_cuda = _version(load.get("torch_cuda"))
    said = f"driver {driver or '?'} (CUDA {facts.get('driver_cuda') or '?'})"
    if driver_cuda is None:
        return Check("driver", True, f"{said}: CUDA version not reported", judged=False)
    if driver_cuda < MIN_DRIVER_CUDA:
        return Check("driver", False, f"{said} (floor: CUDA {'.'.join(map(str, MIN_DRIVER_CUDA))})")
    if torch_cuda is not None and not facts.get("stand_in") and driver_cuda[0] < torch_cuda[0]:
        return Check("driver", False, f"{said} is older than torch {load.get('torch')}'s CUDA "
                                      f"{load.get('torch_cuda')} (floor: CUDA {torch_cuda[0]}.x)")
    if load.get("cuda") is False and rows and not facts.get("stand_in"):
        return Check("driver", False, f"{said}: torch {load.get('torch')} does not see the GPUs")
    return Check("driver", True, f"{said}, torch {load.get('torch') or '?'}"
                                 + (f" (CUDA {load['torch_cuda']})" if load.get("torch_cuda") else ""))


def check_shm(facts: dict) -> Check:
    shm = facts.get("shm_bytes")
    if shm is None:
        return Check("shm", False, f"no /dev/shm (floor: {MIN_SHM_BYTES // 1024 ** 2} MB)")
    said = f"/dev/shm {shm / 1024 ** 2:.0f} MB"
    if shm < MIN_SHM_BYTES:
        return Check("shm", False, f"{said} (floor: {MIN_SHM_BYTES // 1024 ** 2} MB; a container "
                                   "needs --shm-size or --ipc=host)")
    return Check("shm", True, said)


def check_disk(facts: dict) -> Check:
    free = int(facts.get("free_disk_bytes") or 0)
    said = f"{free / 1024 ** 3:.1f} GB free"
    if free < MIN_FREE_DISK_BYTES:
        return Check("disk", False, f"{said} (floor: {MIN_FREE_DISK_BYTES // 1024 ** 3} GB)")
    return Check("disk", True, said)


def matmul_floor(gpu_name: str) -> float | None:
    expected = EXPECTED_BF16_TFLOPS.get(normalize_gpu_name(gpu_name))
    return None if expected is None else expected * MATMUL_FLOOR


def check_matmul(facts: dict, expect: Expectation) -> Check:
    load = facts.get("load") or {}
    rates = [r for r in load.get("matmul_tflops") or [] if isinstance(r, (int, float))]
    if not rates:
        return Check("matmul", False, f"the load test did not run: {load.get('error', 'no result')}")
    slowest = min(rates)
    which = rates.index(slowest)
    if load.get("device") == "cpu":
        said = f"{slowest * 1000:.2f} GFLOP/s fp32 on the CPU (no CUDA: a CPU stands in for the GPUs)"
        floor, unit = CPU_MATMUL_FLOOR_TFLOPS, f"{CPU_MATMUL_FLOOR_TFLOPS * 1000:g} GFLOP/s"
    else:
        said = f"{slowest:.0f} TFLOP/s bf16 on GPU {which} (slowest of {len(rates)})"
        floor = matmul_floor(expect.gpu_name)
        if floor is None:
            return Check("matmul", True, f"{said}; no reference rate for {expect.gpu_name}",
                         judged=False)
        unit = f"{floor:.0f} TFLOP/s"
    if slowest < floor:
        return Check("matmul", False, f"{said} (floor: {unit})")
    return Check("matmul", True, f"{said} (floor: {unit})")


def check_h2d(facts: dict) -> Check | None:
    load = facts.get("load") or {}
    rate = load.get("h2d_gbps")
    if load.get("device") != "cuda" or not isinstance(rate, (int, float)):
        return None
    link = _rows(facts, "pcie")
    gen, width = (_int(link[0].get("pcie.link.gen.max")), _int(link[0].get("pcie.link.width.max"))) \
        if link else (None, None)
    if gen in LANE_GBPS and width:
        floor = LANE_GBPS[gen] * width * H2D_FLOOR
        basis = f"{H2D_FLOOR:g} x Gen{gen} x{width}"
    else:
        floor, basis = H2D_FLOOR_UNKNOWN_LINK_GBPS, "link not reported"
    said = f"{rate:.1f} GB/s pinned to GPU 0 (floor: {floor:.1f} GB/s, {basis})"
    return Check("h2d", rate >= floor, said)


def check_allreduce(facts: dict, expect: Expectation) -> Check | None:
    load = facts.get("load") or {}
    got = load.get("allreduce")
    if load.get("device") != "cuda" or (load.get("gpus") or 0) < 2 or got is None:
        return None
    if "error" in got:
        return Check("allreduce", False, f"NCCL all_reduce failed: {got['error']}")
    busbw = float(got.get("busbw_gbps") or 0.0)
    said = f"{busbw:.0f} GB/s bus bandwidth over {load['gpus']} GPUs ({got.get('bytes', 0) / 1e9:.1f} GB)"
    published = ALLREDUCE_BUSBW.get((normalize_gpu_name(expect.gpu_name), int(load["gpus"])))
    if published is None:
        return Check("allreduce", True, f"{said}; no published rate for this machine", judged=False)
    floor = published * ALLREDUCE_FLOOR
    return Check("allreduce", busbw >= floor, f"{said} (floor: {floor:.0f} GB/s, "
                                              f"{ALLREDUCE_FLOOR:g} x {published:.0f})")


def judge(facts: dict, expect: Expectation) -> list[Check]:
    """Every check on the probe's facts, in the order a person reads them."""
    checks = [check_gpus(facts, expect), check_ecc(facts), check_throttle(facts),
              check_pcie(facts), check_driver(facts), check_shm(facts), check_disk(facts)]
    if "load" in facts:
        checks += [c for c in (check_matmul(facts, expect), check_h2d(facts),
                               check_allreduce(facts, expect)) if c is not None]
    return checks


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
