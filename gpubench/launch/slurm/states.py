"""Slurm's machine-readable answers read into dataclasses: sinfo and squeue with
an explicit --format (fields joined by '|', the free-text reason last),
sacct with --parsable2, and the words slurmstepd leaves in a job's error file.
Never its tables for people.

Why squeue --format and not --json: Slurm 22.05's `squeue --json` ignores the
job filter and lists every job the controller holds, on each poll, which on a
busy cluster is megabytes a second; --format with -j asks for one job on every
version.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import datetime

from gpubench.launch.slurm.errors import SlurmError

# Job states. A job in one of END_STATES is over; COMPLETING is not yet (its
# processes are still being stopped); anything else is pending or running.
END_STATES = frozenset({"COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "PREEMPTED", "NODE_FAIL",
                        "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "REVOKED", "SPECIAL_EXIT"})
PENDING_STATES = frozenset({"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD"})
OK_STATE = "COMPLETED"

# Where an end state came from (kept in the record as slurm_state_source).
FROM_SACCT = "sacct"
FROM_JOBCOMP = "sacct -c (job completion log)"
FROM_SQUEUE = "squeue + output files"

_EMPTY = {"", "(null)", "None", "Unknown", "N/A", "n/a"}

SQUEUE_FIELDS = ("%i", "%T", "%V", "%S", "%e", "%M", "%N", "%P", "%a", "%C", "%D", "%r")
SACCT_FIELDS = ("JobIDRaw", "State", "ExitCode", "ElapsedRaw", "Submit", "Start", "End",
                "NodeList", "Partition", "Account", "AllocCPUS", "NNodes", "Reason")
SINFO_FIELDS = ("%P", "%D", "%G", "%c", "%a")


@dataclass(frozen=True)
class JobState:
    """What Slurm says of one job, as far as the source knows it."""

    job_id: str
    state: str                       # Slurm's own word: PENDING, RUNNING, COMPLETED, TIMEOUT...
    reason: str = ""                 # why it pends (Resources, Priority, JobHeldUser...)
    exit_code: str | None = None     # "exit:signal", as sacct writes it
    submit: datetime | None = None
    start: datetime | None = None
    end: datetime | None = None
    elapsed_s: float | None = None   # Slurm's elapsed: start to end (or to now)
    nodelist: str = ""
    partition: str = ""
    account: str = ""
    cpus: int | None = None          # CPUs allocated, all nodes
    nodes: int | None = None
    source: str = ""

    @property
    def finished(self) -> bool:
        return self.state in END_STATES

    @property
    def pending(self) -> bool:
        return self.state in PENDING_STATES

    @property
    def ok(self) -> bool:
        return self.state == OK_STATE and self.exit_code in (None, "0:0")

    @property
    def queue_wait_s(self) -> float | None:
        """Submit to start: the time spent in the queue."""
        if self.submit is None or self.start is None:
            return None
        return max(0.0, (self.start - self.submit).total_seconds())

    def with_exit_code(self, code: str | None) -> "JobState":
        return self if code is None else replace(self, exit_code=code)


@dataclass(frozen=True)
class Partition:
    """A partition as sinfo lists it (its largest kind of node, when they differ)."""

    name: str
    nodes: int                 # nodes in all
    gpus_per_node: int         # GPUs of gres gpu on one node; 0 when it has none
    gpu_type: str              # the gres type (a100), or "" when untyped
    cpus_per_node: int
    available: str             # up, down, drain, inact
    default: bool


# ---------------------------------------------------------------------- values
def _text(value: str) -> str:
    value = value.strip()
    return "" if value in _EMPTY else value


def _time(value: str) -> datetime | None:
    value = _text(value)
    try:
        return datetime.fromisoformat(value) if value else None
    except ValueError:
        return None


def _int(value: str) -> int | None:
    value = _text(value)
    return int(value) if value.isdigit() else None


def duration_s(value: str) -> float | None:
    """Slurm's durations: 'MM:SS', 'HH:MM:SS', 'D-HH:MM:SS' -> seconds."""
    value = _text(value)
    m = re.fullmatch(r"(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)", value)
    if not m:
        return None
    days, hours, minutes, seconds = (int(g) if g else 0 for g in m.groups())
    return float(((days * 24 + hours) * 60 + minutes) * 60 + seconds)


def _fields(output: str, count: int) -> list[list[str]]:
    """The lines of '|'-joined output with `count` fields (the last may hold '|'),
    leaving out whatever else the command printed (warnings)."""
    rows = []
    for line in output.splitlines():
        parts = line.split("|", count - 1)
        if len(parts) == count and parts[0].strip():
            rows.append(parts)
    return rows


# ---------------------------------------------------------------------- commands
def parse_squeue(output: str, job_id: str) -> JobState | None:
    """`squeue --noheader -t all -j ID --format=SQUEUE_FIELDS` -> the job, or None
    when the controller no longer holds it."""
    for f in _fields(output, len(SQUEUE_FIELDS)):
        if f[0].strip() != job_id:
            continue
        state = f[1].strip().split()[0]
        return JobState(job_id, state, reason=_text(f[11]).strip("()"), submit=_time(f[2]),
                        start=_time(f[3]) if state not in PENDING_STATES else None,
                        end=_time(f[4]) if state in END_STATES else None,
                        elapsed_s=duration_s(f[5]), nodelist=_text(f[6]),
                        partition=_text(f[7]), account=_text(f[8]), cpus=_int(f[9]),
                        nodes=_int(f[10]), source=FROM_SQUEUE)
    return None


