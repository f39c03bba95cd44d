"""Launch workloads with torchrun on this machine (the `local` provider).

Around each run: the machine's load before it and while it runs, the memory its
processes hold, the CPU time they get (machine_load); on GPUs, what NCCL chose, in
files of the run (nccl_log); for a user's script, the files it leaves in its
working directory, moved aside (workdir_guard).
"""

from __future__ import annotations

import importlib.util
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from gpubench.errors import RunError
from gpubench.launch import cpu_policy, nccl_log
from gpubench.onhost import machine_load
from gpubench.onhost import workdir_guard
from gpubench.launch.base import (PROBE, RECORD_ENV, FileChanges, Launcher, LineSink, Machine, RunOutcome,
                                  SweepPoint, cpu_threads_per_process, one_node_procs, record_args,
                                  script_argv, shown_command, visible_gpus)
from gpubench.launch.failures import RunFacts, explain
from gpubench.launch.gpu_sampling import INTERVAL_MS, LIVE_INTERVAL_MS, LocalSampler, local_indices
from gpubench.launch.process import stream_process
from gpubench.providers import registry
from gpubench.remote.pull import RunFiles
from gpubench.suite import WorkloadRef, workloads_dir


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

    def __init__(self, gpus: list[str] | None = None, idle_since: dict | None = None) -> None:
        self._gpus = local_gpus() if gpus is None else gpus
        # where the machine-load window before the next run starts: nothing of a run is
        # alive since (the command began, or the launcher opened); after a run, its end
        self._idle_since = idle_since or machine_load.mark()

    def machine(self) -> Machine:
        if self._gpus:
            return Machine("local", f"local-{len(self._gpus)}x-gpu", self._gpus[0],
                           len(self._gpus), 0.0, "cuda")
        return Machine("local", f"local-cpu-{os.cpu_count()}c", "cpu", 0, 0.0, "cpu")

    def prepare(self, workload: WorkloadRef) -> None:
        """Nothing to do: the workload runs from where it is, with this machine's packages."""

    def files_at(self, workload: WorkloadRef) -> RunFiles:
        return RunFiles(str(Path(workload.workdir) if workload.workdir else Path.cwd()))

    def close(self) -> None:
        """Nothing held between runs."""

    def command(self, workload: WorkloadRef, procs: int, record_file: Path,
                workload_args: list[str]) -> list[str]:
        return [torch_python(), "-m", "torch.distributed.run", "--standalone",
                f"--nproc_per_node={procs}",
                *script_argv(workload, str(workload.script), str(workloads_dir() / PROBE)),
                *record_args(workload, str(record_file)), *workload_args]

    def environment(self, procs: int) -> dict[str, str]:
        # a workload (or a user's script) has no business with the cloud API keys
        scrubbed = registry.key_vars()
        env = {k: v for k, v in os.environ.items() if k not in scrubbed}
        if self._gpus:
            env["CUDA_VISIBLE_DEVICES"] = visible_gpus(procs, os.environ.get("CUDA_VISIBLE_DEVICES"))
        else:
            env["OMP_NUM_THREADS"] = cpu_threads_per_process(machine_load.cores(), procs)
        env["PYTHONUNBUFFERED"] = "1"
        return env

    def run(self, workload: WorkloadRef, point: SweepPoint, workload_args: list[str],
            on_line: LineSink, timeout: float) -> RunOutcome:
        procs = one_node_procs(point)
        run_id = uuid.uuid4().hex
        # where the run starts: as `cd DIR; torchrun ...` for --workdir, else here
        root = Path(workload.workdir) if workload.workdir else Path.cwd()
        with tempfile.TemporaryDirectory(prefix="gpubench-") as tmp:
            record_file = Path(tmp) / "record.json"
            cmd = self.command(workload, procs, record_file, workload_args)
            nccl_files = Path(tmp) / "nccl"  # NCCL's, one per process, on GPUs
            env = {**self.environment(procs), **nccl_log.environment(nccl_files, bool(self._gpus)),
                   RECORD_ENV: str(record_file),
                   **(workload.trace.environment() if workload.trace else {})}  # written in place
            skip = [tmp, *workload.untouched]
            # gpubench's own output (> out.log, | tee bench.log) is not the run's
            own = () if workload.in_suite else set(workdir_guard.own_output())
            files_before = None if workload.in_suite else workdir_guard.snapshot(root, skip, own)
            load = machine_load.before(since=self._idle_since)
            watch = _Watching(run_id)
            cpu_before, own_before = _children_cpu_seconds(), _own_cpu_seconds()
            # a suite workload samples its GPUs itself (here: for the live view alone, at a
            # slower pace); a user's script is sampled from outside
            sampler = (LocalSampler(local_indices(procs), on_line,
                                    LIVE_INTERVAL_MS if workload.in_suite else INTERVAL_MS)
                       if self._gpus else None)
            start = time.perf_counter()
            try:
                finished = stream_process(cmd, env, on_line, timeout,
                                          str(root) if workload.workdir else None, run_id)
                elapsed = time.perf_counter() - start
            finally:
                sampled = sampler.stop() if sampler else None
                beside = None if workload.in_suite else sampled
                watched = watch.stop()
            ok = finished.returncode == 0 and not finished.timed_out
            record = _read_record(record_file) if ok else None
            nccl_said = nccl_log.read_files(nccl_files)
            files = None if workload.in_suite else _settle(root, files_before, point, skip, own)
        self._idle_since = machine_load.mark()  # the run's processes are gone, reaped
        measured = self._measured(workload, env, load, watched, _children_cpu_seconds() - cpu_before,
                                  _own_cpu_seconds() - own_before)
        measured.update(nccl_log.collected({"": nccl_said}))
        failure = None if ok else explain(finished.tail, RunFacts(
            finished.returncode, finished.timed_out, timeout,
            peak_rss_bytes=measured.get("peak_rss_bytes"),
            memory_total_bytes=measured.get("memory_total_bytes"),
            memory_available_min_bytes=measured.get("memory_available_min_bytes")))
        shown = shown_command([Path(cmd[0]).name, *cmd[1:]], str(record_file))
        return RunOutcome(-9 if finished.timed_out else finished.returncode, record, shown, elapsed,
                          failure.error if failure else None, finished.tail, beside, measured,
                          failure, files)

    def _measured(self, workload: WorkloadRef, env: dict[str, str], load: dict, watched: dict,
                  cpu_seconds: float, own_cpu_seconds: float) -> dict:
        """The record fields gpubench measured around a run (record_schema: machine load,
        memory, threads, pinning, the device)."""
        figures = {k: v for k, v in load.items() if k in MACHINE_FIELDS}
        figures.update({k: v for k, v in watched.items() if k in MACHINE_FIELDS})
        figures.update(machine_load.during(load, watched, cpu_seconds, own_cpu_seconds))
        figures["machine_busy"] = machine_load.busy_verdict(figures)
        figures["device"] = "cuda" if self._gpus else "cpu"
        figures["cpu_pinning"] = cpu_policy.NOT_PINNED if self._gpus else cpu_policy.pinning()
        if not workload.in_suite and "OMP_NUM_THREADS" in env:
            figures["threads_per_process"] = int(env["OMP_NUM_THREADS"])
        return figures


