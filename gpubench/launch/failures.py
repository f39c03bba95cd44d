"""A failed run explained in one line, and whether the failure will repeat.

The line is the worker's own last error (not torchrun's traceback, and without
the "[rank0]: " torch 2.x puts before each line a worker prints of its error once
it has joined its process group), or, when the workers said nothing, what
gpubench knows: a signal by name (SIGKILL with the memory the run held, since the
kernel's out-of-memory killer sends it), a timeout, an exit code with no output,
a remote side that sent no exit status. A script that asks for CUDA, NCCL or an
accelerator where there is none is told so, with the line of it that asked.
Some failures come back at every GPU count (a usage error, a module that is not
installed, a missing file, CUDA or NCCL asked for where there is none): the sweep
stops at the first one instead of failing each count the same way. A Lightning
`devices` that fixes the process count fails at every count but that one
(Failure.runs_only_at); the sweep stops at it too, saying which count would run.
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass

from gpubench.workloads.script_probe import PREFIX as PROBE_PREFIX

# torch's own log lines (E1123 06:20:45.143000 1980 torch/...] ...): not the workload's words
TORCH_LOG_LINE = re.compile(r"^[EWIF]\d{4} \d\d:\d\d:\d\d")
TORCHRUN_EXITCODE = re.compile(r"^\s*exitcode\s*:\s*(-?\d+)")
TORCHRUN_RANK = re.compile(r"^\s*rank\s*:\s*(\d+)")
TORCHRUN_FAILED = re.compile(r"failed \(exitcode: (-?\d+)\) local_rank: (\d+)")
LIGHTNING_DEVICES = re.compile(
    r"You set `devices=(?P<devices>[^`]+)` and `num_nodes=(?P<nodes>\d+)` in Lightning, but the "
    r"product \((?P<a>\d+) \* (?P<b>\d+)\) does not match the world size \((?P<world>\d+)\)")
# torch 2.x puts "[rank0]: " before each line of a worker's uncaught error once the worker
# has joined its process group (its excepthook); torchrun --tee puts "[default0]:" before
# each line of a worker's output
WORKER_PREFIX = re.compile(r"^(?:\[(?:rank|default)\d+\]:[ ]?)+")
RANK_PREFIX = re.compile(r"^(?:\[default\d+\]:[ ]?)?\[rank(\d+)\]:")
TRACEBACK_START = "Traceback (most recent call last):"
FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)')
# a frame of torch, Lightning, the standard library, or of gpubench's probe around the
# script (script_probe.py, gpubench.launch.base.PROBE, wraps init_process_group and DDP):
# not the script's own code
LIBRARY_FRAME = re.compile(r"site-packages|dist-packages|/lib/python\d[.\d]*/|^<|(^|/)script_probe\.py$")
SIGNAL_EXIT_BASE = 128  # a shell's exit status for a child killed by signal N: 128 + N
GB = 1e9

# Failures that come back at every count (kind -> why, for the line that stops the sweep).
# torch's words when a GPU's memory runs out (c10/cuda/CUDACachingAllocator.cpp):
# "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of
# which 1.06 GiB is free. Including non-PyTorch memory, this process has 78.12 GiB memory in use."
CUDA_OOM = re.compile(r"CUDA out of memory\. Tried to allocate (?P<ask>[\d.]+ [KMGT]?i?B)\. "
                      r"GPU (?P<gpu>\d+) has a total capacity of (?P<total>[\d.]+ [KMGT]?i?B) of which "
                      r"(?P<free>[\d.]+ [KMGT]?i?B) is free")
CUDA_OOM_HELD = re.compile(r"this process has (?P<used>[\d.]+ [KMGT]?i?B) memory in use")

REPEATING = {
    "usage": "the workload refused its arguments",
    "import": "a module it needs is not installed where it runs",
    "missing file": "a file it needs is missing",
    "syntax": "the script does not compile",
    "no gpu": "the script needs a GPU (CUDA, NCCL, an accelerator) and found none",
    "devices": "the script fixes its process count",  # at every count but Failure.runs_only_at
}

# torch 2.13's words when a script asks for CUDA or NCCL that is not there, and what is
# missing: torch.cuda.set_device, cuda:N, .cuda(), .to("cuda"), a process group's device_id,
# on a CPU build of torch or on a machine without a GPU
NO_CUDA = {
    "Torch not compiled with CUDA enabled": "the torch it runs with is built without CUDA",
    "module 'torch._C' has no attribute '_cuda": "the torch it runs with is built without CUDA",
    "does not match the current compilation's accelerator support: None":
        "the torch it runs with is built without CUDA",
    "Found no NVIDIA driver on your system": "this machine has no GPU (no NVIDIA driver)",
    "No CUDA GPUs are available": "this machine has no GPU",
}
NO_NCCL = {  # init_process_group(backend="nccl")
    "ProcessGroupNCCL is only supported with GPUs": "this machine has no GPU",
    "Distributed package doesn't have NCCL built in": "the torch it runs with is built without NCCL",
}
# torch.accelerator (or an integer device, .to(local_rank)) on a machine without one
NO_ACCELERATOR = ("Cannot access accelerator device when none is available",
                  "device type at start of device string: None")  # torch.device(f"{None}:0")
GLOO = 'on a CPU use gloo (init_process_group(backend="gloo"))'
ON_A_CPU = 'on a CPU use torch.device("cpu")'
# cuda:N past the GPUs a count gives (each count sees only its own, numbered from 0)
BAD_ORDINAL = "invalid device ordinal"


@dataclass(frozen=True)
class Failure:
    error: str  # one line
    kind: str  # a REPEATING key, or signal, out of memory, timeout, no exit status, failed
    signal: str | None = None  # SIGKILL, SIGSEGV, ...
    runs_only_at: int | None = None  # kind "devices": the one process count (world size) it runs at

    @property
    def repeats(self) -> bool:
        """It will fail the same way at every GPU count (kind "devices": at every count but
        runs_only_at)."""
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
    tail = [line for line in tail if PROBE_PREFIX not in line]  # the probe's, not the script's
    root = _root_rank(tail)
    # the first failed worker's own lines, where torch put its rank before them: another
    # rank's error that follows from it (a peer that closed its connection) comes later
    own_lines = [] if root is None else [
        WORKER_PREFIX.sub("", line) for line in tail if _rank_of(line) == root]
    tail = [WORKER_PREFIX.sub("", line) for line in tail]
    lightning = _lightning(tail)
    if lightning:
        return lightning
    if not facts.exit_status_known:
        return Failure(_no_status(tail, facts), "no exit status")
    sig, rank = _signal(tail, facts)
    if sig is not None:  # a signal first: the other ranks' errors follow from it
        return _killed(sig, rank, facts)
    for lines in (own_lines, tail):
        at = _own_error_at(lines)
        if at is not None:
            own = lines[at].strip()
            return (_without_gpu(own, _script_frame(lines, at)) or _out_of_gpu_memory(own)
                    or Failure(own, _kind(own, tail)))
    last = _last_words(tail)
    code = facts.returncode
    if not last:
        return Failure(f"exit code {code} with no output", "failed")
    return Failure(f"exit code {code}: {last}", "failed")


def _root_rank(tail: list[str]) -> int | None:
    """The rank of the first worker to fail, from torchrun's summary."""
    for line in _root_cause(tail):
        found = TORCHRUN_RANK.match(line)
        if found:
            return int(found.group(1))
    return None


