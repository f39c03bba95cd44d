"""Users' scripts, unchanged, predicted by `gpubench predict` before they are measured
through `gpubench run` on one GPU: what the model says of a script against what it did.

    python benchmarks/gpu_scripts.py predict --nanogpt DIR --examples DIR --gpu "H100 SXM" [--gpu ...] --out FILE
    python benchmarks/gpu_scripts.py measure --nanogpt DIR --examples DIR --predicted FILE --out DIR [--minutes 3]
                                             [--only nanogpt-b12,...]
    python benchmarks/gpu_scripts.py lightning-example        # docs/running.md's, on stdout

The scripts, from --nanogpt (karpathy/nanoGPT) and --examples (pytorch/examples, its mnist/
and imagenet/ folders), each run in a scratch copy with the data it reads made up:

  nanogpt-b12   nanoGPT's train.py, eager, batch 12 x 1024 tokens, bf16, 60 iterations
                (synthetic OpenWebText tokens)
  nanogpt-b24   the same at batch 24
  mnist         pytorch/examples' mnist main.py --epochs 1 (synthetic MNIST IDX files in
                ../data), ended after 300 training steps
  imagenet      pytorch/examples' imagenet main.py --dummy -a resnet18 (FakeData, batch 256,
                4 DataLoader workers), ended after 60 steps
  lightning     docs/running.md's Lightning example

`predict` writes, for each --gpu (a name gpubench knows) and each script, what
`gpubench predict SCRIPT --gpu G --gpus 1 --format json` says, with the command and when:
the calibration runs on this machine's CPU, CUDA emulated. Written and kept before the
scripts are measured (results/reference/scripts-predicted.json).

`measure` runs each script through `gpubench run SCRIPT --gpus 1 --repeat 1 [--max-steps N]`
on this machine's CUDA GPU and writes DIR/scripts.json (each script's prediction for this
card beside its record: the step, the throughput, inside the predicted interval or not, the
memory) and DIR/scripts-records.jsonl; it prints the table benchmarks/README.md keeps. A
script whose card --predicted has no prediction for is predicted here first, with the GPU
hidden from the calibration (CUDA_VISIBLE_DEVICES=""), and says so. Without CUDA it checks
its plumbing: each script but nanoGPT's (train.py under torchrun sets a CUDA device) at a
tiny size on the CPU, its figures answering nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

import nanogpt_scratch  # noqa: E402  (this folder's)


@dataclass(frozen=True)
class UserScript:
    """One script as it is run: where it comes from, its arguments on a GPU and in the
    CPU's plumbing check, and where gpubench ends it."""

    key: str
    label: str
    source: str                       # nanoGPT, mnist, imagenet or lightning
    args: tuple[str, ...]             # on a GPU, and as predicted
    cpu_args: tuple[str, ...] | None  # the CPU form; None: not run on a CPU
    max_steps: int | None = None      # run --max-steps (the script would run for long)
    cpu_max_steps: int | None = None


SCRIPTS = (
    UserScript("nanogpt-b12", "nanoGPT train.py, batch 12 x 1024, bf16, eager", "nanoGPT",
               (*nanogpt_scratch.TRAIN_ARGS, "--batch_size=12"), None),
    UserScript("nanogpt-b24", "nanoGPT train.py, batch 24 x 1024, bf16, eager", "nanoGPT",
               (*nanogpt_scratch.TRAIN_ARGS, "--batch_size=24"), None),
    UserScript("mnist", "pytorch/examples mnist main.py, batch 64", "mnist", ("--epochs", "1"),
               ("--epochs", "1", "--no-accel"), max_steps=300, cpu_max_steps=20),
    UserScript("imagenet", "pytorch/examples imagenet main.py --dummy -a resnet18, batch 256", "imagenet",
               ("--dummy", "-a", "resnet18"), ("--dummy", "-a", "resnet18", "-b", "4", "--workers", "1"),
               max_steps=60, cpu_max_steps=6),
    UserScript("lightning", "docs/running.md's Lightning example, batch 64", "lightning", (), ()),
)


def lightning_example() -> str:
    """The manual's Lightning script (docs/running.md), as a user would copy it."""
    text = (REPO / "docs" / "running.md").read_text().split("A PyTorch Lightning script follows", 1)[1]
    found = re.search(r"```python\n(.*?)```", text, re.S)
    if found is None:
        raise SystemExit("docs/running.md: no Lightning example after 'A PyTorch Lightning script follows'")
    return found.group(1)


