"""A failed run explained in one line, and whether the failure will repeat.

The line is the worker's own last error (not torchrun's traceback), or, when
the workers said nothing, what gpubench knows: a signal by name (SIGKILL with
the memory the run held, since the kernel's out-of-memory killer sends it), a
timeout, an exit code with no output, a remote side that sent no exit status.
Some failures come back at every GPU count (a usage error, a module that is not
installed, a missing file, a Lightning `devices` that fixes the process count):
the sweep stops at the first one instead of failing each count the same way.
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass

# torch's own log lines (E1123 06:20:45.143000 1980 torch/...] ...): not the workload's words
TORCH_LOG_LINE = re.compile(r"^[EWIF]\d{4} \d\d:\d\d:\d\d")
TORCHRUN_EXITCODE = re.compile(r"^\s*exitcode\s*:\s*(-?\d+)")
TORCHRUN_RANK = re.compile(r"^\s*rank\s*:\s*(\d+)")
TORCHRUN_FAILED = re.compile(r"failed \(exitcode: (-?\d+)\) local_rank: (\d+)")
LIGHTNING_DEVICES = re.compile(
    r"You set `devices=(?P<devices>[^`]+)` and `num_nodes=(?P<nodes>\d+)` in Lightning, but the "
    r"product \((?P<a>\d+) \* (?P<b>\d+)\) does not match the world size \((?P<world>\d+)\)")
SIGNAL_EXIT_BASE = 128  # a shell's exit status for a child killed by signal N: 128 + N
GB = 1e9

# Failures that come back at every count (kind -> why, for the line that stops the sweep).
REPEATING = {
    "usage": "the workload refused its arguments",
    "import": "a module it needs is not installed where it runs",
    "missing file": "a file it needs is missing",
    "syntax": "the script does not compile",
    "devices": "the script fixes its process count",
}


@dataclass(frozen=True)
class Failure:
    error: str  # one line
    kind: str  # a REPEATING key, or signal, out of memory, timeout, no exit status, failed
    signal: str | None = None  # SIGKILL, SIGSEGV, ...

    @property
    def repeats(self) -> bool:
        """It will fail the same way at every GPU count."""
        return self.kind in REPEATING


@dataclass(frozen=True)
class RunFacts:
    """What gpubench knows about a run besides its output."""

    returncode: int  # the launch command's; negative: killed by that signal
    timed_out: bool = False
    timeout: float = 0.0
    exit_status_known: bool = True  # False: a remote side that sent none
    peak_rss_bytes: float | None = None
    memory_total_bytes: float | None = None
    memory_available_min_bytes: float | None = None
    remote: bool = False


def explain(tail: list[str], facts: RunFacts) -> Failure:
    """The one-line explanation of a failed run from its last lines of output."""
    if facts.timed_out:
        return Failure(f"timed out after {facts.timeout:.0f}s", "timeout")
    lightning = _lightning(tail)
    if lightning:
        return Failure(lightning, "devices")
    if not facts.exit_status_known:
        return Failure(_no_status(tail, facts), "no exit status")
    sig, rank = _signal(tail, facts)
    if sig is not None:  # a signal first: the other ranks' errors follow from it
        return _killed(sig, rank, facts)
    own = _own_error(tail)
    if own:
        return Failure(own, _kind(own, tail), _name(sig) if sig else None)
    last = _last_words(tail)
    code = facts.returncode
    if not last:
        return Failure(f"exit code {code} with no output", "failed")
    return Failure(f"exit code {code}: {last}", "failed")


def _own_error(tail: list[str]) -> str | None:
    """The workers' last error line ("SomethingError: ...", "prog: error: ..."), not torchrun's."""
    for line in reversed(tail):
        text = line.strip()
        head = text.split(":", 1)[0]
        if "ChildFailedError" in text or "elastic" in text:
            continue
        if text.startswith("error:") or ": error: " in text or "can't open file" in text or (
                head.endswith(("Error", "Exception", "Interrupt")) and " " not in head):
            return text
    return None


def _kind(error: str, tail: list[str]) -> str:
    if ": error: " in error and any(line.lstrip().startswith("usage:") for line in tail):
        return "usage"
    if error.startswith(("ModuleNotFoundError", "ImportError")):
        return "import"
    if error.startswith(("SyntaxError", "IndentationError", "TabError")):
        return "syntax"
    if error.startswith("FileNotFoundError") or "can't open file" in error:
        return "missing file"
    return "failed"


def _signal(tail: list[str], facts: RunFacts) -> tuple[int | None, int | None]:
    """The signal that ended the first worker to fail (torchrun's root cause) or the
    whole run, and the worker's rank when known."""
    rank = None
    for line in _root_cause(tail):
        found = TORCHRUN_RANK.match(line)
        if found:
            rank = int(found.group(1))
        code = TORCHRUN_EXITCODE.match(line)
        if code:
            if int(code.group(1)) < 0:
                return -int(code.group(1)), rank
            break
    for line in tail:  # without the summary box: torchrun's log line of the first failure
        found = TORCHRUN_FAILED.search(line)
        if found:
            if int(found.group(1)) < 0:
                return -int(found.group(1)), int(found.group(2))
            break
    code = facts.returncode
    if code < 0 and code != -1:
        return -code, None
    if facts.remote and SIGNAL_EXIT_BASE < code < SIGNAL_EXIT_BASE + 65:
        return code - SIGNAL_EXIT_BASE, None
    return None, None


def _killed(sig: int, rank: int | None, facts: RunFacts) -> Failure:
    who = f"worker rank {rank}" if rank is not None else "the run"
    name = _name(sig)
    if sig == signal.SIGKILL:
        return Failure(f"{who} was killed by SIGKILL: the kernel may have run out of memory"
                       f"{_memory(facts)}", "out of memory", name)
    return Failure(f"{who} was killed by {name}", "signal", name)


def _memory(facts: RunFacts) -> str:
    parts = []
    if facts.peak_rss_bytes:
        of = f" of the machine's {facts.memory_total_bytes / GB:.1f} GB" if facts.memory_total_bytes else ""
        parts.append(f"its processes held up to {facts.peak_rss_bytes / GB:.1f} GB{of}")
    if facts.memory_available_min_bytes is not None:
        parts.append(f"available memory fell to {facts.memory_available_min_bytes / GB:.1f} GB")
    return f" ({'; '.join(parts)}, sampled)" if parts else ""


def _no_status(tail: list[str], facts: RunFacts) -> str:
    said = _last_words(tail)
    return ("no exit status came back from the machine over a live SSH link: the run's remote "
            "shell was killed along with the run (something on the machine stopped every "
            "process of it: another tool stopping processes, the out-of-memory killer, a "
            "shutdown)" + _memory(facts) + (f"; its last words: {said}" if said else "; it printed nothing"))


def _lightning(tail: list[str]) -> str | None:
    for line in reversed(tail):
        found = LIGHTNING_DEVICES.search(line)
        if found:
            devices, nodes, world = found["devices"], found["nodes"], int(found["world"])
            return (f"Lightning's Trainer(devices={devices}, num_nodes={nodes}) wants "
                    f"{int(found['a']) * int(found['b'])} processes but this count runs {world}: "
                    "write Trainer(devices=int(os.environ.get('LOCAL_WORLD_SIZE', 1)), "
                    "num_nodes=int(os.environ.get('WORLD_SIZE', 1)) // "
                    "int(os.environ.get('LOCAL_WORLD_SIZE', 1))) so that it follows every count "
                    "(or devices='auto' on GPUs)")
    return None


def _name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def _last_words(tail: list[str]) -> str:
    return next((t.strip() for t in reversed(_workers_part(tail))
                 if t.strip() and not TORCH_LOG_LINE.match(t.strip())), "")


def _workers_part(tail: list[str]) -> list[str]:
    """The output before torchrun's own report of a failed worker (its log line
    "failed (exitcode: N)", its traceback and its summary box)."""
    for i, line in enumerate(tail):
        if "failed (exitcode:" in line:
            return tail[:i]
    return tail


def _root_cause(tail: list[str]) -> list[str]:
    """torchrun's summary of the first failed worker."""
    for i, line in enumerate(tail):
        if "Root Cause" in line:
            return tail[i:]
    return []


def stop_reason(failure: Failure, count: str) -> str:
    """The line that stops a sweep at a failure that will repeat."""
    return (f"stopping the sweep: {REPEATING[failure.kind]} at {count}, and it would fail the "
            f"same way at every count ({failure.error})")
