"""GPU utilisation, memory and power sampled beside a user's own script, which
gpubench cannot instrument from inside: nvidia-smi's query loop runs for as long
as the run does, and its lines are summarised into the same record fields the
suite workloads fill from NVML (gpu_util_pct_mean, gpu_power_w_peak, ...).

The samples cover the whole process (start-up included), not a measured window;
the record says so (gpu_sampling: "nvidia-smi, whole run").

The same loop feeds the live display of a run on this machine's GPUs (a suite workload's
too, at a slower pace): each GPU's latest figures are passed on as a line of the run's
output (live_line, at most every LIVE_EVERY_S), which the sweep reads as a GPU sample
(sweep/events.py) and never keeps in the run's log.

On a remote node the same source runs beside the run (standard library only, so that
it can): `python gpu_sampling.py feed (--gpus 0,1 | --procs N) [--keep FILE] [--node
LABEL]` (main) says each GPU's figures on its stdout, the run's own output, and keeps
nvidia-smi's lines for the record in FILE; the SSH, cluster and Slurm launchers start it
with the run and end it when the run ends. Where nvidia-smi is missing or cannot loop,
it says nothing.
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from typing import Callable

QUERY = "index,utilization.gpu,memory.used,power.draw"
INTERVAL_MS = 200
LIVE_INTERVAL_MS = 1000   # a suite workload samples its GPUs itself: the live view's pace only
LIVE_EVERY_S = 1.0        # each GPU's figures passed on at most this often
LIVE_TAG = "GPUBENCH_GPU"
LIVE_FIELDS = ("util", "mem_used", "power")   # %, MiB, W: cli/gpu_history.py's keys
MIB = 1 << 20
SAMPLING = "nvidia-smi, whole run"


def sampler_command(indices: list[int], interval_ms: int = INTERVAL_MS) -> list[str]:
    """nvidia-smi printing one CSV line per GPU every `interval_ms` until it is stopped."""
    return ["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv,noheader,nounits",
            "-lms", str(interval_ms), "-i", ",".join(str(i) for i in indices)]


def live_line(index: int, util: float | None, mem_mib: float | None, power: float | None) -> str:
    """'GPUBENCH_GPU index=0 util=87 mem_used=1024 power=300': one GPU's figures now, '-'
    where unknown."""
    values = " ".join(f"{k}={'-' if v is None else f'{v:g}'}"
                      for k, v in zip(LIVE_FIELDS, (util, mem_mib, power)))
    return f"{LIVE_TAG} index={index} {values}"


def parse_live_line(line: str) -> dict | None:
    """A live_line's figures as {"index", "util", "mem_used", "power"} (None where
    unknown); None for any other line."""
    parts = line.strip().split()
    if not parts or parts[0] != LIVE_TAG:
        return None
    fields = dict(part.partition("=")[::2] for part in parts[1:])
    if not fields.get("index", "").isdigit():
        return None
    gpu: dict = {"index": int(fields["index"])}
    for key in LIVE_FIELDS:
        gpu[key] = _value(fields.get(key, "-"))
    return gpu


def is_live_line(line: str) -> bool:
    """Whether `line` is a live_line, behind a node's '[LABEL] ' or not: a GPU sample
    beside a run, never the run's own output (kept out of its tail)."""
    if line.startswith("[") and "] " in line:
        line = line.partition("] ")[2]
    return parse_live_line(line) is not None


def _row(line: str) -> tuple[int, float | None, float | None, float | None] | None:
    """(index, utilisation %, memory MiB, power W) of one of the sampler's lines; None
    for a line that does not parse."""
    fields = [f.strip() for f in line.split(",")]
    if len(fields) != 4 or not fields[0].isdigit():
        return None
    util, mem_mib, power = (_value(f) for f in fields[1:])
    return int(fields[0]), util, mem_mib, power


