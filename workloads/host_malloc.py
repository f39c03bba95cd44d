"""glibc's malloc told to keep the memory a CPU training step frees, for the next step.

By default glibc serves each large block (above a threshold that starts at 128 KiB and
follows the sizes freed, up to 32 MiB) with its own mmap and unmaps it on free, and gives
the free top of its heap back to the kernel. A step on the CPU allocates its activations
and gradients afresh each time, so it faults every page of them in again: 8,500 minor
faults a step of mnist-ddp, 15% of its time in the kernel. With mmap off and the heap
never trimmed, a step reuses what the last one freed. At one process and one thread on a
2-core machine, each workload's record with and without: mnist-ddp 1.23x, gpt-ddp 1.14x,
resnet-ddp 1.06x, gpt-fsdp 1.25x, for up to 14% more peak RSS (gpt-fsdp at two
processes); benchmarks/overhead.py loop and gpt set both beside a plain loop. PyTorch's
CPU tuning guide swaps in tcmalloc or jemalloc for the same reason; two of glibc's own
settings need no other library.

A GPU run's tensors are not malloc's, so a GPU run is left as it is, and so is a user's
script: this is the suite's own set-up, written in every record (host_malloc).
GPUBENCH_MALLOC=default leaves glibc as a plain loop has it.
"""

from __future__ import annotations

import ctypes
import os

ENV = "GPUBENCH_MALLOC"
KEPT = "kept"  # freed memory stays in the process: no mmap, no trim
DEFAULT = "default"  # the C library's own behaviour, untouched

M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4  # glibc's malloc.h
NEVER_TRIM = 2**31 - 1  # mallopt takes an int: the most free heap top it leaves alone


def keep_freed_memory() -> str:
    """Set glibc's malloc (this process, from now on) to keep what is freed; the record's
    host_malloc: KEPT, or DEFAULT where it was asked for, the C library is not glibc
    (musl, macOS) or glibc refused."""
    if os.environ.get(ENV) == DEFAULT or not is_glibc():
        return DEFAULT
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return DEFAULT
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    # mallopt answers 1 when it took the setting
    if mallopt(M_MMAP_MAX, 0) == 1 and mallopt(M_TRIM_THRESHOLD, NEVER_TRIM) == 1:
        return KEPT
    return DEFAULT


def is_glibc() -> bool:
    """The C library is glibc (whose mallopt this module speaks)."""
    try:
        return bool(os.confstr("CS_GNU_LIBC_VERSION"))
    except (ValueError, OSError):  # not a name this system knows, or not glibc
        return False
