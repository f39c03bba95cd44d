"""A few training steps of every rank under torch.profiler, one gzipped Chrome trace
per rank (gpubench run --trace).

gpubench asks for it through the environment, the same for the suite and for a
user's script under the probe:

    GPUBENCH_TRACE_DIR=DIR     where each rank writes rank<R>-<host>.pt.trace.json.gz
    GPUBENCH_TRACE_STEPS=N     how many steps it records (default 3, at most 20)

The profiler starts after the process group is formed (the trace's distributedInfo
then names the rank, the world and the backend), runs one step unrecorded (its own
start-up), then records N: CPU activity always, CUDA kernels and copies where the
process uses a GPU. The suite traces after its timed window; the probe traces from
a user's script's third step and leaves those steps (and the one after, which pays
for writing the file) out of its timing. Open a file in https://ui.perfetto.dev or
chrome://tracing; gpubench summarises them itself (gpubench/report/traces.py).

Standard library at import (torch only once a trace starts): copied to the machine
beside the workloads, loaded by the probe from its own folder, and installed in
gpubench as `gpubench.workloads.rank_trace` for the names and bounds below.
"""

from __future__ import annotations

import os
import re
import socket
from dataclasses import dataclass

DIR_ENV = "GPUBENCH_TRACE_DIR"
STEPS_ENV = "GPUBENCH_TRACE_STEPS"
DEFAULT_STEPS, MOST_STEPS = 3, 20  # a trace of a few steps opens quickly; 20 of a large model is GBs
SUFFIX = ".pt.trace.json.gz"  # TensorBoard's and Holistic Trace Analysis' name for a rank's trace
PROFILER_WARMUP = 1  # steps run under the profiler before it records: its own start-up
SCRIPT_AFTER = 2  # a user's script: steps taken before the profiler starts


@dataclass(frozen=True)
class TraceAsk:
    """What a run is asked to trace: `steps` steps per rank, into `directory` (where the
    launcher wants the files; None until the sweep gives each run its own)."""

    steps: int = DEFAULT_STEPS
    directory: str | None = None

    def environment(self, directory: str | None = None) -> dict[str, str]:
        """The variables that ask a run's processes for it, written into `directory`
        (default: self.directory) as the run's machine sees it."""
        where = directory or self.directory
        return {DIR_ENV: where, STEPS_ENV: str(self.steps)} if where else {}


def steps_problem(steps: int) -> str | None:
    """Why `steps` is no number of steps to trace, or None."""
    if not 1 <= steps <= MOST_STEPS:
        return f"--trace-steps: {steps} is not a number of steps to trace; it is 1 to {MOST_STEPS}"
    return None


def least_script_steps(steps: int) -> int:
    """The fewest training steps a user's script must take for `steps` traced ones to leave
    one timed: the probe's two of warm-up, the profiler's own, the traced, the one that
    writes the file, then one to time."""
    return SCRIPT_AFTER + PROFILER_WARMUP + steps + 2


def asked(environ=None) -> TraceAsk | None:
    """The trace this process is asked for, or None (no GPUBENCH_TRACE_DIR, or a step
    count out of bounds: a trace is never what fails a run)."""
    environ = os.environ if environ is None else environ
    directory = environ.get(DIR_ENV)
    if not directory:
        return None
    try:
        steps = int(environ.get(STEPS_ENV) or DEFAULT_STEPS)
    except ValueError:
        return None
    return TraceAsk(steps, directory) if steps_problem(steps) is None else None


def file_name(rank: int, host: str | None = None) -> str:
    """'rank0-gpu-node-1.pt.trace.json.gz': one rank's file, named by rank and node."""
    host = re.sub(r"[^A-Za-z0-9_.-]", "_", host or socket.gethostname()) or "host"
    return f"rank{rank}-{host}{SUFFIX}"


class RankTracer:
    """torch.profiler over `ask.steps` steps of one rank: `start()`, then `step()` after
    each step until it returns True (the file is written), or `finish()` to write what
    was recorded (a script that ended sooner)."""

    def __init__(self, ask: TraceAsk, rank: int, cuda: bool) -> None:
        self.ask = ask
        self.rank = rank
        self.cuda = cuda
        self.path = os.path.join(ask.directory, file_name(rank))
        self.calls = 0  # step() calls since start
        self.written = False
        self.error: str | None = None
        self._profiler = None

    @property
    def traced_steps(self) -> int:
        """The steps the trace recorded."""
        return max(0, min(self.calls - PROFILER_WARMUP, self.ask.steps))

    @property
    def running(self) -> bool:
        return self._profiler is not None

    def start(self) -> None:
        from torch.profiler import ProfilerActivity, profile, schedule

        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.cuda else [])
        os.makedirs(self.ask.directory, exist_ok=True)
        self._profiler = profile(
            activities=activities,
            schedule=schedule(wait=0, warmup=PROFILER_WARMUP, active=self.ask.steps, repeat=1),
            on_trace_ready=self._write)
        self._profiler.start()

    def _write(self, profiler) -> None:
        try:
            profiler.export_chrome_trace(self.path)  # gzipped: the name ends in .gz
            self.written = True
        except Exception as e:  # a full disk: the run goes on, its record says so
            self.error = f"{type(e).__name__}: {e}"

    def step(self) -> bool:
        """One step ended; True once the last is recorded and the file written."""
        if self._profiler is None:
            return self.written
        self.calls += 1
        self._profiler.step()
        if self.calls >= PROFILER_WARMUP + self.ask.steps:
            self.finish()
        return self.written

    def finish(self) -> None:
        """Stop the profiler; what it recorded so far is written (once)."""
        profiler, self._profiler = self._profiler, None
        if profiler is not None:
            profiler.stop()


def trace_steps(step_fn, ask: TraceAsk, rank: int, cuda: bool, first_step: int,
                synchronize=lambda: None) -> RankTracer:
    """Run the profiler's start-up step and `ask.steps` more of `step_fn` under it,
    numbered from `first_step`; `synchronize` waits for the device before the last step
    ends, so that its kernels are in the trace (the steps before it run as the timed
    ones do, unsynchronised)."""
    tracer = RankTracer(ask, rank, cuda)
    tracer.start()
    total = PROFILER_WARMUP + ask.steps
    for i in range(total):
        step_fn(first_step + i)
        if i == total - 1:
            synchronize()
        tracer.step()
    tracer.finish()
    return tracer
