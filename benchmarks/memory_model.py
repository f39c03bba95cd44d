"""The memory model (gpubench/predict/memory.py) beside what gpt-ddp and gpt-fsdp hold,
at 1 and 2 processes, at GPT sizes this machine can train.

    python benchmarks/memory_model.py                       # tiny and 125M-wide, on the CPU with gloo
    python benchmarks/memory_model.py --sizes tiny --procs 1,2

For each run: the bytes one process keeps from step to step (parameters, gradients and
AdamW's states, its shards under FSDP: the record's train_state_bytes_per_process) set
beside the model's static part for that strategy and count, and the process's peak
memory (on a CPU its peak RSS, which also holds Python, torch and its libraries; on a
GPU what torch allocated) beside the model's static part plus its activations. FSDP's
gathered blocks are a step's transient buffers: the model counts them in the peak, not
in what is kept. Every run goes through gpubench's own launcher (torchrun --standalone).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from gpubench import suite
from gpubench.launch.base import SweepPoint
from gpubench.launch.local import LocalLauncher
from gpubench.predict import gpt_size
from gpubench.predict.memory import need
from gpubench.store.results import ResultsStore, new_run_id
from gpubench.sweep.run import SweepPlan, run_sweep

# --n-layer, --n-head, --n-embd, --block-size, --vocab-size, --batch-size
SIZES = {
    "tiny": ["--n-layer", "2", "--n-head", "4", "--n-embd", "128", "--block-size", "64",
             "--vocab-size", "4096", "--batch-size", "2"],
    # GPT-3 Small's blocks (125M with GPT-2's vocabulary) at short sequences
    "125M": ["--params", "125M", "--block-size", "128", "--batch-size", "1"],
}
STEPS = ["--steps", "3", "--warmup", "1"]
MIB = 2 ** 20


def predicted(workload: str, args: list[str], procs: int) -> tuple[float, float, float]:
    """(kept bytes, static bytes, static + activations) a process, by the memory model."""
    size = gpt_size.gpt_size(workload, tuple(args))
    strategy = "FSDP" if workload == "gpt-fsdp" else "DDP"
    m = need(gpt_size.shape(size), strategy, procs, gpt_size.activations(size))
    kept = m.static_bytes - m.parts.get("gathered blocks", 0.0)
    return kept, m.static_bytes, m.total(size.batch_size) or m.static_bytes


def mib(n: float | None) -> str:
    return "n/a" if n is None else f"{n / MIB:,.1f}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default=",".join(SIZES), help=f"comma-separated, of {', '.join(SIZES)}")
    p.add_argument("--procs", default="1,2", help="process counts")
    p.add_argument("--results", type=Path, default=None, help="keep the records here")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds allowed per run")
    args = p.parse_args(argv)
    sizes = args.sizes.split(",")
    unknown = [s for s in sizes if s not in SIZES]
    if unknown:
        print(f"error: unknown size(s): {', '.join(unknown)} (known: {', '.join(SIZES)})", file=sys.stderr)
        return 2
    counts = [int(c) for c in args.procs.split(",")]

    launcher = LocalLauncher()
    rows = []
    with tempfile.TemporaryDirectory(prefix="gpubench-memory-") as tmp:
        store = ResultsStore.for_writing(args.results or Path(tmp))
        run_id = new_run_id()
        for size in sizes:
            for workload in ("gpt-ddp", "gpt-fsdp"):
                wargs = [*SIZES[size], *STEPS]
                plan = SweepPlan(suite.resolve(workload), [SweepPoint(1, n) for n in counts], wargs, run_id,
                                 args.timeout, invocation="benchmarks/memory_model.py")
                for r in run_sweep(launcher, plan, store, lambda line: None):
                    rows.append((size, workload, r, predicted(workload, SIZES[size], r["gpu_count"])))
                    print(f"  {size} {workload} x{r['gpu_count']}: {r['status']}", flush=True)

    print(f"\n{'size':<5} {'workload':<8} {'procs':>5} {'kept MiB':>9} {'model':>9} {'ratio':>6} "
          f"{'params MiB':>10} {'peak MiB':>9} {'model static+act':>16}  peak is")
    for size, workload, r, (kept, static, total) in rows:
        if r["status"] != "ok":
            print(f"{size:<5} {workload:<8} {r['gpu_count']:>5} FAILED: {r.get('error')}")
            continue
        measured = r.get("train_state_bytes_per_process")
        peak = r.get("peak_memory_bytes") if r.get("device") == "cuda" else r.get("process_peak_rss_bytes")
        ratio = f"{measured / kept:.3f}" if measured else "n/a"
        print(f"{size:<5} {workload:<8} {r['gpu_count']:>5} {mib(measured):>9} {mib(kept):>9} {ratio:>6} "
              f"{mib(r.get('param_bytes_per_process')):>10} {mib(peak):>9} {mib(total):>16}  "
              f"{r.get('peak_memory_kind')}")
    print("\nkept: parameters + gradients + AdamW states one process holds between steps (measured) "
          "beside the memory model's static part without FSDP's gathered blocks; ratio = measured / model.")
    if any(r.get("device") != "cuda" for _, _, r, _ in rows):
        print("On a CPU the peak is the process's RSS: Python, torch and gloo's buffers come on top of "
              "the tensors, and glibc keeps freed memory, so it is not the model's figure.")
    return 0 if all(r["status"] == "ok" for _, _, r, _ in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
