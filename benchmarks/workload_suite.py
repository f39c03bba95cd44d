"""Run the standard workload suite on whatever this machine has and print each
workload's figures next to published ones for the same GPU and precision.

    python benchmarks/workload_suite.py                      # GPUs if present, else a small CPU run
    python benchmarks/workload_suite.py --results results/   # keep the records (JSON Lines)
    python benchmarks/workload_suite.py --only gpt-ddp,allreduce

On GPUs the workloads run at their real sizes (ResNet-50 at 224x224, GPT-2
small at 1024 tokens, all_reduce up to 1 GB) on one GPU, and all_reduce on all
of them; on a CPU they run tiny versions at 1 and 2 gloo processes, which
checks the plumbing, not the speed. Every run goes through gpubench's own
launcher (torchrun --standalone), as `gpubench run` does.

Before the workloads, benchmarks/device_ceilings.py measures what this device
delivers to a bare matrix product and a bare copy; GPT's model TFLOP/s is set
beside that as well as beside the datasheet peak (MFU). With --results the
ceilings are kept next to the records, in device-ceilings.json. Where
nccl-tests' all_reduce_perf is installed (on PATH or in $NCCL_TESTS_DIR), an
allreduce over 2 or more GPUs is set beside it on the same GPUs and sizes.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import nccl_tests
from gpubench import suite
from gpubench.launch.local import LocalLauncher, torch_python
from gpubench.store.results import ResultsStore, new_run_id
from gpubench.launch.base import SweepPoint
from gpubench.sweep.run import SweepPlan, run_sweep


# --------------------------------------------------------------------------- published figures
@dataclass(frozen=True)
class Reference:
    workload: str
    metric: str           # the record field (or derived figure) compared
    gpu: str              # regular expression on the upper-cased GPU name
    precision: str | None  # None: any
    value: float
    label: str            # how the figure reads in the table
    source: str


REFERENCES = (
    # The seeds: pytorch/examples mnist/main.py on Colab, one epoch "about 25 seconds vs
    # 2 mins 30 seconds, if you have a Tesla T4 GPU" (the CPU figure is Colab's CPU).
    Reference("mnist-ddp", "epoch_seconds", r"\bT4\b", None, 25.0, "T4 epoch 25 s",
              "seeds: pytorch/examples MNIST, 1 epoch on a Colab T4 (with its DataLoader)"),
    Reference("mnist-ddp", "epoch_seconds", r"^CPU$", None, 150.0, "CPU epoch 150 s",
              "seeds: the same on Colab's CPU"),
    # NVIDIA DeepLearningExamples, PyTorch/Classification/ConvNets/resnet50v1.5/README.md,
    # "Training performance results" (pytorch-21.03 NGC container, DALI, 1 GPU):
    # DGX A100 80GB: TF32 938 img/s, mixed precision 2470 img/s;
    # DGX-1 V100 16GB: FP32 367 img/s, mixed precision 1200 img/s.
    # Our fp32 on Ampere and newer runs convolutions in TF32 (cudnn.allow_tf32 defaults on).
    Reference("resnet-ddp", "images_per_s_per_gpu", r"A100", "fp32", 938.0, "A100 TF32 938 img/s",
              "NVIDIA DeepLearningExamples RN50 v1.5 PyTorch, A100 80GB, TF32"),
    Reference("resnet-ddp", "images_per_s_per_gpu", r"A100", "bf16", 2470.0, "A100 AMP 2,470 img/s",
              "NVIDIA DeepLearningExamples RN50 v1.5 PyTorch, A100 80GB, AMP"),
    Reference("resnet-ddp", "images_per_s_per_gpu", r"A100", "fp16", 2470.0, "A100 AMP 2,470 img/s",
              "NVIDIA DeepLearningExamples RN50 v1.5 PyTorch, A100 80GB, AMP"),
    Reference("resnet-ddp", "images_per_s_per_gpu", r"V100", "fp32", 367.0, "V100 FP32 367 img/s",
              "NVIDIA DeepLearningExamples RN50 v1.5 PyTorch, V100 16GB, FP32"),
    Reference("resnet-ddp", "images_per_s_per_gpu", r"V100", "fp16", 1200.0, "V100 AMP 1,200 img/s",
              "NVIDIA DeepLearningExamples RN50 v1.5 PyTorch, V100 16GB, AMP"),
    # Lambda's deeplearning-benchmark v2 (NGC pytorch:24.10, NVIDIA DLE ResNet-50, synthetic
    # data, AMP fp16, batch 1280 a GPU; pytorch-train-throughput-v2-fp16.csv, medians of the
    # runs 2024-08 to 2025-12): 1x H100 SXM 2,790 img/s (39 runs), 1x H200 3,079. The H200 is
    # the H100's chip with more and faster memory, so both figures are set beside an H200.
    # v1 (fp32 with TF32, batch 640): 1x H100 SXM 1,753 img/s.
    Reference("resnet-ddp", "images_per_s_per_gpu", r"H100.*(SXM|HBM3)|H200", "bf16", 2790.0,
              "H100 SXM AMP 2,790 img/s", "Lambda deeplearning-benchmark v2, 1x H100 SXM, fp16 AMP, bs 1280"),
    Reference("resnet-ddp", "images_per_s_per_gpu", r"H200", "bf16", 3079.0, "H200 AMP 3,079 img/s",
              "Lambda deeplearning-benchmark v2, 1x H200, fp16 AMP, bs 1280"),
    Reference("resnet-ddp", "images_per_s_per_gpu", r"H100.*(SXM|HBM3)|H200", "fp32", 1753.0,
              "H100 SXM TF32 1,753 img/s", "Lambda deeplearning-benchmark v1, 1x H100 SXM, TF32, bs 640"),
    # nanoGPT README, "efficiency notes": bench.py (GPT-2 124M, 12 x 1024 tokens, bf16)
    # goes from ~250 ms/iter to 135 ms/iter with torch.compile, on the A100s the README's
    # runs use. 12*1024/0.135 = 91,022 tokens/s; x 854,770,176 FLOP/token (6N + 12LHQT)
    # = 77.8 TFLOP/s = 24.9% of the A100's 312 bf16 TFLOP/s.
    # MFU is a share of each card's own peak, so it is set beside any GPU's.
    Reference("gpt-ddp", "mfu", r".", "bf16", 0.249, "nanoGPT A100 bf16 MFU 24.9%",
              "nanoGPT README: bench.py 135 ms/iter compiled, A100, bf16 (MFU derived)"),
)


def references_for(workload: str) -> list[Reference]:
    return [r for r in REFERENCES if r.workload == workload]


def matches(ref: Reference, record: dict) -> bool:
    return bool(re.search(ref.gpu, str(record.get("device_name") or record.get("gpu_name")).upper())) \
        and ref.precision in (None, record.get("precision"))


# --------------------------------------------------------------------------- the runs
def gpu_plan(gpus: int) -> list[tuple[str, list[int], list[str]]]:
    """Real sizes: the workloads' defaults, bf16 where the GPU computes it (T4: fp16)."""
    return [
        ("mnist-ddp", [1], []),  # one epoch
        ("resnet-ddp", [1], ["--steps", "50", "--warmup", "10"]),
        ("resnet-ddp", [1], ["--steps", "30", "--warmup", "10", "--precision", "fp32"]),  # TF32 convolutions
        ("gpt-ddp", [1], ["--steps", "30", "--warmup", "5", "--compile"]),
        # FSDP2's CUDA path (meta-device init, bf16 policy) and its memory at a size DDP also holds
        ("gpt-fsdp", [1], ["--params", "350M", "--steps", "10", "--warmup", "3"]),
        ("recsys-ddp", [1], ["--steps", "300"]),
        ("allreduce", [gpus], []),
    ]


