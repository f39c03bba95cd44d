"""The stand-in `nvidia-smi` on a mock instance's PATH: it answers, from the GPUs the
instance advertises, the queries gpubench makes (the preflight gate, the environment
check, GPU sampling) and the ones people type (`nvidia-smi`, `-L`, `topo -m`).

Standard library only; run as `python nvidia_smi.py CONFIG.json ARGS...` by the
wrapper sshhost.py writes. CONFIG holds the GPU name as nvidia-smi spells it, the
count, their memory, and `bad`: the preflight check this instance fails (the mock's
bad-host fault), which shows here as a real card would show it. Figures only a real
GPU has (utilisation, power, temperature) answer [N/A], and a sampling loop (-l, -lms)
is refused: a CPU stands in for the GPUs.
"""

import json
import sys
import uuid

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


def query(cfg, args):
    if option(args, "-lms") is not None or option(args, "-l") is not None:
        # a sampling loop: there is no GPU to sample, and a record must not say there was
        print("nvidia-smi (gpubench mock): no GPU to sample: a CPU stands in for the GPUs",
              file=sys.stderr)
        return 6
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
