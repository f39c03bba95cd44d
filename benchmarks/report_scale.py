"""How `gpubench report` grows with the size of the results history.

Writes synthetic histories of 10k, 100k and 1M result records (shaped like the
records a sweep appends: every field, a few failed runs, older-schema records,
repeats of one configuration, a provider with no price), then times the
report on each: the first load (every file parsed; from 64 MB of records on,
the column cache is written too), the next load (from the cache), and
computing the report from the loaded columns.

    .venv/bin/python benchmarks/report_scale.py                 # 10k 100k 1M
    .venv/bin/python benchmarks/report_scale.py --sizes 10000,100000 --keep DIR

Each history is written once into --keep DIR (or a temporary directory) and
reused on the next call with the same sizes.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# (workload, unit, epoch size, samples/s of one GPU on an H100 at fp32)
WORKLOADS = [
    ("mnist-ddp", "samples/s", 60_000, 25_000.0),
    ("resnet50", "samples/s", 1_281_167, 1_300.0),
    ("gpt", "tokens/s", 9_000_000_000, 180_000.0),
]
# (provider, instance type, gpu name, $/h of one GPU or None, relative speed)
MACHINES = [
    ("lambda", "gpu_8x_h100_sxm5", "NVIDIA H100 80GB HBM3", 2.99, 1.0),
    ("lambda", "gpu_8x_a100", "NVIDIA A100-SXM4-40GB", 1.29, 0.45),
    ("vast", "8x RTX 4090", "NVIDIA GeForce RTX 4090", 0.40, 0.35),
    ("runpod", "8x H100 SXM", "NVIDIA H100 80GB HBM3", 2.69, 0.97),
    ("runpod", "8x A100 PCIe", "NVIDIA A100 80GB PCIe", None, 0.42),  # no price on record
    ("local", "local", "cpu", 0.0, 0.002),
]
COUNTS = [1, 2, 4, 8]


def make_record(rng: random.Random, i: int, run_id: str, when: float) -> dict:
    workload, unit, epoch, base = WORKLOADS[i % len(WORKLOADS)]
    provider, instance, gpu, price, speed = MACHINES[(i // len(WORKLOADS)) % len(MACHINES)]
    count = COUNTS[(i // (len(WORKLOADS) * len(MACHINES))) % len(COUNTS)]
    precision = "bf16" if (i // 97) % 3 == 0 else "fp32"
    throughput = base * speed * count * (0.92 ** (count.bit_length() - 1)) * rng.uniform(0.97, 1.03)
    steps = 200
    wall = steps * 64 * count / throughput
    status = "failed" if rng.random() < 0.02 else "ok"
    record = {
        "schema_version": 1, "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when)),
        "workload": workload, "status": status,
        "error": "torchrun exited with code 1: NCCL error" if status == "failed" else None,
        "host": f"node-{i % 17}", "gpu_name": gpu, "device_name": gpu, "device": "cuda",
        "world_size": count, "nodes": 1, "backend": "nccl", "precision": precision,
        "compiled": False, "batch_per_gpu": 64, "global_batch": 64 * count, "warmup_steps": 10,
        "steps": steps, "samples": steps * 64 * count, "epoch_samples": epoch,
        "wall_seconds": wall, "median_step_s": wall / steps, "p90_step_s": wall / steps * 1.05,
        "throughput": throughput if status == "ok" else None, "throughput_unit": unit,
        "threads_per_process": 8, "workload_argv": ["--steps", str(steps), "--batch-size", "64"],
        "peak_memory_bytes": 2_000_000_000, "torch_version": "2.13.0", "cuda_version": "12.8",
        "driver_version": "570.86.15", "python_version": "3.11.2",
        "run_id": run_id, "provider": provider, "instance_type": instance, "gpu_count": count,
        "price_per_hour": None if price is None else price * count,
        "instance_price_per_hour": None if price is None else price * 8,
        "launch_command": f"torchrun --standalone --nproc_per_node={count} {workload}.py",
        "invocation": f"gpubench run {workload} --gpus 1,2,4,8", "process_seconds": wall + 4.0,
        "controller_host": "laptop",
    }
    record["cost"] = None if price is None else price * count * wall / 3600.0
    if i % 50 == 7:  # an older record: no schema version, fields under their old names
        for new, old in (("gpu_count", "gpus"), ("throughput", "samples_per_s"),
                         ("price_per_hour", "price"), ("time", "timestamp")):
            record[old] = record.pop(new)
        record["timestamp"] = when
        del record["schema_version"]
    return record


def write_history(directory: Path, n: int, per_file: int, seed: int = 0) -> None:
    """n records in files of per_file records each, one file per run."""
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    start = 1_700_000_000.0
    for f in range(0, n, per_file):
        run_id = f"run-{f // per_file:07d}"
        lines = [json.dumps(make_record(rng, i, run_id, start + i * 60.0), sort_keys=True)
                 for i in range(f, min(n, f + per_file))]
        (directory / f"{run_id}.jsonl").write_text("\n".join(lines) + "\n")


def time_report(directory: Path) -> tuple[float, float, float, float]:
    """Seconds to load the records into the report's columns the first time (every
    file parsed, the column cache written: wall clock and CPU) and the next time
    (from the cache), and to compute the report."""
    from gpubench.report.cache import cache_file, load_frame_cached
    from gpubench.report.compute import build_report
    from gpubench.store.results import ResultsStore

    store = ResultsStore.existing(directory)
    cache_file(directory).unlink(missing_ok=True)
    t0, c0 = time.perf_counter(), time.process_time()
    load_frame_cached(store)
    t1, c1 = time.perf_counter(), time.process_time()
    frame = load_frame_cached(store).frame
    t2 = time.perf_counter()
    build_report(frame)
    t3 = time.perf_counter()
    return t1 - t0, c1 - c0, t2 - t1, t3 - t2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--per-file", type=int, default=200,
                        help="records per run file [200: a long sweep over many workloads]")
    parser.add_argument("--keep", type=Path, help="keep the histories here and reuse them")
    args = parser.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="gpubench-scale-"))
    # The column cache goes beside the histories, not into the user's state directory.
    os.environ["GPUBENCH_STATE_DIR"] = str(base / "state")
    try:
        # On a shared machine the wall clock includes waiting for a core: cpu s shows the work.
        print(f"{'records':>10} {'files':>6} {'MB':>6} | {'load s':>7} {'cpu s':>6} {'cached s':>8} "
              f"{'report s':>8} | {'first s':>7} {'next s':>7}")
        for n in (int(s) for s in args.sizes.split(",")):
            directory = base / f"{n}-{args.per_file}"
            if not directory.is_dir():
                write_history(directory, n, args.per_file)
            files = list(directory.glob("*.jsonl"))
            megabytes = sum(f.stat().st_size for f in files) / 1e6
            first, cpu, cached, report_s = time_report(directory)
            print(f"{n:>10} {len(files):>6} {megabytes:>6.0f} | {first:>7.2f} {cpu:>6.2f} {cached:>8.2f} "
                  f"{report_s:>8.2f} | {first + report_s:>7.2f} {cached + report_s:>7.2f}", flush=True)
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
