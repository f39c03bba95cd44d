"""Launch workloads with torchrun on this machine (the `local` provider)."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gpubench.errors import RunError
from gpubench.launch.base import (RECORD_ENV, Launcher, LineSink, Machine, RunOutcome, SweepPoint,
                                  cpu_threads_per_process, one_node_procs, record_args,
                                  shown_command)
from gpubench.launch.gpu_sampling import LocalSampler, local_indices
from gpubench.launch.process import failure_line, stream_process
from gpubench.providers import registry
from gpubench.suite import WorkloadRef


def local_gpus() -> list[str]:
    """Names of this machine's NVIDIA GPUs, from nvidia-smi (no torch import)."""
    if not shutil.which("nvidia-smi"):
        return []
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return []
    if out.returncode != 0:
        return []
    return [line.strip() for line in out.stdout.splitlines() if line.strip()]


def torch_python() -> str:
    """The Python that runs workloads locally: this one, if it has torch."""
    if importlib.util.find_spec("torch") is None:
        raise RunError("the local provider needs PyTorch in this Python environment: "
                       "pip install 'torch==2.13.0' (or run on a remote machine with --on)")
    return sys.executable


class LocalLauncher(Launcher):
    """torchrun --standalone on this machine: one node, nothing to copy, nothing to close."""

    def __init__(self, gpus: list[str] | None = None) -> None:
        self._gpus = local_gpus() if gpus is None else gpus

    def machine(self) -> Machine:
        if self._gpus:
            return Machine("local", f"local-{len(self._gpus)}x-gpu", self._gpus[0],
                           len(self._gpus), 0.0, "cuda")
        return Machine("local", f"local-cpu-{os.cpu_count()}c", "cpu", 0, 0.0, "cpu")

    def prepare(self, workload: WorkloadRef) -> None:
        """Nothing to do: the workload runs from where it is."""

    def close(self) -> None:
        """Nothing held between runs."""

    def command(self, workload: WorkloadRef, procs: int, record_file: Path,
                workload_args: list[str]) -> list[str]:
        return [torch_python(), "-m", "torch.distributed.run", "--standalone",
                f"--nproc_per_node={procs}", str(workload.script),
                *record_args(workload, str(record_file)), *workload_args]

    def environment(self, procs: int) -> dict[str, str]:
        # a workload (or a user's script) has no business with the cloud API keys
        scrubbed = registry.key_vars()
        env = {k: v for k, v in os.environ.items() if k not in scrubbed}
        if not self._gpus:
            env["OMP_NUM_THREADS"] = cpu_threads_per_process(os.cpu_count() or 1, procs)
        env["PYTHONUNBUFFERED"] = "1"
        return env

    def run(self, workload: WorkloadRef, point: SweepPoint, workload_args: list[str],
            on_line: LineSink, timeout: float) -> RunOutcome:
        procs = one_node_procs(point)
        with tempfile.TemporaryDirectory(prefix="gpubench-") as tmp:
            record_file = Path(tmp) / "record.json"
            cmd = self.command(workload, procs, record_file, workload_args)
            env = {**self.environment(procs), RECORD_ENV: str(record_file)}
            start = time.perf_counter()
            cwd = str(workload.workdir) if workload.workdir else None  # as `cd DIR; torchrun ...`
            # a suite workload samples its GPUs itself; a user's script is sampled from outside
            sampler = LocalSampler(local_indices(procs)) if self._gpus and not workload.in_suite else None
            try:
                returncode, tail = stream_process(cmd, env, on_line, timeout, cwd)
                elapsed = time.perf_counter() - start
            finally:
                beside = sampler.stop() if sampler else None
            record = _read_record(record_file) if returncode == 0 else None
        error = failure_line(tail, returncode, timeout) if returncode != 0 else None
        shown = shown_command([Path(cmd[0]).name, *cmd[1:]], str(record_file))
        return RunOutcome(returncode, record, shown, elapsed, error, tail, beside)


def _read_record(path: Path) -> dict | None:
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None
