"""What gpubench predicts the suite will do on one GPU of this machine's type, from
published figures and datasheets alone (no record of any run), written down before
the suite measures it.

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

from gpubench.predict.advise import Config, Work, predict
from gpubench.predict.memory import need
from gpubench.predict.subject import NoSubject, suite_subject
from gpubench.providers.common import Offer
from workload_suite import gpu_plan, precision_args

PREDICTION_FILE = "prediction.json"


def predictions(gpu: str, memory_gb: float | None) -> list[dict]:
    extra = {"gpu_total_ram_gb": memory_gb} if memory_gb else {}
    offer = Offer("this-machine", "-", gpu, 1, 0.0, extra=extra)
    rows = []
    for workload, _, args in gpu_plan(1):
        if workload == "allreduce":          # one GPU: no link to predict
            continue
        wargs = (*args, *precision_args(gpu, workload, args))
        try:
            subject = suite_subject(workload, wargs, [])
        except NoSubject as e:
            rows.append({"workload": workload, "args": list(wargs), "left_out": str(e)})
            continue
        p = predict(subject, Config(offer, 1, 1, 0.0), [], Work(1.0, "1 unit"))
        memory, held = None, None
        if subject.shape is not None:       # what one GPU holds: the state, plus activations where known
            m = need(subject.shape, subject.strategy, 1, subject.activations)
            memory = m.total(max(subject.memory_batch, 1)) or m.static_bytes
            held = "state and activations" if subject.activations is not None else "state only"
        rows.append({"workload": workload, "args": list(wargs), "precision": subject.precision,
                     "memory_bytes": memory, "memory_holds": held,
                     "unit": subject.unit, "throughput": p.throughput, "uncertainty": p.uncertainty,
                     "basis": p.basis, "bound_by": p.bound_by, "sources": list(p.sources),
                     "left_out": p.left_out})
    return rows


def line(row: dict) -> str:
    if row.get("throughput") is None:
        return f"{row['workload']:<11} no prediction: {row['left_out']}"
    tp, u = row["throughput"], row["uncertainty"]
    bound = f", bound by {row['bound_by']}" if row.get("bound_by") else ""
    if row.get("memory_bytes"):
        bound += f", {row['memory_bytes'] / 2**30:.2f} GiB a GPU ({row['memory_holds']})"
    return (f"{row['workload']:<11} {row['precision']:<5} {tp:,.0f} {row['unit']} ±{u:.0%} "
            f"({tp * (1 - u):,.0f}-{tp * (1 + u):,.0f}){bound}; {row['basis']}: {row['sources'][0]}")


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
         "from": "published figures and datasheets only (no record)", "rows": rows}, indent=1) + "\n")
    print(f"predicted for 1x {args.gpu} before measuring (published figures and datasheets only):")
    for row in rows:
        print("  " + line(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
