"""Run a child process group, stream its output line by line, bound its time."""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass, field

from gpubench.onhost import stop_tagged
from gpubench.launch.base import LineSink

TAIL_LINES = 200
STOP_GRACE_S = 5.0  # SIGTERM to SIGKILL: torchrun needs a moment to stop its workers
DRAIN_S = 5.0  # reading what is left in the pipe after the run ended


@dataclass
class Finished:
    """How a streamed process ended."""

    returncode: int  # negative: killed by that signal (by us, at the timeout: see timed_out)
    tail: list[str] = field(default_factory=list)  # its last TAIL_LINES lines of output
    timed_out: bool = False


def stream_process(cmd: list[str], env: dict[str, str], on_line: LineSink,
                   timeout: float, cwd: str | None = None, run_id: str | None = None) -> Finished:
    """Run `cmd`, pass each output line to `on_line`, stop it all at `timeout`.

    Every process the command starts carries a run id in its environment (`run_id`,
    or a fresh one): torchrun's workers sit in sessions of their own, so on a timeout
    or Ctrl-C torchrun gets SIGTERM (it stops its workers) and then whatever still
    carries the id is killed. The id also lets a watcher find the run's processes.
    """
    run_id = run_id or uuid.uuid4().hex
    proc = subprocess.Popen(cmd, env={**env, stop_tagged.TAG_VAR: run_id}, cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, text=True, errors="replace", bufsize=1,
                            start_new_session=True)
    tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip("\n")
            tail.append(line)
            on_line(line)

    reader = threading.Thread(target=pump, name="run-output", daemon=True)
    reader.start()
    deadline = time.monotonic() + timeout
    timed_out = False
    try:
        while proc.poll() is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                stop_run(proc, run_id)
                break
            try:
                proc.wait(timeout=min(0.5, remaining))
            except subprocess.TimeoutExpired:
                pass
    except BaseException:  # Ctrl-C: nothing of the run may outlive gpubench
        stop_run(proc, run_id)
        raise
    # Output still buffered is read to the end; a worker left holding the pipe is stopped.
    reader.join(timeout=DRAIN_S)
    if reader.is_alive():
        stop_tagged.stop([run_id], grace=0)
        reader.join(timeout=DRAIN_S)
    return Finished(proc.returncode, list(tail), timed_out)


def stop_run(proc: subprocess.Popen, run_id: str) -> None:
    kill_group(proc, grace=STOP_GRACE_S)
    stop_tagged.stop([run_id], grace=STOP_GRACE_S)


def kill_group(proc: subprocess.Popen, grace: float = 0.0) -> None:
    """End a process group started with start_new_session: SIGTERM and up to `grace`
    seconds to exit cleanly when grace > 0, then SIGKILL; bounded waits throughout."""
    signals = ([signal.SIGTERM] if grace > 0 else []) + [signal.SIGKILL]
    for sig in signals:
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.wait(timeout=grace if sig == signal.SIGTERM else 10)
            return
        except subprocess.TimeoutExpired:
            continue