def parse_sacct(output: str, job_id: str, source: str = FROM_SACCT) -> JobState | None:
    """`sacct --parsable2 --noheader -X -j ID --format=SACCT_FIELDS` (with -c for
    the job completion log) -> the job, or None when it is not there (yet)."""
    for f in _fields(output, len(SACCT_FIELDS)):
        if f[0].strip() != job_id:
            continue
        state = f[1].strip().split()[0]  # "CANCELLED by 1000" -> CANCELLED
        elapsed = _int(f[3])
        return JobState(job_id, state, reason=_text(f[12]), exit_code=_text(f[2]) or None,
                        submit=_time(f[4]), start=_time(f[5]), end=_time(f[6]),
                        elapsed_s=float(elapsed) if elapsed is not None else None,
                        nodelist=_text(f[7]), partition=_text(f[8]), account=_text(f[9]),
                        cpus=_int(f[10]), nodes=_int(f[11]), source=source)
    return None


def parse_job_id(output: str) -> str:
    """`sbatch --parsable` prints 'ID' or 'ID;CLUSTER' (after any warnings)."""
    for line in reversed(output.splitlines()):
        m = re.fullmatch(r"\s*(\d+)(?:;\S+)?\s*", line)
        if m:
            return m.group(1)
    raise SlurmError(f"sbatch gave no job id: {one_line(output) or 'no output'}")


def parse_positions(output: str) -> list[str]:
    """`squeue --noheader -t PENDING --sort=-p,i --format=%i`: pending job ids, first first."""
    return [line.strip() for line in output.splitlines() if line.strip().isdigit()]


def parse_sinfo(output: str, wanted: str | None) -> Partition | None:
    """`sinfo --noheader --format=SINFO_FIELDS` -> the partition asked for (or the
    default one, marked '*'); None when the cluster has no such partition."""
    lines: dict[str, list[list[str]]] = {}
    default = None
    for f in _fields(output, len(SINFO_FIELDS)):
        name = f[0].strip()
        if name.endswith("*"):
            name = name[:-1]
            default = name
        lines.setdefault(name, []).append(f)
    name = wanted if wanted is not None else default
    if name is None or name not in lines:
        return None
    rows = lines[name]
    biggest = max(rows, key=lambda f: (gres_gpus(f[2])[0], _int(f[1]) or 0))
    count, gpu_type = gres_gpus(biggest[2])
    return Partition(name, sum(_int(f[1]) or 0 for f in rows), count, gpu_type,
                     _int(biggest[3].rstrip("+")) or 1, biggest[4].strip(), name == default)


def gres_gpus(gres: str) -> tuple[int, str]:
    """'gpu:a100:4(S:0-1),nic:1' -> (4, 'a100'); 'gpu:2' -> (2, ''); '(null)' -> (0, '')."""
    for item in re.split(r",(?![^()]*\))", _text(gres)):
        parts = re.sub(r"\(.*\)$", "", item).split(":")
        if parts[0] != "gpu" or len(parts) < 2:
            continue
        if len(parts) == 2 and parts[1].isdigit():
            return int(parts[1]), ""
        if len(parts) >= 3 and parts[-1].isdigit():
            return int(parts[-1]), parts[1]
    return 0, ""


# ---------------------------------------------------------------------- files
_STEPD = re.compile(r"\*\*\* JOB (\d+) ON \S+ CANCELLED AT \S+(?: DUE TO ([A-Z ]+?))?(?: \*\*\*|$)")
_DUE_TO = {"TIME LIMIT": "TIMEOUT", "PREEMPTION": "PREEMPTED", "NODE FAILURE": "NODE_FAIL"}


def state_from_files(job_id: str, exit_text: str | None, error_tail: list[str]) -> tuple[str, str | None]:
    """The end state where no accounting says it: slurmstepd's '*** JOB N ON host
    CANCELLED AT t DUE TO TIME LIMIT ***' in the error file, else the exit code the
    script wrote. Returns (state, 'exit:signal' or None)."""
    for line in reversed(error_tail):
        m = _STEPD.search(line)
        if m and m.group(1) == job_id:
            return _DUE_TO.get((m.group(2) or "").strip(), "CANCELLED"), None
    code = (exit_text or "").strip()
    if code.isdigit():
        return ("COMPLETED" if code == "0" else "FAILED"), f"{int(code)}:0"
    return "UNKNOWN", None


def accounting_off(output: str) -> bool:
    """sacct's words when the cluster keeps no accounting a user may read."""
    text = output.lower()
    return "accounting storage is disabled" in text or "slurmdbd" in text


def one_line(output: str) -> str:
    """The error lines of a Slurm command's output as one line, in its own words."""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    errors = [ln for ln in lines if "error" in ln.lower() or "failure" in ln.lower()
              or "fatal" in ln.lower()]
    chosen = list(dict.fromkeys(errors or lines[-1:]))
    return "; ".join(chosen)
