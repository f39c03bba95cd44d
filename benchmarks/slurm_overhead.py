"""What gpubench adds to a Slurm sweep: the whole
`gpubench run mnist-ddp --on slurm --nodes 1,2` against submitting the very same
sbatch scripts by hand, interleaved (A B A B ...) so that both see the same load,
on the test cluster of tests/launch/slurm_cluster.py (needs root and slurm-wlm).

    .venv/bin/python benchmarks/slurm_overhead.py [--repeat 3] [--launch srun] [-- WORKLOAD_ARGS]

gpubench's side is a fresh process each time (interpreter start, imports, sinfo,
sbatch --test-only, copying the suite, one job per node count followed to its
end, the records, the report); the time to its first record is read off the
results file as it appears. The hand side submits the scripts gpubench kept
beside its records, one after another, two ways: `sbatch --wait` (what a person
types; it polls every few seconds) and `sbatch --parsable` then `squeue` every
50 ms until the job is over (Slurm's own floor). Medians are compared.
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

END = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY"}


def run_gpubench(cmd: list[str], env: dict[str, str], results: Path) -> tuple[float, float]:
    """The whole command's wall time, and the time until its first record was on disk."""
    for old in results.glob("*.jsonl"):
        old.unlink()
    first: list[float] = []
    done = threading.Event()
    start = time.perf_counter()

    def watch() -> None:
        while not done.is_set():
            if any(p.stat().st_size > 0 for p in results.glob("*.jsonl")):
                first.append(time.perf_counter() - start)
                return
            time.sleep(0.02)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    elapsed = time.perf_counter() - start
    done.set()
    watcher.join()
    if proc.returncode != 0:
        sys.exit(f"failed: {shlex.join(cmd)}\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}")
    return elapsed, (first[0] if first else float("nan"))


def sbatch_wait(script: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(["sbatch", "--wait", str(script)], env=env, check=True, capture_output=True,
                   timeout=900, cwd=script.parent)
    return time.perf_counter() - start


def sbatch_poll(script: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    out = subprocess.run(["sbatch", "--parsable", str(script)], env=env, check=True,
                         capture_output=True, text=True, timeout=60, cwd=script.parent).stdout
    job = out.strip().split(";")[0]
    while True:
        state = subprocess.run(["squeue", "--noheader", "--states=all", f"--jobs={job}", "--format=%T"],
                               env=env, capture_output=True, text=True, timeout=60).stdout.strip()
        if state in END:
            return time.perf_counter() - start
        time.sleep(0.05)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--launch", default="torchrun", choices=["torchrun", "srun"])
    ap.add_argument("workload_args", nargs="*",
                    default=["--steps", "5", "--warmup", "1", "--batch-size", "32"])
    args = ap.parse_args()
    from tests.launch.slurm_cluster import SlurmCluster, slurm_installed

    why = slurm_installed()
    if why:
        sys.exit(why)
    python = sys.executable  # the compute nodes' python: this one, which has torch
    with tempfile.TemporaryDirectory(prefix="gpubench-slurm-overhead-") as tmp:
        tmp = Path(tmp)
        cluster = SlurmCluster.start(tmp / "cluster")
        try:
            env = dict(os.environ, **cluster.env, GPUBENCH_CONFIG_DIR=str(tmp / "config"),
                       GPUBENCH_STATE_DIR=str(tmp / "state"))
            results = tmp / "results"
            results.mkdir()
            gpubench = [python, "-m", "gpubench", "run", "mnist-ddp", "--on", "slurm", "--nodes", "1,2",
                        "--gpus-per-node", "1", "--launch", args.launch, "--remote-python", python,
                        "--remote-dir", str(tmp / "on-cluster"), "--results", str(results), "--force",
                        "--", *args.workload_args]
            # warm-up: copies the suite, loads the page cache, and leaves the scripts to submit by hand
            run_gpubench(gpubench, env, results)
            scripts = sorted((results / "slurm").glob("*.sbatch"), key=lambda p: int(p.stem))
            hand = []
            for i, kept in enumerate(scripts):
                copy = tmp / "by-hand" / f"{i}" / "job.sbatch"
                copy.parent.mkdir(parents=True)
                copy.write_text(kept.read_text())
                hand.append(copy)
            for script in hand:
                sbatch_poll(script, env)
            ours, firsts, waits, polls = [], [], [], []
            for _ in range(args.repeat):
                total, first = run_gpubench(gpubench, env, results)
                ours.append(total)
                firsts.append(first)
                waits.append(sum(sbatch_wait(s, env) for s in hand))
                polls.append(sum(sbatch_poll(s, env) for s in hand))
        finally:
            cluster.stop()
            left = cluster.leftovers()
            if left:
                print(f"warning: still running: {left}", file=sys.stderr)
    jobs = len(hand)
    a, f, w, p = (statistics.median(x) for x in (ours, firsts, waits, polls))
    runs = lambda xs: ", ".join(f"{x:.2f}" for x in xs)  # noqa: E731
    print(f"gpubench run mnist-ddp --on slurm --nodes 1,2 --gpus-per-node 1 --launch {args.launch} "
          f"-- {' '.join(args.workload_args)}   ({jobs} jobs, test cluster, {os.cpu_count()} cores)")
    print(f"  gpubench, whole command:        median {a:6.2f} s   runs {runs(ours)}")
    print(f"  gpubench, start to 1st record:  median {f:6.2f} s   runs {runs(firsts)}")
    print(f"  by hand, sbatch --wait x{jobs}:      median {w:6.2f} s   runs {runs(waits)}")
    print(f"  by hand, sbatch + squeue 50 ms: median {p:6.2f} s   runs {runs(polls)}")
    print(f"  ratio to sbatch --wait: {a / w:.2f}x ({(a - w) / jobs:+.2f} s per job)")
    print(f"  ratio to Slurm's floor: {a / p:.2f}x ({(a - p) / jobs:+.2f} s per job)")


if __name__ == "__main__":
    main()
