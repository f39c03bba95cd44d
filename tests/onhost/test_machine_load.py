"""The machine's load around a run: read before it, the memory of the run's tagged
processes sampled while it runs, other processes' share of the CPU after it, and
the verdict that the machine was busy."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from gpubench.onhost import machine_load


def test_before_a_run_the_cores_memory_and_load_are_read():
    figures = machine_load.before(seconds=0.1)
    assert figures["cpu_cores"] >= 1 and figures["memory_total_bytes"] > 0
    assert 0.0 <= figures["busy_before"] <= 1.0 and figures["load_before"] >= 0.0
    assert figures["mock_instance"] is False


def test_the_memory_of_the_runs_processes_is_sampled_by_its_tag():
    tagged = subprocess.Popen([sys.executable, "-c", "b = bytearray(200 * 2**20); import time; "
                               "print('ready', flush=True); time.sleep(30)"],
                              env={**os.environ, machine_load.TAG_VAR: "run-under-test"},
                              stdout=subprocess.PIPE, text=True)
    try:
        assert tagged.stdout.readline().strip() == "ready"
        watch = machine_load.Watch("run-under-test")
        watch.sample()
        summary = watch.summary()
        assert summary["peak_rss_bytes"] > 200 * 2**20
        assert summary["memory_available_min_bytes"] > 0
        assert machine_load.tagged_rss("another-run") == 0
    finally:
        tagged.kill()
        tagged.wait(10)


def test_other_processes_share_and_the_busy_verdict():
    hz = os.sysconf("SC_CLK_TCK")
    started = {"stat_start": (1000, 10_000), "clock_start": 100.0}
    # 10 s on 2 cores: 20 s of core time, 16 s of it busy; the run itself had 12 s of CPU
    ended = {"stat_end": (1000 + 16 * hz, 10_000 + 20 * hz), "clock_end": 110.0}
    figures = machine_load.during(started, ended, run_cpu_seconds=12.0)
    assert figures["run_cpu_seconds"] == 12.0 and figures["run_cores_used"] == 1.2
    assert abs(figures["other_cpu_share"] - 0.2) < 1e-9
    assert machine_load.busy_verdict(figures) is None
    # gpubench's own CPU meanwhile (loading its report beside a local run) is not other work
    beside = machine_load.during(started, ended, run_cpu_seconds=12.0, launcher_cpu_seconds=2.0)
    assert abs(beside["other_cpu_share"] - 0.1) < 1e-9
    assert machine_load.busy_verdict({"busy_before": 0.6, "other_cpu_share": 0.4}) == (
        "60% of the cores busy with other work as it started; "
        "other processes took 40% of the cores' time while it ran")


def test_the_same_source_watches_beside_a_remote_run(tmp_path):
    """python -c SOURCE before / watch, as the SSH launcher runs them."""
    source = Path(machine_load.__file__).read_text()
    subprocess.run([sys.executable, "-c", source, "before", str(tmp_path / "load")], check=True,
                   timeout=30)
    assert json.loads((tmp_path / "load").read_text())["cpu_cores"] >= 1
    watcher = subprocess.Popen([sys.executable, "-c", source, "watch", "r1", str(tmp_path / "w")])
    deadline = time.monotonic() + 20
    while not (tmp_path / "w").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    watcher.terminate()  # as stop_tagged stops it: it writes its last word and exits
    assert watcher.wait(10) == 0
    summary = json.loads((tmp_path / "w").read_text())
    assert summary["memory_available_min_bytes"] > 0 and len(summary["stat_end"]) == 2