def _rank_of(line: str) -> int | None:
    found = RANK_PREFIX.match(line)
    return int(found.group(1)) if found else None


def _own_error_at(tail: list[str]) -> int | None:
    """Where the workers' last error line is ("SomethingError: ...", "prog: error: ..."), not
    torchrun's; `tail` without the workers' "[rankN]: " prefixes."""
    for i in range(len(tail) - 1, -1, -1):
        text = tail[i].strip()
        head = text.split(":", 1)[0]
        if "ChildFailedError" in text or "elastic" in text:
            continue
        if text.startswith("error:") or ": error: " in text or "can't open file" in text or (
                head.endswith(("Error", "Exception", "Interrupt")) and " " not in head):
            return i
    return None


def _script_frame(tail: list[str], at: int) -> str | None:
    """The line of the script's own code in the traceback that ends at `tail[at]` (its last
    frame outside torch, Lightning and the standard library), as "SOURCE at FILE:LINE"."""
    for i in range(at - 1, -1, -1):
        if tail[i].strip() == TRACEBACK_START:
            return None
        frame = FRAME.match(tail[i])
        if frame and not LIBRARY_FRAME.search(frame["file"]):
            after = tail[i + 1] if i + 1 < at else ""
            source = "" if FRAME.match(after) else after.strip()
            where = f"{frame['file'].rsplit('/', 1)[-1]}:{frame['line']}"
            return f"{_clipped(source)} at {where}" if source.strip("^~ ") else where
    return None


def _clipped(text: str, width: int = 90) -> str:
    return text if len(text) <= width else text[:width - 3] + "..."


