"""benchmarks/gpu_reference.sh: on a machine with torch and nothing to download from,
it lays gpubench out without its dependencies and keeps everything a reference
result needs in one folder."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_reference_folder_holds_records_ceilings_table_and_command(tmp_path):
    out = tmp_path / "ref"
    env = {**os.environ, "PYTHON": sys.executable, "TMPDIR": str(tmp_path)}
    run = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_reference.sh"), str(out),
                          "--only", "allreduce"],
                         capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    records = [json.loads(line) for f in out.glob("*.jsonl") for line in f.read_text().splitlines()]
    assert [(r["workload"], r["status"]) for r in records] == [("allreduce", "ok")]
    ceilings = json.loads((out / "device-ceilings.json").read_text())
    assert ceilings["matmul_tflops"] > 0
    assert "peak busbw" in (out / "suite.txt").read_text()
    assert (out / "command.txt").read_text().strip().endswith("--only allreduce")
    assert (out / "nvidia-smi.txt").exists()
    assert not list(tmp_path.glob("gpubench-site.*"))  # the private copy is removed
    assert not (ROOT / "build").exists()  # and the checkout is left as it was


def test_needs_an_output_folder():
    run = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_reference.sh")],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode != 0 and "usage: bash benchmarks/gpu_reference.sh OUTDIR" in run.stderr
