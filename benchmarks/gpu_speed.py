"""The suite's speed against nanoGPT's, and `gpubench run` against torchrun by hand, on one GPU.

    python benchmarks/gpu_speed.py --out DIR --nanogpt DIR [--minutes 6]

Run from a checkout on a machine with a CUDA GPU, gpubench importable (gpu_check.sh's
`speed` step installs it and calls this), and nanoGPT's source in --nanogpt (karpathy/
nanoGPT: bench.py, train.py, model.py, configurator.py; the machine needs no network).
Each comparison is one run a side, the sides back to back, except the two through
`gpubench run`, whose sides alternate after one untimed run each:

  gpt-ddp vs bench.py, compiled   workloads/gpt_ddp.py under torchrun (GPT-2 124M, 12 x 1024
                                  tokens, bf16, --compile, 30 steps after 10) against
                                  nanoGPT's bench.py (--real_data=False --compile=True
                                  --batch_size=12: 20 steps after 10, a loss.item() each);
                                  bench.py's mean step over ours          (target >= 1.0)
  gpt-ddp vs bench.py, eager      the same without compiling              (target >= 1.0)
  MFU of the compiled gpt-ddp     its record's mfu (model FLOPs over the card's dense bf16
                                  peak)                                   (target >= 0.45)
  gpt-fsdp vs gpt-ddp at 125M     gpt_fsdp.py --params 125M at the same batch and precision,
                                  one GPU, eager: its mean step over gpt-ddp's (target <= 1.2)
  train.py: gpubench vs by hand   nanoGPT's train.py (60 iterations, synthetic data, eager)
                                  through `gpubench run ./train.py --gpus 1` against
                                  `torchrun --standalone --nproc_per_node=1 train.py`, N pairs
                                  in turn: the median of the pairs' ratios (target <= 1.05)
  mnist-ddp through gpubench      benchmarks/overhead.py command on this machine: gpubench's
                                  own time over the by-hand run's (target <= 0.05), and the
                                  whole command's ratio, pair by pair     (target <= 1.05)
  MFU at batch 32, compiled       last, if time is left: where a step's fixed costs weigh
                                  less                                    (target >= 0.45)

A "mean step" is the measured window's wall time over its steps: bench.py reports that, so
ours is read the same way (the record's wall_seconds / steps), not its median.

DIR gets speed.json (each figure: what it compares, its value, its target, whether it was
met, the commands) and records.jsonl (the suite's records); gpu_check.sh's `speed` step
keeps what this prints in speed.txt beside them.
Each step has a time limit within --minutes; one with no time left is skipped and says so.
Without CUDA it checks its own plumbing: the suite's sides at a tiny size on the CPU, and
nanoGPT's sides skipped (bench.py and train.py under torchrun need CUDA).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
WORKLOADS = REPO / "workloads"
sys.path.insert(0, str(Path(__file__).resolve().parent))

import nanogpt_scratch  # noqa: E402  (this folder's)
import overhead  # noqa: E402  (this folder's: the command comparison)

GPT2_SMALL = ("--batch-size", "12", "--precision", "bf16", "--steps", "30", "--warmup", "10")
TINY_GPT = ("--n-layer", "2", "--n-head", "2", "--n-embd", "64", "--block-size", "64", "--vocab-size", "512",
            "--batch-size", "2", "--steps", "5", "--warmup", "2")  # the CPU's plumbing check
BENCH_STEP = re.compile(r"time per iteration: ([0-9.]+)ms")


@dataclass
class Figure:
    """One comparison's outcome, as speed.json keeps it."""

    name: str
    value: float | None          # None: not measured (see note)
    target: str                  # ">= 1.0", "<= 1.2"
    commands: list[str] = field(default_factory=list)
    note: str = ""

    @property
    def met(self) -> bool | None:
        if self.value is None or self.target == "-":
            return None
        sign, bound = self.target.split()
        return self.value >= float(bound) if sign == ">=" else self.value <= float(bound)


class OutOfTime(Exception):
    """The check's --minutes are spent before this step."""


class Clock:
    """What is left of --minutes, handed out step by step."""

    def __init__(self, minutes: float) -> None:
        self.deadline = time.monotonic() + minutes * 60

    def limit(self, wanted: float) -> float:
        left = self.deadline - time.monotonic()
        if left < 10:
            raise OutOfTime(f"no time left ({left:.0f} s)")
        return min(wanted, left)


def mean_step(record: dict) -> float:
    """The measured window's seconds a step, as bench.py counts its own."""
    return float(record["wall_seconds"]) / int(record["steps"])


def bench_step(output: str) -> float:
    """bench.py's mean step in seconds, from its last line."""
    found = BENCH_STEP.findall(output)
    if not found:
        raise RuntimeError("bench.py printed no 'time per iteration' line")
    return float(found[-1]) / 1000