def _without_gpu(error: str, frame: str | None) -> Failure | None:
    """A script that asks for CUDA, NCCL or an accelerator where there is none, in one line
    naming the script's line that asked; None for any other error."""
    where = f" ({frame})" if frame else ""
    said = error.rstrip(".")  # followed by "; what to do"
    nccl_asked = frame is not None and "nccl" in frame.lower()
    for words, lack in NO_NCCL.items():
        if words in error:
            return Failure(f"the script asks for the NCCL backend{where}, which needs GPUs, and "
                           f"{lack}: {said}; {GLOO}", "no gpu")
    for words, lack in NO_CUDA.items():
        if words in error:
            fix = GLOO if nccl_asked else ON_A_CPU
            return Failure(f"the script asks for CUDA{where} and {lack}: {said}; {fix}", "no gpu")
    if _no_accelerator(error, frame):
        return Failure(f"the script asks for an accelerator{where} and this machine has none: "
                       f"{said}; {ON_A_CPU} and gloo where torch.accelerator."
                       "current_accelerator() is None", "no gpu")
    if BAD_ORDINAL in error:  # a GPU machine, and a count with fewer GPUs than the script wants
        return Failure(f"the script asks for a GPU{where} that this count does not give it (each "
                       "count sees only its own GPUs, numbered from 0: cuda:LOCAL_RANK follows "
                       f"the count): {error}", "failed")
    return None


def _out_of_gpu_memory(error: str) -> Failure | None:
    """torch's CUDA out-of-memory error in one line: what the process held, of the card's
    memory, and what it asked for more."""
    found = CUDA_OOM.search(error)
    if not found:
        return None
    held = CUDA_OOM_HELD.search(error)
    had = f"the process held {held['used']} of" if held else "it ran out of"
    return Failure(f"out of GPU memory on GPU {found['gpu']}: {had} the card's {found['total']} "
                   f"({found['free']} free) and asked for {found['ask']} more; a smaller "
                   "--batch-size, activation checkpointing or FSDP (gpt-fsdp) needs less",
                   "out of gpu memory")


def _no_accelerator(error: str, frame: str | None) -> bool:
    """torch.accelerator (or an integer device) asked for on a machine without one."""
    if any(words in error for words in NO_ACCELERATOR) or "torch.accelerator" in error:
        return True  # current_accelerator() is None, and then its .type:
    return frame is not None and "accelerator" in frame and "'NoneType' object has no attribute" in error


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


def _lightning(tail: list[str]) -> Failure | None:
    """Lightning's Trainer(devices=D, num_nodes=M) under torchrun runs only where the world
    size is D x M (its TorchElasticEnvironment.validate_settings): every other count fails."""
    for line in reversed(tail):
        found = LIGHTNING_DEVICES.search(line)
        if found:
            devices, nodes, world = found["devices"], found["nodes"], int(found["world"])
            wants = int(found["a"]) * int(found["b"])
            flag = f"--gpus {wants}" if int(nodes) == 1 else f"--nodes {nodes} --gpus {found['a']}"
            return Failure(
                f"Lightning's Trainer(devices={devices}, num_nodes={nodes}) wants {_procs(wants)} "
                f"but this count runs {world}: write Trainer(devices=int(os.environ.get("
                "'LOCAL_WORLD_SIZE', 1)), num_nodes=int(os.environ.get('WORLD_SIZE', 1)) // "
                "int(os.environ.get('LOCAL_WORLD_SIZE', 1))) so that it follows every count "
                f"(or devices=\"auto\" on GPUs); as written it runs only at {_procs(wants)}: "
                f"{flag} measures it", "devices", runs_only_at=wants)
    return None


def _procs(n: int) -> str:
    return f"{n} process" if n == 1 else f"{n} processes"


def _name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def last_words(tail: list[str]) -> str:
    """The script's own last line, for any run (one that exited 0 too): not the probe's,
    not torch's log or torchrun's report of a failed worker, torch's rank prefix removed."""
    return _last_words([WORKER_PREFIX.sub("", line) for line in tail if PROBE_PREFIX not in line])


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
    if failure.runs_only_at is not None:  # every count but one
        return (f"stopping the sweep: {REPEATING[failure.kind]} at {count}, and every count but "
                f"{_procs(failure.runs_only_at)} would fail the same way ({failure.error})")
    return (f"stopping the sweep: {REPEATING[failure.kind]} at {count}, and it would fail the "
            f"same way at every count ({failure.error})")
