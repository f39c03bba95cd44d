"""What live progress costs the measured window: the same `gpubench run mnist-ddp
--gpus 1,2` with the live display (rich, as on a terminal: FORCE_COLOR=1) and the
workload's progress lines, against `--quiet` with the progress lines turned off
(GPUBENCH_PROGRESS=off), interleaved (A B A B ...) so that both see the same
machine load. Each side's figure is the median throughput of its records per GPU
count; the ratio is with over without (1.00: no cost).

On a machine shared with other work that end-to-end ratio swings by more than the
cost it looks for, so the parts are measured alone too, first: what the workload's
per-step hook costs (a clock read when no line is due, a print when one is) against
a step, and the share of one core the live display takes while it runs.

    .venv/bin/python benchmarks/progress_overhead.py [--pairs 3] [-- WORKLOAD_ARGS]
    .venv/bin/python benchmarks/progress_overhead.py --pairs 0     # the parts only
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GPUBENCH = [sys.executable, "-m", "gpubench"]

SIDES = {
    "with display": ({"FORCE_COLOR": "1"}, []),
    "without": ({"GPUBENCH_PROGRESS": "off"}, ["--quiet"]),
}


def one_sweep(results: Path, env_extra: dict, flags: list[str], workload_args: list[str],
              counts: str) -> tuple[float, int]:
    """Run the sweep once; (its wall seconds, the bytes it printed)."""
    results.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **env_extra}
    started = time.perf_counter()
    done = subprocess.run([*GPUBENCH, "run", "mnist-ddp", "--gpus", counts, "--repeat", "1",
                           "--force", "--results", str(results), *flags, "--", *workload_args],
                          env=env, cwd=REPO, capture_output=True, timeout=1800)
    if done.returncode != 0:
        sys.exit(f"the sweep failed:\n{done.stdout.decode()[-2000:]}{done.stderr.decode()[-2000:]}")
    return time.perf_counter() - started, len(done.stdout)


def throughputs(results: Path) -> dict[int, list[float]]:
    found: dict[int, list[float]] = {}
    for path in results.glob("*.jsonl"):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            if record.get("status") == "ok":
                found.setdefault(record["gpu_count"], []).append(record["throughput"])
    return found


def hook_cost() -> tuple[float, float]:
    """(ns per after_step call when no line is due, us per call that prints a line)."""
    sys.path.insert(0, str(REPO / "workloads"))
    import harness

    with open(os.devnull, "w") as sink:
        quiet = harness.ProgressPrinter(64, every_s=3600, write=lambda line: None)
        idle_ns = _seconds_per_step(quiet, 200_000) * 1e9
        printing = harness.ProgressPrinter(64, every_s=0.0,
                                           write=lambda line: print(line, file=sink, flush=True))
        print_us = _seconds_per_step(printing, 20_000) * 1e6
    return idle_ns, print_us


def _seconds_per_step(printer, calls: int) -> float:
    """Seconds one after_step call of `printer` takes, over `calls` steps."""
    printer.begin("measure", 10**6)
    started = time.perf_counter()
    for i in range(calls):
        printer.after_step(i + 1)
    return (time.perf_counter() - started) / calls


def display_cpu_share(seconds: float = 5.0) -> float:
    """Share of one core the live display takes: rich refreshing it, two step lines a second."""
    from rich.console import Console

    from gpubench.cli.progress import Progress
    from gpubench.sweep.events import RunStarted, step_from_line
    from gpubench.workloads.metrics import progress_line

    with open(os.devnull, "w") as sink:
        console = Console(file=sink, force_terminal=True, width=120)
        cpu0, wall0 = time.process_time(), time.perf_counter()
        with Progress(console, live=True) as progress:
            progress(RunStarted("[1 gpu] mnist-ddp", workload="mnist-ddp", where="1 gpu", index=1,
                                total=1, provider="vast", gpu_name="RTX 3090", price_per_hour=0.3))
            step = 0
            while time.perf_counter() - wall0 < seconds:
                step += 1
                progress(step_from_line(progress_line("measure", step, 10**4, step / 2, 812.0,
                                                      "samples/s", 90, 2e9)))
                time.sleep(0.5)
        return (time.process_time() - cpu0) / (time.perf_counter() - wall0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--gpus", default="1,2")
    parser.add_argument("workload_args", nargs="*", default=["--steps", "100", "--warmup", "3"])
    args = parser.parse_args()
    idle_ns, print_us = hook_cost()
    # against a 1 ms step (a small model on a fast GPU) and a 100 ms one (mnist-ddp on a CPU core)
    print(f"workload hook: {idle_ns:.0f} ns a step when no line is due, {print_us:.1f} us when one "
          f"is (at most 2 a second): {idle_ns / 1e6:.1e} of a 1 ms step, "
          f"{idle_ns / 1e8:.1e} of a 100 ms step")
    print(f"live display: {display_cpu_share():.1%} of one core while it runs")
    if args.pairs < 1:
        return
    with tempfile.TemporaryDirectory(prefix="progress-overhead-") as tmp:
        walls: dict[str, list[float]] = {side: [] for side in SIDES}
        printed: dict[str, int] = {}
        for pair in range(args.pairs):
            for side, (env_extra, flags) in SIDES.items():
                wall, size = one_sweep(Path(tmp) / side, env_extra, flags, args.workload_args,
                                       args.gpus)
                walls[side].append(wall)
                printed[side] = size
                print(f"pair {pair + 1}: {side:13s} {wall:6.1f} s, {size} bytes printed", flush=True)
        rates = {side: throughputs(Path(tmp) / side) for side in SIDES}
    print()
    print(f"{'gpus':>4}  {'with display':>14}  {'without':>14}  ratio (samples/s, median of {args.pairs})")
    for count in sorted(rates["without"]):
        with_, without = (statistics.median(rates[s].get(count, [float("nan")])) for s in SIDES)
        print(f"{count:>4}  {with_:>14.1f}  {without:>14.1f}  {with_ / without:.3f}")
    w, wo = (statistics.median(walls[s]) for s in SIDES)
    print(f"whole sweep wall time: {w:.1f} s with the display, {wo:.1f} s without, {w / wo:.3f}")
    print(f"load average: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
