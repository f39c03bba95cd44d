"""What gpubench predicts the suite will do on one GPU of this machine's type, written
down before the suite measures it: `gpubench predict`'s model (each step's operations
at the card's datasheet rates, with the constants gpubench ships, fitted to earlier
reference runs), no record of this machine's runs.

    python benchmarks/gpu_check_predict.py --gpu "NVIDIA H200" --memory-gb 141 --out DIR

The workloads and arguments are workload_suite.py's GPU plan (its precision included),
so each prediction has a measurement to stand beside. Writes DIR/prediction.json and
prints one line per workload: throughput, its interval, the basis and the source.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from gpubench.predict import gpu_specs
from gpubench.predict.subject import NoSubject, suite_subject
from gpubench.predict.verdict import verdict
from workload_suite import gpu_plan, precision_args

PREDICTION_FILE = "prediction.json"


def predictions(gpu: str, memory_gb: float | None) -> list[dict]:
    spec = gpu_specs.spec_for(gpu, memory_gb)
    rows = []
    for workload, _, args in gpu_plan(1):
        if workload == "allreduce":          # one GPU: no link to predict
            continue
        wargs = (*args, *precision_args(gpu, workload, args))
        if spec is None:
            rows.append({"workload": workload, "args": list(wargs), "throughput": None,
                         "left_out": f"{gpu}: no datasheet row"})
            continue
        try:
            subject = suite_subject(workload, wargs, [])
        except NoSubject as e:
            rows.append({"workload": workload, "args": list(wargs), "throughput": None, "left_out": str(e)})
            continue
        rows.append({**verdict(subject, spec, 1, 1, []), "precision": subject.precision})
    return rows


def line(row: dict) -> str:
    if row.get("throughput") is None:
        return f"{row['workload']:<11} no prediction: {row['left_out']}"
    bound = f", bound by {row['bound_by']}" if row.get("bound_by") else ""
    if row.get("memory_bytes"):
        bound += f", {row['memory_bytes'] / 2**30:.2f} GiB a GPU at its peak"
    return (f"{row['workload']:<11} {row['precision']:<5} {row['throughput']:,.0f} {row['unit']} {row['interval']} "
            f"({row['low']:,.0f}-{row['high']:,.0f}){bound}; {row['sources'][0]}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gpu", required=True, help="the GPU's name, as nvidia-smi or torch gives it")
    p.add_argument("--memory-gb", type=float, default=None, help="its memory (picks between sizes of one model)")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    rows = predictions(args.gpu, args.memory_gb)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / PREDICTION_FILE).write_text(json.dumps(
        {"gpu": args.gpu, "memory_gb": args.memory_gb, "written_at": time.time(),
         "from": "the step model with its shipped constants (no record of this machine)", "rows": rows},
        indent=1) + "\n")
    print(f"predicted for 1x {args.gpu} before measuring (the step model, no record of this machine):")
    for row in rows:
        print("  " + line(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
