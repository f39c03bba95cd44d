"""How CPU runs compare like with like: the threads each process gets, and
whether each process is held to cores of its own.

Measured on a shared 2-core machine (mnist-ddp, 1 and 2 processes, 5 repeats
each): with the cores shared out (2 threads for 1 process, 1 each for 2), the
1-process run is the most sensitive to other work on the machine: its two
OpenMP threads spin-wait for each other, and one descheduled thread stalls
both, so the 1-process baseline swings widely and the speedup with it
(2.47x on 2 processes in one demo). One thread per process, whatever the
count, gave the smallest spread, and holding each process to cores of its own
did not narrow it further, so processes are not pinned. Every record says what
ran (threads_per_process, cpu_pinning).
"""

from __future__ import annotations

THREADS_PER_PROCESS = 1  # OMP_NUM_THREADS of every CPU process
PIN = False  # hold each process to cores of its own
PINNED = "distinct cores"  # cpu_pinning when PIN
NOT_PINNED = "none"


def threads_per_process(cores: int, procs: int) -> str:
    """OMP_NUM_THREADS for a CPU run of `procs` processes on `cores` cores."""
    return str(THREADS_PER_PROCESS)


def pin_prefix(python: str) -> list[str]:
    """torchrun arguments that start each worker held to cores of its own (none while
    PIN is off)."""
    return []


def pinning() -> str:
    return PINNED if PIN else NOT_PINNED