def _idx(path: Path, array) -> None:
    """An MNIST IDX file (unsigned bytes): magic 0x08 and its rank, the sizes big-endian."""
    with open(path, "wb") as f:
        f.write(struct.pack(">I", 0x0800 + array.ndim) + struct.pack(f">{array.ndim}I", *array.shape))
        f.write(array.tobytes())


def synthetic_mnist(raw: Path) -> None:
    """Where torchvision's MNIST('../data') looks before it downloads: random images and
    labels of MNIST's sizes (it checks that the files exist, not what they hold)."""
    import numpy as np

    raw.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for prefix, count in (("train", 60_000), ("t10k", 10_000)):
        _idx(raw / f"{prefix}-images-idx3-ubyte", rng.integers(0, 256, (count, 28, 28), dtype=np.uint8))
        _idx(raw / f"{prefix}-labels-idx1-ubyte", rng.integers(0, 10, (count,), dtype=np.uint8))


def lay_out(script: UserScript, nanogpt: Path | None, examples: Path | None, scratch: Path) -> Path:
    """The script in a scratch folder with the data it reads; its path."""
    where = scratch / script.key
    if script.source == "nanoGPT":
        if nanogpt is None:
            raise LookupError("no --nanogpt checkout")
        return nanogpt_scratch.scratch(nanogpt, where)
    if script.source == "lightning":
        where.mkdir(parents=True, exist_ok=True)
        (where / "lightning_example.py").write_text(lightning_example())
        return where / "lightning_example.py"
    if examples is None:
        raise LookupError("no --examples checkout")
    shutil.copytree(examples / script.source, where / script.source)
    if script.source == "mnist":
        synthetic_mnist(where / "data" / "MNIST" / "raw")    # main.py reads ../data
    return where / script.source / "main.py"


def gpubench_env(scratch: Path) -> dict:
    """gpubench's state (the calibrations it keeps) and config in the scratch folder."""
    return {**os.environ, "GPUBENCH_STATE_DIR": str(scratch / "state"), "GPUBENCH_CONFIG_DIR": str(scratch / "config")}


def predict_one(script: UserScript, path: Path, gpu: str, env: dict, timeout: float) -> dict:
    """What `gpubench predict` says of the script on one `gpu` (its JSON row), with the command."""
    command = ["gpubench", "predict", f"./{path.name}", "--gpu", gpu, "--gpus", "1", "--format", "json",
               *(["--", *script.args] if script.args else [])]
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", *command], cwd=path.parent, capture_output=True, text=True,
                          env=env, timeout=timeout)
    took = time.monotonic() - started
    shown = f"(cd {script.source} && {shlex.join(command)})"
    try:
        row = json.loads(done.stdout)[0]
    except (ValueError, IndexError):
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"key": script.key, "gpu": gpu, "command": shown, "error": last}
    return {"key": script.key, "label": script.label, "gpu": row["gpu"], "command": shown,
            "predicted_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "seconds": round(took, 1),
            **{k: row[k] for k in ("unit", "throughput", "low", "high", "step_seconds", "memory_bytes",
                                   "bound_by", "sources")}}


def predict_main(args: argparse.Namespace) -> int:
    rows, failed = [], 0
    with tempfile.TemporaryDirectory(prefix="gpubench-scripts-") as tmp:
        scratch = Path(tmp)
        env = gpubench_env(scratch)
        for script in args.scripts:
            path = lay_out(script, args.nanogpt, args.examples, scratch)
            for gpu in args.gpu:
                row = predict_one(script, path, gpu, env, timeout=900)
                failed += "error" in row
                print(_prediction_line(row), flush=True)
                rows.append(row)
    args.out.write_text(json.dumps({"made_on": _machine(), "torch": _torch_version(), "predictions": rows},
                                   indent=1) + "\n")
    return 1 if failed else 0


def _prediction_line(row: dict) -> str:
    if "error" in row:
        return f"{row['key']:<12} {row['gpu']:<9} no prediction: {row['error']}"
    return (f"{row['key']:<12} {row['gpu']:<9} {row['step_seconds'] * 1e3:8.2f} ms a step, "
            f"{row['throughput']:,.0f} {row['unit']} ({row['low']:,.0f}-{row['high']:,.0f}), "
            f"{row['memory_bytes'] / 2**30:.2f} GiB, bound by {row['bound_by']}"
            + (f" (predicted in {row['seconds']:.0f} s)" if "seconds" in row else ""))


def _machine() -> str:
    import platform

    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def _torch_version() -> str:
    try:
        import torch
    except ImportError:
        return "absent"
    return torch.__version__


@dataclass
class Measured:
    """One script's run through gpubench: its record, or why there is none."""

    command: str
    record: dict | None
    error: str | None
    seconds: float


