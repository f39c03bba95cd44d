"""benchmarks/gpu_scripts.py, users' scripts against what was predicted of them: the
manual's Lightning example as a user copies it, MNIST files where torchvision looks,
each measurement beside its prediction, and its CPU form end to end."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gpu_scripts.py"


@pytest.fixture(scope="module")
def gpu_scripts():
    spec = importlib.util.spec_from_file_location("gpu_scripts", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_scripts"] = module   # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_the_lightning_example_is_the_manuals_code_block(gpu_scripts):
    source = gpu_scripts.lightning_example()
    assert source.startswith("import os\nimport lightning as L\n")
    assert "trainer.fit(Model()" in source and "```" not in source
    compile(source, "lightning_example.py", "exec")


@pytest.mark.slow   # imports torch
def test_mnist_files_are_idx_of_mnists_sizes(gpu_scripts, tmp_path):
    from gpubench.workloads.mnist_data import read_idx

    gpu_scripts.synthetic_mnist(tmp_path)
    images, labels = read_idx(tmp_path / "train-images-idx3-ubyte"), read_idx(tmp_path / "t10k-labels-idx1-ubyte")
    assert tuple(images.shape) == (60_000, 28, 28) and tuple(labels.shape) == (10_000,)
    assert int(labels.max()) <= 9


PREDICTED = {"key": "lightning", "gpu": "H100 SXM", "unit": "samples/s", "throughput": 32_000.0,
             "low": 24_000.0, "high": 40_000.0, "step_seconds": 0.002, "memory_bytes": 5e7, "bound_by": "host"}


def test_a_measurement_is_set_beside_its_prediction(gpu_scripts):
    script = next(s for s in gpu_scripts.SCRIPTS if s.key == "lightning")
    record = {"status": "ok", "throughput": 21_333.0, "throughput_unit": "samples/s", "median_step_s": 0.003,
              "p10_step_s": 0.0028, "p90_step_s": 0.0035, "steps": 100}
    row = gpu_scripts.compared(script, PREDICTED, gpu_scripts.Measured("gpubench run ...", record, None, 9.0))
    assert row["measured_over_predicted_step"] == pytest.approx(1.5)
    assert row["inside_interval"] is False          # 64 samples / 3 ms = 21,333 < 24,000
    faster = {**record, "median_step_s": 0.0021}
    assert gpu_scripts.compared(script, PREDICTED, gpu_scripts.Measured("-", faster, None, 9.0))["inside_interval"]
    failed = gpu_scripts.compared(script, PREDICTED, gpu_scripts.Measured("-", None, "exit 1", 3.0))
    assert "measured_over_predicted_step" not in failed
    lines = gpu_scripts.table([row, failed], "H100 SXM, one GPU")
    assert "| 2.0 ms | 3.0 ms (2.8-3.5) | 1.50 |" in lines[2] and "| no |" in lines[2]
    assert lines[3].endswith("| exit 1 |")


def test_an_unknown_script_is_one_line():
    run = subprocess.run([sys.executable, str(SCRIPT), "measure", "--out", "/tmp/x", "--only", "resnet-9000"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "--only: resnet-9000: not one of nanogpt-b12" in run.stderr


@pytest.mark.slow
def test_the_cpu_form_measures_the_lightning_example_beside_its_prediction(tmp_path):
    predicted = tmp_path / "predicted.json"
    predicted.write_text(json.dumps({"predictions": [PREDICTED]}))
    out = tmp_path / "out"
    run = subprocess.run([sys.executable, str(SCRIPT), "measure", "--predicted", str(predicted), "--out", str(out),
                          "--only", "nanogpt-b12,lightning"], capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "nanogpt-b12: not run on a CPU" in run.stdout
    kept = json.loads((out / "scripts.json").read_text())
    assert (kept["cuda"], [r["key"] for r in kept["scripts"]]) == (False, ["lightning"])
    row = kept["scripts"][0]
    assert row["measured"]["status"] == "ok" and row["measured_over_predicted_step"] > 0
    assert row["measure_command"].startswith("(cd lightning && gpubench run ./lightning_example.py --gpus 1")
    records = [json.loads(line) for line in (out / "scripts-records.jsonl").read_text().splitlines()]
    assert [Path(r["workload"]).name for r in records] == ["lightning_example.py"]
    assert "the CPU, beside H100 SXM's predictions" in run.stdout
