"""Run a child process group, stream its output line by line, bound its time."""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import threading

from gpubench.launch.base import LineSink

TAIL_LINES = 200


def stream_process(cmd: list[str], env: dict[str, str], on_line: LineSink,
                   timeout: float) -> tuple[int, list[str]]:
    """Run `cmd`, pass each output line to `on_line`, kill the whole group at `timeout`.

    Returns the exit code (-9 when killed for time) and the last lines of output.
    Ctrl-C kills the group too, so no torchrun worker outlives gpubench.
    """
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, text=True, errors="replace", bufsize=1,
                            start_new_session=True)
    timed_out = threading.Event()

    def kill() -> None:
        timed_out.set()
        kill_group(proc)

    timer = threading.Timer(timeout, kill)
    timer.daemon = True
    timer.start()
    tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip("\n")
            tail.append(line)
            on_line(line)
        proc.wait()
    except BaseException:
        kill_group(proc)
        raise
    finally:
        timer.cancel()
    return (-9 if timed_out.is_set() else proc.returncode), list(tail)


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


def failure_line(tail: list[str], returncode: int, timeout: float) -> str:
    """The most telling line of a failed run: the workload's own error, not torchrun's."""
    if returncode == -9:
        return f"timed out after {timeout:.0f}s"
    for line in reversed(tail):
        text = line.strip()
        head = text.split(":", 1)[0]
        if "ChildFailedError" in text or "elastic" in text:
            continue
        if text.startswith("error:") or ": error: " in text or (
                head.endswith(("Error", "Exception", "Interrupt")) and " " not in head):
            return text
    last = next((t.strip() for t in reversed(tail) if t.strip()), "")
    return f"exit code {returncode}" + (f": {last}" if last else "")
