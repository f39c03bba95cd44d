"""benchmarks/gpu_check.sh, the checks a GPU machine runs in one go, in its CPU form:
gpubench installed from the checkout into a folder of its own (the checkout left as it
was), the preflight gate and the prediction kept, and one line per step."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gpu_check.sh"


@pytest.mark.slow
def test_installs_offline_runs_the_gate_and_keeps_what_each_step_said(tmp_path):
    out = tmp_path / "check"
    env = {**os.environ, "PYTHON": sys.executable, "TMPDIR": str(tmp_path)}
    run = subprocess.run(["bash", str(SCRIPT), str(out), "--only", "install,gate,predict",
                          "--archive", str(tmp_path / "check.tar.gz")],
                         capture_output=True, text=True, timeout=240, env=env, cwd=tmp_path)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    steps = (out / "steps.txt").read_text().splitlines()
    assert [line.split(":")[0] for line in steps] == ["install", "gate", "predict"]
    assert steps[0].startswith("install: rc=0")
    assert "gpubench 0.1.0" in (out / "install.txt").read_text()
    gate = json.loads((out / "gate-checks.json").read_text())
    assert {c["name"] for c in gate["checks"]} >= {"gpus", "shm", "disk"}
    assert json.loads((out / "probe-facts.json").read_text())["load"]      # the load test ran
    assert json.loads((out / "prediction.json").read_text())["rows"]
    assert (out / "nvidia-smi.txt").exists() and (out / "command.txt").exists()
    assert (tmp_path / "check.tar.gz").stat().st_size > 0
    assert not list(tmp_path.glob("gpubench-gpu-check.*"))    # the private install is removed
    assert not (ROOT / "build").exists()                       # and the checkout is as it was


def test_bad_arguments_are_one_line():
    for args, says in (([], "usage: bash benchmarks/gpu_check.sh OUTDIR"),
                       (["/tmp/x", "--only", "gate,fly"], "--only: 'fly' is not one of")):
        run = subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=60)
        assert run.returncode != 0 and says in run.stderr
