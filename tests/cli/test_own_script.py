"""`gpubench run ./my_train.py`: a user's own torchrun script, unchanged, is swept and
timed like a suite workload. It is never handed a flag it does not know; it may
report its own throughput through $GPUBENCH_RECORD_FILE, or leave the timing to
gpubench (the whole run's wall time)."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.helpers import JOIN, LEAVE, run_gpubench

pytestmark = pytest.mark.slow

# argparse refuses unknown flags, as most training scripts do; each script's processes
# form one process group, as a training script's do (JOIN, LEAVE)
PLAIN = JOIN + """\
import argparse, os, time
p = argparse.ArgumentParser()
p.add_argument("--work", type=float, default=0.2)
a = p.parse_args()
time.sleep(a.work / int(os.environ["WORLD_SIZE"]))
print("rank", os.environ["RANK"], "done", flush=True)
""" + LEAVE

REPORTING = JOIN + """\
import json, os
world = int(os.environ["WORLD_SIZE"])
if os.environ["RANK"] == "0":
    with open(os.environ["GPUBENCH_RECORD_FILE"], "w") as f:
        json.dump({"throughput": 1000.0 * world, "throughput_unit": "tokens/s",
                   "wall_seconds": 2.0}, f)
""" + LEAVE


def _run(tmp_path, source: str, *args: str, gpus: str = "1,2") -> tuple[subprocess.CompletedProcess, list[dict]]:
    script = tmp_path / "my_train.py"
    script.write_text(source)
    results = tmp_path / "results"
    results.mkdir(exist_ok=True)
    proc = run_gpubench("run", str(script), "--gpus", gpus, "--repeat", "1", "--results", str(results), *args,
                        timeout=180)
    records = [json.loads(line) for f in results.glob("*.jsonl") for line in f.read_text().splitlines()]
    return proc, records


# One count each where what is timed is the subject (two processes: the whole of a
# torchrun); both counts where the sweep must go on past the first.
def test_a_plain_script_is_timed_as_a_whole(tmp_path):
    proc, records = _run(tmp_path, PLAIN, "--", "--work", "1.0", gpus="2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [(r["gpu_count"], r["status"], r["timing"], r["throughput_unit"]) for r in records] == [
        (2, "ok", "whole process", "runs/s")]
    for r in records:
        assert r["throughput"] == 1.0 / r["wall_seconds"]
        assert r["wall_seconds"] == r["process_seconds"] and r["precision"] == "-"
        assert "--record-file" not in r["launch_command"]
    report = run_gpubench("report", "--results", str(tmp_path / "results"), "--format", "markdown",
                          timeout=60)
    header = report.stdout.splitlines()[2]
    assert [c.strip() for c in header.strip("|").split("|")][4:11] == [
        "runs/s", "speedup", "efficiency", "$/h", "s/run", "$/run", "runs/$"]


def test_a_script_that_reports_its_own_throughput(tmp_path):
    proc, records = _run(tmp_path, REPORTING, gpus="2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [(r["throughput"], r["throughput_unit"], r["timing"], r["wall_seconds"]) for r in records] == [
        (2000.0, "tokens/s", "script", 2.0)]
    assert "tokens/s" in proc.stdout


def test_a_failing_script_is_recorded_as_failed(tmp_path):
    proc, records = _run(tmp_path, "raise SystemExit('no data at /data/imagenet')\n")
    assert proc.returncode == 1
    assert [r["status"] for r in records] == ["failed", "failed"]
    assert "no data at /data/imagenet" in records[0]["error"]


def test_workdir_is_where_local_runs_start(tmp_path):
    proj = tmp_path / "proj"
    (proj / "scripts").mkdir(parents=True)
    (proj / "config.txt").write_text("3\n")
    script = proj / "scripts" / "train.py"
    script.write_text("import os\nif os.environ['RANK'] == '0':\n"
                      "    n = int(open('config.txt').read())\n"
                      "    open(os.environ['GPUBENCH_RECORD_FILE'], 'w').write("
                      "'{\"throughput\": %d}' % n)\n")
    results = tmp_path / "results"
    results.mkdir()
    proc = run_gpubench("run", str(script), "--workdir", str(proj), "--gpus", "1", "--repeat", "1", "--results",
                        str(results), cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (record,) = [json.loads(line) for f in results.glob("*.jsonl") for line in f.read_text().splitlines()]
    assert (record["throughput"], record["throughput_unit"]) == (3, "samples/s")