def torchrun(script: str, args: tuple, clock: Clock, records: list, limit: float = 180) -> tuple[dict, str]:
    """One run of a suite workload at one GPU under torchrun: its record, and the command."""
    with tempfile.TemporaryDirectory(prefix="gpu-speed-") as tmp:
        record_file = Path(tmp) / "record.json"
        cmd = [*overhead.TORCHRUN_ONE, str(WORKLOADS / script), *args, "--record-file", str(record_file)]
        done = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, timeout=clock.limit(limit))
        if done.returncode != 0 or not record_file.exists():
            raise RuntimeError(f"{script} exited {done.returncode}: {done.stdout[-600:]}{done.stderr[-600:]}")
        record = json.loads(record_file.read_text())
    records.append(record)
    shown = f"torchrun --standalone --nproc_per_node=1 workloads/{script} {' '.join(args)}"
    print(f"  {shown}: mean step {mean_step(record) * 1000:.2f} ms, median {record['median_step_s'] * 1000:.2f} ms"
          + (f", MFU {record['mfu']:.1%}" if record.get("mfu") else ""), flush=True)
    return record, shown


def nanogpt_bench(nanogpt: Path, compiled: bool, clock: Clock) -> tuple[float, str]:
    """bench.py's mean step (seconds) and its command."""
    args = ["--real_data=False", f"--compile={compiled}", "--batch_size=12"]
    done = subprocess.run([sys.executable, "bench.py", *args], cwd=nanogpt, capture_output=True, text=True,
                          timeout=clock.limit(180))
    if done.returncode != 0:
        raise RuntimeError(f"bench.py exited {done.returncode}: {done.stderr[-600:]}")
    step = bench_step(done.stdout)
    shown = f"(cd nanoGPT && python bench.py {' '.join(args)})"
    print(f"  {shown}: mean step {step * 1000:.2f} ms", flush=True)
    return step, shown


def against_bench(nanogpt: Path | None, why_not: str | None, compiled: bool, clock: Clock,
                  records: list) -> list[Figure]:
    """gpt-ddp against bench.py, compiled or not; with compiling, the MFU too."""
    how = "compiled" if compiled else "eager"
    args = (*GPT2_SMALL, "--compile") if compiled else GPT2_SMALL
    ours, our_cmd = torchrun("gpt_ddp.py", args, clock, records)
    name = f"gpt-ddp vs nanoGPT bench.py, {how}: bench.py's step / ours"
    figures = []
    if nanogpt is None:
        figures.append(Figure(name, None, ">= 1.0", [our_cmd], f"not measured: {why_not}"))
    else:
        theirs, their_cmd = nanogpt_bench(nanogpt, compiled, clock)
        figures.append(Figure(name, theirs / mean_step(ours), ">= 1.0", [our_cmd, their_cmd],
                              f"ours {mean_step(ours) * 1000:.2f} ms, bench.py {theirs * 1000:.2f} ms a step"))
    if compiled:
        figures.append(Figure("gpt-ddp GPT-2 small compiled: MFU", ours.get("mfu"), ">= 0.45", [our_cmd],
                              f"{ours.get('model_tflops_per_gpu') or 0:.1f} TFLOP/s of "
                              f"{ours.get('peak_tflops_per_gpu') or 0:.0f}"))
    return figures


def mfu_at(batch: int, clock: Clock, records: list) -> Figure:
    """The compiled GPT-2 small's MFU at a larger batch, where a step's fixed costs (the
    optimizer, the launches) weigh less."""
    args = ("--batch-size", str(batch), *GPT2_SMALL[2:], "--compile")
    record, shown = torchrun("gpt_ddp.py", args, clock, records)
    return Figure(f"gpt-ddp GPT-2 small compiled, batch {batch}: MFU", record.get("mfu"), ">= 0.45", [shown],
                  f"{record.get('model_tflops_per_gpu') or 0:.1f} TFLOP/s")


def fsdp_against_ddp(shape: tuple, size: str, clock: Clock, records: list) -> Figure:
    ddp, ddp_cmd = torchrun("gpt_ddp.py", shape, clock, records)
    fsdp, fsdp_cmd = torchrun("gpt_fsdp.py", shape, clock, records)
    return Figure(f"gpt-fsdp vs gpt-ddp at {size}, one process: fsdp's step / ddp's", mean_step(fsdp) / mean_step(ddp),
                  "<= 1.2", [ddp_cmd, fsdp_cmd],
                  f"ddp {mean_step(ddp) * 1000:.2f} ms, fsdp {mean_step(fsdp) * 1000:.2f} ms a step")