def cpu_plan() -> list[tuple[str, list[int], list[str]]]:
    """Tiny sizes for a CPU: minutes, not hours, at 1 and 2 gloo processes."""
    return [
        ("mnist-ddp", [1, 2], ["--steps", "30"]),
        ("resnet-ddp", [1, 2], ["--steps", "10", "--depth", "18", "--width", "16",
                                "--image-size", "64", "--batch-size", "16"]),
        ("gpt-ddp", [1, 2], ["--steps", "10", "--n-layer", "2", "--n-head", "4", "--n-embd", "128",
                             "--block-size", "128", "--vocab-size", "4096", "--batch-size", "4"]),
        ("recsys-ddp", [1, 2], ["--steps", "100"]),
        ("allreduce", [2], ["--steps", "5", "--max-bytes", str(16 << 20)]),
    ]


def precision_args(gpu_name: str, workload: str, given: list[str] = ()) -> list[str]:
    """bf16 for the tensor-core workloads (fp16 on a T4 or V100), unless `given` names one."""
    if workload not in ("resnet-ddp", "gpt-ddp", "gpt-fsdp") or "--precision" in given:
        return []
    return ["--precision", "fp16" if re.search(r"\bT4\b|V100", gpu_name.upper()) else "bf16"]


# --------------------------------------------------------------------------- the table
def figures(record: dict) -> dict[str, float | None]:
    tp = record.get("throughput") or 0.0
    out = {
        "throughput": tp,
        "epoch_seconds": record["epoch_samples"] / tp if tp and record.get("epoch_samples") else None,
        "images_per_s_per_gpu": tp / record["world_size"] if tp else None,
        "mfu": record.get("mfu"),
    }
    return out