def local_indices(procs: int) -> list[int]:
    """The GPUs torchrun's local ranks 0..procs-1 use here: CUDA_VISIBLE_DEVICES maps
    them when it holds indices (not UUIDs, which nvidia-smi -i also takes)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible:
        parts = [p.strip() for p in visible.split(",") if p.strip()]
        if all(p.isdigit() for p in parts) and len(parts) >= procs:
            return [int(p) for p in parts[:procs]]
    return list(range(procs))


def _value(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None  # [N/A], [Not Supported]
    return value if math.isfinite(value) else None


def summarise(text: str) -> dict:
    """The record fields for nvidia-smi's lines: means over all samples of all
    sampled GPUs, peaks the largest of any. Lines that do not parse are skipped."""
    per_gpu: dict[int, list[tuple]] = {}
    for row in map(_row, text.splitlines()):
        if row is None:
            continue
        index, util, mem_mib, power = row
        per_gpu.setdefault(index, []).append(
            (util, mem_mib * MIB if mem_mib is not None else None, power))
    count = min((len(s) for s in per_gpu.values()), default=0)
    known = any(v is not None for samples in per_gpu.values() for s in samples for v in s)
    record: dict = {"gpu_sampling": (SAMPLING if count and known else
                                     "off: nvidia-smi gave no figures" if count else
                                     "off: nvidia-smi gave no samples"),
                    "gpu_samples": count if known else 0}
    for i, name in enumerate(("gpu_util_pct", "gpu_mem_used_bytes", "gpu_power_w")):
        values = [s[i] for samples in per_gpu.values() for s in samples if s[i] is not None]
        record[f"{name}_mean"] = statistics.fmean(values) if values else None
        record[f"{name}_peak"] = max(values) if values else None
    return record


class LocalSampler:
    """nvidia-smi's loop as a child of this process, for one local run, read line by line
    on a thread of its own; with `live`, each GPU's figures passed on as a live_line at
    most every LIVE_EVERY_S."""

    def __init__(self, indices: list[int], live: Callable[[str], None] | None = None,
                 interval_ms: int = INTERVAL_MS, clock: Callable[[], float] = time.monotonic) -> None:
        self._lines: list[str] = []
        self._live, self._clock = live, clock
        self._passed: dict[int, float] = {}      # GPU index -> when its last line went out
        self._thread: threading.Thread | None = None
        try:
            self._proc: subprocess.Popen | None = subprocess.Popen(
                sampler_command(indices, interval_ms), stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True)
        except OSError:
            self._proc = None
            return
        self._thread = threading.Thread(target=self._read, name="gpu-sampler", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        for line in self._proc.stdout:
            self._lines.append(line)
            if self._live is not None:
                self.pass_on(line)

    def pass_on(self, line: str) -> None:
        """One of the sampler's lines to `live`, as a live_line, unless its GPU's last one
        went out less than LIVE_EVERY_S ago; a display's failure never stops the sampling."""
        row = _row(line)
        now = self._clock()
        if row is None or now - self._passed.get(row[0], float("-inf")) < LIVE_EVERY_S:
            return
        self._passed[row[0]] = now
        try:
            self._live(live_line(*row))
        except Exception:   # noqa: BLE001 (what the run measures matters more than its view)
            pass

    def stop(self) -> dict | None:
        """Stop sampling; the summary, or None when nvidia-smi could not run."""
        if self._proc is None:
            return None
        self._proc.terminate()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        if self._thread is not None:
            self._thread.join(timeout=10)
        return summarise("".join(self._lines))


# -- on a node, beside a run -----------------------------------------------------------

FEED = "feed"
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


def feed_args(gpus: list[int] | None = None, procs: int | None = None,
              keep: str | None = None) -> list[str]:
    """The on-node sampler's arguments (main): the GPUs `gpus`, or the first `procs` of
    those CUDA_VISIBLE_DEVICES gives there; with `keep`, nvidia-smi's lines are kept in
    that file for the record, sampled at INTERVAL_MS, else at the live view's pace."""
    args = [FEED, "--gpus", ",".join(map(str, gpus))] if gpus else [FEED, "--procs", str(procs or 1)]
    return args + (["--keep", keep] if keep else [])


def main(argv: list[str]) -> int:
    """`feed`: each GPU's figures on stdout as live_lines (behind '[LABEL] ' with --node)
    until SIGTERM, SIGHUP or SIGINT, until nvidia-smi ends (or is not there), or until
    stdout is gone (the run's connection closed); nvidia-smi is stopped with it, and with
    --keep its lines are written to FILE then."""
    parser = argparse.ArgumentParser(prog="gpu_sampling.py")
    parser.add_argument("word", choices=[FEED])
    parser.add_argument("--gpus", default="")
    parser.add_argument("--procs", type=int, default=1)
    parser.add_argument("--keep")
    parser.add_argument("--node", default="")
    args = parser.parse_args(argv)
    listed = [g for g in args.gpus.split(",") if g.strip().isdigit()]
    indices = [int(g) for g in listed] if listed else local_indices(max(1, args.procs))
    done = threading.Event()
    for sig in STOP_SIGNALS:
        signal.signal(sig, lambda *_: done.set())
    prefix = f"[{args.node}] " if args.node else ""

    def say(line: str) -> None:
        try:
            sys.stdout.write(prefix + line + "\n")
            sys.stdout.flush()
        except (OSError, ValueError):
            done.set()   # nobody reads the run's output any more
            raise

    sampler = LocalSampler(indices, say, INTERVAL_MS if args.keep else LIVE_INTERVAL_MS)
    proc = sampler._proc
    while proc is not None and proc.poll() is None and not done.wait(0.2):
        pass
    sampler.stop()
    if args.keep:
        try:
            with open(args.keep, "w") as f:
                f.write("".join(sampler._lines))
        except OSError:
            pass   # the record then says nothing was sampled
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