# What machine_load's before() and watch give that a record keeps.
MACHINE_FIELDS = ("cpu_cores", "load_before", "busy_before", "memory_total_bytes", "mock_instance",
                  "peak_rss_bytes", "memory_available_min_bytes")


class _Watching:
    """machine_load.Watch on a thread of its own for as long as the run lasts."""

    def __init__(self, run_id: str) -> None:
        self._watch = machine_load.Watch(run_id)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="run-watch", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while True:
            self._watch.sample()
            if self._stop.wait(machine_load.INTERVAL_S):
                return

    def stop(self) -> dict:
        self._stop.set()
        self._thread.join(timeout=10)
        return self._watch.summary()


def _children_cpu_seconds() -> float:
    """CPU time of this process's finished children (and theirs, as each reaps its own):
    around a run, the whole of torchrun and its workers."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _own_cpu_seconds() -> float:
    """CPU time of gpubench itself, every thread: its watcher, its reader of the run's
    output, the report it loads meanwhile (gpubench.report.preload)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _settle(root: Path, before: dict | None, point: SweepPoint, skip: list,
            own: set = frozenset()) -> FileChanges:
    """Move aside what the run left in its working directory (workdir_guard); `own`:
    gpubench's own output files (workdir_guard.own_output), never the run's."""
    keep = f"{time.strftime('%Y%m%d-%H%M%S')}-{point.world_size}gpu"
    found = workdir_guard.settle(root, before, keep, skip, own)
    why_not = None if found["watched"] else (workdir_guard.unwatched(root)
                                             or f"{root} holds too many files to list")
    return FileChanges(found["watched"], found["created"], found.get("kept_in"), found["changed"],
                       why_not)


def _read_record(path: Path) -> dict | None:
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None