def describe(record: dict) -> str:
    w = record["workload"]
    tp = record.get("throughput") or 0.0
    unit = record.get("throughput_unit", "")
    if record.get("status") != "ok":
        return f"FAILED: {record.get('error')}"
    if w == "mnist-ddp":
        return f"{tp:,.0f} {unit}, epoch {record['epoch_samples'] / tp:.2f} s"
    if w == "resnet-ddp":
        return f"{tp:,.0f} {unit} ({tp / record['world_size']:,.0f}/GPU) {record['model']}"
    if w in ("gpt-ddp", "gpt-fsdp"):
        mfu = f"{record['mfu']:.1%}" if record.get("mfu") is not None else "n/a"
        peak = record.get("peak_memory_bytes") or record.get("process_peak_rss_bytes")
        held = f", peak {peak / 2**30:.2f} GiB ({record.get('peak_memory_kind')})" if peak else ""
        return (f"{tp:,.0f} tokens/s, {record['model_tflops_per_gpu']:.2f} TFLOP/s/GPU, MFU {mfu} "
                f"({record['params'] / 1e6:.1f}M params{held})")
    if w == "recsys-ddp":
        return f"{tp:,.0f} {unit}, epoch {record['epoch_samples'] / tp:.2f} s"
    if w == "allreduce" and record.get("no_bandwidth"):
        return record["no_bandwidth"]                      # one process: no figure to give
    if w == "allreduce":
        return (f"peak busbw {record['peak_busbw']:.2f} GB/s at {record['peak_busbw_size']:,} B, "
                f"algbw {record['peak_algbw']:.2f} GB/s")
    return f"{tp:,.1f} {unit}"


# --------------------------------------------------------------------------- this device's ceilings
CEILINGS_SCRIPT = Path(__file__).resolve().parent / "device_ceilings.py"
CEILINGS_FILE = "device-ceilings.json"


def measure_ceilings(timeout: float = 600.0) -> dict | None:
    """benchmarks/device_ceilings.py in its own process, so this one never holds a
    CUDA context while the workloads run; None (with a line saying why) if it fails."""
    try:
        out = subprocess.run([torch_python(), str(CEILINGS_SCRIPT), "--json"],
                             capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError) as e:
        print(f"device ceilings not measured: {e}", file=sys.stderr)
        return None
    if out.returncode != 0:
        tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
        print(f"device ceilings not measured: {tail}", file=sys.stderr)
        return None
    return json.loads(out.stdout)


def rate(value: float) -> str:
    return f"{value:,.1f}" if value >= 10 else f"{value:.3f}"


def ceiling_line(record: dict, ceilings: dict | None) -> str | None:
    """GPT's model TFLOP/s over the matrix-product rate measured on the same device
    at the same precision: how much of what the card delivers here the model gets."""
    if not ceilings or record["workload"] != "gpt-ddp" or record.get("status") != "ok":
        return None
    if record.get("precision") != ceilings["matmul_dtype"] or record.get("tf32"):
        return None
    achieved = record.get("model_tflops_per_gpu")
    if not achieved:
        return None
    return (f"model TFLOP/s / measured {ceilings['matmul_dtype']} matrix product = "
            f"{achieved / ceilings['matmul_tflops']:.1%} "
            f"({rate(ceilings['matmul_tflops'])} TFLOP/s, device_ceilings.py)")


# --------------------------------------------------------------------------- nccl-tests
NCCL_TESTS_FILE = "nccl-tests-all_reduce_perf.txt"


def compare_with_nccl_tests(records: list[dict], directory: Path | None) -> dict[int, str]:
    """For each allreduce record over 2 or more GPUs, all_reduce_perf's figures on the
    same GPUs and sizes, as a line for the table (keyed by the record's GPU count)."""
    lines: dict[int, str] = {}
    for r in records:
        if r["workload"] != "allreduce" or r.get("status") != "ok":
            continue
        if r["world_size"] < 2:
            lines[r["gpu_count"]] = "nccl-tests: not compared (one GPU has no bus to measure)"
            continue
        if r.get("device") != "cuda":
            lines[r["gpu_count"]] = "nccl-tests: not compared (gloo on a CPU; nccl-tests measures NCCL)"
            continue
        binary = nccl_tests.find_binary()
        if binary is None:
            lines[r["gpu_count"]] = ("nccl-tests: not compared (no all_reduce_perf on PATH "
                                     "or in $NCCL_TESTS_DIR)")
            continue
        try:
            text = nccl_tests.run_all_reduce_perf(binary, r["world_size"], r["min_bytes"],
                                                  r["max_bytes"])
            rows = nccl_tests.parse_output(text)
        except nccl_tests.NcclTestsError as e:
            lines[r["gpu_count"]] = f"nccl-tests: not compared ({e})"
            continue
        if directory is not None:
            (directory / NCCL_TESTS_FILE).write_text(text)
        lines[r["gpu_count"]] = nccl_tests.comparison_line(r["curve"], rows)
    return lines