def train_py_pairs(nanogpt: Path, pairs: int, clock: Clock) -> Figure:
    """nanoGPT's train.py through gpubench against torchrun by hand, in turn."""
    with tempfile.TemporaryDirectory(prefix="gpu-speed-train-") as tmp:
        work = nanogpt_scratch.scratch(nanogpt, Path(tmp) / "nanogpt", 20_000_000).parent
        by_hand = [*overhead.TORCHRUN_ONE, "train.py", *nanogpt_scratch.TRAIN_ARGS]
        through = [sys.executable, "-m", "gpubench", "run", "./train.py", "--gpus", "1", "--repeat", "1",
                   "--results", str(Path(tmp) / "results"), "--quiet", "--", *nanogpt_scratch.TRAIN_ARGS]

        def timed(cmd: list[str]) -> float:
            shutil.rmtree(work / "out", ignore_errors=True)
            shutil.rmtree(work / ".gpubench-left-behind", ignore_errors=True)
            started = time.perf_counter()
            subprocess.run(cmd, cwd=work, check=True, capture_output=True, timeout=clock.limit(120))
            return time.perf_counter() - started

        figures = overhead.alternate({"gpubench run": lambda: timed(through),
                                      "torchrun by hand": lambda: timed(by_hand)}, pairs)
    for name, values in figures.items():
        print(overhead.median_line(name, values, "s"))
    return Figure("nanoGPT train.py: gpubench run / torchrun by hand, whole command", overhead.paired(figures),
                  "<= 1.05", ["(cd nanoGPT && torchrun --standalone --nproc_per_node=1 train.py "
                              + " ".join(nanogpt_scratch.TRAIN_ARGS) + ")",
                              "(cd nanoGPT && gpubench run ./train.py --gpus 1 --repeat 1 --quiet -- "
                              + " ".join(nanogpt_scratch.TRAIN_ARGS) + ")"],
                  "seconds a command: " + "; ".join(f"{n} {', '.join(f'{v:.2f}' for v in vs)}"
                                                    for n, vs in figures.items()))


def own_time(cuda: bool, clock: Clock) -> list[Figure]:
    clock.limit(120)
    runs, steps = (3, 30) if cuda else (1, 5)
    found = overhead.command(argparse.Namespace(runs=runs, steps=steps, warmup=5, script=False))
    how = [f"python benchmarks/overhead.py command --runs {runs} --steps {steps}"]
    return [Figure("mnist-ddp: gpubench's own time / torchrun by hand", found.own_share, "<= 0.05", how),
            Figure("mnist-ddp: gpubench run / torchrun by hand, whole command", found.end_to_end, "<= 1.05", how)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--nanogpt", type=Path, help="nanoGPT's source (bench.py, train.py, model.py, ...)")
    parser.add_argument("--minutes", type=float, default=6.0)
    parser.add_argument("--pairs", type=int, default=2, help="train.py pairs, gpubench and by hand in turn")
    args = parser.parse_args()
    import torch

    cuda = torch.cuda.is_available()
    nanogpt = args.nanogpt.resolve() if cuda and args.nanogpt else None
    if cuda and nanogpt is not None and not (nanogpt / "bench.py").exists():
        print(f"--nanogpt {nanogpt}: no bench.py there", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    clock, records, figures = Clock(args.minutes), [], []
    device = torch.cuda.get_device_name(0) if cuda else "cpu"
    print(f"gpu_speed on {device}, torch {torch.__version__}; {overhead.load()}", flush=True)
    why_not = None if nanogpt else ("no --nanogpt given" if cuda else "bench.py and train.py under torchrun need CUDA")
    steps = [
        ("gpt-ddp vs bench.py, compiled", lambda: against_bench(nanogpt, why_not, True, clock, records) if cuda else []),
        ("gpt-ddp vs bench.py, eager", lambda: against_bench(nanogpt, why_not, False, clock, records) if cuda else []),
        ("gpt-fsdp vs gpt-ddp", lambda: [fsdp_against_ddp(*((GPT2_SMALL, "125M") if cuda else (TINY_GPT, "a tiny size")),
                                                           clock, records)]),
        ("train.py through gpubench vs by hand", lambda: [train_py_pairs(nanogpt, args.pairs, clock)] if nanogpt else []),
        ("mnist-ddp through gpubench vs by hand", lambda: own_time(cuda, clock)),
        ("gpt-ddp compiled at batch 32", lambda: [mfu_at(32, clock, records)] if cuda else []),
    ]
    for name, step in steps:
        print(f"{name}:", flush=True)
        try:
            figures += step()
        except (OutOfTime, RuntimeError, subprocess.SubprocessError) as e:
            print(f"  skipped: {e}", flush=True)
            figures.append(Figure(name, None, "-", note=f"not measured: {e}"))
    if why_not:
        figures.append(Figure("nanoGPT's sides (bench.py, train.py)", None, "-", note=why_not))
    print(f"\ngpu_speed, {time.strftime('%Y-%m-%d %H:%M')}, {device}"
          + ("" if cuda else " (the CPU form: a check of the plumbing; its figures answer no target)") + ":")
    for f in figures:
        value = "-" if f.value is None else f"{f.value:.3f}"
        verdict = {True: "met", False: "NOT met", None: "not measured"}[f.met]
        print(f"  {f.name:70s} {value:>7s}  target {f.target:8s} {verdict}{'; ' + f.note if f.note else ''}")
    (args.out / "speed.json").write_text(json.dumps({
        "device": device, "torch": torch.__version__, "cuda": cuda, "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "figures": [{**asdict(f), "met": f.met} for f in figures]}, indent=1))
    with open(args.out / "records.jsonl", "a") as out:
        for record in records:
            out.write(json.dumps(record) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