def measure_one(script: UserScript, path: Path, cuda: bool, env: dict, timeout: float) -> Measured:
    results = path.parent / "gpubench-results"
    steps = script.max_steps if cuda else script.cpu_max_steps
    argv = script.args if cuda else script.cpu_args
    command = ["gpubench", "run", f"./{path.name}", "--gpus", "1", "--repeat", "1",
               *(["--max-steps", str(steps)] if steps else []), "--results", "gpubench-results", "--quiet",
               *(["--", *argv] if argv else [])]
    shown = f"(cd {script.source} && {shlex.join(command)})"
    started = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-m", *command], cwd=path.parent, capture_output=True, text=True,
                              env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return Measured(shown, None, f"no record within {timeout:.0f} s", time.monotonic() - started)
    took = time.monotonic() - started
    records = [json.loads(line) for f in results.glob("*.jsonl") for line in f.read_text().splitlines()]
    if not records:
        last = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        return Measured(shown, None, last, took)
    record = records[-1]
    return Measured(shown, record, record.get("error") if record.get("status") != "ok" else None, took)


def compared(script: UserScript, predicted: dict | None, measured: Measured) -> dict:
    """The prediction beside the measurement, as scripts.json keeps it."""
    record = measured.record or {}
    row = {"key": script.key, "label": script.label, "measure_command": measured.command,
           "measure_seconds": round(measured.seconds, 1), "error": measured.error,
           "predicted": predicted, "measured": {k: record.get(k) for k in (
               "status", "throughput", "throughput_unit", "median_step_s", "p10_step_s", "p90_step_s", "steps",
               "ended_after_steps", "gpu_mem_used_bytes_peak", "gpu_util_pct_mean", "launch_command")}}
    step = record.get("median_step_s")
    if predicted and "error" not in predicted and step and not measured.error:
        row["measured_over_predicted_step"] = step / predicted["step_seconds"]
        # the interval is of the throughput: the prediction's work a step over the measured step
        work = predicted["throughput"] * predicted["step_seconds"]
        row["inside_interval"] = predicted["low"] <= work / step <= predicted["high"]
    return row


def table(rows: list[dict], measured_on: str) -> list[str]:
    lines = [f"| script ({measured_on}) | predicted step | measured step (p10-p90) | measured / predicted | "
             "predicted throughput (interval) | measured | inside | predicted memory | GPU memory used | bound by |",
             "|---|---:|---:|---:|---|---:|---|---:|---:|---|"]
    for row in rows:
        p, m = row["predicted"] or {}, row["measured"]
        if row["error"] or "step_seconds" not in p:
            why = row["error"] or p.get("error") or "no prediction"
            lines.append(f"| {row['label']} | - | - | - | - | - | - | - | - | {why} |")
            continue
        spread = (f" ({m['p10_step_s'] * 1e3:.1f}-{m['p90_step_s'] * 1e3:.1f})"
                  if m.get("p10_step_s") and m.get("p90_step_s") else "")
        used = m.get("gpu_mem_used_bytes_peak")   # nvidia-smi's, the CUDA context included
        lines.append(
            f"| {row['label']} | {p['step_seconds'] * 1e3:.1f} ms | {m['median_step_s'] * 1e3:.1f} ms{spread} | "
            f"{row['measured_over_predicted_step']:.2f} | {p['throughput']:,.0f} {p['unit']} "
            f"({p['low']:,.0f}-{p['high']:,.0f}) | {m['throughput']:,.0f} {m['throughput_unit']} | "
            f"{'yes' if row['inside_interval'] else 'no'} | {p['memory_bytes'] / 2**30:.2f} GiB | "
            f"{f'{used / 2**30:.2f} GiB' if used else '-'} | {p['bound_by']} |")
    return lines


class Clock:
    """What is left of --minutes."""

    def __init__(self, minutes: float) -> None:
        self.deadline = time.monotonic() + minutes * 60

    def left(self) -> float:
        return self.deadline - time.monotonic()


