"""The preflight gate's judgement: every floor in one place, and the checks that hold
the facts preflight_probe.py gathered on the machine against them (preflight.py runs
the probe and keeps the verdict):

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

from dataclasses import dataclass

from gpubench.providers.gpus import gpu_matches, normalize_gpu_name

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


# -- reading nvidia-smi's answers ---------------------------------------------------

def parse_csv(text: str, fields: str) -> list[dict]:
    """nvidia-smi --query-gpu=FIELDS --format=csv,noheader,nounits as rows of {field: text}."""
    names = fields.split(",")
    return [dict(zip(names, (v.strip() for v in line.split(","))))
            for line in text.splitlines() if line.strip()]


def fact_rows(facts: dict, group: str) -> list[dict]:
    """The rows of one of the probe's nvidia-smi queries (`group`: "basic", "pcie", ...)."""
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
    names = [r.get("name", "") for r in fact_rows(facts, "basic")]
    if len(names) != expect.gpu_count:
        return Check("gpus", False, f"{len(names)} GPU(s) seen, {expect.gpu_count} paid for")
    wrong = [f"GPU {i} is {n}" for i, n in enumerate(names)
             if expect.gpu_name and not (gpu_matches(expect.gpu_name, n) or gpu_matches(n, expect.gpu_name))]
    if wrong:
        return Check("gpus", False, f"{', '.join(wrong)}; paid for {expect.gpu_name}")
    return Check("gpus", True, f"{len(names)}x {names[0] if names else '-'}")


def check_ecc(facts: dict) -> Check:
    bad, seen = [], False
    for i, row in enumerate(fact_rows(facts, "ecc")):
        n = _int(row.get("ecc.errors.uncorrected.volatile.total"))
        seen |= n is not None
        if n:
            bad.append(f"GPU {i}: {n} uncorrected ECC error(s)")
    for i, row in enumerate(fact_rows(facts, "remap")):
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
    rows, when = (under.get("rows"), "under load") if under.get("rows") else (fact_rows(facts, "pcie"), "idle")
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
    rows = fact_rows(facts, "basic")
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
    link = fact_rows(facts, "pcie")
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
