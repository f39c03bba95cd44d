"""The stand-in `nvidia-smi` on a mock instance's PATH: it answers, from the GPUs the
instance advertises, the queries gpubench makes (the preflight gate, the environment
check, GPU sampling) and the ones people type (`nvidia-smi`, `-L`, `topo -m`).

Standard library only; run as `python nvidia_smi.py CONFIG.json ARGS...` by the
wrapper sshhost.py writes. CONFIG holds the GPU name as nvidia-smi spells it, the
count, their memory, and `bad`: the preflight check this instance fails (the mock's
bad-host fault), which shows here as a real card would show it. Figures only a real
GPU has (utilisation, memory in use, power, temperature) answer [N/A], in a sampling
loop (-l, -lms) too, which answers every interval until it is stopped or its reader is
gone: a record says no figure was sampled, a live view shows every GPU without one.

`--query-compute-apps` lists the processes of this instance (GPUBENCH_MOCK_INSTANCE=
CONFIG's seed, which its sessions export) that say they use a GPU: those whose
environment carries GPUBENCH_MOCK_GPU=<index>[,<index>...], a test's stand-in for a
process holding the device (a "ghost" is a `sleep` started so). Their GPU memory is
[N/A], a figure only a real GPU has.
"""

import json
import os
import sys
import time
import uuid

MOCK_DEVICE_VAR = "GPUBENCH_MOCK_GPU"

DRIVER = ("550.54.15", "12.4")
OLD_DRIVER = ("470.256.02", "11.4")    # before 535: no clocks_event_reasons.active


def gpu_rows(cfg):
    bad = cfg.get("bad") or ""
    driver = OLD_DRIVER if bad == "old-driver" else DRIVER
    rows = []
    for i in range(int(cfg["count"])):
        first = i == 0                  # the bad-host fault spoils GPU 0
        reasons = "0x0000000000000040" if bad == "throttle" and first else "0x0000000000000001"
        row = {
            "index": str(i), "count": str(cfg["count"]), "name": cfg["name"],
            "uuid": "GPU-" + str(uuid.uuid5(uuid.NAMESPACE_OID, f"{cfg['seed']}-{i}")),
            "driver_version": driver[0], "pci.bus_id": f"00000000:{0x18 + i:02X}:00.0",
            "memory.total": str(int(cfg.get("memory_mib", 81559))), "memory.used": "[N/A]",
            "memory.free": "[N/A]", "utilization.gpu": "[N/A]", "power.draw": "[N/A]",
            "temperature.gpu": "[N/A]",
            "ecc.errors.uncorrected.volatile.total": "2" if bad == "ecc" and first else "0",
            "ecc.errors.uncorrected.aggregate.total": "2" if bad == "ecc" and first else "0",
            "remapped_rows.pending": "Yes" if bad == "ecc" and first else "No",
            "remapped_rows.failure": "No",
            "clocks_throttle_reasons.active": reasons,
            "pcie.link.gen.current": "4", "pcie.link.gen.max": "4",
            "pcie.link.width.current": "4" if bad == "pcie-x4" and first else "16",
            "pcie.link.width.max": "16",
        }
        if bad != "old-driver":
            row["clocks_event_reasons.active"] = reasons
        rows.append(row)
    return rows, driver


def option(args, name):
    for i, a in enumerate(args):
        if a == name and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    return None


def interval_s(args):
    """A sampling loop's interval (-lms MS or -l S), or None for one answer."""
    for name, scale in (("-lms", 1000.0), ("-l", 1.0)):
        value = option(args, name)
        if value is not None:
            try:
                return max(float(value) / scale, 0.05)
            except ValueError:
                return 1.0
    return None


def query(cfg, args):
    every = interval_s(args)
    if every is None:
        return answer(cfg, args)
    while True:   # as the real one: until it is stopped, or nobody reads it
        try:
            code = answer(cfg, args)
            sys.stdout.flush()
        except BrokenPipeError:
            return 0
        if code:
            return code
        time.sleep(every)