def measure_main(args: argparse.Namespace) -> int:
    import torch

    from gpubench.predict import gpu_specs

    cuda = torch.cuda.is_available()
    if cuda:
        props = torch.cuda.get_device_properties(0)
        spec = gpu_specs.spec_for(props.name, props.total_memory / 1e9)
        device, card = props.name, (spec.name if spec else props.name)
    else:
        device, card = "cpu", args.card
    kept = json.loads(args.predicted.read_text())["predictions"] if args.predicted else []
    clock, rows, records = Clock(args.minutes), [], []
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"gpu_scripts on {device} ({card}), torch {torch.__version__}"
          + ("" if cuda else ": the CPU form, a check of the plumbing; its figures answer nothing"), flush=True)
    with tempfile.TemporaryDirectory(prefix="gpubench-scripts-") as tmp:
        scratch = Path(tmp)
        env = gpubench_env(scratch)
        for script in args.scripts:
            if not cuda and script.cpu_args is None:
                print(f"{script.key}: not run on a CPU (train.py under torchrun sets a CUDA device)", flush=True)
                continue
            if clock.left() < 30:
                rows.append(compared(script, None, Measured("-", None, "skipped: no time left", 0.0)))
                print(f"{script.key}: skipped, no time left", flush=True)
                continue
            try:
                path = lay_out(script, args.nanogpt, args.examples, scratch)
            except LookupError as e:
                rows.append(compared(script, None, Measured("-", None, f"not run: {e}", 0.0)))
                print(f"{script.key}: not run: {e}", flush=True)
                continue
            predicted = next((p for p in kept if p["key"] == script.key and p["gpu"] == card), None)
            if predicted is None and card in gpu_specs.known_gpus():
                # predicted here, before it is measured, the GPU hidden from the calibration
                predicted = predict_one(script, path, card, {**env, "CUDA_VISIBLE_DEVICES": ""},
                                        timeout=max(10.0, clock.left() - 30))
                predicted["predicted_on"] = "this machine, before measuring"
            if predicted:
                print(_prediction_line(predicted), flush=True)
            measured = measure_one(script, path, cuda, env, timeout=max(10.0, min(240.0, clock.left() - 10)))
            if measured.record:
                records.append(measured.record)
            row = compared(script, predicted, measured)
            rows.append(row)
            m = row["measured"]
            print(f"{script.key:<12} measured: " + (f"{m['median_step_s'] * 1e3:.2f} ms a step, {m['throughput']:,.0f} "
                                                   f"{m['throughput_unit']} ({measured.seconds:.0f} s)"
                                                   if not measured.error else measured.error), flush=True)
    (args.out / "scripts.json").write_text(json.dumps(
        {"device": device, "card": card, "cuda": cuda, "torch": torch.__version__,
         "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
         "predicted_file": str(args.predicted) if args.predicted else None, "scripts": rows}, indent=1) + "\n")
    with open(args.out / "scripts-records.jsonl", "a") as out:
        for record in records:
            out.write(json.dumps(record) + "\n")
    print("\n" + "\n".join(table(rows, f"{card}, one GPU" if cuda else f"the CPU, beside {card}'s predictions")))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    verbs = parser.add_subparsers(dest="verb", required=True)
    sources = argparse.ArgumentParser(add_help=False)
    sources.add_argument("--nanogpt", type=Path, help="a karpathy/nanoGPT checkout (train.py, model.py, ...)")
    sources.add_argument("--examples", type=Path, help="a pytorch/examples checkout (mnist/, imagenet/)")
    sources.add_argument("--only", default=",".join(s.key for s in SCRIPTS),
                         help="the scripts, comma-separated (default: all)")
    p = verbs.add_parser("predict", parents=[sources], help="each script predicted, before it is measured")
    p.add_argument("--gpu", action="append", required=True, help="a GPU type gpubench knows; again for more")
    p.add_argument("--out", type=Path, required=True, help="the predictions (JSON)")
    m = verbs.add_parser("measure", parents=[sources], help="each script run through gpubench on this GPU")
    m.add_argument("--predicted", type=Path, help="predictions made before (predict's --out)")
    m.add_argument("--out", type=Path, required=True, help="a folder: scripts.json, scripts-records.jsonl")
    m.add_argument("--minutes", type=float, default=3.0)
    m.add_argument("--card", default="H100 SXM", help="without CUDA: the card whose predictions to compare with")
    verbs.add_parser("lightning-example", help="docs/running.md's Lightning example, on stdout")
    args = parser.parse_args(argv)
    if args.verb == "lightning-example":
        sys.stdout.write(lightning_example())
        return 0
    known = {s.key for s in SCRIPTS}
    unknown = set(args.only.split(",")) - known
    if unknown:
        parser.error(f"--only: {', '.join(sorted(unknown))}: not one of {', '.join(s.key for s in SCRIPTS)}")
    args.scripts = [s for s in SCRIPTS if s.key in args.only.split(",")]
    for name in ("nanogpt", "examples"):
        folder = getattr(args, name)
        if folder is not None and not folder.is_dir():
            parser.error(f"--{name} {folder}: no such folder")
        setattr(args, name, folder.resolve() if folder else None)
    return predict_main(args) if args.verb == "predict" else measure_main(args)


if __name__ == "__main__":
    sys.exit(main())
