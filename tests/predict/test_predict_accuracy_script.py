"""benchmarks/predict_accuracy.py in its quick mode: it predicts a 2-process run from
a 1-process run and the all-reduce bandwidth, then measures it, and prints both in a
table row. Behaviour only: no figure is asserted, timing being the machine's."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "predict_accuracy.py"
NUMBER = r"[\d,]+\.\d+"


def run_quick(part: str, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), "--quick", "--part", part,
                           "--time-limit", str(timeout - 30)],
                          capture_output=True, text=True, timeout=timeout)


def rows(out: str, part: str) -> list[list[str]]:
    """The result table's rows of that part, as cells."""
    found = []
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0] == part and len(cells) == 9:
            found.append(cells)
    return found


def assert_one_predicted_and_measured_row(out: str, part: str) -> list[str]:
    table = out.split("### inputs")[0]  # the result table; the inputs table follows
    found = rows(table, part)
    assert len(found) == 1, out
    part_, workload, link, predicted, measured, error, p_speedup, m_speedup, _ = found[0]
    assert workload.startswith("recsys-ddp")
    assert re.fullmatch(NUMBER, predicted) and re.fullmatch(NUMBER, measured), found[0]
    assert re.fullmatch(r"[+-]\d+\.\d", error), found[0]
    assert re.fullmatch(r"\d+\.\d\d", p_speedup) and re.fullmatch(r"\d+\.\d\d", m_speedup), found[0]
    return found[0]


@pytest.mark.slow
def test_quick_part_a_prints_a_prediction_beside_its_measurement():
    out = run_quick("A", timeout=180)
    assert out.returncode == 0, out.stdout + out.stderr
    row = assert_one_predicted_and_measured_row(out.stdout, "A")
    assert row[2] == "gloo loopback"
    # what it ran, on what, with how many threads, and how long it took
    assert "threads per process: 1 in every run" in out.stdout
    assert re.search(r"machine: \d+ cores .*torch \S+", out.stdout)
    assert "workloads/allreduce.py" in out.stdout and "workloads/recsys_ddp.py" in out.stdout
    assert re.search(r"wall time: \d+\.\d s", out.stdout)


def _netns_unavailable() -> str | None:
    if shutil.which("ip") is None or shutil.which("tc") is None:
        return "needs iproute2's ip and tc"
    from gpubench.mock import netns
    return netns.available()


@pytest.mark.slow
def test_quick_part_b_runs_across_two_shaped_namespaces_and_leaves_none():
    why = _netns_unavailable()
    if why:
        pytest.skip(why)
    out = run_quick("B", timeout=240)
    assert out.returncode == 0, out.stdout + out.stderr
    row = assert_one_predicted_and_measured_row(out.stdout, "B")
    assert row[2] == "veth tbf 100mbit"
    names = re.findall(r"in (gbpred\d+[ab])", out.stdout)
    assert names, out.stdout
    from gpubench.mock import netns
    assert not set(names) & set(netns.namespaces())  # cleaned up
