"""The README's first command in its short mode ends with a speedup table, and says
each run's count and progress as plain lines when its output is not a terminal."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_short_demo_ends_with_a_speedup_table(tmp_path):
    # a copy of the script beside this venv, so that its results land in tmp_path
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "demo.sh", tmp_path / "scripts" / "demo.sh")
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))
    # one run per count (the demo's own is three) keeps the test short; the short window
    # is the demo's: 30 steps after 3 of warm-up
    done = subprocess.run(["bash", str(tmp_path / "scripts" / "demo.sh"), "--no-setup", "--repeat", "1",
                           "--", "--steps", "30", "--warmup", "3"],
                          capture_output=True, text=True, timeout=280,
                          env={**os.environ, "COLUMNS": "200"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    assert "(run 1 of 2)" in out and "(run 2 of 2)" in out
    assert "speedup" in out and "mnist-ddp" in out
    records = list((tmp_path / "results").glob("*.jsonl"))
    lines = records[0].read_text().splitlines()
    assert len(lines) == 2 and all('"steps": 30' in line for line in lines)
    assert "GPUBENCH_PROGRESS" not in out
