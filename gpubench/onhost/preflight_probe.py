"""The preflight probe that runs on a rented machine: it gathers facts and judges
none of them (gpubench/lifecycle/preflight_checks.py holds every floor).

Standard library only, apart from the torch it looks for: gpubench copies this
file to ~/.gpubench-preflight/probe.py on the machine and runs

    python3 probe.py gate '{"load": true, "hold_s": 1.5}'

which prints one line "@gpubench-preflight {json}". What it gathers:
- nvidia-smi --query-gpu, one group of fields per call (a driver that does not know
  one field refuses the whole query): names, UUIDs, driver; uncorrected ECC errors
  and row remaps; the active clock-event (throttle) reasons; the PCIe link, current
  and max. The throttle reasons and the link are read again while the load test
  holds every GPU busy: an idle link trains down, and a hot card throttles only when
  worked.
- the CUDA version the driver supports (nvidia-smi's header) and `nvidia-smi topo -m`;
- /dev/shm and free disk;
- the load test, in a child process with torch (`probe.py load ARGS`): a bf16 matrix
  product on each GPU, a pinned host-to-device copy, and on several GPUs an NCCL
  all_reduce, one process per GPU (`probe.py allreduce RANK WORLD PORT BYTES`).
  Without CUDA (the mock cloud's CPU machines) the product runs in fp32 on the CPU
  and the result says so.
"""

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time

MARK = "@gpubench-preflight "
LOAD_MARK = "@load "
HOLD_MARK = "@hold"
SMI_TIMEOUT_S = 20
LOAD_TIMEOUT_S = 90

QUERIES = {
    "basic": "index,name,uuid,driver_version,memory.total",
    "ecc": "ecc.errors.uncorrected.volatile.total",
    "remap": "remapped_rows.pending,remapped_rows.failure",
    "pcie": "pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max",
}
# Named clocks_throttle_reasons.active on drivers before 535.
THROTTLE_FIELDS = ("clocks_event_reasons.active", "clocks_throttle_reasons.active")


def mock_fault():
    """The check a mock cloud machine is told to fail (its bad-host fault), for the two
    facts the mock cannot make true for real: the size of /dev/shm and a slow card."""
    return os.environ.get("GPUBENCH_MOCK_BAD_HOST", "")


def smi(args):
    """(exit code, output) of nvidia-smi; (None, why) when it cannot run."""
    try:
        done = subprocess.run(["nvidia-smi"] + args, capture_output=True, text=True,
                              timeout=SMI_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError) as e:
        return None, str(e)[:200]
    return done.returncode, (done.stdout if done.returncode == 0 else (done.stdout + done.stderr))


def query(fields):
    """Rows of {field: text} for one --query-gpu, or {"error": ...}."""
    code, text = smi(["--query-gpu=" + fields, "--format=csv,noheader,nounits"])
    if code != 0:
        return {"error": (text.strip().splitlines() or ["exit code %s" % code])[-1][:200]}
    names = fields.split(",")
    rows = []
    for line in text.splitlines():
        if line.strip():
            rows.append(dict(zip(names, [v.strip() for v in line.split(",")])))
    return {"rows": rows}


def throttle():
    for name in THROTTLE_FIELDS:
        got = query(name)
        if "rows" in got:
            got["field"] = name
            return got
    return got


def gpu_facts():
    facts = {"nvidia_smi": bool(shutil.which("nvidia-smi"))}
    if not facts["nvidia_smi"]:
        return facts
    for group, fields in QUERIES.items():
        facts[group] = query(fields)
    facts["throttle"] = throttle()
    code, text = smi([])
    found = re.search(r"CUDA Version:\s*([0-9.]+)", text or "") if code == 0 else None
    facts["driver_cuda"] = found.group(1) if found else None
    code, text = smi(["topo", "-m"])
    facts["topology"] = text.strip()[:4000] if code == 0 else None
    return facts


def disk_facts():
    shm = shutil.disk_usage("/dev/shm").total if os.path.isdir("/dev/shm") else None
    if mock_fault() == "small-shm":
        shm = 64 * 1024 ** 2     # Docker's default, which the mock cannot make real
    return {"shm_bytes": shm, "free_disk_bytes": shutil.disk_usage(os.path.expanduser("~")).free}


def gate(args):
    started = time.monotonic()
    facts = {"hostname": socket.gethostname(), "python": sys.version.split()[0],
             "stand_in": bool(os.environ.get("GPUBENCH_MOCK_INSTANCE"))}
    facts.update(gpu_facts())
    facts.update(disk_facts())
    if args.get("load", True):
        facts["load"], facts["under_load"] = load_with_readings(args)
    facts["seconds"] = round(time.monotonic() - started, 2)
    print(MARK + json.dumps(facts, sort_keys=True), flush=True)


def load_with_readings(args):
    """Run the load test in a child; while it holds the GPUs busy, read the throttle
    reasons and the PCIe link again."""
    under = {}
    cmd = [sys.executable, os.path.abspath(__file__), "load", json.dumps(args)]
    try:
        child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    except OSError as e:
        return {"error": str(e)[:200]}, under
    deadline = time.monotonic() + LOAD_TIMEOUT_S
    result, tail = None, []
    try:
        for line in child.stdout:
            line = line.rstrip("\n")
            if line == HOLD_MARK and shutil.which("nvidia-smi"):
                under = {"pcie": query(QUERIES["pcie"]), "throttle": throttle()}
            elif line.startswith(LOAD_MARK):
                result = json.loads(line[len(LOAD_MARK):])
            elif line.strip():
                tail = (tail + [line])[-3:]
            if time.monotonic() > deadline:
                child.kill()
                break
        child.wait(timeout=10)
    except subprocess.TimeoutExpired:
        child.kill()
    if result is None:
        result = {"error": (tail or ["the load test stopped without a result"])[-1][:300]}
    return result, under


