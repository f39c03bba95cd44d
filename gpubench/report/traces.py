"""What run --trace's files say, per rank: the traced window, and in it the time spent
computing, communicating, both at once, and neither.

Each file is one rank's Chrome trace JSON (gzipped or not), as torch.profiler writes
it (workloads/rank_trace.py). Where the trace holds GPU activity, the figures are the
GPU's: its kernels, copies and sets are busy time, NCCL's kernels (nccl*) the
communication and every other one compute. Without GPU activity (gloo on a CPU) they
come from the CPU ops: the collectives' own events (gloo:all_reduce on gloo's
threads, c10d::allreduce_, nccl:*, record_param_comms) are the communication, every
other op compute. Either way a kind's time is the length of the union of its
events' intervals, so nested ops and concurrent streams are never counted twice;
overlap is the length of the intersection of the two unions, idle the window less
their union. The window runs from the first profiler step's start to the last one's
end (widened to the GPU's last activity, which runs behind the host), or spans the
events where the trace marks no step.

Holistic Trace Analysis reads the same files for deeper views; these figures are
gpubench's own and need nothing beyond the standard library.
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from gpubench.errors import GpubenchError
from gpubench.sweep.traces import files_in

Interval = tuple[float, float]  # (start, end), microseconds as the trace gives them

GPU_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset"}  # the device's own activity
CPU_OPS = {"cpu_op", "operator"}  # torch's operators (named "Operator" by older versions)
GPU_COMM = re.compile(r"^nccl", re.I)  # ncclKernel_AllReduce_..., ncclDevKernel_...
CPU_COMM = re.compile(r"^(?:(?:gloo|nccl|mpi|ucc|xccl):|c10d::|record_param_comms$)", re.I)
STEP = re.compile(r"^ProfilerStep#\d+$")
RANK_IN_NAME = re.compile(r"rank(\d+)")
GPU, CPU = "GPU kernels", "CPU ops"  # what a rank's figures were read from

OPEN_WITH = "https://ui.perfetto.dev (Open trace file) or chrome://tracing (Load)"


class TraceError(GpubenchError):
    """A trace file that cannot be read as Chrome trace JSON."""


# --------------------------------------------------------------------------- intervals
def merged(intervals) -> list[Interval]:
    """The union of `intervals` as sorted, disjoint intervals (empty ones dropped)."""
    out: list[list[float]] = []
    for start, end in sorted((s, e) for s, e in intervals if e > s):
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return [(s, e) for s, e in out]


def length(union: list[Interval]) -> float:
    """The total length of disjoint intervals."""
    return sum(e - s for s, e in union)


def intersection(a: list[Interval], b: list[Interval]) -> list[Interval]:
    """Where two unions (each sorted and disjoint, as merged gives them) both hold."""
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        start, end = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if end > start:
            out.append((start, end))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def clipped(union: list[Interval], low: float, high: float) -> list[Interval]:
    return intersection(union, [(low, high)]) if high > low else []


# --------------------------------------------------------------------------- one rank
@dataclass(frozen=True)
class RankTrace:
    """One rank's traced window in milliseconds, and its shares of it."""

    rank: int
    file: Path
    basis: str           # GPU or CPU: what the figures were read from
    events: int          # complete events in the file
    steps: int           # profiler steps marked in it (0: none marked)
    window_ms: float
    compute_ms: float
    comm_ms: float
    overlap_ms: float    # computing and communicating at once
    idle_ms: float       # neither
    backend: str | None = None  # the process group's, as the trace names it

    def share(self, ms: float) -> float | None:
        return ms / self.window_ms if self.window_ms > 0 else None


def read_events(path: Path) -> tuple[list[dict], dict]:
    """(events, the trace's other keys) of a Chrome trace JSON file, gzipped or not."""
    try:
        raw = Path(path).read_bytes()
        text = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
        data = json.loads(text)
    except (OSError, EOFError, ValueError, gzip.BadGzipFile) as e:
        raise TraceError(f"{path}: not a readable Chrome trace ({type(e).__name__}: {e})") from None
    if isinstance(data, list):
        return [e for e in data if isinstance(e, dict)], {}
    if isinstance(data, dict) and isinstance(data.get("traceEvents"), list):
        return [e for e in data["traceEvents"] if isinstance(e, dict)], data
    raise TraceError(f"{path}: no traceEvents in it")


def _span(event: dict) -> Interval | None:
    """A complete event's (start, end), or None where it is no complete event."""
    if event.get("ph") != "X":
        return None
    try:
        start, dur = float(event["ts"]), float(event.get("dur", 0))
    except (KeyError, TypeError, ValueError):
        return None
    return start, start + max(dur, 0.0)


