"""GPU sampling for the workloads' measured window: GpuMonitor reads one GPU's
utilisation, memory in use and power draw through NVML (nvidia-smi's figures)
from a background thread, and sums them up across the ranks for the record.

Copied to remote machines beside the workloads (imported as `gpu_monitor`, by
harness.py, which the workloads use): it must import nothing from gpubench.
"""

from __future__ import annotations

import contextlib
import math
import statistics
import threading
from typing import TYPE_CHECKING, Callable

import torch
import torch.distributed as dist

if TYPE_CHECKING:
    from harness import Dist


class GpuMonitor:
    """Samples one GPU's utilisation, memory in use and power draw from a
    background thread while the measured window runs (nvidia-smi's figures,
    read through NVML). Without a GPU or without nvidia-ml-py it records why
    and samples nothing."""

    INTERVAL_S = 0.1
    FIELDS = ("gpu_util_pct", "gpu_mem_used_bytes", "gpu_power_w")

    def __init__(self, read: Callable[[], tuple] | None, status: str,
                 interval: float = INTERVAL_S) -> None:
        self._read = read
        self.status = status
        self.interval = interval
        self.samples: list[tuple] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @classmethod
    def for_device(cls, device: torch.device) -> "GpuMonitor":
        if device.type != "cuda":
            return cls(None, "off: no CUDA device")
        try:
            import pynvml  # the nvidia-ml-py package; a bare image may lack it
        except ImportError:
            return cls(None, "off: nvidia-ml-py not installed")
        try:
            pynvml.nvmlInit()
            handle = _nvml_handle(pynvml, device)
        except pynvml.NVMLError as e:
            return cls(None, f"off: NVML: {e}")

        def read() -> tuple:
            return (_nvml_or_none(lambda: pynvml.nvmlDeviceGetUtilizationRates(handle).gpu),
                    _nvml_or_none(lambda: pynvml.nvmlDeviceGetMemoryInfo(handle).used),
                    _nvml_or_none(lambda: pynvml.nvmlDeviceGetPowerUsage(handle) / 1000.0))

        return cls(read, "nvml")

    def start(self) -> None:
        if self._read is None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="gpu-monitor", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            self.samples.append(self._read())
            if self._stop.wait(self.interval):
                return

    def stop(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None

    def local_summary(self) -> list[float]:
        """[mean, peak] per field over this rank's samples; nan where none."""
        out = []
        for i in range(len(self.FIELDS)):
            values = [s[i] for s in self.samples if s[i] is not None]
            out += [statistics.fmean(values), max(values)] if values else [math.nan, math.nan]
        return out

    def summary_across_ranks(self, ctx: Dist) -> dict:
        """Means averaged over the ranks, peaks the largest on any rank (collective)."""
        local = self.local_summary()
        means = torch.tensor(local[0::2], dtype=torch.float64, device=ctx.device)
        peaks = torch.tensor(local[1::2], dtype=torch.float64, device=ctx.device)
        count = torch.tensor([len(self.samples)], dtype=torch.float64, device=ctx.device)
        dist.all_reduce(means)  # SUM
        dist.all_reduce(peaks, op=dist.ReduceOp.MAX)
        dist.all_reduce(count, op=dist.ReduceOp.MIN)
        record: dict = {"gpu_sampling": self.status, "gpu_samples": int(count.item())}
        for name, mean, peak in zip(self.FIELDS, means.tolist(), peaks.tolist()):
            record[f"{name}_mean"] = None if math.isnan(mean) else mean / ctx.world_size
            record[f"{name}_peak"] = None if math.isnan(peak) else peak
        return record


def _nvml_handle(pynvml, device: torch.device):
    """NVML numbers GPUs physically; CUDA numbers the visible ones. Match by UUID."""
    uuid = getattr(torch.cuda.get_device_properties(device), "uuid", None)
    if uuid is not None:
        with contextlib.suppress(pynvml.NVMLError):
            return pynvml.nvmlDeviceGetHandleByUUID(f"GPU-{uuid}")
    return pynvml.nvmlDeviceGetHandleByIndex(device.index or 0)


def _nvml_or_none(read: Callable[[], float]) -> float | None:
    try:
        return float(read())
    except Exception:  # NVML_ERROR_NOT_SUPPORTED and friends: that figure is absent
        return None