# ---------------------------------------------------------------------------- load test

def load(args):
    """The torch half: prints "@hold" while it keeps every GPU busy, then "@load {json}"."""
    out = {}
    try:
        import torch
    except Exception as e:    # a broken install says more than ImportError
        print(LOAD_MARK + json.dumps({"error": "torch: " + (str(e).splitlines() or [""])[0][:200]}))
        return
    out["torch"] = torch.__version__
    out["torch_cuda"] = torch.version.cuda
    out["cuda"] = bool(torch.cuda.is_available())
    if out["cuda"]:
        out.update(cuda_load(torch, args))
    else:
        out.update(cpu_load(torch, args))
    print(LOAD_MARK + json.dumps(out), flush=True)


def timed_matmul(torch, device, n, dtype, iters, sync):
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    for _ in range(3):
        a @ b
    sync()
    start = time.perf_counter()
    for _ in range(iters):
        a @ b
    sync()
    seconds = time.perf_counter() - start
    return 2.0 * n ** 3 * iters / seconds / 1e12


def cuda_load(torch, args):
    n_gpus = torch.cuda.device_count()
    out = {"device": "cuda", "gpus": n_gpus}
    try:
        out["nccl"] = ".".join(str(v) for v in torch.cuda.nccl.version())
    except Exception:
        out["nccl"] = None
    n = int(args.get("matmul_n", 8192))
    rates = []
    for d in range(n_gpus):
        dev = torch.device("cuda", d)
        rates.append(timed_matmul(torch, dev, n, torch.bfloat16, int(args.get("matmul_iters", 20)),
                                  lambda: torch.cuda.synchronize(dev)))
    out["matmul_tflops"] = rates
    out["matmul_dtype"] = "bf16"
    size = int(args.get("copy_bytes", 256 * 1024 ** 2))
    host = torch.empty(size, dtype=torch.uint8, pin_memory=True)
    dev0 = torch.empty(size, dtype=torch.uint8, device="cuda:0")
    dev0.copy_(host, non_blocking=True)
    torch.cuda.synchronize(0)
    start = time.perf_counter()
    for _ in range(5):
        dev0.copy_(host, non_blocking=True)
    torch.cuda.synchronize(0)
    out["h2d_gbps"] = 5 * size / (time.perf_counter() - start) / 1e9
    del host, dev0
    hold(torch, [torch.device("cuda", d) for d in range(n_gpus)], n, float(args.get("hold_s", 1.5)),
         lambda: [torch.cuda.synchronize(d) for d in range(n_gpus)])
    if n_gpus > 1 and args.get("allreduce", True):
        out["allreduce"] = run_allreduce(n_gpus, int(args.get("allreduce_bytes", 1024 ** 3)))
    return out


def hold(torch, devices, n, seconds, sync):
    """Keep every device busy for `seconds` while the parent reads nvidia-smi."""
    mats = [(torch.randn(n, n, device=d, dtype=torch.bfloat16 if d.type == "cuda" else torch.float32),
             torch.randn(n, n, device=d, dtype=torch.bfloat16 if d.type == "cuda" else torch.float32))
            for d in devices]
    print(HOLD_MARK, flush=True)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for a, b in mats:
            for _ in range(4):
                a @ b
        sync()


def cpu_load(torch, args):
    """The mock's machines have no GPU: the product runs on the CPU, in fp32, small."""
    n = int(args.get("cpu_matmul_n", 256))
    rate = timed_matmul(torch, torch.device("cpu"), n, torch.float32, 20, lambda: None)
    if mock_fault() == "slow-matmul":
        rate /= 1e5          # a slow card, which the mock's CPU cannot be made into
    hold(torch, [torch.device("cpu")], n, min(float(args.get("hold_s", 1.5)), 0.5), lambda: None)
    return {"device": "cpu", "gpus": 0, "nccl": None, "matmul_tflops": [rate],
            "matmul_dtype": "fp32", "h2d_gbps": None}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_allreduce(world, size):
    """Bus bandwidth of an NCCL all_reduce over every GPU (nccl-tests' busbw: algbw x
    2(n-1)/n), the slowest rank's time; {"error": ...} when it cannot run."""
    port = str(free_port())
    procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "allreduce", str(rank),
                               str(world), port, str(size)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for rank in range(world)]
    outputs = []
    for p in procs:
        try:
            outputs.append(p.communicate(timeout=LOAD_TIMEOUT_S)[0])
        except subprocess.TimeoutExpired:
            p.kill()
            outputs.append("timed out")
    times = []
    for text in outputs:
        found = re.search(r"^@seconds ([0-9.e+-]+)$", text, re.M)
        if not found:
            return {"error": (text.strip().splitlines() or ["no output"])[-1][:200]}
        times.append(float(found.group(1)))
    seconds = max(times)
    return {"bytes": size, "seconds": seconds,
            "busbw_gbps": size / seconds / 1e9 * 2 * (world - 1) / world}


def allreduce(rank, world, port, size):
    import torch
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world)
    x = torch.ones(size // 2, dtype=torch.bfloat16, device="cuda")
    for _ in range(3):
        dist.all_reduce(x)
    torch.cuda.synchronize()
    iters = 10
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(x)
    torch.cuda.synchronize()
    print("@seconds %r" % ((time.perf_counter() - start) / iters), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    role = sys.argv[1] if len(sys.argv) > 1 else "gate"
    if role == "load":
        load(json.loads(sys.argv[2]))
    elif role == "allreduce":
        allreduce(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5]))
    else:
        gate(json.loads(sys.argv[2]) if len(sys.argv) > 2 else {})