def print_table(records: list[dict], ceilings: dict | None = None,
                nccl_lines: dict[int, str] | None = None) -> None:
    print()
    if ceilings:
        print(f"device ceilings ({ceilings['device_name']}): {ceilings['matmul_dtype']} "
              f"{ceilings['matmul_n']}^3 matrix product {rate(ceilings['matmul_tflops'])} TFLOP/s, "
              f"copy {rate(ceilings['copy_gb_per_s'])} GB/s (medians of {ceilings['repeats']})")
    print(f"{'workload':<11} {'gpus':>4} {'precision':<9} measured")
    for r in records:
        print(f"{r['workload']:<11} {r['gpu_count']:>4} {r.get('precision', ''):<9} {describe(r)}")
        if r["workload"] == "allreduce" and nccl_lines and r["gpu_count"] in nccl_lines:
            print(f"{'':<26}   {nccl_lines[r['gpu_count']]}")
        if r.get("status") != "ok" or r["gpu_count"] != 1:
            continue
        measured = figures(r)
        refs = references_for(r["workload"])
        same = [ref for ref in refs if matches(ref, r)]
        for ref in same:
            value = measured.get(ref.metric)
            ratio = f"{value / ref.value:.2f}" if value else "n/a"
            print(f"{'':<26}   measured / published = {ratio} ({ref.label})  [{ref.source}]")
        against_device = ceiling_line(r, ceilings)
        if against_device:
            print(f"{'':<26}   {against_device}")
        others = sorted({ref.label for ref in refs} - {ref.label for ref in same})
        if others:
            print(f"{'':<26}   published for other GPUs/precisions: {'; '.join(others)}")
        if r.get("gpu_sampling") == "nvml":
            print(f"{'':<26}   GPU util mean {r['gpu_util_pct_mean'] or 0:.0f}% "
                  f"(peak {r['gpu_util_pct_peak'] or 0:.0f}%), power mean "
                  f"{r['gpu_power_w_mean'] or 0:.0f} W, peak allocated "
                  f"{(r.get('peak_memory_bytes') or 0) / 2**30:.1f} GiB")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--results", type=Path, default=None,
                   help="keep the records in this directory (default: a temporary one)")
    p.add_argument("--only", default=None, help="comma-separated workloads to run")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds allowed per run")
    p.add_argument("--no-ceilings", action="store_true",
                   help="skip measuring the device's matrix-product rate and copy bandwidth")
    args = p.parse_args(argv)

    launcher = LocalLauncher()
    machine = launcher.machine()
    on_gpu = machine.accelerator == "cuda" and machine.gpu_count > 0
    plan = gpu_plan(machine.gpu_count) if on_gpu else cpu_plan()
    if args.only:
        wanted = set(args.only.split(","))
        unknown = wanted - set(suite.suite_names())
        if unknown:
            print(f"error: unknown workload(s): {', '.join(sorted(unknown))}", file=sys.stderr)
            return 2
        plan = [step for step in plan if step[0] in wanted]
    print(f"machine: {machine.instance_type} ({machine.gpu_name}); "
          f"{'real sizes' if on_gpu else 'tiny sizes on the CPU: plumbing, not speed'}")

    ceilings = None if args.no_ceilings else measure_ceilings()
    with tempfile.TemporaryDirectory(prefix="gpubench-suite-") as tmp:
        directory = args.results or Path(tmp)
        directory.mkdir(parents=True, exist_ok=True)
        if ceilings and args.results:
            (directory / CEILINGS_FILE).write_text(json.dumps(ceilings, indent=1, sort_keys=True) + "\n")
        store = ResultsStore.for_writing(directory)
        run_id = new_run_id()
        records: list[dict] = []
        for name, counts, extra in plan:
            wargs = [*extra, *(precision_args(machine.gpu_name, name, extra) if on_gpu else [])]
            sweep = SweepPlan(suite.resolve(name), [SweepPoint(1, n) for n in counts], wargs, run_id, args.timeout,
                              invocation="benchmarks/workload_suite.py")
            records += run_sweep(launcher, sweep, store, lambda line: None)
            print(f"  {name}: {', '.join(r['status'] for r in records[-len(counts):])}", flush=True)
        nccl_lines = compare_with_nccl_tests(records, directory if args.results else None)
        print_table(records, ceilings, nccl_lines)
        if args.results:
            print(f"\nrecords: {directory}/{run_id}.jsonl")
    return 0 if all(r["status"] == "ok" for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
