"""workloads/host_malloc.py: on glibc, a CPU run's malloc keeps what a step frees, so the
next step's blocks are not faulted in again; GPUBENCH_MALLOC=default leaves it alone.
Each case runs in a process of its own (mallopt holds for the rest of a process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from gpubench.workloads import host_malloc
from tests.helpers import REPO

# Allocate, touch and free a 64 MiB block (over glibc's largest dynamic mmap threshold,
# 32 MiB) a few times, as a CPU step does its activations; count the minor page faults
# of every round after the first.
ROUNDS = """
import ctypes, json, resource, sys
sys.path.insert(0, sys.argv[1])
import host_malloc
setting = host_malloc.keep_freed_memory()
libc = ctypes.CDLL(None)
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, (ctypes.c_size_t,)
libc.free.argtypes = (ctypes.c_void_p,)
size, faults = 64 << 20, []
for _ in range(4):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    block = libc.malloc(size)
    ctypes.memset(block, 1, size)
    libc.free(block)
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(json.dumps({"setting": setting, "faults": faults}))
"""

PAGES = (64 << 20) // os.sysconf("SC_PAGE_SIZE")


def rounds(malloc_env: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "GPUBENCH_MALLOC"}
    if malloc_env is not None:
        env["GPUBENCH_MALLOC"] = malloc_env
    out = subprocess.run([sys.executable, "-c", ROUNDS, str(REPO / "workloads")], env=env,
                         capture_output=True, text=True, timeout=60, check=True)
    return json.loads(out.stdout)


glibc_only = pytest.mark.skipif(not host_malloc.is_glibc(), reason="glibc's mallopt")


@glibc_only
def test_kept_memory_is_reused_without_faulting_it_in_again():
    found = rounds(None)
    assert found["setting"] == "kept"
    first, *later = found["faults"]
    assert first > PAGES // 2  # the first block is new memory, faulted in as it is touched
    assert max(later) < PAGES // 20  # the others reuse it


@glibc_only
def test_default_leaves_glibc_returning_each_block():
    found = rounds("default")
    assert found["setting"] == "default"
    assert min(found["faults"]) > PAGES // 2  # every block mapped anew and faulted in again