def summarise(path: Path, rank: int | None = None) -> RankTrace:
    """One rank's figures from its trace file (module docstring). TraceError where the
    file cannot be read."""
    events, info = read_events(path)
    dist = info.get("distributedInfo") if isinstance(info.get("distributedInfo"), dict) else {}
    complete = [(e, span) for e in events if (span := _span(e)) is not None]
    gpu = [(e, s) for e, s in complete if str(e.get("cat", "")).lower() in GPU_CATEGORIES]
    if gpu:
        basis = GPU
        comm = [s for e, s in gpu if str(e.get("cat", "")).lower() == "kernel"
                and GPU_COMM.match(str(e.get("name", "")))]
        compute = [s for e, s in gpu if not (str(e.get("cat", "")).lower() == "kernel"
                                              and GPU_COMM.match(str(e.get("name", ""))))]
    else:
        basis = CPU
        comm = [s for e, s in complete if CPU_COMM.match(str(e.get("name", "")))]
        compute = [s for e, s in complete if str(e.get("cat", "")).lower() in CPU_OPS
                   and not CPU_COMM.match(str(e.get("name", "")))]
    # the host's step marks (a GPU's copy of them, gpu_user_annotation, is not another step)
    steps = [s for e, s in complete if STEP.match(str(e.get("name", "")))
             and not str(e.get("cat", "")).lower().startswith("gpu_")]
    busy_all = merged(comm + compute)
    if steps:
        low, high = min(s for s, _ in steps), max(e for _, e in steps)
        if gpu:  # the device runs behind the host: its last kernels end after the last step
            high = max(high, max(end for _, (_, end) in gpu))
    elif busy_all:
        low, high = busy_all[0][0], busy_all[-1][1]
    else:
        low = high = 0.0
    comm_u, compute_u = clipped(merged(comm), low, high), clipped(merged(compute), low, high)
    busy = clipped(busy_all, low, high)
    window = max(high - low, 0.0)
    ms = 1e-3  # the trace's microseconds
    return RankTrace(
        rank=_rank(dist, path, rank), file=Path(path), basis=basis, events=len(complete),
        steps=len(steps), window_ms=window * ms, compute_ms=length(compute_u) * ms,
        comm_ms=length(comm_u) * ms, overlap_ms=length(intersection(compute_u, comm_u)) * ms,
        idle_ms=(window - length(busy)) * ms,
        backend=dist.get("backend") if isinstance(dist.get("backend"), str) else None)


def _rank(dist: dict, path: Path, given: int | None) -> int:
    """The trace's own word (distributedInfo), else its file's name, else `given`, else 0."""
    if isinstance(dist.get("rank"), int):
        return dist["rank"]
    found = RANK_IN_NAME.search(Path(path).name)
    if found:
        return int(found.group(1))
    return given if given is not None else 0


# --------------------------------------------------------------------------- a count
@dataclass
class CountTraces:
    """The traces of one run at one count: its ranks' figures, the files that could not
    be read, and where they are."""

    label: str              # "2 gpus", "2 nodes x 4 gpus"
    folder: Path
    world_size: int | None  # ranks the run had
    ranks: list[RankTrace] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)  # one line each

    @property
    def missing(self) -> int:
        """Ranks of the run with no trace."""
        if self.world_size is None:
            return 0
        return max(self.world_size - len(self.ranks) - len(self.unreadable), 0)


def summarise_folder(folder: Path, label: str, world_size: int | None = None) -> CountTraces:
    found = CountTraces(label, Path(folder), world_size)
    for path in files_in(Path(folder)):
        try:
            found.ranks.append(summarise(path))
        except TraceError as e:
            found.unreadable.append(str(e))
    found.ranks.sort(key=lambda r: r.rank)
    return found


def for_records(results: Path, records: list[dict]) -> list[CountTraces]:
    """The traces of the runs `records` name (trace_dir, relative to `results`), in the
    records' order; a traced run none of whose files came back is listed without ranks."""
    counts = []
    for record in records:
        if record.get("trace_dir") is None and record.get("trace_files") is None:
            continue  # not traced
        label = _label(record)
        world = record.get("world_size") if isinstance(record.get("world_size"), int) else None
        if record.get("trace_dir"):
            counts.append(summarise_folder(Path(results) / record["trace_dir"], label, world))
        else:
            counts.append(CountTraces(label, Path(results), world))
    return counts


def _label(record: dict) -> str:
    gpus, nodes = record.get("gpu_count") or record.get("world_size") or 0, record.get("nodes") or 1
    per_node = gpus // nodes if nodes and gpus else gpus
    text = f"{per_node} gpu{'s' if per_node != 1 else ''}"
    return text if nodes == 1 else f"{nodes} nodes x {text}"