def answer(cfg, args):
    rows, _ = gpu_rows(cfg)
    fields = [f.strip() for f in option(args, "--query-gpu").split(",") if f.strip()]
    for f in fields:
        if rows and f not in rows[0]:
            print(f'Field "{f}" is not a valid field to query.', file=sys.stderr)
            return 2
    only = option(args, "-i") or option(args, "--id")
    if only is not None:
        wanted = {w.strip() for w in only.split(",")}
        rows = [r for r in rows if r["index"] in wanted or r["uuid"] in wanted]
    form = option(args, "--format") or ""
    if "noheader" not in form:
        print(", ".join(fields))
    for r in rows:
        print(", ".join(r[f] for f in fields))
    return 0


def _environ(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    return dict(item.decode("utf-8", "replace").split("=", 1)
                for item in raw.split(b"\0") if b"=" in item)


def _exited(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return True
    return stat[stat.rfind(")") + 2:][:1] in ("Z", "X")


def app_rows(cfg):
    """One row per (process, GPU) of this instance's processes marked as using a GPU."""
    gpus = {r["index"]: r for r in gpu_rows(cfg)[0]}
    rows = []
    for entry in sorted((e for e in os.listdir("/proc") if e.isdigit()), key=int):
        env = _environ(entry)
        if not env or env.get("GPUBENCH_MOCK_INSTANCE") != cfg["seed"] \
                or MOCK_DEVICE_VAR not in env or _exited(entry):
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                name = f.read().split(b"\0")[0].decode("utf-8", "replace")
        except OSError:
            continue
        for index in env[MOCK_DEVICE_VAR].split(","):
            gpu = gpus.get(index.strip())
            if gpu is not None:
                rows.append({"pid": entry, "process_name": name, "gpu_uuid": gpu["uuid"],
                             "gpu_name": gpu["name"], "gpu_bus_id": gpu["pci.bus_id"],
                             "used_memory": "[N/A]", "used_gpu_memory": "[N/A]"})
    return rows


def query_apps(cfg, args):
    fields = [f.strip() for f in option(args, "--query-compute-apps").split(",") if f.strip()]
    known = ("pid", "process_name", "gpu_uuid", "gpu_name", "gpu_bus_id", "used_memory",
             "used_gpu_memory")
    for f in fields:
        if f not in known:
            print(f'Field "{f}" is not a valid field to query.', file=sys.stderr)
            return 2
    form = option(args, "--format") or ""
    if "noheader" not in form:
        print(", ".join(fields))
    for r in app_rows(cfg):
        print(", ".join(r[f] for f in fields))
    return 0


def table(cfg):
    rows, (driver, cuda) = gpu_rows(cfg)
    bar = "+" + "-" * 89 + "+"
    print(bar)
    print(f"| NVIDIA-SMI {driver:<22} Driver Version: {driver:<14} CUDA Version: {cuda:<8}|")
    print(f"| {'gpubench mock: a CPU stands in for these GPUs':<88}|")
    print(bar)
    for r in rows:
        print(f"| {r['index']:>3}  {r['name']:<40} {r['pci.bus_id']}   {r['memory.total']:>6}MiB   "
              f"{'':<13}|")
    print(bar)
    return 0


def topology(cfg):
    n = int(cfg["count"])
    print("\t" + "\t".join(f"GPU{i}" for i in range(n)) + "\tCPU Affinity\tNUMA Affinity")
    for i in range(n):
        cells = ["X" if i == j else "NODE" for j in range(n)]
        print(f"GPU{i}\t" + "\t".join(cells) + "\t0-1\t0")
    return 0


def main(argv):
    with open(argv[0]) as f:
        cfg = json.load(f)
    args = argv[1:]
    if any(a.startswith("--query-gpu") for a in args):
        return query(cfg, args)
    if any(a.startswith("--query-compute-apps") for a in args):
        return query_apps(cfg, args)
    if args[:1] in (["-L"], ["--list-gpus"]):
        for r in gpu_rows(cfg)[0]:
            print(f"GPU {r['index']}: {r['name']} (UUID: {r['uuid']})")
        return 0
    if args[:2] == ["topo", "-m"]:
        return topology(cfg)
    if not args:
        return table(cfg)
    print(f"nvidia-smi (gpubench mock): unsupported arguments: {' '.join(args)}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
