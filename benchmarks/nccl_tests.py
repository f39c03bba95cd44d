"""Run nccl-tests' all_reduce_perf on this machine, when it is installed, and read
its table, so that the allreduce workload's bus bandwidth can be set beside the
reference tool's on the same GPUs.

The binary is `$NCCL_TESTS_DIR/all_reduce_perf` or `all_reduce_perf` on PATH
(build it with `make` in a clone of github.com/NVIDIA/nccl-tests). It runs as
one process driving every GPU (`-g N`), over the same sizes as the workload:
float32 sum, doubling from 1 KB. Its default text output is parsed: one row
per size, with out-of-place and in-place time, algbw and busbw; torch's
all_reduce works in place, so the in-place columns are the ones compared.
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

BINARY = "all_reduce_perf"


class NcclTestsError(Exception):
    """all_reduce_perf could not be run, or its output could not be read."""


@dataclass(frozen=True)
class NcclTestsRow:
    size: int           # bytes
    count: int          # elements
    oop_time_us: float
    oop_algbw: float    # GB/s
    oop_busbw: float
    ip_time_us: float
    ip_algbw: float
    ip_busbw: float


def find_binary() -> Path | None:
    directory = os.environ.get("NCCL_TESTS_DIR")
    if directory:
        candidate = Path(directory) / BINARY
        return candidate if os.access(candidate, os.X_OK) else None
    found = shutil.which(BINARY)
    return Path(found) if found else None


def parse_output(text: str) -> list[NcclTestsRow]:
    """The rows of all_reduce_perf's table: size count type redop root, then
    time algbw busbw #wrong out of place, then the same in place (numbers as
    12.34, 1234.5 or 1.2e+03, as the column width allows)."""
    rows = []
    for line in text.splitlines():
        fields = line.split()
        if not fields or line.lstrip().startswith("#") or not fields[0].isdigit():
            continue
        if len(fields) < 13:
            raise NcclTestsError(f"all_reduce_perf row with {len(fields)} fields: {line.strip()}")
        try:
            rows.append(NcclTestsRow(int(fields[0]), int(fields[1]),
                                     *(float(f) for f in fields[5:8]),
                                     *(float(f) for f in fields[9:12])))
        except ValueError as e:
            raise NcclTestsError(f"all_reduce_perf row not understood ({e}): {line.strip()}") from e
    if not rows:
        raise NcclTestsError("all_reduce_perf printed no result rows")
    return rows


def run_all_reduce_perf(binary: Path, gpus: int, min_bytes: int, max_bytes: int,
                        timeout: float = 600.0) -> str:
    """all_reduce_perf's whole output (parse it with parse_output)."""
    cmd = [str(binary), "-b", str(min_bytes), "-e", str(max_bytes), "-f", "2", "-g", str(gpus),
           "-d", "float", "-o", "sum"]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError) as e:
        raise NcclTestsError(f"{binary.name}: {e}") from e
    if out.returncode != 0:
        tail = (out.stderr.strip() or out.stdout.strip() or "no output").splitlines()[-1]
        raise NcclTestsError(f"{binary.name} exited with {out.returncode}: {tail}")
    return out.stdout


def comparison_line(curve: list[dict], rows: list[NcclTestsRow]) -> str:
    """The workload's peak busbw over nccl-tests' in-place peak, and the same at the
    largest size both measured."""
    ours_peak = max(row["busbw"] for row in curve)
    theirs_peak = max(row.ip_busbw for row in rows)
    ratio = ours_peak / theirs_peak if theirs_peak > 0 else math.nan
    text = (f"peak busbw / nccl-tests in-place peak = {ratio:.2f} "
            f"({ours_peak:.2f} vs {theirs_peak:.2f} GB/s)")
    theirs_by_size = {row.size: row for row in rows}
    common = [row for row in curve if row["size"] in theirs_by_size]
    if common:
        largest = common[-1]
        other = theirs_by_size[largest["size"]].ip_busbw
        if other > 0:
            text += f"; at {largest['size']:,} B {largest['busbw'] / other:.2f}"
    return text
