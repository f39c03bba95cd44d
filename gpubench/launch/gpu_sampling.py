"""GPU utilisation, memory and power sampled beside a user's own script, which
gpubench cannot instrument from inside: nvidia-smi's query loop runs for as long
as the run does, and its lines are summarised into the same record fields the
suite workloads fill from NVML (gpu_util_pct_mean, gpu_power_w_peak, ...).

The samples cover the whole process (start-up included), not a measured window;
the record says so (gpu_sampling: "nvidia-smi, whole run").
"""

from __future__ import annotations

import math
import os
import statistics
import subprocess

QUERY = "index,utilization.gpu,memory.used,power.draw"
INTERVAL_MS = 200
MIB = 1 << 20
SAMPLING = "nvidia-smi, whole run"


def sampler_command(indices: list[int]) -> list[str]:
    """nvidia-smi printing one CSV line per GPU every INTERVAL_MS until it is stopped."""
    return ["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv,noheader,nounits",
            "-lms", str(INTERVAL_MS), "-i", ",".join(str(i) for i in indices)]


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
    for line in text.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != 4 or not fields[0].isdigit():
            continue
        util, mem_mib, power = (_value(f) for f in fields[1:])
        per_gpu.setdefault(int(fields[0]), []).append(
            (util, mem_mib * MIB if mem_mib is not None else None, power))
    count = min((len(s) for s in per_gpu.values()), default=0)
    record: dict = {"gpu_sampling": SAMPLING if count else "off: nvidia-smi gave no samples",
                    "gpu_samples": count}
    for i, name in enumerate(("gpu_util_pct", "gpu_mem_used_bytes", "gpu_power_w")):
        values = [s[i] for samples in per_gpu.values() for s in samples if s[i] is not None]
        record[f"{name}_mean"] = statistics.fmean(values) if values else None
        record[f"{name}_peak"] = max(values) if values else None
    return record


class LocalSampler:
    """nvidia-smi's loop as a child of this process, for one local run."""

    def __init__(self, indices: list[int]) -> None:
        try:
            self._proc: subprocess.Popen | None = subprocess.Popen(
                sampler_command(indices), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                stdin=subprocess.DEVNULL, text=True)
        except OSError:
            self._proc = None

    def stop(self) -> dict | None:
        """Stop sampling; the summary, or None when nvidia-smi could not run."""
        if self._proc is None:
            return None
        self._proc.terminate()
        try:
            text, _ = self._proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            text, _ = self._proc.communicate()
        return summarise(text)
