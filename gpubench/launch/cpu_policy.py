"""How CPU runs compare like with like: the threads each process gets, and
whether each process is held to cores of its own.

Measured on this project's shared 2-core machine (mnist-ddp, 60 steps, 1 and 2
processes, 5 runs each, the four policies taking turns; other work took 15-40%
of the CPU throughout, never quiet), images/s median and range over median:

    policy                          1 process          2 processes
    cores shared out (2 threads/1)  506  (152..1024, 172%)  907 (596..1009, 45%)
    shared out, each pinned         651  (403..998,   91%)  801 (410..1017, 76%)
    1 thread per process            591  (407..606,   34%)  983 (553..1042, 50%)
    1 thread, each pinned           612  (453..676,   37%)  815 (569..1110, 66%)

With the cores shared out, the 1-process run is the one most at the mercy of
other work: its two OpenMP threads wait for each other, and one descheduled
thread stalls both, so the baseline swings and the speedup with it (2.47x on 2
processes in one demo). One thread per process, whatever the count, gave the
smallest spread; holding processes to cores of their own did not narrow it (a
pinned process cannot move off a core another program is using), so they are
not pinned. Each "GPU" is then one process on one core. Every record says what
ran (threads_per_process, cpu_pinning).
"""

from __future__ import annotations

THREADS_PER_PROCESS = 1  # OMP_NUM_THREADS of every CPU process
NOT_PINNED = "none"  # the records' cpu_pinning


def threads_per_process(cores: int, procs: int) -> str:
    """OMP_NUM_THREADS for a CPU run of `procs` processes on `cores` cores: one each,
    however many there are (the cores a count can use grow with it, as GPUs do)."""
    return str(THREADS_PER_PROCESS)


def pinning() -> str:
    """How CPU processes are held to cores: not at all (see above)."""
    return NOT_PINNED
