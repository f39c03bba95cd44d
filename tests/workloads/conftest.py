"""Fixtures for the tests of the workload suite and the benchmark scripts: the
workloads and benchmarks folders on sys.path (their scripts import their siblings
by name, as they do on a remote machine), and a CPU sweep through gpubench's own
launcher."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from tests.helpers import one_node

ROOT = Path(__file__).resolve().parents[2]
for folder in (ROOT / "workloads", ROOT / "benchmarks"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

def one_thread_launcher():
    """gpubench's local launcher, one thread per process: on a shared 2-core machine,
    two OpenMP threads that spin-wait for each other make tiny runs several times slower."""
    from gpubench.launch.local import LocalLauncher

    class OneThread(LocalLauncher):
        def environment(self, procs: int) -> dict[str, str]:
            return {**super().environment(procs), "OMP_NUM_THREADS": "1"}

    return OneThread(gpus=[])


@pytest.fixture
def sweep(tmp_path):
    """Run a suite workload at 1 and 2 gloo processes on the CPU; return its records."""
    from gpubench import suite
    from gpubench.store.results import ResultsStore, new_run_id
    from gpubench.sweep.run import SweepPlan, run_sweep

    def run(name: str, args: list[str], counts=(1, 2), expect: str = "ok") -> list[dict]:
        lines: list[str] = []
        plan = SweepPlan(suite.resolve(name), one_node(counts), ["--warmup", "1", *args],
                         new_run_id(), timeout=120)
        (tmp_path / "results").mkdir(exist_ok=True)
        store = ResultsStore.for_writing(tmp_path / "results")
        records = run_sweep(one_thread_launcher(), plan, store, lines.append)
        assert [r["status"] for r in records] == [expect] * len(counts), "\n".join(lines[-40:])
        assert len(store.load().records) == len(counts)
        return records

    return run
